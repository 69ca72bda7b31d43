"""Plain terminal transcripts (`script` recordings, copied scrollback): prompts are found heuristically.

A line is taken as the worker's prompt when it starts with an input marker the agents' terminals draw
("> ", "› ", "❯ ", "│ > ") or a speaker label ("You:", "User:", "Human:"); the lines between two prompts are
one agent turn. The result is flagged as heuristic so nobody mistakes the counts for exact ones.
"""

from __future__ import annotations

import re
from typing import IO

from grading.transcripts.model import FileTranscript, Format, Role, TranscriptBuilder

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\r")
_PROMPT = re.compile(r"^\s*(?:[│|]\s*)?(?:>|›|❯|(?:you|user|human)\s*:)\s+(?P<text>\S.*?)\s*[│|]?\s*$",
                     re.IGNORECASE)
_AGENT = re.compile(r"^\s*(?:assistant|agent|claude|codex|gemini|ai)\s*:\s*", re.IGNORECASE)
_INTERRUPT = re.compile(r"interrupted by user|\^C|\[interrupted\]", re.IGNORECASE)
_MAX_LINE = 20_000


def parse(name: str, stream: IO[bytes]) -> FileTranscript:
    """Parse a terminal transcript line by line; undecodable bytes are replaced and counted."""
    b = TranscriptBuilder(name, Format.TERMINAL)
    b.result.heuristic = True
    block: list[str] = []
    block_chars = 0

    def flush() -> None:
        nonlocal block_chars
        text = "\n".join(block).strip()
        if text:
            b.turn(Role.AGENT, text, message_id=object())
        block.clear()
        block_chars = 0

    for raw in stream:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", "replace")
            b.non_utf8()
        b.record()
        line = _ANSI.sub("", line[:_MAX_LINE]).rstrip("\n")
        if (match := _PROMPT.match(line)) is not None:
            flush()
            b.turn(Role.USER, match.group("text"))
        elif _INTERRUPT.search(line):
            flush()
            b.interrupt()
        elif line.strip():
            line = _AGENT.sub("", line)
            if block_chars < 8000:  # the builder caps the turn anyway; stop collecting long outputs early
                block.append(line)
                block_chars += len(line)
    flush()
    note = "prompts detected heuristically from terminal text"
    if not b.result.user_prompts:
        note += "; no prompt marker was found"
    return b.finish(note=note)
