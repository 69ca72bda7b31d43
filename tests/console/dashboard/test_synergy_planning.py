"""Planning the solo condition: a target width starts a background plan from the study's fitted variance
components (assumed ones before a fit); bad input starts nothing; the page shows the smallest design."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.dashboard import services, synergy_planning
from console.dashboard.exceptions import JobRefused
from studies.models import BackgroundJob
from tests.factories.scenarios import make_world
from tests.factories.synergy import planted_synergy_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_grid(monkeypatch):
    monkeypatch.setattr(synergy_planning, "WORKERS", (20, 80))
    monkeypatch.setattr(synergy_planning, "REPLICATES", 2)
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)


@pytest.mark.parametrize("width", ["", "wide", "0", "80"])
def test_a_bad_target_width_starts_nothing(width, small_grid):
    world = make_world(tasks=6)
    with pytest.raises(JobRefused, match="Target width"):
        synergy_planning.synergy_plan_request(study=world.study, actor=None, fit=None, width=width)
    assert not BackgroundJob.objects.filter(kind="synergy_plan").exists()


def test_before_a_fit_the_plan_uses_assumed_spreads():
    world = make_world(tasks=6, tasks_per_session=5)
    inputs = synergy_planning.synergy_plan_inputs(world.study, None)
    assert inputs["components"] == synergy_planning.ASSUMED_COMPONENTS and "assumed" in inputs["source"]
    assert inputs["solo_per_worker"] == [1, 2, 3] and inputs["n_agents"] == 3


def test_a_plan_from_the_fitted_components_is_stored_and_shown(staff_client, small_grid):
    planted = planted_synergy_study(workers=30, tasks=8, slug="plan")
    study = planted.world.study
    services.analysis_job_run(job_id=services.analysis_request(study=study, kind="synergy", actor=None).pk)
    response = staff_client.post(reverse("dashboard:synergy_plan", args=[study.slug]), {"width": "12"})
    assert response.status_code == 302
    job = BackgroundJob.objects.get(kind="synergy_plan", study=study)
    assert job.params["source"] == "the study's synergy fit" and job.params["n_agents"] == 2
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    rows = job.result["rows"]
    assert [(r["workers"], r["solo_per_worker"]) for r in rows] == [(20, 1), (20, 2), (20, 3), (80, 1), (80, 2),
                                                                    (80, 3)]
    by = {(r["workers"], r["solo_per_worker"]): r["mean_width"] for r in rows}
    assert by[(80, 2)] < by[(20, 2)]
    html = staff_client.get(reverse("dashboard:synergy", args=[study.slug])).content.decode()
    assert 'id="plan-table"' in html and 'id="plan-verdict"' in html
