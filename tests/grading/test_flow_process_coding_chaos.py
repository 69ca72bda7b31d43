"""Chaos: a worker killed mid-way through a ToM coding pays once per judge and stores one coding per judge.

Real `celery worker` processes, the test's own broker, PostgreSQL and the fake providers (the grading chaos
fixture): the grade sends the coding, the pool child is killed while a ToM call is in flight, and the
redelivered message plus the sweep finish the work after the claim's lease lapses.
"""

from __future__ import annotations

import os
import time

import pytest

from grading.models import GradingFollowUp, LLMUsage, ProcessCoding
from tests.conftest import requires_postgres, requires_redis, wait_for
from tests.factories import StudyFactory
from tests.grading import test_flow_grading_chaos as grading_chaos
from tests.grading.chaos import child_pids
from tests.grading.test_flow_grading_chaos import JUDGES, RECOVERY_BOUND, _kill

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres, requires_redis]

chaos = grading_chaos.chaos  # the grading chaos fixture: own broker, scripted providers, worker helpers
KEYS = [(instrument, provider) for instrument in ("response_quality", "tom") for provider in ("anthropic", "openai")]


def _coded(pk: int) -> bool:
    current = ProcessCoding.objects.filter(episode_id=pk, is_current=True, status="succeeded").count()
    return current == 4 and not GradingFollowUp.objects.filter(episode_id=pk, kind="process",
                                                               done_at__isnull=True).exists()


def test_a_pool_child_killed_mid_tom_call_leaves_one_coding_and_one_recorded_call_per_judge(chaos):
    chaos.script.process_delay = 3.0
    study = StudyFactory(judges=JUDGES, tom_coding=True)
    worker = chaos.worker(pool="prefork", concurrency=1)
    episode = chaos.episode(study)
    wait_for(lambda: sum(chaos.script.process_in_flight().values()) >= 1, timeout=120,
             message="a ToM coding call in flight")
    lost = chaos.script.process_in_flight()
    assert set(lost) <= {("tom", "openai"), ("tom", "anthropic")}
    killed_at = time.monotonic()
    for pid in child_pids(worker.proc.pid):
        _kill(pid)
    chaos.script.process_delay = 0.2
    try:
        wait_for(lambda: _coded(episode.pk), timeout=RECOVERY_BOUND, message="the episode's four codings")
    except BaseException:
        print(chaos.logs())
        raise
    recovery = time.monotonic() - killed_at
    rows = sorted(ProcessCoding.objects.filter(episode_id=episode.pk).values_list("instrument", "provider",
                                                                                  "status", "is_current"))
    assert rows == [(i, p, "succeeded", True) for i, p in KEYS], "one coding per instrument and judge"
    recorded = sorted(LLMUsage.objects.filter(study=study, purpose__in=["tom", "response_quality"])
                      .values_list("purpose", "provider"))
    assert recorded == KEYS, "one recorded (paid) call per instrument and judge"
    produced = chaos.script.process_replies
    for key in KEYS:  # the provider produced one reply per judge, plus the one the killed worker never read
        assert produced[key] == 1 + lost.get(key, 0), (key, produced, lost)
    print(f"RECOVERY ToM coding pool child killed mid-call: {recovery:.1f} s to four codings; "
          f"load {os.getloadavg()[0]:.1f}")
