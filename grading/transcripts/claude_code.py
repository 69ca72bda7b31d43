"""Claude Code session files: `~/.claude/projects/<project>/<session>.jsonl`.

Each line is a record with `type` (user, assistant, summary, system, …), `message` {role, content},
`isSidechain` (sub-agent chains), `timestamp`, `uuid`/`parentUuid`. Content is a string or a list of
parts (text, tool_use, tool_result, thinking, image). Tool results come back as `type: user` records whose
parts are tool_result: they are not the worker's prompts; nor are the CLI's own "API Error" replies agent
turns (`isApiErrorMessage`). Neither are meta records (`isMeta`), compaction
summaries, local command output, bare slash commands (/clear, /cost) or the "[Request interrupted by user…]"
markers (counted as interventions).
"""

from __future__ import annotations

import re
from typing import IO, Any

from grading.transcripts.lines import compact, json_lines
from grading.transcripts.model import FileTranscript, Format, Role, TranscriptBuilder
from grading.transcripts.usage import claude_usage

_INTERRUPTED = "[Request interrupted by user"
_REJECTED = ("The user doesn't want to proceed with this tool use", "The user doesn't want to take this action")
_NOT_PROMPTS = ("<local-command-stdout>", "<local-command-stderr>", "Caveat: The messages below were generated")
_COMMAND = re.compile(r"<command-name>\s*(?P<name>[^<]*)</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(?P<args>.*?)</command-args>", re.DOTALL)
_NON_DIALOGUE = frozenset({"summary", "system", "file-history-snapshot", "queue-operation", "progress"})


def _tool_result_text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _user(record: dict[str, Any], content: Any, b: TranscriptBuilder, state: dict[str, bool]) -> None:
    """Add a user record's turns; a refusal and the interruption marker that follows it count once."""
    at, side = record.get("timestamp"), bool(record.get("isSidechain"))
    if record.get("isMeta") or record.get("isCompactSummary") or record.get("isVisibleInTranscriptOnly"):
        b.skip("meta")
        b.time(at)
        return
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list):
        b.unknown("user content")
        return
    texts: list[str] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "tool_result":
            result = _tool_result_text(part.get("content"))
            flag = "error: " if part.get("is_error") else ""
            b.turn(Role.TOOL_RESULT, flag + compact(result), at, sidechain=side)
            if result.startswith(_REJECTED):
                b.interrupt(at, sidechain=side)
                state["refused"] = True
        elif kind == "image":
            texts.append("[image]")
        elif kind == "document":
            texts.append("[document]")
        else:
            b.unknown(f"user part {kind}")
    text = "\n".join(t for t in texts if t.strip())
    if not text:
        return
    if text.startswith(_INTERRUPTED):
        if not state.pop("refused", False):
            b.interrupt(at, sidechain=side)
        return
    state.pop("refused", None)
    if text.lstrip().startswith(_NOT_PROMPTS):
        b.skip("command output")
        b.time(at)
    elif (command := _COMMAND.search(text)) is not None:
        # A slash command with arguments asks the agent for something; a bare one (/clear, /cost) does not.
        found = _COMMAND_ARGS.search(text)
        args = found.group("args").strip() if found else ""
        if args:
            b.turn(Role.USER, f"{command.group('name').strip()} {args}", at, sidechain=side)
        else:
            b.skip("slash command")
            b.time(at)
    else:
        b.turn(Role.USER, text, at, sidechain=side)


def _assistant(record: dict[str, Any], message: dict[str, Any], b: TranscriptBuilder) -> None:
    at, side = record.get("timestamp"), bool(record.get("isSidechain"))
    if record.get("isApiErrorMessage"):  # "API Error: …" written by the CLI itself, not the model's reply
        b.skip("api error")
        b.time(at)
        return
    content = message.get("content")
    message_id = message.get("id") or record.get("requestId") or record.get("uuid")
    usage = claude_usage(message)
    if usage is not None and usage.tokens:  # the CLI's own "<synthetic>" notices carry zero usage
        b.usage.response(message.get("model"), usage, response_id=message_id)
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list):
        b.unknown("assistant content")
        return
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = str(part.get("text", ""))
            if text.strip():
                b.turn(Role.AGENT, text, at, sidechain=side, message_id=message_id)
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            b.turn(Role.TOOL_CALL, f"{part.get('name', '?')} {compact(part.get('input'))}", at, sidechain=side,
                   message_id=message_id)
        elif kind in ("thinking", "redacted_thinking"):
            b.skip("thinking")
            b.time(at)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):  # server tools: web search, fetch, code
            b.turn(Role.TOOL_RESULT, compact(part.get("content")), at, sidechain=side)
        else:
            b.unknown(f"assistant part {kind}")


def parse(name: str, stream: IO[bytes]) -> FileTranscript:
    """Parse one Claude Code session file in a single streaming pass."""
    b = TranscriptBuilder(name, Format.CLAUDE_CODE)
    state: dict[str, bool] = {}
    for record in json_lines(stream, b):
        kind = record.get("type")
        message = record.get("message")
        if kind in ("user", "assistant") and isinstance(message, dict):
            if kind == "user":
                _user(record, message.get("content"), b, state)
            else:
                _assistant(record, message, b)
        elif kind in _NON_DIALOGUE:
            b.skip(str(kind))
            b.time(record.get("timestamp"))
        else:
            b.unknown(kind)
    return b.finish()
