"""Design jobs through a real Celery worker: planning with progress, and the cached posterior for pairing."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import transaction

from console.dashboard import power
from pairing.services import design_posterior_get, posterior_cache_key
from studies.models import BackgroundJob
from tests.conftest import wait_for
from tests.factories import StudyFactory
from tests.factories.scenarios import populated_study


@pytest.mark.django_db(transaction=True)
def test_a_plan_runs_on_a_real_worker_and_stores_sessions_per_design(celery_worker_process):
    study = StudyFactory(slug="planned")
    worker = celery_worker_process(queues="default")
    params = {**power.plan_defaults(study), "n_agents": 3, "studies": 20, "max_sessions": 1500, "noise_sd": 6}
    job = power.plan_request(study=study, actor=None, params=params)
    wait_for(lambda: BackgroundJob.objects.get(pk=job.pk).status in ("done", "failed"), timeout=180,
             message=f"plan job to finish\n{worker.output()[-2000:]}")
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert job.progress_done == job.progress_total > 0
    assert set(job.result["modes"]) == {"uniform", "balanced", "adaptive"}
    assert job.result["settings"]["n_agents"] == 3


@pytest.mark.django_db(transaction=True)
def test_a_missing_design_posterior_is_computed_by_the_worker_not_the_request(celery_worker_process):
    data = populated_study(n_participants=8, per_participant=3, surveys=False, extras=False, seed=3)
    cache.delete(posterior_cache_key(data.study.pk))
    worker = celery_worker_process(queues="default")
    try:
        with transaction.atomic():
            assert design_posterior_get(data.study) is None      # the request gets nothing and fits nothing
        wait_for(lambda: cache.get(posterior_cache_key(data.study.pk)) is not None, timeout=120,
                 message=f"design posterior in the cache\n{worker.output()[-2000:]}")
        value = design_posterior_get(data.study)
        assert value["version"] == data.snapshot.version
        assert sorted(value["agent_ids"]) == sorted(str(a.pk) for a in data.agents)
    finally:
        cache.delete(posterior_cache_key(data.study.pk))
