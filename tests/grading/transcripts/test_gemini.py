"""Gemini CLI saved chats (checkpoints) and recorded sessions."""

from __future__ import annotations

import io
import json

from grading.transcripts import FileStatus, Format, Role, parse_log


def test_a_checkpoint_counts_prompts_without_setup_context_or_function_responses(parse_sample):
    result = parse_sample("gemini_checkpoint.json")
    assert result.format is Format.GEMINI
    assert result.user_prompts == 2  # the memo request and "Leadership…"; function responses are tool results
    # Two function calls and the model's built-in code execution (an executableCode part).
    assert result.agent_turns == 3 and result.tool_calls == 3 and result.tool_results == 2
    assert result.skipped == {"setup context": 2, "thinking": 1}
    assert result.unknown == {} and result.status is FileStatus.PARSED
    assert result.duration_seconds is None  # checkpoints carry no timestamps


def test_a_part_of_a_kind_no_gemini_version_wrote_is_counted_as_drift():
    chat = [{"role": "user", "parts": [{"text": "Go"}]}, {"role": "model", "parts": [{"futurePart": {"x": 1}}]}]
    result = parse_log("checkpoint-x.json", io.BytesIO(json.dumps(chat).encode()))
    assert result.unknown == {"part futurePart": 1} and result.status is FileStatus.PARTIAL


def test_text_before_a_function_call_stays_before_it(parse_sample):
    roles = [t.role for t in parse_sample("gemini_checkpoint.json").turns][:4]
    assert roles == [Role.USER, Role.AGENT, Role.TOOL_CALL, Role.TOOL_RESULT]


def test_a_recorded_session_has_times_and_tool_calls(parse_sample):
    result = parse_sample("gemini_session.json")
    assert (result.user_prompts, result.agent_turns, result.tool_calls, result.tool_results) == (2, 2, 1, 1)
    assert result.duration_seconds == 600
    # startTime 08:00:00, prompt 08:00:05, reply 08:00:20, info 08:01:00 (55 s), 8-minute pause idle,
    # prompt 08:09:00, reply 08:09:30, lastUpdated 08:10:00.
    assert result.active_seconds == 5 + 15 + 40 + 30 + 30


def test_the_prompt_log_lists_typed_prompts():
    data = json.dumps([{"sessionId": "s", "messageId": 0, "type": "user", "message": "make a chart",
                        "timestamp": "2025-10-01T08:00:00Z"}]).encode()
    result = parse_log("logs.json", io.BytesIO(data))
    assert (result.format, result.user_prompts) == (Format.GEMINI, 1)


def test_session_messages_with_content_parts_are_read():
    data = json.dumps({"sessionId": "s", "messages": [
        {"type": "user", "content": [{"text": "Summarise the memo."}], "timestamp": "2025-10-01T08:00:00Z"},
        {"type": "gemini", "content": [{"text": "thinking…", "thought": True}, {"text": "Here it is."}]},
    ]}).encode()
    result = parse_log("session.json", io.BytesIO(data))
    assert [t.text for t in result.turns] == ["Summarise the memo.", "Here it is."]


def test_a_newer_recorded_session_reads_part_lists_cancelled_calls_and_cli_notices(parse_sample):
    result = parse_sample("gemini_session_v2.json")
    assert (result.format, result.status, result.unknown) == (Format.GEMINI, FileStatus.PARSED, {})
    prompts = [t.text for t in result.turns if t.role is Role.USER]
    assert prompts == ["Turn survey.xlsx into a two-page summary with one chart per question.",
                       "Use matplotlib, not a script of your own. Which questions need a chart?"]
    assert (result.agent_turns, result.tool_calls, result.tool_results) == (2, 2, 2)
    assert result.skipped == {"thinking": 1, "info": 1, "error": 1}
    assert result.duration_seconds == 390  # startTime to lastUpdated
