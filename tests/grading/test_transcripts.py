"""Storing an episode's normalised transcript and process metrics from its uploaded log files."""

from __future__ import annotations

import pytest

from grading.models import EpisodeTranscript
from grading.services.transcripts import episode_transcript_build
from studies.models import EpisodeFile
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.files import png_bytes
from tests.factories.scenarios import submitted_episode
from tests.grading.transcripts.conftest import SAMPLES

pytestmark = pytest.mark.django_db


def _sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def test_a_session_file_and_a_screenshot_give_the_episode_metrics_and_a_file_report():
    episode = submitted_episode(logs={"session.jsonl": _sample("claude_code_session.jsonl"), "end.png": png_bytes()})
    row = episode_transcript_build(episode_id=episode.pk)
    assert row.status == EpisodeTranscript.Status.PARTIAL  # the sample has a broken last line
    assert (row.user_prompts, row.agent_turns, row.tool_calls, row.interventions) == (4, 4, 3, 2)
    assert (row.duration_seconds, row.active_seconds, row.sidechain_turns, row.screenshots) == (1206, 516, 4, 1)
    assert row.initiative_entropy == pytest.approx(0.7219, abs=1e-4)
    assert row.formats == ["claude_code", "screenshot"]
    by_name = {f["name"]: f for f in row.files}
    assert by_name["end.png"]["status"] == "screenshot" and by_name["end.png"]["turns"] == []
    session = by_name["session.jsonl"]
    assert session["unknown_records"] == {"x-telemetry": 1} and session["bad_lines"] == 1
    assert session["turns"][0] == {"role": "user", "at": "2025-06-02T10:00:00+00:00",
                                   "text": "Please turn sales.csv into a quarterly summary workbook for the "
                                           "finance team."}


def test_without_a_readable_transcript_the_metrics_are_missing_not_zero():
    no_log = episode_transcript_build(episode_id=submitted_episode().pk)
    assert no_log.status == "no_log" and no_log.user_prompts is None
    shots = episode_transcript_build(episode_id=submitted_episode(logs={"a.png": png_bytes()}).pk)
    assert shots.status == "screenshots_only" and shots.user_prompts is None and shots.screenshots == 1
    broken = episode_transcript_build(episode_id=submitted_episode(logs={"s.jsonl": b'{"type": "us'}).pk)
    assert broken.status == "unreadable" and broken.tool_calls is None
    assert "not valid JSON" in broken.files[0]["note"]


def test_the_transcript_is_parsed_again_only_when_the_log_files_change():
    episode = submitted_episode(logs={"rollout.jsonl": _sample("codex_rollout.jsonl")})
    first = episode_transcript_build(episode_id=episode.pk)
    EpisodeTranscript.objects.filter(pk=first.pk).update(user_prompts=99)
    assert episode_transcript_build(episode_id=episode.pk).user_prompts == 99  # unchanged files: kept
    EpisodeFileFactory(episode=episode, name="chat.json", content=_sample("gemini_checkpoint.json"),
                       kind=EpisodeFile.Kind.LOG)
    again = episode_transcript_build(episode_id=episode.pk)
    assert again.pk == first.pk and again.user_prompts == 3 + 2
    assert episode_transcript_build(episode_id=episode.pk, force=True).user_prompts == 5


def test_a_stored_file_that_has_gone_missing_is_reported_not_raised():
    episode = submitted_episode(logs={"session.jsonl": _sample("claude_code_session.jsonl")})
    log = episode.files.get(kind=EpisodeFile.Kind.LOG)
    log.file.storage.delete(log.file.name)
    row = episode_transcript_build(episode_id=episode.pk)
    assert row.status == "unreadable" and "could not be opened" in row.files[0]["note"]


def test_staff_see_each_files_parse_report_in_the_admin(admin_client):
    from django.urls import reverse

    episode = submitted_episode(logs={"session.jsonl": _sample("claude_code_session.jsonl"), "x.jsonl": b"{bad"})
    row = episode_transcript_build(episode_id=episode.pk)
    page = admin_client.get(reverse("admin:grading_episodetranscript_change", args=[row.pk])).content.decode()
    assert "session.jsonl" in page and "claude_code (partial): 4 prompts, 3 tool calls" in page
    assert "x.jsonl" in page and "unreadable" in page
    listing = admin_client.get(reverse("admin:grading_episodetranscript_changelist")).content.decode()
    assert "Parsed with problems" in listing
