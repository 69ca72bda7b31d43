"""Parallel gradings against a small LLM budget: reservations keep the overshoot to one round's estimate."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest
from django.db import connection

from grading.exceptions import RetryLater
from grading.models import JudgeRun, Rubric
from grading.selectors import study_llm_spend
from grading.services.pipeline import episode_grade
from studies.models import Episode
from tests.conftest import requires_postgres
from tests.factories import StudyFactory, TaskFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres]

N = 10


def _grade_until_settled(episode_id: int, outcomes: dict[int, str], deadline: float) -> None:
    """What the task does across its retries: grade, and on RetryLater try again a moment later."""
    try:
        while time.monotonic() < deadline:
            try:
                outcomes[episode_id] = episode_grade(episode_id=episode_id, final_attempt=False).status
                return
            except RetryLater:
                time.sleep(0.05)
        outcomes[episode_id] = "timed out"
    finally:
        connection.close()


def test_parallel_gradings_spend_at_most_the_cap_plus_one_call_estimate_and_resume_when_it_is_raised(
        llm_server, sent_tasks, settings):
    # One judge (a round is one call), priced so one call costs about $0.04, no JSON repair rounds and a modest
    # output ceiling: a call's reserved estimate is then (prompt bytes x input price + max tokens x output price).
    settings.GRADING = {**settings.GRADING, "DEFAULT_JUDGES": [{"provider": "openai", "model": "gpt-4.1"}],
                        "PRICES": {"gpt-4.1": [20.0, 80.0]}, "JUDGE_REPAIR_ATTEMPTS": 0,
                        "JUDGE_MAX_TOKENS": 1000}
    llm_server.latency = 0.3  # calls overlap: every thread is in flight at once without a reservation
    study = StudyFactory(llm_budget_usd=Decimal("0.10"))
    task = TaskFactory()
    make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    episodes = [submitted_episode(study=study, task=task) for _ in range(N)]

    outcomes: dict[int, str] = {}
    deadline = time.monotonic() + 90
    threads = [threading.Thread(target=_grade_until_settled, args=(e.pk, outcomes, deadline)) for e in episodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    calls = len(llm_server.requests_for("openai"))
    spend = study_llm_spend(study)
    per_call = spend / calls
    prompt_bytes = max(len(r.body["messages"][0]["content"].encode()) + len(r.body["messages"][1]["content"].encode())
                       for r in llm_server.requests_for("openai"))
    estimate = Decimal(prompt_bytes * 20 + 1000 * 80) / Decimal(1_000_000)
    assert spend <= study.llm_budget_usd + estimate, (spend, calls, per_call, estimate)
    assert sorted(set(outcomes.values())) == ["graded", "waiting"], outcomes  # nothing timed out
    assert spend >= study.llm_budget_usd  # the cap was used, not left idle
    waiting = Episode.objects.filter(study=study, status=Episode.Status.SUBMITTED)
    assert waiting.exists()
    for episode in waiting:
        assert episode.grading_note.startswith("LLM budget reached: this study has spent $")
    assert not JudgeRun.objects.filter(episode__study=study, reserved_usd__isnull=False).exists()

    study.llm_budget_usd = Decimal("50.00")
    study.save()
    for episode in waiting:
        assert episode_grade(episode_id=episode.pk).status == "graded"
    assert Episode.objects.filter(study=study, status=Episode.Status.GRADED).count() == N
