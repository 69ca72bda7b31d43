"""Gemini CLI saved chats (checkpoints) and recorded sessions."""

from __future__ import annotations

import io
import json

from grading.transcripts import FileStatus, Format, Role, parse_log


def test_a_checkpoint_counts_prompts_without_setup_context_or_function_responses(parse_sample):
    result = parse_sample("gemini_checkpoint.json")
    assert result.format is Format.GEMINI
    assert result.user_prompts == 2  # the memo request and "Leadership…"; function responses are tool results
    assert result.agent_turns == 3 and result.tool_calls == 2 and result.tool_results == 2
    assert result.skipped == {"setup context": 2, "thinking": 1}
    assert result.unknown == {"part executableCode": 1} and result.status is FileStatus.PARTIAL
    assert result.duration_seconds is None  # checkpoints carry no timestamps


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
