"""Plain terminal transcripts: best-effort prompt detection, flagged as heuristic."""

from __future__ import annotations

import io

from grading.transcripts import Format, Role, parse_log


def test_prompts_are_detected_heuristically_and_flagged(parse_sample):
    result = parse_sample("terminal_transcript.txt")
    assert result.format is Format.TERMINAL and result.heuristic
    assert "heuristically" in result.note
    assert [t.text for t in result.turns if t.role is Role.USER and not t.intervention] == [
        "Write a cover letter for the attached job ad in cover.docx",
        "Management, and keep it to one page.",
        "Use British spelling.",
    ]
    assert result.interventions == 1
    assert result.non_utf8_lines == 1


def test_colour_codes_do_not_reach_the_transcript(parse_sample):
    assert not any("\x1b" in t.text for t in parse_sample("terminal_transcript.txt").turns)


def test_text_without_prompt_markers_is_one_agent_block_with_a_note():
    result = parse_log("notes.txt", io.BytesIO(b"Some output\nmore output\n"))
    assert result.user_prompts == 0 and result.agent_turns == 1
    assert "no prompt marker" in result.note
