"""Concurrent runs of the same set's judge rankings (duplicate messages, a command beside the admin action): one
paid call and one row per set x order x judge, the others back off while the calls are in flight."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from experts.models import ComparisonSet, JudgeComparison
from experts.services.judge_comparisons import comparison_set_judge
from grading.exceptions import CodingInFlight
from tests.conftest import requires_postgres
from tests.experts.test_judge_comparisons import _requests, world  # noqa: F401  (the judged world)
from tests.grading.conftest import _fake_llm_session, llm_server  # noqa: F401  (the local LLM test server)

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres]

RUNS = 4


def _run(set_id: int, outcomes: list[str]) -> None:
    try:
        comparison_set = ComparisonSet.objects.select_related("study", "task").get(pk=set_id)
        outcomes.append(",".join(sorted(r.status for r in comparison_set_judge(comparison_set=comparison_set))))
    except CodingInFlight:
        outcomes.append("in flight")
    finally:
        connection.close()


def test_concurrent_runs_pay_once_per_set_order_and_judge(llm_server, world):  # noqa: F811
    llm_server.latency = 0.4  # every run starts while the first calls are still in flight
    outcomes: list[str] = []
    threads = [threading.Thread(target=_run, args=(world["set"].pk, outcomes)) for _ in range(RUNS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(outcomes) == RUNS
    assert len(_requests(llm_server)) == 4
    rows = JudgeComparison.objects.filter(comparison_set=world["set"])
    assert rows.count() == 4 and set(rows.values_list("status", "attempts")) == {("succeeded", 1)}
    assert "in flight" in outcomes or outcomes.count("succeeded,succeeded,succeeded,succeeded") == RUNS
    # Once the calls are done every run returns the stored rankings without paying again.
    assert {r.status for r in comparison_set_judge(comparison_set=world["set"])} == {"succeeded"}
    assert len(_requests(llm_server)) == 4
