"""The design panel over HTTP: switching the pairing design, planning a study, the stopping-rule estimate."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.dashboard import power
from studies.models import AuditEvent, BackgroundJob, Study


@pytest.mark.django_db
def test_an_empty_study_shows_the_design_panel_with_planning(staff_client, empty_study):
    response = staff_client.get(reverse("dashboard:leaderboard", args=[empty_study.slug]))
    text = response.content.decode()
    assert response.status_code == 200
    assert "Pairing design and episodes still needed" in text
    assert 'action="{}"'.format(reverse("dashboard:plan_run", args=[empty_study.slug])) in text
    assert "Estimate episodes still needed" not in text, "no estimate without data"


@pytest.mark.django_db
def test_staff_switch_the_design_and_the_change_is_audited(staff_client, staff_user, empty_study):
    url = reverse("dashboard:design_set", args=[empty_study.slug])
    response = staff_client.post(url, {"mode": "adaptive", "floor": "0.3", "repeat_limit": "2", "note": "pilot"})
    assert response.status_code == 302
    empty_study.refresh_from_db()
    assert (empty_study.design_mode, empty_study.design_floor, empty_study.design_repeat_limit) == ("adaptive", 0.3, 2)
    event = AuditEvent.objects.get(action="study.design_changed")
    assert event.actor == staff_user and event.after["design_mode"] == "adaptive" and event.note == "pilot"


@pytest.mark.django_db
@pytest.mark.parametrize("data", [{"mode": "greedy"}, {"mode": "adaptive", "floor": "zero"},
                                  {"mode": "adaptive", "floor": "1.5"}])
def test_bad_design_input_changes_nothing_and_says_why(staff_client, empty_study, data):
    response = staff_client.post(reverse("dashboard:design_set", args=[empty_study.slug]), data, follow=True)
    assert "Nothing was changed" in response.content.decode()
    empty_study.refresh_from_db()
    assert empty_study.design_mode == Study.DesignMode.UNIFORM
    assert not AuditEvent.objects.filter(action="study.design_changed").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("role_user", ["worker_user", "expert_user"])
def test_workers_and_experts_cannot_switch_the_design_or_start_estimates(client, empty_study, role_user, request):
    client.force_login(request.getfixturevalue(role_user))
    for name, data in (("design_set", {"mode": "adaptive"}), ("plan_run", power.plan_defaults(empty_study)),
                       ("power_run", {})):
        response = client.post(reverse(f"dashboard:{name}", args=[empty_study.slug]), data)
        assert response.status_code == 302 and reverse("admin:login") in response["Location"]
    empty_study.refresh_from_db()
    assert empty_study.design_mode == Study.DesignMode.UNIFORM
    assert not BackgroundJob.objects.exists()


@pytest.mark.django_db
def test_a_plan_runs_as_a_job_and_its_figures_appear_on_the_page(staff_client, empty_study):
    data = {**power.plan_defaults(empty_study), "n_agents": 3, "studies": 20, "max_sessions": 2000, "noise_sd": 5}
    staff_client.post(reverse("dashboard:plan_run", args=[empty_study.slug]), data)
    job = BackgroundJob.objects.get(kind="plan", study=empty_study)
    job = power.power_job_run(job_id=job.pk)
    assert job.status == BackgroundJob.Status.DONE, job.error
    modes = job.result["modes"]
    assert set(modes) == {"uniform", "balanced", "adaptive"}
    assert modes["uniform"]["sessions"]["median"] is not None
    text = staff_client.get(reverse("dashboard:leaderboard", args=[empty_study.slug])).content.decode()
    assert f"≈ {modes['uniform']['sessions']['median']}" in text


@pytest.mark.django_db
def test_bad_planning_input_starts_nothing(staff_client, empty_study):
    data = {**power.plan_defaults(empty_study), "noise_sd": "-3"}
    response = staff_client.post(reverse("dashboard:plan_run", args=[empty_study.slug]), data, follow=True)
    assert "noise sd: must be between" in response.content.decode()
    assert not BackgroundJob.objects.exists()


@pytest.mark.django_db
def test_no_estimate_without_data(staff_client, empty_study):
    response = staff_client.post(reverse("dashboard:power_run", args=[empty_study.slug]), follow=True)
    assert "There is no data yet" in response.content.decode()
    assert not BackgroundJob.objects.exists()


@pytest.mark.django_db
def test_planning_defaults_come_from_an_earlier_studys_calibrated_fit(staff_client, empty_study, populated):
    from django.core.cache import cache

    from pairing.services import design_posterior_refresh, posterior_cache_key

    assert power.plan_defaults(empty_study)["source"] == "the planning prior"
    fitted = design_posterior_refresh(study_id=populated.study.pk)
    try:
        defaults = power.plan_defaults(empty_study)
        assert defaults["noise_sd"] == round(fitted["noise_sd"], 2)
        assert populated.study.name in defaults["source"]
        text = staff_client.get(reverse("dashboard:leaderboard", args=[empty_study.slug])).content.decode()
        assert f"the calibrated fit of “{populated.study.name}”" in text
    finally:
        cache.delete(posterior_cache_key(populated.study.pk))


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["uniform", "balanced", "adaptive"])
def test_where_every_worker_meets_every_agent_the_panel_says_why_the_designs_are_equal(staff_client, empty_study, mode):
    from tests.factories import AgentFactory

    empty_study.agents.add(*[AgentFactory() for _ in range(5)])
    Study.objects.filter(pk=empty_study.pk).update(tasks_per_session=5, design_mode=mode, design_repeat_limit=1)
    url = reverse("dashboard:leaderboard", args=[empty_study.slug])
    text = staff_client.get(url).content.decode()
    assert 'id="design-repeat-advice"' in text and "need the same number of episodes" in text
    assert f"allow {power.RECOMMENDED_REPEAT_LIMIT} tasks per worker with one agent" in text
    assert "every worker meets every agent, so the three designs assign the same pairs" in text  # the verdict
    Study.objects.filter(pk=empty_study.pk).update(design_repeat_limit=power.RECOMMENDED_REPEAT_LIMIT)
    assert 'id="design-repeat-advice"' not in staff_client.get(url).content.decode()
