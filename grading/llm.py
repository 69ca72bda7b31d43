"""The one door to LLM providers: the official OpenAI and Anthropic SDKs behind a small, testable interface.

Services depend on `complete` / `complete_json`, never on an SDK. Retries are ours, not the SDKs' (their
retries are switched off) so the policy is explicit and tested: back off with full jitter on 429, 5xx,
timeouts and connection errors only, honour Retry-After, fail fast on every other 4xx with the provider's
own message. All configuration arrives as a frozen `ProviderConfig`; the Django layer builds it from the
`GRADING` settings dict, so this module imports nothing from Django.

Concurrency: a process-wide semaphore per provider caps simultaneous requests from one process. Rate: when a
config carries `rate_limit`, every attempt first takes a slot in its provider's sliding window from
`config.limiter` (shared by all worker processes through Redis; see grading.rate_limits).
"""

from __future__ import annotations

import base64
import email.utils
import functools
import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anthropic
import openai
import pydantic

from grading.extract import ExtractedImage

__all__ = [
    "LLMError",
    "LLMInvalidOutput",
    "LLMNotConfigured",
    "LLMResponse",
    "ProviderConfig",
    "complete",
    "complete_json",
    "parse_json_reply",
    "prompt_hash",
    "set_concurrency_limit",
]

Model = TypeVar("Model", bound=pydantic.BaseModel)
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class ProviderConfig:
    """Everything needed to call one (provider, model) pair; hashable so clients can be cached on it."""

    provider: Literal["openai", "anthropic"]
    model: str
    api_key: str | None
    base_url: str | None = None  # None lets the SDK honour OPENAI_BASE_URL / ANTHROPIC_BASE_URL
    timeout: float = 120
    max_retries: int = 4  # retries after the first attempt
    vision: bool = True
    price_in_per_mtok: float = 0
    price_out_per_mtok: float = 0
    # Sent to OpenAI only: Anthropic's API version used by SDK 2.x rejects sampling parameters outright.
    temperature: float | None = 0.0
    max_concurrency: int = 8  # per provider, per process
    backoff_base: float = 1.0  # seconds; attempt n waits uniform(0, min(cap, base * 2**n))
    backoff_cap: float = 60.0
    retry_after_cap: float = 120.0
    json_mode: bool = True  # OpenAI response_format=json_object; turn off for servers that lack it
    rate_limit: int = 0  # requests per `rate_window` seconds for the provider, across processes; 0: none
    rate_window: float = 60.0
    limiter: Any = field(default=None, compare=False, hash=False, repr=False)  # a grading.rate_limits limiter


@dataclass
class LLMResponse:
    text: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: int  # the successful attempt; `attempts` says how many it took
    attempts: int
    request_id: str | None
    stop_reason: str | None = None


class LLMError(Exception):
    """A provider call that did not produce a usable reply; `retryable` tells a task whether to try later."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        attempts: int = 0,
        retry_after: float | None = None,
        responses: Sequence[LLMResponse] = (),
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.status = status
        self.attempts = attempts
        self.retry_after = retry_after
        self.responses = list(responses)  # replies already paid for (JSON repair rounds), for cost records


class LLMNotConfigured(LLMError):
    """No API key: grading waits with a clear status instead of failing."""


class LLMInvalidOutput(LLMError):
    """The model kept answering with JSON that does not parse or validate."""

    def __init__(self, reason: str, *, errors: Sequence[str], responses: Sequence[LLMResponse]) -> None:
        super().__init__(reason, retryable=False, attempts=len(responses), responses=responses)
        self.errors = list(errors)


def prompt_hash(*parts: str) -> str:
    """Return a short stable hash of a prompt template version (parts are separated, not concatenated)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x1f")
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- limits

_slots_lock = threading.Lock()
_slots: dict[str, threading.BoundedSemaphore] = {}


def set_concurrency_limit(provider: str, size: int) -> None:
    """Replace the process-wide cap for `provider` (calls already holding a slot finish normally)."""
    if size < 1:
        raise ValueError("size must be at least 1")
    with _slots_lock:
        _slots[provider] = threading.BoundedSemaphore(size)


def _throttle(config: ProviderConfig, sleep: Sleep) -> None:
    """Wait for a slot in the provider's request window (no limit configured: return at once)."""
    if config.rate_limit <= 0 or config.limiter is None:
        return
    while (wait := config.limiter.acquire(config.provider, config.rate_limit, config.rate_window)) > 0:
        sleep(wait)


def _slot(config: ProviderConfig) -> threading.BoundedSemaphore:
    with _slots_lock:
        if config.provider not in _slots:
            _slots[config.provider] = threading.BoundedSemaphore(max(1, config.max_concurrency))
        return _slots[config.provider]


# --------------------------------------------------------------------------------------------- clients


@functools.lru_cache(maxsize=32)
def _client(provider: str, api_key: str, base_url: str | None, timeout: float) -> Any:
    """Build one SDK client per configuration: clients are thread-safe and pool their connections."""
    kwargs: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "max_retries": 0}
    if base_url:
        kwargs["base_url"] = base_url
    return openai.OpenAI(**kwargs) if provider == "openai" else anthropic.Anthropic(**kwargs)


@dataclass
class _Turn:
    role: Literal["user", "assistant"]
    text: str
    images: Sequence[ExtractedImage] = field(default_factory=tuple)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _openai_messages(system: str, turns: Sequence[_Turn]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in turns:
        if not turn.images:
            messages.append({"role": turn.role, "content": turn.text})
            continue
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
        for image in turn.images:
            content.append({"type": "text", "text": f"Image file: {image.name}"})
            content.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{image.media_type};base64,{_b64(image.data)}"},
                }
            )
        messages.append({"role": turn.role, "content": content})
    return messages


def _anthropic_messages(turns: Sequence[_Turn]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in turns:
        content: list[dict[str, Any]] = []
        for image in turn.images:
            content.append({"type": "text", "text": f"Image file: {image.name}"})
            content.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": image.media_type,
                        "data": _b64(image.data),
                    },
                }
            )
        content.append({"type": "text", "text": turn.text})
        messages.append({"role": turn.role, "content": content})
    return messages


@dataclass
class _Raw:
    text: str
    input_tokens: int
    output_tokens: int
    request_id: str | None
    stop_reason: str | None


def _send(
    config: ProviderConfig, system: str, turns: Sequence[_Turn], max_tokens: int, json_mode: bool
) -> _Raw:
    client = _client(config.provider, config.api_key or "", config.base_url, config.timeout)
    if config.provider == "openai":
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": _openai_messages(system, turns),
            "max_completion_tokens": max_tokens,
        }
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if json_mode and config.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        completion = client.chat.completions.create(**kwargs)
        if not completion.choices:
            raise LLMError("the provider returned no choices", status=None)
        choice = completion.choices[0]
        usage = completion.usage
        return _Raw(
            text=choice.message.content or "",
            stop_reason=choice.finish_reason,
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            request_id=getattr(completion, "_request_id", None) or completion.id,
        )
    message = client.messages.create(
        model=config.model, max_tokens=max_tokens, system=system, messages=_anthropic_messages(turns)
    )
    text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
    return _Raw(
        text=text,
        stop_reason=message.stop_reason,
        input_tokens=message.usage.input_tokens or 0,
        output_tokens=message.usage.output_tokens or 0,
        request_id=getattr(message, "_request_id", None) or message.id,
    )


# ------------------------------------------------------------------------------------------ error policy


def _provider_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", None) or exc)


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


_TIMEOUTS = (openai.APITimeoutError, anthropic.APITimeoutError)
_CONNECTION = (openai.APIConnectionError, anthropic.APIConnectionError)
_STATUS = (openai.APIStatusError, anthropic.APIStatusError)


def _to_llm_error(exc: Exception, config: ProviderConfig) -> LLMError:
    """Map an SDK exception to LLMError, deciding retryability from the status alone."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, _TIMEOUTS):
        return LLMError(f"{config.provider} timed out after {config.timeout:g}s", retryable=True)
    if isinstance(exc, _CONNECTION):
        return LLMError(f"could not connect to {config.provider}: {_provider_message(exc)}", retryable=True)
    if isinstance(exc, _STATUS):
        status = exc.status_code
        retryable = status in (408, 429) or status >= 500
        return LLMError(
            f"{config.provider} returned HTTP {status}: {_provider_message(exc)}",
            retryable=retryable,
            status=status,
            retry_after=_retry_after(exc),
        )
    return LLMError(f"{config.provider} call failed: {type(exc).__name__}: {exc}", retryable=False)


def _backoff(config: ProviderConfig, attempt: int, error: LLMError, rng: random.Random) -> float:
    if error.retry_after is not None:
        return min(error.retry_after, config.retry_after_cap)
    return rng.uniform(0, min(config.backoff_cap, config.backoff_base * 2**attempt))


_rng = random.Random()


def _call(
    config: ProviderConfig,
    system: str,
    turns: Sequence[_Turn],
    *,
    max_tokens: int,
    json_mode: bool,
    sleep: Sleep,
) -> LLMResponse:
    if not config.api_key:
        raise LLMNotConfigured(
            f"no API key configured for {config.provider} ({config.model}); grading waits until one is set",
            retryable=False,
        )
    attempts = 0
    while True:
        attempts += 1
        _throttle(config, sleep)
        started = time.monotonic()
        try:
            with _slot(config):
                raw = _send(config, system, turns, max_tokens, json_mode)
        except Exception as exc:
            error = _to_llm_error(exc, config)
            error.attempts = attempts
            if error.retryable and attempts <= config.max_retries:
                sleep(_backoff(config, attempts - 1, error, _rng))
                continue
            if error.retryable:
                error.reason = f"{error.reason} (gave up after {attempts} attempts)"
                error.args = (error.reason,)
            if error is exc:
                raise
            raise error from exc
        latency_ms = int((time.monotonic() - started) * 1000)
        cost = (
            raw.input_tokens * config.price_in_per_mtok + raw.output_tokens * config.price_out_per_mtok
        ) / 1e6
        return LLMResponse(
            text=raw.text,
            provider=config.provider,
            model=config.model,
            input_tokens=raw.input_tokens,
            output_tokens=raw.output_tokens,
            cost_usd=cost,
            latency_ms=latency_ms,
            attempts=attempts,
            request_id=raw.request_id,
            stop_reason=raw.stop_reason,
        )


# ----------------------------------------------------------------------------------------------- public


def complete(
    config: ProviderConfig,
    *,
    system: str,
    user_text: str,
    images: Sequence[ExtractedImage] = (),
    max_tokens: int = 4096,
    sleep: Sleep = time.sleep,
) -> LLMResponse:
    """Send one prompt (images only to vision-capable configs) and return the reply with its costs."""
    turns = [_Turn("user", user_text, tuple(images) if config.vision else ())]
    return _call(config, system, turns, max_tokens=max_tokens, json_mode=False, sleep=sleep)


JSON_INSTRUCTION = (
    "Reply with one JSON object and nothing else: no prose before or after it and no markdown code fences."
)


def complete_json(
    config: ProviderConfig,
    *,
    system: str,
    user_text: str,
    schema: type[Model],
    images: Sequence[ExtractedImage] = (),
    repair_attempts: int = 2,
    extra_validate: Callable[[Model], list[str]] | None = None,
    max_tokens: int = 4096,
    include_schema: bool = True,
    sleep: Sleep = time.sleep,
) -> tuple[Model, list[LLMResponse]]:
    """Ask for JSON matching `schema`; on parse or validation errors show the model its errors and re-ask.

    `extra_validate` adds domain checks pydantic cannot express (e.g. points that must add up); it returns
    a list of error sentences. Returns the model and every response paid for. Raises LLMInvalidOutput once
    `repair_attempts` re-asks are spent.
    """
    instructions = f"{system}\n\n{JSON_INSTRUCTION}"
    if include_schema:
        instructions += "\nThe object must match this JSON Schema:\n" + json.dumps(schema.model_json_schema())
    turns = [_Turn("user", user_text, tuple(images) if config.vision else ())]
    responses: list[LLMResponse] = []
    errors: list[str] = []
    for _round in range(repair_attempts + 1):
        try:
            response = _call(config, instructions, turns, max_tokens=max_tokens, json_mode=True, sleep=sleep)
        except LLMError as exc:
            exc.responses = responses + exc.responses
            raise
        responses.append(response)
        result, errors = _validate(response, schema, extra_validate)
        if result is not None:
            return result, responses
        turns += [
            _Turn("assistant", response.text or "(empty reply)"),
            _Turn("user", _repair_request(errors)),
        ]
    raise LLMInvalidOutput(
        f"{config.provider} {config.model} returned invalid JSON {len(responses)} times: "
        + "; ".join(errors[:5]),
        errors=errors,
        responses=responses,
    )


def _repair_request(errors: Sequence[str]) -> str:
    listed = "\n".join(f"- {e}" for e in errors)
    return (
        f"Your previous reply could not be used because of these problems:\n{listed}\n"
        "Send the complete corrected JSON object again, fixing every problem listed."
    )


def _validate(
    response: LLMResponse, schema: type[Model], extra_validate: Callable[[Model], list[str]] | None
) -> tuple[Model | None, list[str]]:
    errors: list[str] = []
    if response.stop_reason in ("length", "max_tokens"):
        errors.append("the reply was cut off at the output token limit; answer more concisely")
    try:
        data = parse_json_reply(response.text)
    except ValueError as exc:
        return None, [*errors, str(exc)]
    try:
        model = schema.model_validate(data)
    except pydantic.ValidationError as exc:
        return None, [*errors, *(_format_error(e) for e in exc.errors(include_url=False))]
    domain = extra_validate(model) if extra_validate else []
    return (None, [*errors, *domain]) if domain else (model, [])


def _format_error(error: Any) -> str:
    location = ".".join(str(part) for part in error.get("loc", ())) or "(top level)"
    return f"{location}: {error.get('msg', 'invalid')}"


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json_reply(text: str) -> Any:
    """Parse a JSON object from a reply, tolerating ```json fences and prose around the object."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply was empty; a JSON object was expected")
    candidates = [stripped]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(stripped)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    start = stripped.find("{")
    if start >= 0:
        try:
            value, _end = json.JSONDecoder().raw_decode(stripped[start:])
            return value
        except ValueError as exc:
            raise ValueError(f"the reply is not valid JSON: {exc}") from exc
    raise ValueError("the reply contains no JSON object")
