"""Stream JSON records from a JSON Lines file, tolerating broken lines and non-UTF-8 bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from grading.transcripts import bounded_json
from grading.transcripts.model import TranscriptBuilder


def json_lines(stream: IO[bytes], builder: TranscriptBuilder) -> Iterator[dict[str, Any]]:
    """Yield each line's JSON object; count blank-free broken lines and undecodable bytes on the builder."""
    for raw in stream:
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            builder.non_utf8()
        if text.startswith("\ufeff"):  # a byte-order mark some editors add
            text = text[1:]
        try:
            record = bounded_json.loads(text)
        except ValueError:
            builder.bad_line()
            continue
        if not isinstance(record, dict):
            builder.bad_line()
            continue
        builder.record()
        yield record


def compact(value: Any, limit: int = 300) -> str:
    """Return a short one-line rendering of a tool's input or output."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            text = str(value)
    text = " ".join(text[: limit * 2].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
