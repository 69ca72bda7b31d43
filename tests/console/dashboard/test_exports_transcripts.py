"""Exports carry each episode's transcript metrics; the normalised transcripts only with identifying information."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest

from console.exports import Pseudonymizer, build_export
from grading.services.transcripts import episode_transcript_build
from studies.models import Participant
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.scenarios import populated_study
from tests.grading.transcripts.conftest import SAMPLES


def _export(study, **kwargs) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle, **kwargs)
    handle.seek(0)
    return zipfile.ZipFile(handle)


@pytest.fixture
def study_with_logs(db):
    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=4)
    first, second, third = populated.episodes[:3]
    EpisodeFileFactory(episode=first, name="session.jsonl", kind="log",
                       content=(SAMPLES / "claude_code_session.jsonl").read_bytes())
    EpisodeFileFactory(episode=second, name="rollout.jsonl", kind="log",
                       content=(SAMPLES / "codex_rollout.jsonl").read_bytes())
    EpisodeFileFactory(episode=third, name="broken.jsonl", content=b'{"type": "us', kind="log")
    for episode in (first, second, third):
        episode_transcript_build(episode_id=episode.pk)
    return populated


@pytest.mark.django_db
def test_transcript_metrics_are_exported_per_episode_under_hashed_ids(study_with_logs):
    archive = _export(study_with_logs.study)
    rows = {r["episode_id"]: r for r in csv.DictReader(io.TextIOWrapper(archive.open("transcript_metrics.csv")))}
    hasher = Pseudonymizer(study_with_logs.study)
    first, second, third = study_with_logs.episodes[:3]
    claude = rows[hasher("episode", first.pk)]
    assert (claude["status"], claude["formats"], claude["user_prompts"], claude["tool_calls"]) == (
        "partial", "claude_code", "4", "3")
    assert (claude["interventions"], claude["active_seconds"], claude["unknown_records"], claude["bad_lines"]) == (
        "2", "516.0", "1", "1")
    assert rows[hasher("episode", second.pk)]["user_prompts"] == "3"
    broken = rows[hasher("episode", third.pk)]
    assert broken["status"] == "unreadable" and broken["user_prompts"] == "" and broken["log_files"] == "1"
    assert "transcripts.jsonl" not in archive.namelist()
    assert "Thanks" not in archive.read("transcript_metrics.csv").decode()


@pytest.mark.django_db
def test_the_normalised_transcripts_come_only_with_identifying_information(study_with_logs):
    archive = _export(study_with_logs.study, include_pii=True)
    lines = [json.loads(line) for line in archive.read("transcripts.jsonl").decode().splitlines()]
    assert len(lines) == 3
    hasher = Pseudonymizer(study_with_logs.study)
    claude = next(line for line in lines if line["episode_id"] == hasher("episode", study_with_logs.episodes[0].pk))
    turns = claude["files"][0]["turns"]
    assert turns[0]["role"] == "user" and turns[0]["text"].startswith("Please turn sales.csv")
    assert any(t.get("sidechain") for t in turns) and any(t.get("intervention") for t in turns)
    assert "transcripts.jsonl: 3" in archive.read("README.txt").decode()
    dictionary = archive.read("data_dictionary.csv").decode()
    assert "transcripts.jsonl" in dictionary and "transcript_metrics.csv,initiative_entropy" in dictionary


@pytest.mark.django_db
def test_withdrawn_participants_transcripts_are_not_exported(study_with_logs):
    Participant.objects.filter(pk=study_with_logs.episodes[0].participant_id).update(
        status=Participant.Status.WITHDRAWN)
    archive = _export(study_with_logs.study, include_pii=True)
    withdrawn = Pseudonymizer(study_with_logs.study)("episode", study_with_logs.episodes[0].pk)
    assert withdrawn not in archive.read("transcript_metrics.csv").decode()
    assert withdrawn not in archive.read("transcripts.jsonl").decode()
