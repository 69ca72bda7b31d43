"""Codex CLI session files: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.

Current files wrap every line in an envelope {timestamp, type, payload} with types session_meta,
response_item (message with role user/assistant, function_call, function_call_output, reasoning, …),
event_msg (user_message, agent_message, token_count, turn_aborted, …) and turn_context. The response items
are the conversation; a user_message/agent_message event with the text of a response item mirrors it and is
not counted twice, but reduced rollouts (written by other Codex front-ends) hold the dialogue only as these
events, so an event without its response item is a turn of its own: a first pass collects the response
items' texts (the mirror may come before or after its item). Likewise the exec/patch/MCP/web-search begin
and end events are the tool calls of a file that holds no call items, and mirrors otherwise. Older
files hold the bare items one per line (after a bare session header), or one JSON document: a list of
items or {"session": …, "items": […]}. Injected context (environment, AGENTS.md instructions) is not a
prompt the worker typed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from grading.transcripts import bounded_json
from grading.transcripts.lines import compact, json_lines
from grading.transcripts.model import FileTranscript, Format, Role, TranscriptBuilder
from grading.transcripts.usage import codex_total

_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<user_shell_command>",
            "<turn_aborted>")
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_ITEMS = _CALLS | _OUTPUTS | {"message", "reasoning", "compaction", "compaction_summary", "ghost_snapshot"}
# Dialogue events: a turn of their own unless they mirror a response item with the same text.
_DIALOGUE_EVENTS = {"user_message": "user", "agent_message": "assistant"}
# Tool events: the calls themselves in files that hold no call items (reduced rollouts), else mirrors.
_TOOL_EVENTS = {"exec_command_begin": Role.TOOL_CALL, "mcp_tool_call_begin": Role.TOOL_CALL,
                "patch_apply_begin": Role.TOOL_CALL, "web_search_begin": Role.TOOL_CALL,
                "exec_command_end": Role.TOOL_RESULT, "mcp_tool_call_end": Role.TOOL_RESULT,
                "patch_apply_end": Role.TOOL_RESULT, "web_search_end": Role.TOOL_RESULT}
# Context the CLI injects is tagged on the user_message event by some versions.
_CONTEXT_KINDS = frozenset({"environment_context", "user_instructions"})
_EVENTS_IGNORED = frozenset({
    "agent_reasoning", "agent_reasoning_raw_content", "token_count", "task_started", "task_complete",
    "exec_command_output_delta", "session_configured", "plan_update", "background_event", "stream_error", "error",
    "turn_diff", "get_history_entry_response", "entered_review_mode", "exited_review_mode", "view_image_tool_call",
    "agent_reasoning_section_break", "user_message_edit", "context_compacted", "undo_started", "undo_completed",
})
_ENVELOPES_IGNORED = frozenset({"session_meta", "turn_context", "compacted"})


def _content_text(content: Any, *, images: bool = True) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text", "")))
        elif images and part.get("type") in ("input_image", "image"):
            texts.append("[image]")
    return "\n".join(t for t in texts if t.strip())


def _call_text(item: dict[str, Any]) -> str:
    if item.get("type") == "local_shell_call":
        return f"shell {compact((item.get('action') or {}).get('command'))}"
    if item.get("type") == "web_search_call":
        return f"web_search {compact(item.get('action'))}"
    return f"{item.get('name', '?')} {compact(item.get('arguments', item.get('input')))}"


def _item(item: dict[str, Any], at: Any, b: TranscriptBuilder) -> None:
    kind = item.get("type")
    if kind == "message":
        text = _content_text(item.get("content"))
        role = item.get("role")
        if role == "user":
            if not text.strip() or text.lstrip().startswith(_CONTEXT):
                b.skip("injected context")
                b.time(at)
            else:
                b.turn(Role.USER, text, at)
        elif role == "assistant":
            if text.strip():
                b.turn(Role.AGENT, text, at, message_id=item.get("id") or object())
        elif role in ("system", "developer"):
            b.skip("instructions")
        else:
            b.unknown(f"message role {role}")
    elif kind in _CALLS:
        b.turn(Role.TOOL_CALL, _call_text(item), at)
    elif kind in _OUTPUTS:
        b.turn(Role.TOOL_RESULT, compact(item.get("output")), at)
    elif kind == "reasoning":
        b.skip("reasoning")
        b.time(at)
    elif kind in ("compaction", "compaction_summary"):
        b.skip("compaction")
    elif kind == "ghost_snapshot":  # the undo snapshot newer versions take after a turn changes files
        b.skip("ghost_snapshot")
        b.time(at)
    else:
        b.unknown(kind)


def _key(role: str, text: str) -> tuple[str, int]:
    """Return the key a dialogue event and its response item share (a hash: memory stays small)."""
    return role, hash(" ".join(text.split()))


@dataclass
class Mirrors:
    """What a rollout's response items hold, so the events that merely mirror them are not counted twice."""

    texts: Counter[tuple[str, int]] = field(default_factory=Counter)
    has_calls: bool = False


_CALL_ITEM = re.compile(rb'"type"\s*:\s*"(?:function_call|custom_tool_call|local_shell_call|web_search_call)"')


def mirrored_items(lines: Iterable[bytes]) -> Mirrors:
    """Return the (role, text) of every user/assistant response item and whether any tool call item exists."""
    found = Mirrors()
    seen = found.texts
    for raw in lines:
        if b"response_item" not in raw:
            continue
        if not found.has_calls and _CALL_ITEM.search(raw):
            found.has_calls = True
        if b'"message"' not in raw:
            continue  # cheap filter: only message items can be mirrored by dialogue events
        try:
            record = bounded_json.loads(raw.decode("utf-8", "replace").lstrip("\ufeff"))
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if record.get("type") == "response_item" and isinstance(payload, dict) and payload.get("type") == "message" \
                and payload.get("role") in ("user", "assistant"):
            seen[_key(str(payload["role"]), _content_text(payload.get("content"), images=False))] += 1
    return found


def _tool_event_text(payload: dict[str, Any]) -> str:
    name = str(payload.get("type", "")).rsplit("_", 1)[0]
    if isinstance(payload.get("invocation"), dict):  # MCP: {server, tool, arguments}
        name = f"{payload['invocation'].get('server', '?')}.{payload['invocation'].get('tool', '?')}"
    rest = {k: v for k, v in payload.items() if k not in ("type", "call_id", "invocation", "turn_id")}
    return f"{name} {compact(rest)}"


def _event(payload: dict[str, Any], at: Any, b: TranscriptBuilder, mirrors: Mirrors) -> None:
    event = payload.get("type")
    if event == "token_count" and (total := codex_total(payload.get("info"))) is not None:
        b.usage.cumulative(total)
    if event == "turn_aborted":
        b.interrupt(at)
    elif event in _TOOL_EVENTS:
        if mirrors.has_calls:
            b.skip(f"event {event}")
            b.time(at)
        else:
            b.turn(_TOOL_EVENTS[event], _tool_event_text(payload), at)
    elif event in _DIALOGUE_EVENTS:
        text = payload.get("message")
        text = text if isinstance(text, str) else ""
        key = _key(_DIALOGUE_EVENTS[event], text)
        if mirrors.texts[key] > 0:
            mirrors.texts[key] -= 1
            b.skip(f"event {event}")
            b.time(at)
        elif event == "user_message":
            if payload.get("kind") in _CONTEXT_KINDS or not text.strip() or text.lstrip().startswith(_CONTEXT):
                b.skip("injected context")
                b.time(at)
            else:
                images = payload.get("images") or payload.get("local_images") or ()
                b.turn(Role.USER, "\n".join([text, *("[image]" for _ in images)]), at)
        elif text.strip():
            b.turn(Role.AGENT, text, at, message_id=object())
        else:
            b.skip(f"event {event}")
    elif event in _EVENTS_IGNORED:
        b.skip(f"event {event}")
        b.time(at)
    else:
        b.unknown(f"event {event}")


def _records(records: Iterable[dict[str, Any]], b: TranscriptBuilder, mirrors: Mirrors | None = None) -> None:
    mirrors = Mirrors(has_calls=True) if mirrors is None else mirrors
    for record in records:
        kind = record.get("type")
        at = record.get("timestamp")
        payload = record.get("payload")
        if isinstance(payload, dict) and kind is not None:
            if kind == "response_item":
                _item(payload, at, b)
            elif kind == "event_msg":
                _event(payload, at, b, mirrors)
            elif kind in _ENVELOPES_IGNORED:
                if kind == "turn_context" and payload.get("model"):  # the model the next turns run on
                    b.usage.model = str(payload["model"])
                b.skip(str(kind))
                b.time(at)
            else:
                b.unknown(kind)
        elif record.get("record_type") is not None:  # older files: state snapshots between items
            b.skip("state")
        elif kind in _ITEMS:
            _item(record, at, b)
        elif kind is None and "id" in record and "timestamp" in record:  # older files: bare session header
            b.skip("session_meta")
            b.time(record.get("timestamp"))
        else:
            b.unknown(kind)


def parse(name: str, stream: IO[bytes]) -> FileTranscript:
    """Parse one Codex CLI rollout (JSON Lines): a light pass for the mirrored texts, then the parse."""
    b = TranscriptBuilder(name, Format.CODEX)
    start = stream.tell()
    mirrors = mirrored_items(stream)
    stream.seek(start)
    _records(json_lines(stream, b), b, mirrors)
    return b.finish()


def parse_document(name: str, document: Any) -> FileTranscript:
    """Parse an older Codex session saved as one JSON document (a list of items, or {session, items})."""
    b = TranscriptBuilder(name, Format.CODEX)
    items = document.get("items") if isinstance(document, dict) else document
    if isinstance(document, dict) and isinstance(document.get("session"), dict):
        b.time(document["session"].get("timestamp"))
    records = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            b.record()
            records.append(item)
        else:
            b.bad_line()
    _records(records, b)
    return b.finish()
