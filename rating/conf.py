"""The rating knobs: every default in one place, read through `rating_settings()`.

`studyapp/settings.py` sets ``RATING`` only from environment variables (falling back to `DEFAULTS`);
`rating_settings()` is the one reader of ``settings.RATING``, overlaying it on `DEFAULTS` at call time.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Requests to refresh a study's posterior within this window share one refresh.
    "REFRESH_DEBOUNCE_SECONDS": 5.0,
    # Bootstrap rounds of the ranking-stability analysis (paper: 10 000).
    "BOOTSTRAP_ROUNDS": 10_000,
}


def rating_settings() -> dict[str, Any]:
    """Return ``settings.RATING`` over `DEFAULTS` (the one accessor for these knobs)."""
    return {**DEFAULTS, **getattr(settings, "RATING", {})}
