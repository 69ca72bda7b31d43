"""Claude Code session JSONL: prompts, agent turns, tools, side chains, interruptions and format drift."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

from grading.transcripts import FileStatus, Format, Role, parse_log


def test_the_sample_session_counts_match_the_hand_count(parse_sample):
    result = parse_sample("claude_code_session.jsonl")
    assert result.format is Format.CLAUDE_CODE
    # Prompts: the opening request, "Fiscal year…", the openpyxl request (text + image), "Thanks…".
    assert result.user_prompts == 4
    # msg_01 text, msg_02 text (thinking skipped), msg_05 (two records, one message), msg_06.
    assert result.agent_turns == 4
    assert result.tool_calls == 3 and result.tool_results == 3  # Bash, Task, Write (main chain only)
    # The refused Write (its interruption marker not counted twice) and the final interruption.
    assert result.interventions == 2
    assert result.sidechain_turns == 4  # the sub-agent's prompt, text, Read call and its result
    assert result.first_at == datetime(2025, 6, 2, 10, 0, tzinfo=UTC)
    assert result.last_at == datetime(2025, 6, 2, 10, 20, 6, tzinfo=UTC)
    assert result.duration_seconds == 1206
    # Every gap counts except the 11.5-minute pause before the openpyxl request (10:03:30 → 10:15:00).
    assert result.active_seconds == 516
    assert result.agent_questions == 1  # the fiscal/calendar question


def test_tool_results_meta_records_and_command_output_are_not_prompts(parse_sample):
    result = parse_sample("claude_code_session.jsonl")
    prompts = [t.text for t in result.turns if t.role is Role.USER and not t.sidechain and not t.intervention]
    assert prompts[0].startswith("Please turn sales.csv")
    assert prompts[1] == "Fiscal year, starting in April."
    assert prompts[2].endswith("like in this screenshot.\n[image]")
    assert prompts[3].startswith("Thanks") and "\ufffd" in prompts[3]
    assert not any("Caveat" in p or "local-command" in p or "Total cost" in p for p in prompts)
    assert result.skipped == {"summary": 1, "thinking": 1, "meta": 1, "command output": 1}


def test_a_side_chain_prompt_is_kept_but_marked_as_a_sub_agent_turn(parse_sample):
    side = [t for t in parse_sample("claude_code_session.jsonl").turns if t.sidechain]
    assert [t.role for t in side] == [Role.USER, Role.AGENT, Role.TOOL_CALL, Role.TOOL_RESULT]
    assert side[0].text == "Summarise the columns of sales.csv"


def test_parts_of_one_message_split_over_records_form_one_agent_turn(parse_sample):
    turns = parse_sample("claude_code_session.jsonl").turns
    agent = [t.text for t in turns if t.role is Role.AGENT and not t.sidechain]
    assert agent[2] == "Done: summary.xlsx is written.\nIt has one sheet per fiscal quarter and a totals sheet."


def test_unknown_record_types_broken_lines_and_bad_bytes_are_counted_not_fatal(parse_sample):
    result = parse_sample("claude_code_session.jsonl")
    assert result.status is FileStatus.PARTIAL
    assert result.unknown == {"x-telemetry": 1}
    assert result.bad_lines == 1  # the record cut off when the session was killed
    assert result.non_utf8_lines == 1
    assert "x-telemetry ×1" in result.note and "not valid JSON" in result.note


def test_a_clean_session_is_parsed_without_notes():
    lines = [
        {"type": "user", "message": {"role": "user", "content": "hello"}, "uuid": "a", "sessionId": "s",
         "timestamp": "2025-01-01T00:00:00Z"},
        {"type": "assistant", "message": {"id": "m", "role": "assistant", "content": [{"type": "text", "text": "hi"}]},
         "uuid": "b", "timestamp": "2025-01-01T00:00:02Z"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    result = parse_log("s.jsonl", io.BytesIO(data))
    assert (result.status, result.note, result.user_prompts, result.agent_turns) == (FileStatus.PARSED, "", 1, 1)


def test_turn_text_is_bounded_and_the_transcript_flagged_truncated():
    long_prompt = "x" * 10_000
    line = {"type": "user", "message": {"role": "user", "content": long_prompt}, "uuid": "a", "sessionId": "s"}
    result = parse_log("s.jsonl", io.BytesIO(json.dumps(line).encode()))
    assert result.truncated and len(result.turns[0].text) < 4100
    assert result.user_chars == 10_000  # the metrics count the full text


def test_a_bare_slash_command_is_not_a_prompt_but_one_with_arguments_is():
    def user(content: str) -> str:
        return json.dumps({"type": "user", "sessionId": "s", "message": {"role": "user", "content": content}})

    lines = [user("<command-message>clear</command-message>\n<command-name>/clear</command-name>\n"
                  "<command-args></command-args>"),
             user("<command-message>review</command-message>\n<command-name>/review</command-name>\n"
                  "<command-args>the budget sheet</command-args>")]
    result = parse_log("s.jsonl", io.BytesIO("\n".join(lines).encode()))
    assert result.user_prompts == 1 and result.turns[0].text == "/review the budget sheet"
    assert result.skipped == {"slash command": 1}


def test_a_newer_session_file_reads_every_record_shape_it_writes(parse_sample):
    result = parse_sample("claude_code_session_v2.jsonl")
    assert (result.format, result.status, result.unknown) == (Format.CLAUDE_CODE, FileStatus.PARSED, {})
    # The request, the queued follow-up (once, from its user record) and /review with its arguments;
    # not /init, the compaction summary, the queue records or the cost printout.
    prompts = [t.text for t in result.turns if t.role is Role.USER]
    assert prompts == ["Compare our prices in prices.csv with the three competitor sheets and suggest where to move.",
                       "Stay premium, but close the gap on the top three.",
                       "/review check proposal.md for arithmetic errors"]
    # The CLI's own "API Error: 529" reply is not an agent turn; server web search is a call and a result.
    assert result.agent_turns == 2 and not any("API Error" in t.text for t in result.turns)
    assert (result.tool_calls, result.tool_results) == (3, 3)
    assert result.skipped == {"file-history-snapshot": 1, "slash command": 1, "thinking": 1, "queue-operation": 2,
                              "api error": 1, "system": 2, "meta": 1}
    assert result.duration_seconds == 242 and result.agent_questions == 1
