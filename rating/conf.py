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
    # Live updates of the calibrated model between refits (rating.services.live): on or off, and the debounce
    # of a refresh request that will be a live update.
    "LIVE_UPDATES": True,
    "LIVE_DEBOUNCE_SECONDS": 0.3,
    # A refit (variance components re-estimated by REML) replaces live updates when the last one is older than
    # this, when the REML score test rejects the fitted components at this level, when more participants
    # changed at once than this, or while the ledger is smaller than this (a refit is then as fast).
    "REML_INTERVAL_SECONDS": 900.0,
    "LIVE_DRIFT_ALPHA": 0.01,
    "LIVE_MAX_PARTICIPANTS": 2000,
    "LIVE_MIN_OBSERVATIONS": 2000,
    # Retention of superseded refits' participants' rating rows (rating.services.retention): 0 keeps them all;
    # N keeps those of each study's N latest refits, and the beat sweep deletes older ones (at most
    # RETENTION_PER_SWEEP refits a sweep), once a newer refit has been current for RETENTION_GRACE_SECONDS.
    "KEEP_PARTICIPANT_REFITS": 0,
    "RETENTION_GRACE_SECONDS": 3600.0,
    "RETENTION_PER_SWEEP": 2,
}


def rating_settings() -> dict[str, Any]:
    """Return ``settings.RATING`` over `DEFAULTS` (the one accessor for these knobs)."""
    return {**DEFAULTS, **getattr(settings, "RATING", {})}
