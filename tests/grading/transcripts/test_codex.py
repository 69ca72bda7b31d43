"""Codex CLI rollouts: enveloped JSONL, older bare-item lines and single JSON documents."""

from __future__ import annotations

import pytest

from grading.transcripts import FileStatus, Format, Role


def test_the_enveloped_rollout_counts_match_the_hand_count(parse_sample):
    result = parse_sample("codex_rollout.jsonl")
    assert result.format is Format.CODEX
    # The environment context is injected, not typed; user_message events mirror the response items.
    assert result.user_prompts == 3
    assert result.agent_turns == 2  # agent_message events mirror the assistant messages
    assert result.tool_calls == 3 and result.tool_results == 3  # shell, apply_patch, shell (aborted)
    assert result.interventions == 1  # turn_aborted
    assert result.duration_seconds == 150 and result.active_seconds == 150
    assert result.agent_questions == 1


def test_unknown_events_and_record_types_are_skipped_and_reported(parse_sample):
    result = parse_sample("codex_rollout.jsonl")
    assert result.status is FileStatus.PARTIAL
    assert result.unknown == {"event future_event_kind": 1, "shiny_new_record": 1}
    assert result.skipped["event user_message"] == 2 and result.skipped["injected context"] == 1
    assert result.non_utf8_lines == 1


def test_a_prompt_with_an_image_keeps_its_text_and_notes_the_image(parse_sample):
    prompts = [t.text for t in parse_sample("codex_rollout.jsonl").turns if t.role is Role.USER]
    assert prompts[1] == "The sheet called Actuals.\n[image]"


def test_older_bare_item_lines_are_read(parse_sample):
    result = parse_sample("codex_legacy.jsonl")
    assert (result.format, result.status) == (Format.CODEX, FileStatus.PARSED)
    assert (result.user_prompts, result.agent_turns, result.tool_calls) == (1, 1, 1)
    assert result.skipped == {"session_meta": 1, "state": 2}


def test_an_older_single_document_session_is_read(parse_sample):
    result = parse_sample("codex_legacy.json")
    assert (result.format, result.status) == (Format.CODEX, FileStatus.PARSED)
    assert [t.role for t in result.turns] == [Role.USER, Role.TOOL_CALL, Role.TOOL_RESULT, Role.AGENT]


def test_a_reduced_rollout_counts_the_prompts_that_exist_only_as_user_message_events(parse_sample):
    result = parse_sample("codex_reduced_rollout.jsonl")
    assert (result.format, result.status) == (Format.CODEX, FileStatus.PARSED)
    # Three typed prompts, each only an event_msg user_message; the tagged environment context is not one.
    assert result.user_prompts == 3
    assert result.skipped["injected context"] == 1
    prompts = [t.text for t in result.turns if t.role is Role.USER and not t.intervention]
    assert prompts == ["Match every line of bank.csv to an invoice in invoices/ and list the ones that do not match.",
                       "Invoice number in the memo first, then amount and date for the rest.",
                       "Also write the unmatched lines to unmatched.csv.\n[image]"]
    # The assistant's response items are the turns; their agent_message events are mirrors.
    assert result.agent_turns == 2 and result.skipped["event agent_message"] == 2
    assert (result.tool_calls, result.tool_results, result.interventions) == (2, 2, 1)
    assert result.skipped["ghost_snapshot"] == 1
    assert result.duration_seconds == 180


def test_a_mirror_event_is_matched_whether_it_comes_before_or_after_its_response_item():
    import io

    from grading.transcripts import parse_log

    item = ('{"timestamp": "2025-11-03T09:00:0%d.000Z", "type": "response_item", "payload": {"type": "message", '
            '"role": "user", "content": [{"type": "input_text", "text": "Sum  column B"}]}}')
    event = ('{"timestamp": "2025-11-03T09:00:0%d.000Z", "type": "event_msg", "payload": {"type": "user_message", '
             '"message": "Sum column B", "images": []}}')
    lonely = ('{"timestamp": "2025-11-03T09:00:09.000Z", "type": "event_msg", "payload": {"type": "user_message", '
              '"message": "Now column C", "images": []}}')
    for lines in ([event % 1, item % 2, lonely], [item % 1, event % 2, lonely]):
        result = parse_log("rollout.jsonl", io.BytesIO("\n".join(lines).encode()))
        assert result.format is Format.CODEX
        assert result.user_prompts == 2, lines
        # The response item is the turn (its text as written); the event only mirrors it.
        assert [t.text for t in result.turns] == ["Sum  column B", "Now column C"]


def test_a_rollout_of_events_only_reads_prompts_replies_and_tool_calls_from_the_events(parse_sample):
    result = parse_sample("codex_events_only.jsonl")
    assert (result.format, result.status) == (Format.CODEX, FileStatus.PARSED)
    assert (result.user_prompts, result.agent_turns) == (2, 2)
    # exec, MCP and patch: each begin event is the call and its end event the result.
    assert (result.tool_calls, result.tool_results) == (3, 3)
    calls = [t.text for t in result.turns if t.role is Role.TOOL_CALL]
    assert calls[0].startswith("exec_command ") and calls[1].startswith("pdf.extract_tables ")
    assert result.agent_questions == 1 and result.duration_seconds == pytest.approx(150.1)


def test_tool_events_beside_call_items_are_mirrors_not_second_calls(parse_sample):
    result = parse_sample("codex_rollout.jsonl")
    assert result.tool_calls == 3 and result.skipped["event exec_command_begin"] == 1
