"""Build `llm.ProviderConfig`s from the GRADING settings dict and a study's judge list.

`grading_settings()` is the only reader of `settings.GRADING` (like DRF's `api_settings`): it fills in
defaults for keys a deployment leaves out and is read at call time, so tests can override settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from grading.llm import ProviderConfig
from grading.rate_limits import LocalWindow, RateLimiter, RedisWindow

PROVIDERS = ("openai", "anthropic")

_DEFAULTS: dict[str, Any] = {
    "DEFAULT_JUDGES": [{"provider": "openai", "model": "gpt-4.1"},
                       {"provider": "anthropic", "model": "claude-sonnet-4-5"}],
    "RUBRIC_GENERATOR": {"provider": "openai", "model": "gpt-4.1"},
    # Log coding uses the rubric generator unless a deployment names its own coder.
    "FLUENCY_CODER": None,
    "OPENAI_API_KEY": None,
    "OPENAI_BASE_URL": None,
    "ANTHROPIC_API_KEY": None,
    "ANTHROPIC_BASE_URL": None,
    "TIMEOUT_SECONDS": 180.0,
    "MAX_RETRIES": 4,
    "RETRY_BASE_DELAY": 2.0,
    "PROVIDER_CONCURRENCY": {"openai": 4, "anthropic": 4},
    # Requests per window per provider, shared by every worker process when Redis is configured; 0: no limit.
    "PROVIDER_RATE_LIMITS": {},
    "PROVIDER_RATE_WINDOW_SECONDS": 60.0,
    "PRICES": {},
    "DISAGREEMENT_THRESHOLD": 15.0,
    "EXTRACT_MAX_CHARS": 400_000,
    "RUBRIC_REPAIR_ATTEMPTS": 2,
    "JUDGE_REPAIR_ATTEMPTS": 2,
    "JUDGE_MAX_TOKENS": 8192,
    "RUBRIC_MAX_TOKENS": 8192,
    # Celery-level retries of a whole grading task after the client's own retries gave up (429/5xx/timeouts).
    "TASK_RETRIES": 3,
    "TASK_RETRY_DELAY": 30.0,
    # Leases: a claimed judge run or rubric generation is renewed every third of this while the call is in
    # flight; when its worker dies the claim lapses after at most this long and the work is taken over.
    "LEASE_SECONDS": 60.0,
    "ATTEMPT_SECONDS": 600.0,
    # The reconciliation sweep (beat, every GRADING_SWEEP_SECONDS): submissions untouched this long with no
    # live lease are sent to grading again; waiting ones (no key, budget) are looked at less often.
    "REQUEUE_AFTER_SECONDS": 60.0,
    "WAITING_RECHECK_SECONDS": 900.0,
    # Follow-ups a grade owes (observation, log coding) are done by the sweep once this old and still open.
    "FOLLOW_UP_GRACE_SECONDS": 30.0,
    "FOLLOW_UP_MAX_ATTEMPTS": 5,
    # Characters of hidden (gold) task files shown to rubric writers and judges.
    "HIDDEN_MAX_CHARS": 100_000,
}


def grading_settings() -> dict[str, Any]:
    """Return the GRADING settings with defaults filled in (the one accessor for these knobs)."""
    merged = {**_DEFAULTS, **getattr(settings, "GRADING", {})}
    if merged["FLUENCY_CODER"] is None:
        merged["FLUENCY_CODER"] = merged["RUBRIC_GENERATOR"]
    return merged


@dataclass(frozen=True)
class JudgeSpec:
    """One (provider, model) pair from a judge list."""

    provider: str
    model: str
    vision: bool = True

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"


def _spec(entry: Any, where: str) -> JudgeSpec:
    if not isinstance(entry, dict) or not entry.get("provider") or not entry.get("model"):
        raise ImproperlyConfigured(f'{where}: each judge needs "provider" and "model", got {entry!r}')
    provider = str(entry["provider"]).strip().lower()
    if provider not in PROVIDERS:
        raise ImproperlyConfigured(f"{where}: unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    return JudgeSpec(provider=provider, model=str(entry["model"]).strip(), vision=bool(entry.get("vision", True)))


def study_judges(study: Any | None) -> list[JudgeSpec]:
    """Return the study's judge list, or the default list (two model families) when it names none."""
    entries = (getattr(study, "judges", None) or []) if study is not None else []
    where = f"study {getattr(study, 'slug', '?')} judges" if entries else "GRADING['DEFAULT_JUDGES']"
    specs = [_spec(e, where) for e in (entries or grading_settings()["DEFAULT_JUDGES"])]
    unique = list(dict.fromkeys(specs))
    if not unique:
        raise ImproperlyConfigured(f"{where} is empty")
    return unique


def rubric_generator() -> JudgeSpec:
    return _spec(grading_settings()["RUBRIC_GENERATOR"], "GRADING['RUBRIC_GENERATOR']")


def fluency_coder() -> JudgeSpec:
    return _spec(grading_settings()["FLUENCY_CODER"], "GRADING['FLUENCY_CODER']")


def provider_configured(provider: str) -> bool:
    """True when a key, or a base URL of a compatible local server, is set for the provider."""
    conf = grading_settings()
    prefix = provider.upper()
    return bool(conf.get(f"{prefix}_API_KEY") or conf.get(f"{prefix}_BASE_URL"))


def not_configured_note(providers: list[str] | tuple[str, ...] = PROVIDERS, *,
                        then: str = "manage.py grade --pending") -> str:
    """The status line shown while grading waits for a key."""
    keys = " / ".join(f"{p.upper()}_API_KEY" for p in providers)
    urls = " / ".join(f"{p.upper()}_BASE_URL" for p in providers)
    return (f"No judge is configured: set {keys} (or {urls} for a compatible local server), then run "
            f"`{then}`.")


def price_of(model: str) -> tuple[float, float] | None:
    """USD per million (input, output) tokens, or None when the model has no configured price."""
    price = grading_settings()["PRICES"].get(model)
    if price is None:
        return None
    return float(price[0]), float(price[1])


_local_window = LocalWindow()
_redis_windows: dict[str, RedisWindow] = {}


def rate_limiter() -> RateLimiter:
    """The provider request window: shared through Redis when REDIS_URL is set, else kept per process."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return _local_window
    if url not in _redis_windows:
        _redis_windows[url] = RedisWindow(url)
    return _redis_windows[url]


def provider_config(spec: JudgeSpec) -> ProviderConfig:
    """Return the client configuration for one judge (or generator) spec."""
    conf = grading_settings()
    prefix = spec.provider.upper()
    key = conf.get(f"{prefix}_API_KEY")
    base_url = conf.get(f"{prefix}_BASE_URL")
    if not key and base_url:
        key = "local-server"  # local OpenAI/Anthropic-compatible servers ignore the key but the SDKs need one
    price_in, price_out = price_of(spec.model) or (0.0, 0.0)
    return ProviderConfig(
        provider=spec.provider,  # type: ignore[arg-type]
        model=spec.model,
        api_key=key or None,
        base_url=base_url or None,
        timeout=float(conf["TIMEOUT_SECONDS"]),
        max_retries=int(conf["MAX_RETRIES"]),
        vision=spec.vision,
        price_in_per_mtok=price_in,
        price_out_per_mtok=price_out,
        max_concurrency=int(conf["PROVIDER_CONCURRENCY"].get(spec.provider, 4)),
        backoff_base=float(conf["RETRY_BASE_DELAY"]),
        rate_limit=max(0, int(conf["PROVIDER_RATE_LIMITS"].get(spec.provider) or 0)),
        rate_window=float(conf["PROVIDER_RATE_WINDOW_SECONDS"]),
        limiter=rate_limiter(),
    )
