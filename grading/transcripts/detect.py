"""Recognise which agent wrote a log file and send it to the right parser; never raise on bad input."""

from __future__ import annotations

import io
import logging
import shutil
import tempfile
from typing import IO, Any

from grading.transcripts import bounded_json, claude_code, codex, gemini, terminal
from grading.transcripts.model import FileStatus, FileTranscript, Format, unreadable
from studies.byte_format import human_bytes
from studies.sniffing import image_media_type

logger = logging.getLogger(__name__)

HEAD_BYTES = 64 * 1024
# Single-document JSON (Gemini chats, old Codex files) is loaded whole; those files are small in practice.
MAX_DOCUMENT_BYTES = 20 * 2**20
_CODEX_ENVELOPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CLAUDE_KEYS = ("parentUuid", "sessionId", "isSidechain", "leafUuid", "uuid")


def _looks_binary(head: bytes) -> bool:
    sample = head[:4096]
    return b"\x00" in sample


def _jsonl_format(head: bytes) -> Format | None:
    """Return the JSONL dialect from the first complete lines, or None when the head is not JSON Lines."""
    lines = head.split(b"\n")
    complete = lines[:-1] if len(lines) > 1 else lines
    seen_json = False
    for raw in complete[:50]:
        if not raw.strip():
            continue
        try:
            record = bounded_json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        if not isinstance(record, dict) or gemini.looks_like(record) or isinstance(record.get("items"), list):
            return None  # one JSON document written on a single line
        seen_json = True
        kind = record.get("type")
        if kind in _CODEX_ENVELOPES and "payload" in record or "record_type" in record:
            return Format.CODEX
        if isinstance(record.get("message"), dict) or any(key in record for key in _CLAUDE_KEYS):
            return Format.CLAUDE_CODE
        if kind in ("message", "function_call", "function_call_output", "reasoning") and "payload" not in record:
            return Format.CODEX
        if kind is None and "id" in record and "instructions" in record:
            return Format.CODEX
    return Format.UNKNOWN if seen_json else None


def _document(name: str, stream: IO[bytes], size: int) -> FileTranscript | None:
    """Parse a single JSON document, or return None when the bytes are not one JSON value."""
    if size > MAX_DOCUMENT_BYTES:
        return unreadable(name, Format.UNKNOWN, f"a single JSON document larger than {human_bytes(MAX_DOCUMENT_BYTES)} "
                                                "is not parsed")
    raw = stream.read(MAX_DOCUMENT_BYTES + 1)
    text = raw.decode("utf-8", "replace")
    try:
        document: Any = bounded_json.loads(text)
    except ValueError:
        return None
    if gemini.looks_like(document):
        result = gemini.parse_document(name, document)
    elif isinstance(document, dict) and isinstance(document.get("items"), list) or (
            isinstance(document, list) and document and isinstance(document[0], dict)
            and document[0].get("type") in ("message", "function_call", "reasoning")):
        result = codex.parse_document(name, document)
    else:
        return unreadable(name, Format.UNKNOWN, "JSON in a layout no supported agent writes")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        result.non_utf8_lines += 1
    return result


def _document_format(head: bytes, complete: bool) -> Format:
    """Return the agent a single JSON document came from, from the whole file or, if longer, its head."""
    if complete:
        try:
            document: Any = bounded_json.loads(head.decode("utf-8", "replace"))
        except ValueError:
            return Format.UNKNOWN
        if gemini.looks_like(document):
            return Format.GEMINI
        items = document.get("items") if isinstance(document, dict) else document
        if isinstance(items, list) and items and isinstance(items[0], dict) and (
                isinstance(document, dict) or items[0].get("type") in ("message", "function_call", "reasoning")):
            return Format.CODEX
        return Format.UNKNOWN
    # A longer document: its first keys say which layout it is (a checkpoint opens with a role and its parts).
    text = head[:HEAD_BYTES].decode("utf-8", "replace")
    if '"projectHash"' in text or '"sessionId"' in text and '"messages"' in text \
            or '"role"' in text and '"parts"' in text:
        return Format.GEMINI
    if '"items"' in text:
        return Format.CODEX
    return Format.UNKNOWN


def sniff_log_format(head: bytes, *, complete: bool) -> Format:
    """Return which agent wrote a log file from its first bytes, without parsing it (checked on upload).

    `complete` says the head is the whole file. The answer agrees with the format `parse_log` reports for
    every file whose first record fits in the head; a screenshot is SCREENSHOT, anything unrecognised UNKNOWN.
    """
    if not head.strip() or _looks_binary(head) and image_media_type(head) is None:
        return Format.UNKNOWN
    if image_media_type(head) is not None:
        return Format.SCREENSHOT
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] not in (b"{", b"["):
        return Format.TERMINAL
    dialect = _jsonl_format(stripped)
    if dialect in (Format.CLAUDE_CODE, Format.CODEX):
        return dialect
    if dialect is None or stripped[:1] == b"[":
        return _document_format(stripped, complete)
    return Format.UNKNOWN


def detect_log_format(stream: IO[bytes], size: int) -> Format:
    """Return which agent wrote a stored log file, reading its head (or its first record, if longer).

    Worker pages call this on every upload they list, so no content may make it raise: what cannot be
    recognised (too deep, or a detection bug) is UNKNOWN, and a storage error stays an OSError for the caller.
    """
    head = stream.read(HEAD_BYTES)
    if size > len(head) and b"\n" not in head.strip() and head.lstrip()[:1] == b"{":
        head += stream.readline(MAX_DOCUMENT_BYTES) + b"\n"
    try:
        return sniff_log_format(head, complete=size <= len(head))
    except Exception:  # noqa: BLE001 - a page must not fail on a file it only labels
        logger.exception("the format of a collaboration log could not be detected")
        return Format.UNKNOWN


def parse_log(name: str, stream: IO[bytes], *, size: int | None = None) -> FileTranscript:
    """Parse one collaboration-log file into a normalised transcript; problems become a report, not an error."""
    try:
        return _parse(name, stream, size)
    except Exception as exc:  # a parser bug or a storage error must never stop grading
        logger.exception("collaboration log %s could not be parsed", name)
        return unreadable(name, Format.UNKNOWN, f"could not be parsed ({type(exc).__name__})")


def _rewindable(stream: IO[bytes]) -> IO[bytes]:
    """Return a stream that can be read twice: the original when seekable, else a disk-spilling copy."""
    try:
        if stream.seekable():
            return stream
    except (AttributeError, ValueError):
        pass
    copy = tempfile.SpooledTemporaryFile(max_size=8 * 2**20)  # noqa: SIM115 - closed with the stream it replaces
    shutil.copyfileobj(stream, copy, 2**20)
    copy.seek(0)
    return copy  # type: ignore[return-value]


def _parse(name: str, stream: IO[bytes], size: int | None) -> FileTranscript:
    stream = _rewindable(stream)
    start = stream.tell()
    if size is None:
        size = stream.seek(0, io.SEEK_END) - start
    stream.seek(start)
    head = stream.read(HEAD_BYTES)
    stream.seek(start)
    buffered = stream
    if not head.strip():
        return unreadable(name, Format.UNKNOWN, "the file is empty")
    if image_media_type(head) is not None:
        return FileTranscript(name=name, format=Format.SCREENSHOT, status=FileStatus.SCREENSHOT,
                              note="screenshot: sent to a vision-capable coder")
    if _looks_binary(head):
        return unreadable(name, Format.UNKNOWN, "binary content that is not a known log or image format")
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] in (b"{", b"["):
        if b"\n" not in stripped.rstrip(b"\r\n") and size > len(head):
            # The first record is longer than the head (a long pasted prompt): read that whole line to decide.
            stripped = stream.readline(MAX_DOCUMENT_BYTES).lstrip(b"\xef\xbb\xbf \t\r\n") + b"\n"
            stream.seek(start)
        dialect = _jsonl_format(stripped)
        if dialect is Format.CLAUDE_CODE:
            return claude_code.parse(name, buffered)
        if dialect is Format.CODEX:
            return codex.parse(name, buffered)
        if dialect is None or stripped[:1] == b"[":
            result = _document(name, buffered, size)
            if result is not None:
                return result
            return unreadable(name, Format.UNKNOWN, "looks like JSON but is not valid JSON or JSON Lines")
        return unreadable(name, Format.UNKNOWN, "JSON Lines records of a kind no supported agent writes")
    return terminal.parse(name, buffered)
