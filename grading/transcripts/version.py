"""Which parse a stored transcript came from: the parser version and the fingerprint of the files it read."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# Bump when parsing or metrics change so stored transcripts are rebuilt (the reconciliation sweep does it).
PARSER_VERSION = "3"  # 3: model usage per file


def files_fingerprint(files: Iterable[tuple[str, str]]) -> str:
    """Return the hash of the (name, sha256) pairs of an episode's log files, in name order, and the version."""
    digest = hashlib.sha256(PARSER_VERSION.encode())
    for name, sha256 in sorted(files):
        digest.update(f"{name}\0{sha256}\0".encode())
    return digest.hexdigest()
