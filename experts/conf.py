"""The expert workspace's knobs: every default in one place, read through `experts_settings()`.

`studyapp/settings.py` sets ``EXPERTS`` only from environment variables (falling back to `DEFAULTS`);
`experts_settings()` is the one reader of ``settings.EXPERTS``, overlaying it on `DEFAULTS` at call time.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Days an expert invitation link stays valid.
    "INVITE_DAYS": 14,
    # A primary and a second grade whose scores differ by this many points (0-100) or more count as a
    # disagreement on the staff's double-grading page, which offers adjudication.
    "ADJUDICATION_SCORE_GAP": 20.0,
}


def experts_settings() -> dict[str, Any]:
    """Return ``settings.EXPERTS`` over `DEFAULTS` (the one accessor for these knobs)."""
    return {**DEFAULTS, **getattr(settings, "EXPERTS", {})}
