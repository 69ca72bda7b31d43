"""Build `llm.ProviderConfig`s from the GRADING settings (`grading.conf`) and a study's judge list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from grading.conf import grading_settings
from grading.llm import ProviderConfig
from grading.rate_limits import LocalWindow, RateLimiter, RedisWindow
from studies.model_families import judge_family, tom_coder_problem

PROVIDERS = ("openai", "anthropic")


@dataclass(frozen=True)
class JudgeSpec:
    """One (provider, model) pair from a judge list."""

    provider: str
    model: str
    vision: bool = True
    family: str = ""

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"


def _spec(entry: Any, where: str) -> JudgeSpec:
    if not isinstance(entry, dict) or not entry.get("provider") or not entry.get("model"):
        raise ImproperlyConfigured(f'{where}: each judge needs "provider" and "model", got {entry!r}')
    provider = str(entry["provider"]).strip().lower()
    if provider not in PROVIDERS:
        raise ImproperlyConfigured(f"{where}: unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    model = str(entry["model"]).strip()
    # The family (for the judge-aware rating's self-preference term) is study data; blank takes the model's.
    family = judge_family(provider=provider, model=model, family=str(entry.get("family") or ""))
    return JudgeSpec(provider=provider, model=model, vision=bool(entry.get("vision", True)), family=family)


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


def tom_coders(study: Any) -> tuple[JudgeSpec, JudgeSpec]:
    """Return the study's two ToM / response-quality judges (its own pair, else GRADING['TOM_CODERS']).

    Raise ImproperlyConfigured, naming where the pair came from, when it is not two judges of different families.
    """
    entries = list(getattr(study, "tom_coders", None) or [])
    where = f"study {getattr(study, 'slug', '?')} tom_coders" if entries else "GRADING['TOM_CODERS']"
    entries = entries or list(grading_settings()["TOM_CODERS"] or [])
    if (problem := tom_coder_problem(entries)) is not None:
        raise ImproperlyConfigured(f"{where}: {problem}")
    first, second = (_spec(entry, where) for entry in entries)
    return first, second


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
