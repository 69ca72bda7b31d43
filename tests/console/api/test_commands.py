"""manage.py import_tasks and export_tasks."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.management import CommandError, call_command

from studies.models import TaskInstance
from tests.console.api.bundles import TASK_UUID, new_uuid, spec, write_bundle
from tests.factories import OccupationFactory, SectorFactory, StudyFactory


@pytest.fixture
def taxonomy(db):
    sector = SectorFactory(code="finance", name="Finance and Insurance")
    OccupationFactory(soc_code="13-2011.00", sector=sector)
    return sector


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_import_tasks_creates_then_reports_unchanged(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"ledger.csv": b"a,b\n1,2\n"})
    assert "1 created, 0 updated, 0 unchanged were imported." in _run("import_tasks", str(root))
    assert "0 created, 0 updated, 1 unchanged" in _run("import_tasks", str(root))
    assert TaskInstance.objects.count() == 1


def test_import_tasks_attaches_to_a_study_and_dry_runs(taxonomy, tmp_path):
    StudyFactory(slug="pilot")
    root = write_bundle(tmp_path / "b")
    assert "would be imported into pilot" in _run("import_tasks", str(root), "--study", "pilot", "--dry-run")
    assert TaskInstance.objects.count() == 0
    _run("import_tasks", str(root), "--study", "pilot")
    assert TaskInstance.objects.get().studies.get().slug == "pilot"


def test_import_tasks_lists_every_problem_and_fails(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", spec(title="", occupations=["00-0000.00"]))
    err = io.StringIO()
    with pytest.raises(CommandError, match="2 problems; nothing was imported"):
        call_command("import_tasks", str(root), stdout=io.StringIO(), stderr=err)
    assert "task.json:title: must not be empty" in err.getvalue()
    assert "task.json:occupations[0]: unknown occupation “00-0000.00”" in err.getvalue()


def test_import_tasks_refuses_an_unknown_study(taxonomy, tmp_path):
    with pytest.raises(CommandError, match="No study"):
        call_command("import_tasks", str(write_bundle(tmp_path / "b")), "--study", "nope")


def test_export_tasks_writes_a_zip_that_imports_back(taxonomy, tmp_path):
    other = new_uuid()
    write_bundle(tmp_path / "in" / "a", reference={"ledger.csv": b"a,b\n"}, hidden={"gold.txt": b"gold\n"})
    write_bundle(tmp_path / "in" / "b", spec(uuid=other))
    _run("import_tasks", str(tmp_path / "in"))
    out = _run("export_tasks", str(tmp_path / "one.zip"), "--uuid", TASK_UUID)
    assert "Exported 1 task(s) with 2 file(s)" in out
    with zipfile.ZipFile(tmp_path / "one.zip") as archive:
        assert sorted(archive.namelist()) == [f"{TASK_UUID}/hidden/gold.txt", f"{TASK_UUID}/reference/ledger.csv",
                                              f"{TASK_UUID}/task.json"]
    assert "1 unchanged" in _run("import_tasks", str(tmp_path / "one.zip"))


def test_export_tasks_filters_by_study_and_refuses_bad_arguments(taxonomy, tmp_path):
    study = StudyFactory(slug="pilot")
    _run("import_tasks", str(write_bundle(tmp_path / "b")))
    with pytest.raises(CommandError, match="No tasks match"):
        call_command("export_tasks", str(tmp_path / "out"), "--study", "pilot")
    TaskInstance.objects.get().studies.add(study)
    assert "Exported 1 task(s)" in _run("export_tasks", str(tmp_path / "out"), "--study", "pilot")
    with pytest.raises(CommandError, match="choose a new destination"):
        call_command("export_tasks", str(tmp_path / "out"))
    with pytest.raises(CommandError, match="is not a UUID"):
        call_command("export_tasks", str(tmp_path / "x"), "--uuid", "abc")
