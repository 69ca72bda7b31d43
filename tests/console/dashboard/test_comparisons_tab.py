"""The dashboard's "Comparisons" tab: the preference fit runs as a background job (queued by opening the page,
progress shown, the result read from the job), the verdict comes first, model rates carry intervals, the raw
counts stay labelled raw, and what the model cannot identify gives its reason and no number. Staff only."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from console.dashboard import services
from experts.services.preferences import study_preferences
from studies.models import BackgroundJob, Episode, SoloRun
from tests.experts.test_preference_service import VARIED, grade, rank_set
from tests.factories.experts import make_comparison_world, make_solo_run
from tests.factories.users import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_broker(monkeypatch):
    sent = []
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: sent.append(a))
    return sent


def fitted_world():
    world = make_comparison_world()
    staff = UserFactory(is_staff=True)
    for i, episode in enumerate((world["with_agent"], world["alone"])):
        grade(episode, "openai/judge-a", 60.0 + 10 * i)
        grade(episode, "anthropic/judge-b", 64.0 + 8 * i)
    SoloRun.objects.filter(pk=world["run"].pk).update(score=40.0)
    SoloRun.objects.filter(pk=make_solo_run(study=world["study"], task=world["task"], agent=world["agent"]).pk
                           ).update(score=46.0)
    rank_set(world, staff, VARIED, experts=len(VARIED))
    return world


def page(client, study):
    return client.get(reverse("dashboard:comparisons", args=[study.slug]))


def test_opening_the_tab_queues_the_fit_and_shows_its_progress_then_the_result(staff_client, no_broker,
                                                                               django_capture_on_commit_callbacks):
    study = fitted_world()["study"]
    with django_capture_on_commit_callbacks(execute=True):
        html = page(staff_client, study).content.decode()
    job = BackgroundJob.objects.get(study=study, kind="preferences")
    assert job.status == BackgroundJob.Status.QUEUED and len(no_broker) == 1
    assert "Queued · 0%" in html and 'data-reload="1"' in html
    page(staff_client, study)
    assert BackgroundJob.objects.filter(study=study, kind="preferences").count() == 1  # asked again: same job
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == BackgroundJob.Status.DONE
    assert job.result == study_preferences(study)  # the stored result is the service's, JSON-ready
    html = page(staff_client, study).content.decode()
    assert "Queued" not in html
    verdict = re.search(r'id="preferences-verdict">(.*?)</p>', html, re.S).group(1)
    assert "against the worker alone" in verdict and "% interval" in verdict
    assert html.index('id="preferences-verdict"') < html.index('id="preferences-versus"') < html.index(
        'id="preferences-win-rates"') < html.index('id="preferences-raw"')
    versus = html[html.index('id="preferences-versus"'):]
    versus = versus[:versus.index("</table>")]
    assert "with agent: Claude Code" in versus and "agent alone: Claude Code" in versus
    assert re.search(r"\d+ %<br><small>\d+ %–\d+ %</small>", versus)  # a rate with its interval
    for table in ("preferences-differences", "preferences-effects", "preferences-experts", "preferences-graders"):
        assert f'id="{table}"' in html
    assert "Raw counts (not modelled)" in html and "Worker + Claude Code" in html
    # New data makes the stored fit stale: the page queues a new job and keeps showing the old result meanwhile.
    rank_set(make_comparison_world_again(study), UserFactory(is_staff=True), {"human_agent": 1, "agent_alone": 2,
                                                                            "human_alone": 2})
    html = page(staff_client, study).content.decode()
    assert BackgroundJob.objects.filter(study=study, kind="preferences").count() == 2
    assert "the data has changed since" in html and 'id="preferences-versus"' in html


def make_comparison_world_again(study):
    """The same study's deliverables as a world dict for another set (a later ranking of the same task)."""
    episode = Episode.objects.filter(study=study, agent__isnull=False).order_by("pk").first()
    alone = Episode.objects.filter(study=study, agent__isnull=True).order_by("pk").first()
    run = SoloRun.objects.filter(study=study).order_by("pk").first()
    return {"study": study, "task": episode.task, "with_agent": episode, "alone": alone, "run": run}


def test_one_ranking_gives_the_models_reason_and_no_number(staff_client, no_broker):
    world = make_comparison_world()
    rank_set(world, UserFactory(is_staff=True), {"human_agent": 1, "agent_alone": 2, "human_alone": 3})
    page(staff_client, world["study"])
    services.analysis_job_run(job_id=BackgroundJob.objects.get(study=world["study"], kind="preferences").pk)
    html = page(staff_client, world["study"]).content.decode()
    verdict = re.search(r'id="preferences-verdict">(.*?)</p>', html, re.S).group(1)
    assert verdict.startswith("No win rate can be estimated yet:") and "too few" in verdict
    assert 'id="preferences-reason"' in html and 'id="preferences-win-rates"' not in html
    assert not re.search(r"\d+ %<br><small>", html)  # no model number anywhere
    assert "Raw counts (not modelled)" in html


def test_a_study_without_comparisons_says_so_and_queues_nothing(staff_client, no_broker):
    world = make_comparison_world()
    html = page(staff_client, world["study"]).content.decode()
    assert 'id="preferences-empty"' in html and not BackgroundJob.objects.filter(kind="preferences").exists()


def test_the_tab_is_staff_only(client, no_broker):
    world = make_comparison_world()
    url = reverse("dashboard:comparisons", args=[world["study"].slug])
    assert client.get(url).status_code == 302  # to the admin login
    client.force_login(UserFactory(is_staff=False))
    response = client.get(url)
    assert response.status_code == 302 and "login" in response["Location"]
    assert not BackgroundJob.objects.filter(kind="preferences").exists()


@pytest.mark.django_db(transaction=True)
def test_the_preference_job_runs_on_a_real_worker(celery_worker_process):
    from tests.conftest import wait_for

    study = fitted_world()["study"]
    worker = celery_worker_process(queues="default")
    job = services.analysis_request(study=study, kind="preferences", actor=None)  # enqueued on commit
    wait_for(lambda: BackgroundJob.objects.get(pk=job.pk).status in ("done", "failed"), timeout=120)
    job.refresh_from_db()
    assert job.status == "done", job.error + worker.output()[-3000:]
    assert job.progress_done == job.progress_total == 1
    assert job.result == study_preferences(study) and job.result["fit"]["win_rates"]
