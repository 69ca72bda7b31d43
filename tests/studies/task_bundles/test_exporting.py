"""Exported bundles import back identically."""

from __future__ import annotations

import json

import pytest

from studies.models import TaskFile, TaskInstance
from studies.services.task_bundles import task_bundles_export, task_bundles_import
from tests.console.api.bundles import TASK_UUID, new_uuid, spec, write_bundle
from tests.studies.task_bundles.helpers import GOLD, LEDGER, files_of


def _snapshot(task: TaskInstance) -> dict:
    return {
        "title": task.title, "prompt": task.prompt, "source": task.source, "sector": task.sector.code,
        "occupations": sorted(task.occupations.values_list("soc_code", flat=True)),
        "required_software": task.required_software, "expected_deliverables": task.expected_deliverables,
        "hidden_info": task.hidden_info, "time_limit_minutes": task.time_limit_minutes, "files": files_of(task),
    }


@pytest.mark.parametrize("destination", ["bundles", "bundles.zip"])
def test_export_then_import_gives_back_identical_tasks(taxonomy, tmp_path, destination):
    write_bundle(tmp_path / "in" / "a", spec(uuid=new_uuid(), prompt="  Keep my spacing.\n\n"),
                 reference={"ledger.csv": LEDGER}, hidden={"gold.txt": GOLD})
    write_bundle(tmp_path / "in" / "b", spec(uuid=new_uuid(), occupations=["13-2051.00", "13-2011.00"],
                                            time_limit_minutes=None, hidden_info=""))
    task_bundles_import(source=tmp_path / "in")
    before = {str(t.uuid): _snapshot(t) for t in TaskInstance.objects.all()}

    report = task_bundles_export(tasks=TaskInstance.objects.all(), destination=tmp_path / destination)
    assert (report.tasks, report.files) == (2, 2)
    assert task_bundles_import(source=tmp_path / destination).count("unchanged") == 2

    TaskFile.objects.all().delete()
    TaskInstance.objects.all().delete()
    assert task_bundles_import(source=tmp_path / destination).count("created") == 2
    after = {str(t.uuid): _snapshot(t) for t in TaskInstance.objects.all()}
    assert after == before


def test_export_without_hidden_leaves_out_gold_data(taxonomy, tmp_path):
    task_bundles_import(source=write_bundle(tmp_path / "b", hidden={"gold.txt": GOLD}))
    task_bundles_export(tasks=TaskInstance.objects.all(), destination=tmp_path / "out", include_hidden=False)
    exported = tmp_path / "out" / TASK_UUID
    assert "hidden_info" not in json.loads((exported / "task.json").read_text())
    assert not (exported / "hidden").exists()


def test_export_refuses_to_overwrite(taxonomy, tmp_path):
    task_bundles_import(source=write_bundle(tmp_path / "b"))
    (tmp_path / "out.zip").write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        task_bundles_export(tasks=TaskInstance.objects.all(), destination=tmp_path / "out.zip")
    assert (tmp_path / "out.zip").read_bytes() == b"keep me"


def test_pointing_at_a_bundles_task_json_imports_that_bundle(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"ledger.csv": LEDGER})
    assert task_bundles_import(source=root / "task.json").tasks[0].files_added == ["reference/ledger.csv"]
