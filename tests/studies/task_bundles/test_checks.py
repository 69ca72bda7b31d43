"""Drafts checked before anything is written: fields, taxonomy, files, duplicates."""

from __future__ import annotations

import pytest

from studies.models import TaskFile, TaskInstance
from studies.services.task_bundles import task_bundles_import
from studies.task_bundle_format import TaskBundleInvalid
from tests.console.api.bundles import bundle_members, new_uuid, spec, write_bundle, zip_bytes
from tests.studies.task_bundles.helpers import LEDGER, fields_of, upload_named


def test_missing_fields_are_reported_per_field(taxonomy, tmp_path):
    data = spec(title=..., prompt=..., uuid=...)
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=write_bundle(tmp_path / "b", data))
    assert fields_of(exc) == {
        "task.json:uuid": ["this field is required"],
        "task.json:title": ["this field is required"],
        "task.json:prompt": ["this field is required"],
    }


def test_wrong_types_unknown_fields_and_bad_sources_are_reported(taxonomy, tmp_path):
    data = spec(uuid="not-a-uuid", source="kaggle", required_software="Excel", time_limit_minutes=0, colour="red")
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=write_bundle(tmp_path / "b", data))
    problems = fields_of(exc)
    assert problems["task.json:uuid"] == ["must be a UUID, e.g. 0b7f1f3e-5d3c-4b8e-9d8a-1c2f3e4d5a6b"]
    assert problems["task.json:source"] == ["must be one of gdpval, apex, apex_agents, custom"]
    assert problems["task.json:required_software"] == ["must be a list of text values"]
    assert problems["task.json:time_limit_minutes"] == ["must be at least 1"]
    assert problems["task.json:colour"] == ["unknown field"]


def test_unknown_occupations_and_sectors_are_reported_with_their_position(taxonomy, tmp_path):
    data = spec(sector="Mining", occupations=["13-2011.00", "99-9999.99"])
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=write_bundle(tmp_path / "b", data))
    problems = fields_of(exc)
    assert set(problems) == {"task.json:sector", "task.json:occupations[1]"}
    assert "99-9999.99" in problems["task.json:occupations[1]"][0]


def test_a_sector_may_be_given_by_its_name(taxonomy, tmp_path):
    task_bundles_import(source=write_bundle(tmp_path / "b", spec(sector="finance and insurance")))
    assert TaskInstance.objects.get().sector == taxonomy




def test_duplicate_uuids_in_one_upload_are_refused_at_every_occurrence(taxonomy):
    members = {**bundle_members("a"), **bundle_members("b")}
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(zip_bytes(members), "dupes.zip"))
    problems = fields_of(exc)
    assert set(problems) == {"a/task.json:uuid", "b/task.json:uuid"}
    assert "appears 2 times" in problems["a/task.json:uuid"][0]
    assert TaskInstance.objects.count() == 0



def test_oversize_files_are_refused(taxonomy, tmp_path, settings):
    settings.UPLOADS = {**settings.UPLOADS, "MAX_FILE_BYTES": 16}
    root = write_bundle(tmp_path / "b", reference={"big.csv": b"a," * 20, "small.csv": b"a,b\n"})
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=root)
    assert set(fields_of(exc)) == {"reference/big.csv"}
    assert "per-file limit" in fields_of(exc)["reference/big.csv"][0]
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(zip_bytes(bundle_members(reference={"big.csv": b"a," * 20})), "b.zip"))
    assert "per-file limit" in fields_of(exc)["reference/big.csv"][0]



def test_file_types_are_checked_by_extension_and_content(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"run.exe": b"MZ\x90", "fake.pdf": b"not a pdf", "ok.csv": b"a\n"})
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=root)
    assert set(fields_of(exc)) == {"reference/run.exe", "reference/fake.pdf"}


def test_unsafe_file_names_get_a_suggested_name(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"bad;name.csv": b"a\n"})
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=root)
    assert "rename it to “bad_name.csv”" in fields_of(exc)["reference/bad;name.csv"][0]




def test_one_bad_bundle_stops_the_whole_import(taxonomy, tmp_path):
    write_bundle(tmp_path / "all" / "good", spec(uuid=new_uuid()), reference={"ledger.csv": LEDGER})
    write_bundle(tmp_path / "all" / "bad", spec(uuid=new_uuid(), occupations=["00-0000.00"]))
    with pytest.raises(TaskBundleInvalid):
        task_bundles_import(source=tmp_path / "all")
    assert TaskInstance.objects.count() == 0 and TaskFile.objects.count() == 0
