"""The upload knobs: every default in one place, read through `upload_limits()`.

`studyapp/settings.py` sets ``UPLOADS`` only from environment variables (falling back to `UPLOAD_DEFAULTS`);
`upload_limits()` is the one reader of ``settings.UPLOADS``, overlaying it on `UPLOAD_DEFAULTS` at call time.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

UPLOAD_DEFAULTS: dict[str, Any] = {
    "MAX_FILE_BYTES": 2 * 2**30,
    "MAX_EPISODE_BYTES": 4 * 2**30,
    "MAX_FILES_PER_EPISODE": 50,
    "ALLOWED_EXTENSIONS": [
        "pdf", "docx", "doc", "xlsx", "xlsm", "xls", "pptx", "ppt", "csv", "tsv", "txt", "md", "json", "jsonl",
        "html", "htm", "xml", "png", "jpg", "jpeg", "gif", "webp", "zip", "mp3", "wav", "m4a", "mp4",
        "mov", "webm", "py", "ipynb", "r", "sql", "log", "odt", "ods", "odp", "rtf",
    ],
    # Task-bundle imports (docs/task-bundles.md): files or archive members, unpacked bytes, compression ratio.
    "BUNDLE_MAX_MEMBERS": 5000,
    "BUNDLE_MAX_TOTAL_BYTES": 16 * 2**30,
    "BUNDLE_MAX_RATIO": 100.0,
}


def upload_limits() -> dict[str, Any]:
    """Return ``settings.UPLOADS`` over `UPLOAD_DEFAULTS` (the one accessor for these knobs)."""
    return {**UPLOAD_DEFAULTS, **getattr(settings, "UPLOADS", {})}
