"""Bundles read into task drafts: task.json parsing, stray files, nested bundles."""

from __future__ import annotations

import pytest

from studies.services.task_bundles import task_bundles_import
from studies.task_bundle_format import TaskBundleInvalid
from tests.console.api.bundles import bundle_members, new_uuid, spec, write_bundle, zip_bytes
from tests.studies.task_bundles.helpers import fields_of, upload_named


def test_invalid_json_is_reported_with_its_position(taxonomy, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "task.json").write_text('{"uuid": ')
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=tmp_path / "b")
    assert fields_of(exc)["task.json"][0].startswith("is not valid JSON (line 1")



def test_stray_files_and_sub_folders_are_reported(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b")
    (root / "notes.txt").write_text("x")
    (root / "reference" / "deep").mkdir(parents=True)
    (root / "reference" / "deep" / "x.csv").write_text("a\n")
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=root)
    assert set(fields_of(exc)) == {"notes.txt", "reference/deep/x.csv"}


def test_a_bundle_inside_another_bundle_is_refused(taxonomy):
    members = {**bundle_members("outer"), **bundle_members("outer/inner", spec(uuid=new_uuid()))}
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(zip_bytes(members), "nested.zip"))
    assert "bundle inside another bundle" in fields_of(exc)["outer/inner/task.json"][0]
