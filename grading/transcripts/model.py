"""The normalised transcript every agent's session file is parsed into, built in one bounded pass.

Parsers push turns into a `TranscriptBuilder`, which counts the process metrics as the turns stream by and
keeps only a bounded copy of the text (per-turn caps, a total budget, a turn limit), so a 50 MB session
file never sits in memory whole. Unknown record types and broken lines are counted, never fatal.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from grading.transcripts.usage import UsageLedger

# Gaps between consecutive events longer than this count as idle, not active time (seconds).
IDLE_GAP_SECONDS = 5 * 60
MAX_TURNS = 4000
TEXT_BUDGET = 400_000
TURN_TEXT_LIMIT = {"user": 4000, "agent": 2000, "tool_call": 300, "tool_result": 300}

INTERRUPT_MARKER = "[worker interrupted the agent]"


class Role(enum.StrEnum):
    USER = "user"
    AGENT = "agent"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


class Format(enum.StrEnum):
    CLAUDE_CODE = "claude_code"
    CODEX = "codex"
    GEMINI = "gemini"
    TERMINAL = "terminal"
    SCREENSHOT = "screenshot"
    UNKNOWN = "unknown"


FORMAT_LABELS = {
    Format.CLAUDE_CODE: "Claude Code session (JSONL)",
    Format.CODEX: "Codex CLI session (JSONL)",
    Format.GEMINI: "Gemini CLI saved chat",
    Format.TERMINAL: "Terminal transcript (prompts detected heuristically)",
    Format.SCREENSHOT: "Screenshot",
    Format.UNKNOWN: "Unrecognised file",
}


class FileStatus(enum.StrEnum):
    PARSED = "parsed"  # every record understood or knowingly skipped
    PARTIAL = "partial"  # parsed, but some lines were broken or of unknown types
    SCREENSHOT = "screenshot"  # an image: listed, sent to a vision-capable coder
    UNREADABLE = "unreadable"  # recognised nothing usable (empty, binary, unknown layout, broken JSON)


def parse_timestamp(value: Any) -> datetime | None:
    """Return an aware datetime from an ISO 8601 string or epoch seconds/milliseconds, else None."""
    try:
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value)
        elif isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            parsed = datetime.fromtimestamp(value / 1000 if value > 1e11 else value).astimezone()
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return parsed if parsed.tzinfo else parsed.astimezone()


def _asks_question(text: str) -> bool:
    """Whether an agent message ends by asking the worker something (dialogue initiative)."""
    return "?" in text.rstrip()[-200:]


@dataclass(slots=True)
class Turn:
    role: Role
    text: str
    at: datetime | None = None
    sidechain: bool = False
    intervention: bool = False  # the worker halted the agent (not a prompt)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": str(self.role), "text": self.text}
        if self.at is not None:
            out["at"] = self.at.isoformat()
        if self.sidechain:
            out["sidechain"] = True
        if self.intervention:
            out["intervention"] = True
        return out


@dataclass
class FileTranscript:
    """One parsed file: its turns (bounded), counts and what was skipped."""

    name: str
    format: Format
    status: FileStatus = FileStatus.PARSED
    note: str = ""
    heuristic: bool = False  # prompt detection was guessed (plain terminal text)
    turns: list[Turn] = field(default_factory=list)
    truncated: bool = False
    records: int = 0
    bad_lines: int = 0
    non_utf8_lines: int = 0
    unknown: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    user_prompts: int = 0
    agent_turns: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    interventions: int = 0
    sidechain_turns: int = 0
    user_chars: int = 0
    agent_chars: int = 0
    agent_questions: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    active_seconds: float = 0.0
    usage: dict[str, dict[str, int]] | None = None  # per model; None: the file reported no usage

    @property
    def duration_seconds(self) -> float | None:
        if self.first_at is None or self.last_at is None:
            return None
        return max(0.0, (self.last_at - self.first_at).total_seconds())

    def report(self) -> dict[str, Any]:
        """Return the file's parse report (no text) for staff and the export."""
        return {
            "name": self.name, "format": str(self.format), "status": str(self.status), "note": self.note,
            "heuristic": self.heuristic, "truncated": self.truncated, "records": self.records,
            "bad_lines": self.bad_lines, "non_utf8_lines": self.non_utf8_lines,
            "unknown_records": dict(self.unknown), "skipped_records": dict(self.skipped),
            "user_prompts": self.user_prompts, "agent_turns": self.agent_turns, "tool_calls": self.tool_calls,
            "interventions": self.interventions, "sidechain_turns": self.sidechain_turns,
            "usage": self.usage,
        }


class TranscriptBuilder:
    """Collect turns from one file, counting metrics on the way and keeping bounded text."""

    def __init__(self, name: str, fmt: Format) -> None:
        self.result = FileTranscript(name=name, format=fmt)
        self._text_left = TEXT_BUDGET
        self._times: list[datetime] = []  # every event time, for active time once the file is read
        self._agent_key: Any = None  # id of the agent message the last agent text belonged to
        self.usage = UsageLedger()

    # ---- events

    def record(self) -> None:
        self.result.records += 1

    def bad_line(self) -> None:
        self.result.bad_lines += 1

    def non_utf8(self) -> None:
        self.result.non_utf8_lines += 1

    def unknown(self, kind: Any) -> None:
        """Count a record or part type this parser does not know (format drift); it is skipped."""
        self.result.unknown[str(kind)[:60] if kind is not None else "(no type)"] += 1

    def skip(self, kind: str) -> None:
        """Count a known record that carries no dialogue (metadata, reasoning, mirrored events)."""
        self.result.skipped[kind] += 1

    def time(self, value: Any) -> datetime | None:
        """Note an event time (any record, dialogue or not) for duration and active time."""
        at = value if isinstance(value, datetime) else parse_timestamp(value)
        if at is None:
            return None
        r = self.result
        try:
            if r.first_at is None or at < r.first_at:
                r.first_at = at
            if r.last_at is None or at > r.last_at:
                r.last_at = at
        except TypeError:  # naive and aware mixed in one file: keep what is consistent
            return None
        self._times.append(at)
        return at

    def interrupt(self, at: Any = None, *, sidechain: bool = False) -> None:
        """The worker stopped the agent or refused a tool call (a halting intervention)."""
        when = self.time(at)
        if sidechain:
            self.result.sidechain_turns += 1
            return
        self.result.interventions += 1
        self._keep(Turn(Role.USER, INTERRUPT_MARKER, when, intervention=True))
        self._agent_key = None

    def turn(self, role: Role, text: str, at: Any = None, *, sidechain: bool = False, message_id: Any = None) -> None:
        """Add one turn; consecutive agent text parts of one message (same `message_id`) form one turn."""
        when = self.time(at)
        r = self.result
        if sidechain:
            r.sidechain_turns += 1
        elif role is Role.USER:
            r.user_prompts += 1
            r.user_chars += len(text)
        elif role is Role.AGENT:
            r.agent_chars += len(text)
            if message_id is not None and message_id == self._agent_key and r.turns and \
                    r.turns[-1].role is Role.AGENT:
                if _asks_question(text):
                    r.agent_questions += 1
                self._append_text(r.turns[-1], text)
                return
            r.agent_turns += 1
            if _asks_question(text):
                r.agent_questions += 1
        elif role is Role.TOOL_CALL:
            r.tool_calls += 1
        else:
            r.tool_results += 1
        self._agent_key = message_id if role is Role.AGENT else (self._agent_key if role is Role.TOOL_CALL else None)
        self._keep(Turn(role, self._bounded(role, text), when, sidechain))

    # ---- bounded text

    def _bounded(self, role: Role, text: str) -> str:
        limit = min(TURN_TEXT_LIMIT[str(role)], max(self._text_left, 0))
        if len(text) > limit:
            self.result.truncated = True
            text = text[:limit] + (f" […{len(text) - limit} characters cut]" if limit else "")
        self._text_left -= len(text)
        return text

    def _append_text(self, turn: Turn, text: str) -> None:
        room = TURN_TEXT_LIMIT["agent"] - len(turn.text)
        if room <= 0 or self._text_left <= 0:
            self.result.truncated = True
            return
        piece = "\n" + text
        if len(piece) > room:
            self.result.truncated = True
            piece = piece[:room]
        self._text_left -= len(piece)
        turn.text += piece

    def _keep(self, turn: Turn) -> None:
        if len(self.result.turns) < MAX_TURNS:
            self.result.turns.append(turn)
        else:
            self.result.truncated = True

    def finish(self, *, status: FileStatus | None = None, note: str = "") -> FileTranscript:
        """Return the file transcript, marking it partial when lines were broken or unknown."""
        r = self.result
        r.usage = self.usage.totals()
        r.active_seconds = active_seconds(self._times)
        if status is not None:
            r.status = status
        elif r.bad_lines or r.unknown:
            r.status = FileStatus.PARTIAL
        notes = [note] if note else []
        if r.bad_lines:
            notes.append(f"{r.bad_lines} line(s) were not valid JSON and were skipped")
        if r.unknown:
            kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(r.unknown.items()))
            notes.append(f"unknown record types skipped: {kinds}")
        if r.non_utf8_lines:
            notes.append(f"{r.non_utf8_lines} line(s) had bytes that are not UTF-8 (replaced)")
        r.note = "; ".join(notes)
        return r


def active_seconds(times: list[datetime]) -> float:
    """Sum the gaps of at most IDLE_GAP_SECONDS between events in time order, not file order: records out of
    order (a sub-agent's events written after the main thread's) would otherwise count a stretch twice and
    give more active time than the session lasted. The result never exceeds last minus first."""
    ordered = sorted(times)
    gaps = ((later - earlier).total_seconds() for earlier, later in zip(ordered, ordered[1:], strict=False))
    return float(sum(gap for gap in gaps if 0 < gap <= IDLE_GAP_SECONDS))


def unreadable(name: str, fmt: Format, note: str) -> FileTranscript:
    """Return the report of a file nothing could be read from (kept, listed, never fatal)."""
    return FileTranscript(name=name, format=fmt, status=FileStatus.UNREADABLE, note=note)
