"""The grading knobs: every default in one place, read through `grading_settings()`.

`studyapp/settings.py` sets ``GRADING`` only from environment variables (falling back to `DEFAULTS`);
`grading_settings()` is the one reader of ``settings.GRADING`` (like DRF's ``api_settings``). It overlays
the configured dict on `DEFAULTS` at call time, so a deployment may leave keys out and tests can override.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

# Default judge models per provider; GRADING_OPENAI_MODEL / GRADING_ANTHROPIC_MODEL replace them (README).
DEFAULT_MODELS: dict[str, str] = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6"}

DEFAULTS: dict[str, Any] = {
    # Judges used when a study does not list its own: two model families, as the design asks.
    "DEFAULT_JUDGES": [{"provider": provider, "model": model} for provider, model in DEFAULT_MODELS.items()],
    "RUBRIC_GENERATOR": {"provider": "openai", "model": DEFAULT_MODELS["openai"]},
    # Log coding uses the rubric generator unless a deployment names its own coder.
    "FLUENCY_CODER": None,
    # The two judges (of different model families) that code theory of mind and response quality in studies that
    # turn ToM coding on and name no pair of their own; None: the default judges.
    "TOM_CODERS": None,
    "OPENAI_API_KEY": None,
    "OPENAI_BASE_URL": None,
    "ANTHROPIC_API_KEY": None,
    "ANTHROPIC_BASE_URL": None,
    "TIMEOUT_SECONDS": 180.0,
    "MAX_RETRIES": 4,
    "RETRY_BASE_DELAY": 2.0,
    "PROVIDER_CONCURRENCY": {"openai": 4, "anthropic": 4},
    # Requests per window per provider, shared by all worker processes through Redis (per process without it);
    # 0: no limit.
    "PROVIDER_RATE_LIMITS": {"openai": 0, "anthropic": 0},
    "PROVIDER_RATE_WINDOW_SECONDS": 60.0,
    # USD per million tokens (input, output); unknown models cost 0 and say so in the run record.
    "PRICES": {
        "gpt-4.1": [2.0, 8.0],
        "gpt-4.1-mini": [0.4, 1.6],
        "gpt-4o": [2.5, 10.0],
        "claude-sonnet-4-6": [3.0, 15.0],
        "claude-sonnet-4-5": [3.0, 15.0],
        "claude-haiku-4-5": [1.0, 5.0],
    },
    "DISAGREEMENT_THRESHOLD": 15.0,
    "EXTRACT_MAX_CHARS": 400_000,
    "RUBRIC_REPAIR_ATTEMPTS": 2,
    "JUDGE_REPAIR_ATTEMPTS": 2,
    "JUDGE_MAX_TOKENS": 8192,
    "RUBRIC_MAX_TOKENS": 8192,
    # Celery-level retries of a whole grading task after the client's own retries gave up (429/5xx/timeouts).
    "TASK_RETRIES": 3,
    "TASK_RETRY_DELAY": 30.0,
    # Crash safety (docs/grading-reliability.md): a claimed judge run or rubric generation is renewed every
    # third of this while the call is in flight; when its worker dies the claim lapses after at most this long
    # and the work is taken over.
    "LEASE_SECONDS": 60.0,
    # Wall-time budget of one grading attempt (soft limit; the hard limit is a minute later). A slower attempt
    # frees its judge runs and retries later instead of holding a pool slot for the LLM client's worst case.
    "ATTEMPT_SECONDS": 600.0,
    # The reconciliation sweep (beat, every GRADING_SWEEP_SECONDS): submissions untouched this long with no
    # live lease are sent to grading again; waiting ones (no key, budget) are looked at less often.
    "REQUEUE_AFTER_SECONDS": 60.0,
    "WAITING_RECHECK_SECONDS": 900.0,
    # A judge whose provider kept failing through every task attempt waits for it (not failed): each sweep probes
    # each such provider once (a free model-list request) and sends the waiting submissions again once it
    # answers. A run is given up after PROVIDER_OUTAGE_ROUNDS such rounds of TASK_RETRIES + 1 attempts (the cost
    # bound when the probe answers while completions still fail).
    "PROVIDER_PROBE_TIMEOUT_SECONDS": 10.0,
    "PROVIDER_OUTAGE_ROUNDS": 6,
    # Follow-ups a grade owes (observation, log coding) are done by the sweep once this old and still open.
    "FOLLOW_UP_GRACE_SECONDS": 30.0,
    "FOLLOW_UP_MAX_ATTEMPTS": 5,
    # Characters of hidden (gold) task files shown to rubric writers and judges.
    "HIDDEN_MAX_CHARS": 100_000,
}


def grading_settings() -> dict[str, Any]:
    """Return ``settings.GRADING`` over `DEFAULTS` (the one accessor for these knobs)."""
    merged = {**DEFAULTS, **getattr(settings, "GRADING", {})}
    if merged["FLUENCY_CODER"] is None:
        merged["FLUENCY_CODER"] = merged["RUBRIC_GENERATOR"]
    if merged["TOM_CODERS"] is None:
        merged["TOM_CODERS"] = merged["DEFAULT_JUDGES"]
    return merged
