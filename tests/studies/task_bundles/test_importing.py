"""Imports are idempotent: re-imports update in place, dry runs write nothing."""

from __future__ import annotations

import pytest
from django.core.files.storage import default_storage

from studies.models import TaskFile, TaskInstance
from studies.services.task_bundles import task_bundles_import
from tests.console.api.bundles import spec, write_bundle
from tests.factories import OccupationFactory, SectorFactory
from tests.studies.task_bundles.helpers import GOLD, LEDGER, stored_bytes


def test_reimporting_the_same_bundle_changes_nothing(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"ledger.csv": LEDGER}, hidden={"gold.txt": GOLD})
    task_bundles_import(source=root)
    task = TaskInstance.objects.get()
    stored = {f.pk: f.file.name for f in task.files.all()}
    updated_at = task.updated_at
    report = task_bundles_import(source=root)
    assert [o.action for o in report.tasks] == ["unchanged"]
    assert report.tasks[0].files_unchanged == 2
    task.refresh_from_db()
    assert task.updated_at == updated_at
    assert {f.pk: f.file.name for f in task.files.all()} == stored
    assert TaskInstance.objects.count() == 1 and TaskFile.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_reimport_updates_fields_and_replaces_and_removes_files(tmp_path):
    sector = SectorFactory(code="finance", name="Finance and Insurance")
    OccupationFactory(soc_code="13-2011.00", sector=sector)
    OccupationFactory(soc_code="13-2051.00", sector=sector)
    root = write_bundle(tmp_path / "v1", reference={"ledger.csv": LEDGER, "old.txt": b"old\n"})
    task_bundles_import(source=root)
    task = TaskInstance.objects.get()
    old_file = task.files.get(name="old.txt").file.name
    old_ledger = task.files.get(name="ledger.csv").file.name

    v2 = write_bundle(tmp_path / "v2", spec(title="Quarterly summary (v2)", occupations=["13-2051.00"]),
                      reference={"ledger.csv": LEDGER + b"east,5\n", "new.txt": b"new\n"})
    report = task_bundles_import(source=v2)
    outcome = report.tasks[0]
    assert outcome.action == "updated"
    assert (outcome.files_added, outcome.files_replaced, outcome.files_removed) == (
        ["reference/new.txt"], ["reference/ledger.csv"], ["reference/old.txt"])
    task = TaskInstance.objects.get()
    assert task.title == "Quarterly summary (v2)"
    assert list(task.occupations.values_list("soc_code", flat=True)) == ["13-2051.00"]
    assert sorted(task.files.values_list("name", flat=True)) == ["ledger.csv", "new.txt"]
    assert stored_bytes(task.files.get(name="ledger.csv")).endswith(b"east,5\n")
    # Replaced and removed files are gone from storage once the import committed.
    assert not default_storage.exists(old_file) and not default_storage.exists(old_ledger)


def test_a_bundle_without_hidden_information_keeps_the_tasks_hidden_data(taxonomy, tmp_path):
    task_bundles_import(source=write_bundle(tmp_path / "full", hidden={"gold.txt": GOLD}))
    public = write_bundle(tmp_path / "public", spec(hidden_info=...))
    report = task_bundles_import(source=public)
    assert report.tasks[0].action == "unchanged"
    task = TaskInstance.objects.get()
    assert task.hidden_info == "GOLD: the north total is 10."
    assert list(task.files.values_list("name", flat=True)) == ["gold.txt"]
    cleared = write_bundle(tmp_path / "cleared", spec(hidden_info=""))
    assert task_bundles_import(source=cleared).tasks[0].files_removed == ["hidden/gold.txt"]
    assert TaskInstance.objects.get().hidden_info == ""


def test_a_dry_run_reports_what_would_change_and_writes_nothing(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"ledger.csv": LEDGER})
    report = task_bundles_import(source=root, dry_run=True)
    assert report.dry_run and report.tasks[0].action == "created"
    assert TaskInstance.objects.count() == 0
