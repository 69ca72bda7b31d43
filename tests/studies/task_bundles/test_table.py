"""GDPval-style task tables (CSV, JSONL) with their files beside them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from studies.models import TaskInstance
from studies.services.task_bundles import task_bundles_import
from studies.task_bundle_format import TaskBundleInvalid
from tests.console.api.bundles import new_uuid, zip_bytes
from tests.studies.task_bundles.helpers import LEDGER, fields_of, files_of, upload_named


def _table_folder(tmp_path: Path, rows: list[dict], *, fmt: str = "csv") -> Path:
    folder = tmp_path / "table"
    (folder / "files" / "reference_files" / "abc").mkdir(parents=True)
    (folder / "files" / "reference_files" / "abc" / "ledger.csv").write_bytes(LEDGER)
    (folder / "memo.txt").write_bytes(b"memo\n")
    path = folder / f"tasks.{fmt}"
    if fmt == "jsonl":
        path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    else:
        import csv

        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return path


def test_a_gdpval_style_csv_imports_with_files_beside_it(taxonomy, tmp_path):
    first, second = new_uuid(), new_uuid()
    rows = [
        {"task_id": first, "sector": "Finance and Insurance", "occupation": "Accountants and Auditors",
         "prompt": "Reconcile the ledger.\nUse the attached file.",
         "reference_files": "['reference_files/abc/ledger.csv']"},
        {"task_id": second, "sector": "finance", "occupation": "13-2051.00", "prompt": "Write a memo.",
         "reference_files": "memo.txt"},
    ]
    table = _table_folder(tmp_path, rows)
    report = task_bundles_import(source=table)
    assert report.count("created") == 2
    task = TaskInstance.objects.get(uuid=first)
    assert (task.title, task.source) == ("Reconcile the ledger.", "gdpval")
    assert list(task.occupations.values_list("soc_code", flat=True)) == ["13-2011.00"]
    assert files_of(task) == {"reference/ledger.csv": hashlib.sha256(LEDGER).hexdigest()}
    assert list(TaskInstance.objects.get(uuid=second).files.values_list("name", flat=True)) == ["memo.txt"]
    assert task_bundles_import(source=table).count("unchanged") == 2


def test_a_jsonl_table_inside_a_zip_imports(taxonomy):
    row = {"task_id": new_uuid(), "sector": "finance", "occupation": "13-2011.00", "prompt": "Summarise.",
           "title": "Summary", "reference_files": ["ledger.csv"]}
    members = {"export/tasks.jsonl": (json.dumps(row) + "\n").encode(), "export/files/ledger.csv": LEDGER}
    report = task_bundles_import(source=upload_named(zip_bytes(members), "gdpval.zip"))
    assert report.tasks[0].title == "Summary" and report.tasks[0].files_added == ["reference/ledger.csv"]


def test_table_problems_name_the_row_and_column(taxonomy, tmp_path):
    same = new_uuid()
    rows = [
        {"task_id": same, "sector": "finance", "occupation": "Astronaut", "prompt": "A",
         "reference_files": "missing.csv"},
        {"task_id": same, "sector": "finance", "occupation": "13-2011.00", "prompt": "B",
         "reference_files": "../../etc/passwd"},
        {"task_id": "nope", "sector": "", "occupation": "13-2011.00", "prompt": "C", "reference_files": ""},
    ]
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=_table_folder(tmp_path, rows))
    problems = fields_of(exc)
    assert "unknown occupation “Astronaut”" in problems["tasks.csv:row 2.occupation"][0]
    assert "was not found" in problems["tasks.csv:row 2.reference_files"][0]
    assert "points outside the upload" in problems["tasks.csv:row 3.reference_files"][0]
    assert "appears 2 times" in problems["tasks.csv:row 2.task_id"][0]
    assert problems["tasks.csv:row 4.sector"] == ["this field is required"]


def test_a_table_missing_a_required_column_says_which(taxonomy, tmp_path):
    path = tmp_path / "tasks.csv"
    path.write_text("task_id,sector,prompt\nx,y,z\n")
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=path)
    assert fields_of(exc) == {"tasks.csv:occupation": ["this column is required"]}
