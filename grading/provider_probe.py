"""Is a judge provider answering again? One free request (the model list) through the official SDK.

Judges whose provider kept failing wait for it (`grading.services.outages`); the sweep asks this once per
provider per sweep before sending any waiting submission again, so an outage costs one
unpaid request a minute per provider, not a retry loop per submission. "Answering" means any reply that is
not a provider fault: a 2xx, or a 4xx other than 408/429 (a proxy without the model list still shows the
service is up). 5xx, 408, 429, timeouts and refused connections mean it is still down.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from grading.conf import grading_settings
from grading.providers import JudgeSpec, provider_config

_DOWN_STATUSES = (408, 429)


def _client(spec: JudgeSpec, timeout: float) -> Any:
    config = provider_config(spec)
    kwargs: dict[str, Any] = {"api_key": config.api_key or "", "timeout": timeout, "max_retries": 0}
    if config.base_url:
        kwargs["base_url"] = config.base_url
    return openai.OpenAI(**kwargs) if spec.provider == "openai" else anthropic.Anthropic(**kwargs)


def provider_down_reason(spec: JudgeSpec) -> str | None:
    """Return why the provider is still down, or None when it answers (never raises)."""
    timeout = float(grading_settings()["PROVIDER_PROBE_TIMEOUT_SECONDS"])
    try:
        client = _client(spec, timeout)
        try:
            client.models.list()
        finally:
            client.close()
    except (openai.APIStatusError, anthropic.APIStatusError) as exc:
        if exc.status_code >= 500 or exc.status_code in _DOWN_STATUSES:
            return f"{spec.provider} answered HTTP {exc.status_code}"
        return None
    except (openai.APIConnectionError, anthropic.APIConnectionError) as exc:  # timeouts are connection errors
        return f"{spec.provider} unreachable: {type(exc).__name__}"
    except Exception as exc:  # a probe must never break the sweep
        return f"{spec.provider} probe failed: {type(exc).__name__}: {exc}"[:300]
    return None
