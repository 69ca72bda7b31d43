"""Run in separate processes by test_rate_limits: each one a worker process calling a provider."""

from __future__ import annotations

from typing import Any


def call_provider(config: Any, calls: int, start: Any, grants: Any) -> None:
    """Make `calls` provider calls, then report the limiter's grant times (Redis's clock) on `grants`."""
    from grading import llm

    start.wait(30)
    for index in range(calls):
        llm.complete(config, system="You are terse.", user_text=f"request {index}", max_tokens=16)
    grants.put(list(config.limiter.grants))
