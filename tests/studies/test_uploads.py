"""Episode uploads: limits, types by extension and content, names, duplicates, replace/remove, locking,
and the streamed reference ZIP."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.storage import default_storage

from pairing.services import episode_assign
from studies import models as m
from studies.exceptions import DuplicateFileName, EpisodeLocked, UploadRejected
from studies.selectors import reference_files
from studies.services.uploads import episode_file_add, episode_file_remove, reference_zip_chunks
from tests.factories.files import PDF, PNG, XLSX, upload
from tests.factories.scenarios import HIDDEN_MARKER, make_participant, make_world

pytestmark = pytest.mark.django_db
DELIVERABLE = m.EpisodeFile.Kind.DELIVERABLE


@pytest.fixture
def episode():
    world = make_world(with_files=True)
    return episode_assign(participant=make_participant(world), position=1)


def _names(episode):
    return sorted(m.EpisodeFile.objects.filter(episode=episode).values_list("name", flat=True))


def test_a_valid_file_is_stored_privately_with_its_hash_and_size(episode):
    record = episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("summary.xlsx", XLSX))
    assert record.size == len(XLSX)
    assert record.sha256 == __import__("hashlib").sha256(XLSX).hexdigest()
    assert "summary" not in record.file.name, "the stored path never contains the worker's file name"
    with default_storage.open(record.file.name, "rb") as handle:
        assert handle.read() == XLSX


@pytest.mark.parametrize("name, content, message", [
    ("empty.pdf", b"", "empty"),
    ("virus.exe", b"MZ\x90\x00", "not accepted"),
    ("noextension", b"hello", "not accepted"),
    ("fake.pdf", b"<html><script>alert(1)</script>", "does not match"),
    ("fake.png", PDF, "does not match"),
    ("binary.csv", b"a,b\x00\x01", "does not look like a text file"),
    ("....", b"data", "no usable characters"),
])
def test_bad_files_are_refused_with_a_clear_message(episode, name, content, message):
    with pytest.raises(UploadRejected, match=message):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload(name, content))
    assert _names(episode) == []


def test_unicode_and_path_names_are_sanitised(episode):
    weird = "../../etc/Ｑ3 résumé\u202e\x00 report?.pdf"
    record = episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload(weird, PDF))
    assert "/" not in record.name and "\x00" not in record.name and "\u202e" not in record.name
    assert record.name.endswith(".pdf") and "résumé" in record.name


def test_per_file_and_per_episode_limits_are_configurable(episode, settings):
    settings.UPLOADS = {**settings.UPLOADS, "MAX_FILE_BYTES": 100, "MAX_EPISODE_BYTES": 150,
                        "MAX_FILES_PER_EPISODE": 3}
    with pytest.raises(UploadRejected, match="limit per file"):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("big.txt", b"x" * 101))
    episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("a.txt", b"x" * 100))
    with pytest.raises(UploadRejected, match="limit per task"):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("b.txt", b"x" * 51))
    episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("b.txt", b"x" * 20))
    episode_file_add(episode=episode, kind=m.EpisodeFile.Kind.LOG, upload=upload("c.txt", b"x" * 20))
    with pytest.raises(UploadRejected, match="at most 3 files"):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("d.txt", b"x"))
    assert _names(episode) == ["a.txt", "b.txt", "c.txt"], "refusals never remove saved files"


def test_only_allowed_extensions_from_settings_are_accepted(episode, settings):
    settings.UPLOADS = {**settings.UPLOADS, "ALLOWED_EXTENSIONS": ["pdf"]}
    with pytest.raises(UploadRejected, match="Allowed: pdf"):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("notes.txt", b"hi"))


def test_a_duplicate_name_is_refused_unless_the_worker_chooses_replace(episode):
    first = episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("report.txt", b"version one"))
    with pytest.raises(DuplicateFileName, match="Replace") as info:
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("report.txt", b"version two"))
    assert info.value.name == "report.txt"
    assert default_storage.exists(first.file.name)
    newer = episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("report.txt", b"version two"),
                             replace=True)
    assert m.EpisodeFile.objects.filter(episode=episode).count() == 1
    with default_storage.open(newer.file.name, "rb") as handle:
        assert handle.read() == b"version two"


def test_the_same_name_may_be_used_once_as_deliverable_and_once_as_log(episode):
    episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("notes.txt", b"deliverable"))
    episode_file_add(episode=episode, kind=m.EpisodeFile.Kind.LOG, upload=upload("notes.txt", b"log"))
    assert _names(episode) == ["notes.txt", "notes.txt"]


def test_screenshots_must_be_images_or_pdf(episode):
    with pytest.raises(UploadRejected, match="not accepted"):
        episode_file_add(episode=episode, kind=m.EpisodeFile.Kind.SKIP_SCREENSHOT, upload=upload("log.txt", b"x"))
    episode_file_add(episode=episode, kind=m.EpisodeFile.Kind.SKIP_SCREENSHOT, upload=upload("shot.png", PNG))


def test_files_can_be_removed_before_but_not_after_submission(episode):
    record = episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("a.pdf", PDF))
    keep = episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("b.pdf", PDF))
    episode_file_remove(episode=episode, file_id=record.pk)
    assert _names(episode) == ["b.pdf"]
    m.Episode.objects.filter(pk=episode.pk).update(status=m.Episode.Status.SUBMITTED)
    episode.refresh_from_db()
    with pytest.raises(EpisodeLocked):
        episode_file_remove(episode=episode, file_id=keep.pk)
    with pytest.raises(EpisodeLocked):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("c.pdf", PDF))
    assert _names(episode) == ["b.pdf"]


def test_a_refused_file_leaves_nothing_in_storage(episode, settings, tmp_path):
    settings.UPLOADS = {**settings.UPLOADS, "MAX_FILES_PER_EPISODE": 1}
    episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("a.pdf", PDF))
    stored_before = sorted(p.name for p in (tmp_path / "media").rglob("*") if p.is_file())
    with pytest.raises(UploadRejected):
        episode_file_add(episode=episode, kind=DELIVERABLE, upload=upload("b.pdf", PDF))
    assert sorted(p.name for p in (tmp_path / "media").rglob("*") if p.is_file()) == stored_before


def test_reference_zip_streams_reference_files_only(episode):
    files = reference_files(episode.task_id)
    assert {f.name for f in files} == {"data.xlsx", "brief.txt"}
    chunks = list(reference_zip_chunks(files))
    assert len(chunks) > 1, "the archive is produced piece by piece"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    assert sorted(archive.namelist()) == ["brief.txt", "data.xlsx"]
    assert archive.read("data.xlsx") == XLSX
    assert HIDDEN_MARKER.encode() not in b"".join(chunks)
    hidden = m.TaskFile.objects.filter(kind=m.TaskFile.Kind.HIDDEN)
    assert b"".join(reference_zip_chunks(list(hidden))).count(HIDDEN_MARKER.encode()) == 0
