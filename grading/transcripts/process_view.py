"""What the process coders may read from a stored transcript: the worker's prompts, and the worker-agent dialogue.

The ToM coder must see the worker's own messages only: never the agent's turns, tool traffic, sub-agent chains
(there the "user" is the main agent) or interventions (a halt, not a message). These functions are the one place
that choice is made; they read stored turn dicts and return plain text, bounded to a character budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

READABLE = ("parsed", "partial")
CUT = " […]"


def _main_turns(files: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for f in files:
        if f.get("status") not in READABLE:
            continue
        for turn in f.get("turns", ()):
            if not turn.get("sidechain") and not turn.get("intervention") and str(turn.get("text", "")).strip():
                yield turn


def worker_prompts(files: Sequence[dict[str, Any]]) -> list[str]:
    """The worker's own messages, in order, across the episode's parsed log files."""
    return [str(t["text"]) for t in _main_turns(files) if t.get("role") == "user"]


def dialogue(files: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(speaker, text) of the worker's messages ("WORKER") and the agent's replies ("AGENT"), without tools."""
    speakers = {"user": "WORKER", "agent": "AGENT"}
    return [(speakers[t["role"]], str(t["text"])) for t in _main_turns(files) if t.get("role") in speakers]


def bounded(texts: list[str], budget: int) -> tuple[list[str], bool]:
    """Keep messages in order up to `budget` characters in all, cutting the one that crosses it; say if cut."""
    kept: list[str] = []
    used = 0
    for text in texts:
        if used + len(text) > budget:
            room = max(0, budget - used)
            if room:
                kept.append(text[:room] + CUT)
            return kept, True
        kept.append(text)
        used += len(text)
    return kept, False
