"""Render stored normalised transcripts as the text the AI-fluency coder reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grading.transcripts.model import FORMAT_LABELS, Format

_SPEAKER = {"user": "WORKER", "agent": "AGENT", "tool_call": "TOOL CALL", "tool_result": "TOOL RESULT"}


def _label(fmt: str) -> str:
    try:
        return FORMAT_LABELS[Format(fmt)]
    except ValueError:
        return fmt


def render_transcripts(files: Sequence[dict[str, Any]]) -> str:
    """Return one document: per file its format and counts, then each turn with its speaker.

    Files that are screenshots or unreadable are listed with the reason; the coder sees images separately.
    """
    lines: list[str] = []
    for f in files:
        header = f"===== LOG FILE: {f['name']} ({_label(f['format'])}; {f['status']}"
        if f.get("note"):
            header += f"; {f['note']}"
        lines.append(header + ") =====")
        if f.get("heuristic"):
            lines.append("Prompts in this file were detected heuristically; speaker labels may be wrong.")
        if f.get("truncated"):
            lines.append("This transcript was shortened to fit the reading budget (marked […] where cut).")
        for turn in f.get("turns", ()):
            speaker = _SPEAKER.get(turn.get("role"), str(turn.get("role")).upper())
            if turn.get("sidechain"):
                speaker = f"SUB-AGENT {speaker}"
            when = f"[{turn['at'][11:19]}] " if turn.get("at") else ""
            lines.append(f"{when}{speaker}: {turn.get('text', '')}")
        lines.append(f"===== END OF LOG FILE: {f['name']} =====")
        lines.append("")
    return "\n".join(lines).strip()
