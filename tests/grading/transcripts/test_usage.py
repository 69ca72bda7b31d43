"""Model usage read from each CLI's session file, against counts made by hand from the sample lines."""

from __future__ import annotations

import io
import json

import pytest

from grading.transcripts import parse_log
from grading.transcripts.usage import UNKNOWN_MODEL, merge_usage


def _counts(calls=0, input=0, cache_read=0, cache_write=0, output=0, reasoning=0) -> dict[str, int]:  # noqa: A002
    return {"calls": calls, "input": input, "cache_read": cache_read, "cache_write": cache_write,
            "output": output, "reasoning": reasoning}


def _parse_lines(name: str, records: list[dict]) -> dict | None:
    data = "\n".join(json.dumps(record) for record in records).encode()
    return parse_log(name, io.BytesIO(data), size=len(data)).usage


def test_claude_code_counts_each_response_once_however_many_lines_repeat_its_usage(parse_sample):
    # msg_A1 is written twice (10/5, then its final 10/20); msg_A2 200/80; msg_err is the CLI's own
    # "<synthetic>" notice with 0/0; msg_A3 50/60; msg_A4 60/30.
    usage = parse_sample("claude_code_session_v2.jsonl").usage
    assert usage == {"claude-sonnet-4-5-20250929": _counts(calls=4, input=10 + 200 + 50 + 60,
                                                           output=20 + 80 + 60 + 30)}


def test_claude_code_keeps_cache_reads_and_writes_apart_from_input():
    line = {"type": "assistant", "timestamp": "2025-06-02T10:00:05Z", "message": {
        "id": "msg_1", "role": "assistant", "model": "claude-opus-4-1", "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": 4, "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 12000,
                  "output_tokens": 350}}}
    assert _parse_lines("s.jsonl", [line]) == {"claude-opus-4-1": _counts(1, 4, 12000, 1500, 350)}


def test_codex_reads_its_running_total_with_cached_input_and_reasoning_inside(parse_sample):
    # total_token_usage: input 3120 of which cached 1024; output 212 of which reasoning 64.
    usage = parse_sample("codex_reduced_rollout.jsonl").usage
    assert usage == {"gpt-5-codex": _counts(calls=1, input=3120 - 1024, cache_read=1024, output=212, reasoning=64)}
    assert parse_sample("codex_events_only.jsonl").usage == {"gpt-5-codex": _counts(1, 5400, output=380)}


def test_codex_running_totals_go_to_the_model_in_use_when_each_arrived():
    def total(prompt, output):
        return {"type": "event_msg", "timestamp": "2025-09-10T14:00:10Z", "payload": {
            "type": "token_count", "info": {"total_token_usage": {"input_tokens": prompt, "output_tokens": output}}}}

    def context(model):
        return {"type": "turn_context", "timestamp": "2025-09-10T14:00:00Z", "payload": {"model": model}}

    usage = _parse_lines("rollout.jsonl", [context("gpt-5-codex"), total(1000, 100), total(1000, 100),
                                           total(2500, 180), context("gpt-5-mini"), total(4000, 200)])
    # The repeated total adds nothing; the third adds 1500/80; after the switch 1500/20 go to gpt-5-mini.
    assert usage == {"gpt-5-codex": _counts(2, 2500, output=180), "gpt-5-mini": _counts(1, 1500, output=20)}


def test_gemini_counts_each_response_with_thoughts_as_output_and_the_cache_apart(parse_sample):
    # 8120 in / 96 out / 40 thoughts; then 9100 in of which 8000 cached / 60 out.
    usage = parse_sample("gemini_session_v2.json").usage
    assert usage == {"gemini-2.5-pro": _counts(calls=2, input=8120 + (9100 - 8000), cache_read=8000,
                                               output=96 + 40 + 60, reasoning=40)}


@pytest.mark.parametrize("name", ["codex_legacy.jsonl", "gemini_session.json", "gemini_checkpoint.json",
                                  "terminal_transcript.txt", "claude_code_session.jsonl"])
def test_a_file_without_usage_records_none_never_zero(parse_sample, name):
    usage = parse_sample(name).usage
    if name == "claude_code_session.jsonl":  # it does record one response's usage: 12 in, 9 out
        assert usage == {"claude-sonnet-4-20250514": _counts(1, 12, output=9)}
    else:
        assert usage is None


def test_a_response_that_names_no_model_is_kept_under_its_own_label():
    line = {"type": "assistant", "message": {"id": "m", "role": "assistant", "content": "hi",
                                             "usage": {"input_tokens": 3, "output_tokens": 2}}}
    assert _parse_lines("s.jsonl", [line]) == {UNKNOWN_MODEL: _counts(1, 3, output=2)}


def test_broken_counts_count_nothing():
    line = {"type": "assistant", "message": {"id": "m", "model": "claude-x", "role": "assistant", "content": "hi",
                                             "usage": {"input_tokens": "12", "output_tokens": -4}}}
    assert _parse_lines("s.jsonl", [line]) is None  # no token counted: nothing to report


def test_files_of_one_episode_add_up_per_model_and_stay_unknown_only_when_all_are():
    a = {"m1": _counts(1, 10, output=5)}
    b = {"m1": _counts(2, 1, 2, 3, 4, 1), "m2": _counts(1, 7)}
    assert merge_usage([a, None, b]) == {"m1": _counts(3, 11, 2, 3, 9, 1), "m2": _counts(1, 7)}
    assert merge_usage([None, None]) is None and merge_usage([]) is None
