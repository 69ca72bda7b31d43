"""``json.loads`` for untrusted log content: nesting beyond ``MAX_DEPTH`` is invalid JSON, never a RecursionError.

The C decoder recurses once per nested ``[`` or ``{`` and raises ``RecursionError`` (not ``ValueError``) on a
few thousand levels, e.g. ``{"a":`` × 5 000 in a 30 KB upload. Every reader of a log line catches ValueError,
so the depth is checked first, without recursion, and a too-deep value is rejected as a ValueError. No agent
writes records nested anywhere near this deep; the cap also keeps the parsers' own walks over a record (which
recurse over nested content) far from the interpreter's limit.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 128
# A JSON string (skipped whole, so brackets inside it do not count) or one bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class TooDeep(ValueError):
    """The JSON nests deeper than MAX_DEPTH."""


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether brackets in `text` (outside strings) nest deeper than `limit`; stops at the first level past it."""
    if text.count("[") + text.count("{") <= limit:
        return False  # fewer brackets than levels allowed: no scan needed (every short line)
    depth = 0
    for token in _TOKEN.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def loads(text: str | bytes) -> Any:
    """Decode one JSON value; raise ValueError when it is invalid or nests deeper than MAX_DEPTH."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8", "replace")
    if too_deep(text):
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError as exc:  # a value under the cap, decoded on an already deep stack
        raise TooDeep("JSON nested too deeply to decode") from exc
