"""Where an import's files come from: bundle folders, ZIPs and uploads; unsafe archive members are refused."""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile

import pytest

from studies.models import Study, TaskInstance
from studies.services.task_bundles import task_bundles_import
from studies.task_bundle_format import BundleLimits, TaskBundleInvalid
from tests.console.api.bundles import TASK_UUID, bundle_members, mark_encrypted, new_uuid, spec, write_bundle, zip_bytes
from tests.factories import StudyFactory
from tests.studies.task_bundles.helpers import GOLD, LEDGER, fields_of, stored_bytes, upload_named


def test_a_bundle_folder_creates_the_task_with_its_files(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "bundle", reference={"ledger.csv": LEDGER}, hidden={"gold.txt": GOLD})
    report = task_bundles_import(source=root)
    assert [o.action for o in report.tasks] == ["created"]
    task = TaskInstance.objects.get(uuid=TASK_UUID)
    assert (task.title, task.source, task.sector, task.time_limit_minutes) == (
        "Quarterly summary", "gdpval", taxonomy, 90)
    assert task.prompt == "Summarise the ledger by region.\n"
    assert list(task.occupations.values_list("soc_code", flat=True)) == ["13-2011.00"]
    assert task.required_software == ["Excel"] and task.expected_deliverables == ["summary.xlsx"]
    assert task.hidden_info == "GOLD: the north total is 10."
    files = {f.name: f for f in task.files.all()}
    assert files["ledger.csv"].kind == "reference" and files["gold.txt"].kind == "hidden"
    assert files["ledger.csv"].sha256 == hashlib.sha256(LEDGER).hexdigest()
    assert files["ledger.csv"].size == len(LEDGER) and files["ledger.csv"].content_type == "text/csv"
    assert stored_bytes(files["gold.txt"]) == GOLD


def test_a_folder_of_bundles_and_a_zip_of_bundles_import_every_task(taxonomy, tmp_path):
    ids = [new_uuid(), new_uuid()]
    for index, task_id in enumerate(ids):
        write_bundle(tmp_path / "many" / f"t{index}", spec(uuid=task_id), reference={"ledger.csv": LEDGER})
    (tmp_path / "many" / "README.md").write_text("Bundles for the pilot.")
    assert task_bundles_import(source=tmp_path / "many").count("created") == 2
    zipped = {**bundle_members("wrap/x", spec(uuid=new_uuid())), **bundle_members("wrap/y", spec(uuid=new_uuid()))}
    (tmp_path / "many.zip").write_bytes(zip_bytes(zipped))
    assert task_bundles_import(source=tmp_path / "many.zip").count("created") == 2
    assert TaskInstance.objects.count() == 4


def test_a_zip_with_one_bundle_at_its_root_imports(taxonomy):
    upload = upload_named(zip_bytes(bundle_members(reference={"ledger.csv": LEDGER})), "one.zip")
    report = task_bundles_import(source=upload)
    assert report.tasks[0].files_added == ["reference/ledger.csv"]


def test_system_junk_in_archives_is_ignored(taxonomy):
    members = {**bundle_members(), "__MACOSX/._task.json": b"\x00\x05", "reference/.DS_Store": b"\x00"}
    assert task_bundles_import(source=upload_named(zip_bytes(members), "mac.zip")).count("created") == 1


def test_importing_into_a_study_attaches_the_tasks(taxonomy, tmp_path):
    study = StudyFactory(slug="pilot")
    task_bundles_import(source=write_bundle(tmp_path / "b"), study=study)
    assert list(Study.objects.get(slug="pilot").tasks.values_list("uuid", flat=True)) == [
        TaskInstance.objects.get().uuid]



@pytest.mark.parametrize(
    ("member", "message"),
    [
        ("../outside.txt", "points outside the upload"),
        ("/etc/passwd", "is an absolute path"),
        ("C:/windows/evil.txt", "is an absolute path"),
        ("bundle\\reference\\x.txt", "uses backslashes"),
    ],
)
def test_unsafe_archive_paths_are_refused(taxonomy, member, message):
    members = {**bundle_members(), member: b"x"}
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(zip_bytes(members), "unsafe.zip"))
    assert message in fields_of(exc)[member][0]
    assert TaskInstance.objects.count() == 0


def test_symlinks_and_encrypted_members_in_archives_are_refused(taxonomy):
    def mutate(info: zipfile.ZipInfo) -> None:
        if info.filename == "reference/link.txt":
            info.external_attr = (stat.S_IFLNK | 0o777) << 16

    members = {**bundle_members(), "reference/link.txt": b"/etc/passwd", "reference/secret.txt": b"xx"}
    archive = mark_encrypted(zip_bytes(members, mutate=mutate), "reference/secret.txt")
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(archive, "odd.zip"))
    problems = fields_of(exc)
    assert "symbolic link" in problems["reference/link.txt"][0]
    assert "encrypted" in problems["reference/secret.txt"][0]


def test_symlinks_in_folders_are_refused(taxonomy, tmp_path):
    root = write_bundle(tmp_path / "b", reference={"ledger.csv": LEDGER})
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    os.symlink(secret, root / "reference" / "notes.txt")
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=root)
    assert "symbolic link" in fields_of(exc)["reference/notes.txt"][0]



def test_zip_bombs_and_archives_with_too_many_members_are_refused(taxonomy):
    bomb = {**bundle_members(), "reference/zeros.csv": b"0" * (3 * 2**20)}
    limits = BundleLimits(max_file_bytes=2**30, max_members=100, max_total_bytes=2**30, max_ratio=100.0)
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(zip_bytes(bomb), "bomb.zip"), limits=limits)
    assert "possible zip bomb" in fields_of(exc)["reference/zeros.csv"][0]
    crowded = {**bundle_members(), **{f"reference/f{i}.txt": b"x" for i in range(5)}}
    small = BundleLimits(max_file_bytes=2**30, max_members=3, max_total_bytes=2**30, max_ratio=100.0)
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(zip_bytes(crowded), "crowded.zip"), limits=small)
    assert "more than the limit of 3" in fields_of(exc)[""][0]



def test_not_an_archive_is_a_clear_problem(taxonomy):
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(b"plain text", "tasks.zip"))
    assert fields_of(exc)["tasks.zip"] == ["is not a readable ZIP archive"]
    with pytest.raises(TaskBundleInvalid) as exc:
        task_bundles_import(source=upload_named(b"x", "tasks.rar"))
    assert "not a bundle folder" in fields_of(exc)["tasks.rar"][0]
