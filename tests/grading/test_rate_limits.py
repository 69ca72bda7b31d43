"""Provider rate limits hold across worker processes (Redis), and grading survives a Redis outage."""

from __future__ import annotations

import logging
import math
import multiprocessing
import socket

import pytest

from grading.providers import JudgeSpec, provider_config
from tests.conftest import requires_redis
from tests.grading.rate_limit_child import call_provider

PROCESSES, CALLS, LIMIT, WINDOW = 3, 5, 4, 2.0


def _busiest_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + window) for start in times)


@requires_redis
def test_the_provider_rate_limit_holds_across_worker_processes(llm_server, settings):
    settings.GRADING = {**settings.GRADING, "PROVIDER_RATE_LIMITS": {"openai": LIMIT},
                        "PROVIDER_RATE_WINDOW_SECONDS": WINDOW}
    config = provider_config(JudgeSpec("openai", "gpt-4.1"))
    config.limiter.clear("openai")  # an earlier run's window must not slow this one
    context = multiprocessing.get_context("spawn")
    start, reports = context.Event(), context.Queue()
    children = [context.Process(target=call_provider, args=(config, CALLS, start, reports))
                for _ in range(PROCESSES)]
    for child in children:
        child.start()
    start.set()
    grants = [t for _ in children for t in reports.get(timeout=120)]
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    assert len(llm_server.requests_for("openai")) == PROCESSES * CALLS
    # The limiter's own decisions, on Redis's clock (one clock for every process, whatever the machine's load):
    # every call was granted once, no window of WINDOW seconds holds more than LIMIT grants (without a shared
    # limit every process would take its own LIMIT), so the 15 grants span at least three full windows.
    assert len(grants) == PROCESSES * CALLS
    assert _busiest_window(grants, WINDOW) <= LIMIT
    assert max(grants) - min(grants) >= (math.ceil(PROCESSES * CALLS / LIMIT) - 1) * WINDOW


def test_the_process_local_limit_spaces_calls_when_no_redis_is_configured(llm_server, settings):
    settings.REDIS_URL = ""
    settings.GRADING = {**settings.GRADING, "PROVIDER_RATE_LIMITS": {"anthropic": 2},
                        "PROVIDER_RATE_WINDOW_SECONDS": 1.0}
    config = provider_config(JudgeSpec("anthropic", "claude-sonnet-4-6"))
    from grading import llm

    config.limiter.clear("anthropic")
    config.limiter.grants.clear()
    for index in range(5):
        llm.complete(config, system="s", user_text=f"r{index}", max_tokens=16)
    assert len(llm_server.requests_for("anthropic")) == 5
    # The limiter's own decisions (when the requests then arrive depends on the machine's load): no window of a
    # second holds more than two grants, so the five span at least two full windows.
    grants = list(config.limiter.grants)
    assert len(grants) == 5
    assert _busiest_window(grants, 1.0) <= 2
    assert max(grants) - min(grants) >= 2.0 - 1e-6  # (rounding of the clock arithmetic)


def test_an_unreachable_redis_falls_back_to_the_local_limit_and_says_so(llm_server, settings, caplog):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    settings.GRADING = {**settings.GRADING, "PROVIDER_RATE_LIMITS": {"openai": 100}}
    config = provider_config(JudgeSpec("openai", "gpt-4.1"))
    from grading import llm

    with caplog.at_level(logging.WARNING, logger="grading.rate_limits"):
        reply = llm.complete(config, system="s", user_text="still graded", max_tokens=16)
    assert reply.text
    assert "Redis is unreachable" in caplog.text and "per-process" in caplog.text


def test_no_limit_configured_means_no_limiter_call(llm_server, settings):
    settings.GRADING = {**settings.GRADING, "PROVIDER_RATE_LIMITS": {}}
    assert provider_config(JudgeSpec("openai", "gpt-4.1")).rate_limit == 0


@pytest.mark.parametrize("limit", [0, -1])
def test_a_non_positive_limit_is_no_limit(settings, limit):
    settings.GRADING = {**settings.GRADING, "PROVIDER_RATE_LIMITS": {"openai": limit}}
    assert provider_config(JudgeSpec("openai", "gpt-4.1")).rate_limit == 0
