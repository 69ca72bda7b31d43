"""The expert-gate page: staff see which judge × category pairs pass, which fail and why; nobody else gets in."""

from __future__ import annotations

import pytest
from celery import current_app
from django.urls import reverse
from django.utils import timezone

from grading.models import JudgeGate
from studies.models import AuditEvent
from tests.factories import AgentFactory, TaskFactory
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role_user", ["worker_user", "expert_user"])
def test_only_staff_see_the_gate_page(client, empty_study, request, role_user):
    for name in ("dashboard:gate", "dashboard:gate_evaluate"):
        url = reverse(name, args=[empty_study.slug])
        assert client.get(url).status_code == 302  # anonymous: to the admin login
        client.force_login(request.getfixturevalue(role_user))
        response = client.post(url) if name.endswith("evaluate") else client.get(url)
        assert response.status_code == 302 and reverse("admin:login") in response["Location"]
        client.logout()


def test_an_unknown_study_is_not_found(staff_client):
    assert staff_client.get(reverse("dashboard:gate", args=["no-such-study"])).status_code == 404


def test_a_study_never_evaluated_says_so(staff_client, empty_study):
    page = staff_client.get(reverse("dashboard:gate", args=[empty_study.slug])).content.decode()
    assert "Not evaluated yet" in page
    assert "No episode has been graded automatically" in page


def test_the_page_shows_passing_and_failing_pairs_with_reasons_and_the_sample(staff_client, empty_study):
    now = timezone.now()
    JudgeGate.objects.create(study=empty_study, judge="openai/gpt-4.1", category="correctness", passes=True,
                             n_episodes=30, n_items=60, agreement=0.71, agreement_low=0.55, agreement_high=0.82,
                             bias=-2.5, bias_low=-6.0, bias_high=1.0, more_for_bias_width=0, computed_at=now)
    JudgeGate.objects.create(study=empty_study, judge="anthropic/claude-sonnet-4-6", category="technical",
                             passes=False, reasons=["biased: +18.0 points against the experts (limit ±10)"],
                             n_episodes=30, n_items=30, agreement=0.4, agreement_low=0.2, agreement_high=0.6,
                             bias=18.0, bias_low=12.0, bias_high=24.0, more_for_bias_width=114, computed_at=now)
    task = TaskFactory(studies=[empty_study])
    agent = AgentFactory(family="anthropic")
    make_episode(study=empty_study, task=task, agent=agent, in_calibration_sample=True, calibration_probability=1.0)
    make_episode(study=empty_study, task=task, agent=agent, calibration_probability=0.1)
    page = staff_client.get(reverse("dashboard:gate", args=[empty_study.slug])).content.decode()
    assert "1 judge × category pair passes, 1 fails" in page
    assert "fails: biased: +18.0 points against the experts" in page
    assert "0.55 to 0.82" in page and "12.0 to 24.0" in page
    assert "about 114 more calibration episodes" in page
    assert '<th scope="row">anthropic</th><td class="num">2</td><td class="num">1</td><td class="num">0</td>' in page


def test_evaluating_is_a_background_job_with_progress_like_the_others_and_is_audited(
        staff_client, staff_user, empty_study, monkeypatch, django_capture_on_commit_callbacks):
    """"Queued · 0 %" on the next page (which reloads itself when done), not "reload in a moment"."""
    from console.dashboard import services
    from console.task_names import RUN_ANALYSIS
    from studies.models import BackgroundJob

    sent_tasks: list = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: sent_tasks.append((name, list(args))))
    url = reverse("dashboard:gate_evaluate", args=[empty_study.slug])
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(url, follow=True)
        staff_client.post(url)  # a second click while it is queued starts nothing new
    job = BackgroundJob.objects.get(study=empty_study, kind="gate")
    assert sent_tasks == [(RUN_ANALYSIS, [job.pk])]
    html = response.content.decode()
    assert response.redirect_chain == [(reverse("dashboard:gate", args=[empty_study.slug]), 302)]
    status_url = reverse("dashboard:job_status", args=[empty_study.slug, job.pk])
    assert f'data-status-url="{status_url}" data-reload="1"' in html and "Queued · 0%" in html
    assert "reload in a moment" not in html and "Evaluate the gate now" not in html
    assert AuditEvent.objects.filter(action="study.expert_gate_request", actor=staff_user).count() == 1
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == BackgroundJob.Status.DONE
    page = staff_client.get(reverse("dashboard:gate", args=[empty_study.slug])).content.decode()
    assert "data-status-url" not in page and "Evaluate the gate now" in page
    assert staff_client.get(reverse("dashboard:gate_evaluate", args=[empty_study.slug])).status_code == 405
