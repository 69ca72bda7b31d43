"""Per-episode process metrics: combining files, initiative entropy, effort."""

from __future__ import annotations

import math

import pytest
import scipy.stats

from grading.transcripts import initiative_entropy, transcript_metrics
from grading.transcripts.model import FileStatus, FileTranscript, Format


@pytest.mark.parametrize("counts", [(4, 1), (3, 3), (10, 7), (1, 9)])
def test_initiative_entropy_matches_scipy_with_the_number_of_parties_as_base(counts):
    assert initiative_entropy(counts) == pytest.approx(scipy.stats.entropy(counts, base=len(counts)))


def test_initiative_entropy_is_zero_when_a_party_never_takes_initiative_and_undefined_without_dialogue():
    assert initiative_entropy((5, 0)) == 0.0
    assert initiative_entropy((0, 0)) is None


def test_the_sample_episode_metrics(parse_sample):
    m = transcript_metrics([parse_sample("claude_code_session.jsonl")])
    assert (m.user_prompts, m.agent_turns, m.tool_calls, m.interventions) == (4, 4, 3, 2)
    assert m.initiative_entropy == pytest.approx(-(0.8 * math.log2(0.8) + 0.2 * math.log2(0.2)))
    assert m.human_initiative_share == pytest.approx(0.8)
    assert m.effort_ratio == pytest.approx(m.agent_chars / m.user_chars)


def test_several_session_files_add_up_and_screenshots_are_counted_apart(parse_sample):
    claude, codex = parse_sample("claude_code_session.jsonl"), parse_sample("codex_rollout.jsonl")
    shot = FileTranscript(name="a.png", format=Format.SCREENSHOT, status=FileStatus.SCREENSHOT)
    m = transcript_metrics([claude, codex, shot])
    assert m.user_prompts == 7 and m.tool_calls == 6 and m.interventions == 3
    assert m.duration_seconds == 1206 + 150 and m.active_seconds == 516 + 150
    assert m.screenshots == 1
    # Initiative pools the files: 7 worker prompts against 2 agent questions.
    assert m.initiative_entropy == pytest.approx(scipy.stats.entropy([7, 2], base=2))


def test_files_without_timestamps_leave_time_metrics_unknown(parse_sample):
    m = transcript_metrics([parse_sample("gemini_checkpoint.json")])
    assert m.duration_seconds is None and m.active_seconds is None


def test_active_time_follows_the_clock_not_the_file_order_and_never_exceeds_the_duration():
    """A sub-agent's events written after the main thread's (out of time order) counted a stretch twice."""
    from datetime import UTC, datetime, timedelta

    from grading.transcripts.model import TranscriptBuilder

    start = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    builder = TranscriptBuilder("session.jsonl", Format.CLAUDE_CODE)
    for offset in (0, 100, 200, 50, 150, 200):  # in file order 100 + 100 + 100 + 50 = 350 s "active" in 200 s
        builder.time(start + timedelta(seconds=offset))
    result = builder.finish()
    assert (result.duration_seconds, result.active_seconds) == (200.0, 200.0)
    metrics = transcript_metrics([result])
    assert metrics.active_seconds == metrics.duration_seconds == 200.0
