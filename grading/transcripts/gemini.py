"""Gemini CLI chats: `/chat save <tag>` checkpoints and the recorded sessions under `~/.gemini/tmp/<project>/`.

A checkpoint (`checkpoint-<tag>.json`) is a JSON array of {role: "user"|"model", parts: [...]} where a part
is {text} (with `thought: true` for reasoning), {functionCall} or {functionResponse}; function responses
travel in user-role entries and are not the worker's prompts, nor is the setup context the CLI sends first.
Recorded sessions (`chats/session-*.json`) are {sessionId, messages: [{type: user|gemini|info|error,
content, timestamp, toolCalls, thoughts}]}; `logs.json` lists the prompts typed: [{type: "user", message,
timestamp}].
"""

from __future__ import annotations

from typing import Any

from grading.transcripts.lines import compact
from grading.transcripts.model import FileTranscript, Format, Role, TranscriptBuilder
from grading.transcripts.usage import gemini_usage

_SETUP = ("This is the Gemini CLI. We are setting up the context", "Got it. Thanks for the context")


def looks_like(document: Any) -> bool:
    """Whether a JSON document has one of the Gemini CLI layouts."""
    if isinstance(document, dict):
        return isinstance(document.get("messages"), list) and ("sessionId" in document or "projectHash" in document)
    if isinstance(document, list) and document and isinstance(document[0], dict):
        first = document[0]
        return ("role" in first and "parts" in first) or ("messageId" in first and "message" in first)
    return False


def _content(entry: dict[str, Any], b: TranscriptBuilder) -> None:
    role = entry.get("role")
    parts = entry.get("parts")
    if not isinstance(parts, list):
        b.unknown(f"{role} entry without parts")
        return
    texts: list[str] = []

    def flush() -> None:
        text = "\n".join(t for t in texts if t.strip())
        texts.clear()
        if not text:
            return
        if text.startswith(_SETUP):
            b.skip("setup context")
        elif role == "user":
            b.turn(Role.USER, text)
        elif role == "model":
            b.turn(Role.AGENT, text, message_id=object())
        else:
            b.unknown(f"role {role}")

    for part in parts:
        if not isinstance(part, dict):
            b.unknown("part")
        elif "functionCall" in part:
            flush()
            call = part["functionCall"] or {}
            b.turn(Role.TOOL_CALL, f"{call.get('name', '?')} {compact(call.get('args'))}")
        elif "functionResponse" in part:
            flush()
            b.turn(Role.TOOL_RESULT, compact((part["functionResponse"] or {}).get("response")))
        elif "text" in part:
            if part.get("thought"):
                b.skip("thinking")
            else:
                texts.append(str(part["text"]))
        elif "inlineData" in part or "fileData" in part:
            texts.append("[file]")
        elif "executableCode" in part:  # the model's built-in code execution: a call and its result
            flush()
            b.turn(Role.TOOL_CALL, f"code_execution {compact((part['executableCode'] or {}).get('code'))}")
        elif "codeExecutionResult" in part:
            flush()
            b.turn(Role.TOOL_RESULT, compact((part["codeExecutionResult"] or {}).get("output")))
        else:
            b.unknown(f"part {'/'.join(sorted(part))[:40]}")
    flush()


def _message(message: dict[str, Any], b: TranscriptBuilder) -> None:
    kind, at = message.get("type"), message.get("timestamp")
    content = message.get("content")
    if isinstance(content, list):  # newer files store parts: [{"text": …}, …]
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and not p.get("thought"))
    else:
        text = content if isinstance(content, str) else ""
    if kind == "user":
        if text.strip():
            b.turn(Role.USER, text, at)
        else:
            b.skip("empty prompt")
    elif kind in ("gemini", "model"):
        if (usage := gemini_usage(message)) is not None:
            b.usage.response(message.get("model"), usage, response_id=message.get("id"))
        for _ in message.get("thoughts") or ():
            b.skip("thinking")
        if text.strip():
            b.turn(Role.AGENT, text, at, message_id=object())
        for call in message.get("toolCalls") or ():
            if not isinstance(call, dict):
                continue
            b.turn(Role.TOOL_CALL, f"{call.get('name', '?')} {compact(call.get('args'))}", at)
            if "result" in call:
                b.turn(Role.TOOL_RESULT, compact(call.get("resultDisplay") or call.get("result")), at)
    elif kind in ("info", "error", "warning"):
        b.skip(str(kind))
        b.time(at)
    else:
        b.unknown(kind)


def parse_document(name: str, document: Any) -> FileTranscript:
    """Parse a Gemini CLI checkpoint, recorded session or prompt log."""
    b = TranscriptBuilder(name, Format.GEMINI)
    if isinstance(document, dict):
        b.time(document.get("startTime"))
        entries: list[Any] = document.get("messages") or []
    else:
        entries = document
    for entry in entries:
        if not isinstance(entry, dict):
            b.bad_line()
            continue
        b.record()
        if "parts" in entry and "role" in entry:
            _content(entry, b)
        elif "messageId" in entry and "message" in entry:  # logs.json: the prompts the worker typed
            if entry.get("type") == "user":
                b.turn(Role.USER, str(entry.get("message", "")), entry.get("timestamp"))
            else:
                b.unknown(entry.get("type"))
        else:
            _message(entry, b)
    if isinstance(document, dict):
        b.time(document.get("lastUpdated"))
    return b.finish()
