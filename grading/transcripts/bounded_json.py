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
from itertools import accumulate
from typing import Any

MAX_DEPTH = 128
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    """The JSON nests deeper than MAX_DEPTH."""


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether brackets in `text` (outside strings) nest deeper than `limit`, found without recursion."""
    if text.count("[") + text.count("{") <= limit:
        return False  # fewer brackets than levels allowed: no scan needed (most lines)
    # Outside strings only: drop escaped backslashes, then escaped quotes; every other quote opens or closes
    # a string, so the even pieces between quotes are what lies outside them (all at C speed).
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(unescaped.split('"')[::2])
    if outside.count("[") + outside.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", outside)
    # The running depth after each bracket, computed by C iterators (no Python loop per character).
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


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
