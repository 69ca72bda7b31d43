"""The stopping-rule estimate on real study data, and the cached posterior adaptive pairing reads."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.cache import cache
from django.urls import reverse

from console.dashboard import power
from pairing.services import design_posterior_get, design_posterior_refresh, posterior_cache_key
from rating import selectors as rating_selectors
from rating.fit import ModelSpec, fit_model
from studies.models import BackgroundJob

pytestmark = pytest.mark.django_db


def test_the_cached_design_posterior_is_the_calibrated_fit_of_the_active_ledger(populated):
    value = design_posterior_refresh(study_id=populated.study.pk)
    arrays = rating_selectors.observations_arrays(populated.study)
    fit = fit_model(arrays.agent_ids.astype(str), arrays.participant_ids.astype(str), arrays.y,
                    spec=ModelSpec(kind="calibrated"), weights=arrays.w)
    np.testing.assert_allclose(value["mu"], fit.agent_mu, rtol=1e-10)
    np.testing.assert_allclose(value["cov"], fit.agent_cov, rtol=1e-10)
    assert value["noise_sd"] == pytest.approx(fit.hyper["beta"]["estimate"])
    assert value["version"] == rating_selectors.latest_snapshot(populated.study).version
    assert design_posterior_get(populated.study) == value
    cache.delete(posterior_cache_key(populated.study.pk))


def test_the_estimate_runs_as_a_job_with_progress_and_shows_every_design(staff_client, populated):
    staff_client.post(reverse("dashboard:power_run", args=[populated.study.slug]))
    job = BackgroundJob.objects.get(kind="power", study=populated.study)
    staff_client.post(reverse("dashboard:power_run", args=[populated.study.slug]))
    assert BackgroundJob.objects.filter(kind="power").count() == 1, "same posterior, same job"
    assert job.params["futures"] == power.ESTIMATE["futures"]
    # Fewer futures and a shorter horizon keep the test quick; the code path is the same.
    BackgroundJob.objects.filter(pk=job.pk).update(params={**job.params, "futures": 12, "max_sessions": 300})
    job = power.power_job_run(job_id=job.pk)
    assert job.status == BackgroundJob.Status.DONE, job.error
    assert job.progress_done == job.progress_total > 0
    result = job.result
    assert set(result["goals"]) == {"top", "ranking", "adjacent"}
    for goal, per_mode in result["goals"].items():
        assert set(per_mode) == {"uniform", "balanced", "adaptive"}
        assert 0.0 <= result["now"][goal] <= 1.0
        for q in per_mode.values():
            assert q["low"] is None or q["median"] is None or q["low"] <= q["median"]
    text = staff_client.get(reverse("dashboard:leaderboard", args=[populated.study.slug])).content.decode()
    assert "simulated futures</a> drawn from the current" in text
    assert "To identify the top agent with P ≥ 0.95, the current design needs" in text  # the panel's verdict
    assert "(current)" in text
    cache.delete(posterior_cache_key(populated.study.pk))
