"""The dashboard over HTTP: who gets in, what an empty study shows, what a populated one shows."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from console.dashboard import services
from studies.models import BackgroundJob

PAGES = ("overview", "leaderboard", "surveys", "collaboration", "exports")


def _page_urls(slug: str) -> list[str]:
    return [reverse("dashboard:index")] + [reverse(f"dashboard:{page}", args=[slug]) for page in PAGES]


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_the_admin_login(client, empty_study):
    for url in _page_urls(empty_study.slug):
        response = client.get(url)
        assert response.status_code == 302
        assert reverse("admin:login") in response["Location"]


@pytest.mark.django_db
@pytest.mark.parametrize("role_user", ["worker_user", "expert_user"])
def test_workers_and_experts_are_denied_every_dashboard_page(client, empty_study, role_user, request):
    client.force_login(request.getfixturevalue(role_user))
    for url in _page_urls(empty_study.slug):
        response = client.get(url)
        assert response.status_code == 302, url
        assert reverse("admin:login") in response["Location"]
    job = BackgroundJob.objects.create(kind="export", study=empty_study)
    for name in ("job_status", "job_download"):
        response = client.get(reverse(f"dashboard:{name}", args=[empty_study.slug, job.pk]))
        assert response.status_code == 302
    response = client.post(reverse("dashboard:analysis_run", args=[empty_study.slug, "stability"]))
    assert response.status_code == 302 and not BackgroundJob.objects.filter(kind="stability").exists()


@pytest.mark.django_db
def test_an_empty_study_renders_every_page_with_no_data_yet(staff_client, empty_study):
    for url in _page_urls(empty_study.slug)[1:]:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        text = response.content.decode()
        assert "Traceback" not in text
        if not url.endswith("/exports/"):
            assert "No data yet" in text, url
    assert not BackgroundJob.objects.filter(study=empty_study).exists()


@pytest.mark.django_db
def test_the_admin_home_links_to_the_dashboard(staff_client):
    response = staff_client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert reverse("dashboard:index") in response.content.decode()


@pytest.mark.django_db
def test_the_study_list_shows_counts_and_links(staff_client, populated):
    response = staff_client.get(reverse("dashboard:index"))
    text = response.content.decode()
    assert populated.study.name in text
    assert reverse("dashboard:overview", args=[populated.study.slug]) in text
    slug = populated.study.slug
    assert f'data-count="participants" data-study="{slug}">{len(populated.participants)}</span>' in text
    assert f'data-count="episodes" data-study="{slug}">{len(populated.episodes)}</span>' in text


@pytest.mark.django_db
def test_the_overview_shows_the_funnel_progress_queue_and_spend(staff_client, populated):
    response = staff_client.get(reverse("dashboard:overview", args=[populated.study.slug]))
    assert response.status_code == 200
    text = response.content.decode()
    assert "<svg" in text and "Participants who reached each step" in text
    assert populated.agents[0].name in text
    assert "$0.04" in text  # 0.012 + 0.030 spent
    assert "Rubric generation" in text


@pytest.mark.django_db
def test_the_leaderboard_shows_agents_humans_and_the_employment_caution(staff_client, populated):
    response = staff_client.get(reverse("dashboard:leaderboard", args=[populated.study.slug]))
    text = response.content.decode()
    assert response.status_code == 200
    for agent in populated.agents:
        assert agent.name in text
    assert populated.participants[0].pseudonym in text
    assert "Not for employment decisions" in text
    assert "Run stability analysis" in text
    assert "PROLIFIC0000" not in text and "person0@example.org" not in text


@pytest.mark.django_db
def test_the_leaderboard_reads_a_stored_stability_result(staff_client, populated, settings):
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 200}
    job = services.analysis_request(study=populated.study, kind="stability", actor=None)
    services.analysis_job_run(job_id=job.pk)
    response = staff_client.get(reverse("dashboard:leaderboard", args=[populated.study.slug]))
    text = response.content.decode()
    assert "Run stability analysis" not in text
    assert "P(row agent &gt; column agent)" in text
    assert text.count('<rect x=') >= len(populated.agents) ** 2
    assert "200 bootstrap rounds" in text


@pytest.mark.django_db
def test_survey_and_collaboration_pages_start_their_analysis_and_then_show_it(
    staff_client, populated, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    for page in ("surveys", "collaboration"):
        url = reverse(f"dashboard:{page}", args=[populated.study.slug])
        with django_capture_on_commit_callbacks(execute=True):
            first = staff_client.get(url)
        assert first.status_code == 200
        job = BackgroundJob.objects.get(study=populated.study, kind=page)
        assert sent[-1] == ("console.dashboard.tasks.run_analysis", [job.pk])
        assert f'data-status-url="{reverse("dashboard:job_status", args=[populated.study.slug, job.pk])}"' in (
            first.content.decode()
        )
        services.analysis_job_run(job_id=job.pk)
        again = staff_client.get(url).content.decode()
        assert BackgroundJob.objects.filter(study=populated.study, kind=page).count() == 1
        assert "data-status-url" not in again
        assert len(re.findall(r"<svg", again)) >= 2
    assert "Spearman" in staff_client.get(reverse("dashboard:surveys", args=[populated.study.slug])).content.decode()


@pytest.mark.django_db
def test_job_status_reports_progress_as_json(staff_client, populated):
    job = BackgroundJob.objects.create(kind="export", study=populated.study, progress_done=3, progress_total=12,
                                       status=BackgroundJob.Status.RUNNING)
    data = staff_client.get(reverse("dashboard:job_status", args=[populated.study.slug, job.pk])).json()
    assert data == {"id": job.pk, "kind": "export", "status": "running", "done": 3, "total": 12, "percent": 25,
                    "error": "", "download_url": None}


@pytest.mark.django_db
def test_a_job_of_another_study_is_not_found(staff_client, populated, empty_study):
    job = BackgroundJob.objects.create(kind="export", study=populated.study)
    assert staff_client.get(reverse("dashboard:job_status", args=[empty_study.slug, job.pk])).status_code == 404
    assert staff_client.get(reverse("dashboard:job_download", args=[empty_study.slug, job.pk])).status_code == 404


@pytest.mark.django_db
def test_an_unknown_study_is_not_found(staff_client):
    assert staff_client.get(reverse("dashboard:overview", args=["no-such-study"])).status_code == 404


@pytest.mark.django_db
def test_an_older_result_stays_visible_while_new_data_is_analysed(staff_client, populated, monkeypatch):
    import numpy as np

    from tests.factories import ParticipantFactory
    from tests.factories.surveys import add_survey

    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: None)
    job = services.analysis_request(study=populated.study, kind="surveys", actor=None)
    services.analysis_job_run(job_id=job.pk)
    add_survey(ParticipantFactory(study=populated.study, status="complete"), np.random.default_rng(0))
    text = staff_client.get(reverse("dashboard:surveys", args=[populated.study.slug])).content.decode()
    assert "the data has changed since and they are being recomputed" in text
    assert "data-status-url" in text and "Spearman" in text
    assert BackgroundJob.objects.filter(study=populated.study, kind="surveys").count() == 2


def test_the_overview_shows_the_invitation_link_and_on_the_demo_its_accounts(staff_client, empty_study):
    page = staff_client.get(reverse("dashboard:overview", args=[empty_study.slug])).content.decode()
    assert f"http://testserver/join/{empty_study.invite_code}/" in page
    assert 'id="demo-accounts"' not in page, "only the demo study publishes accounts"
    from django.core.management import call_command

    call_command("demo", "--no-cohort")
    demo = staff_client.get(reverse("dashboard:overview", args=["collabskill-demo"])).content.decode()
    assert 'id="demo-accounts"' in demo and "demo-expert" in demo and "demo-password" in demo


@pytest.mark.django_db
def test_the_live_monitor_is_paginated_so_the_overview_stays_small(staff_client):
    """Each monitor row carries its own action forms: 45 people in the middle of the study show 20 at a time,
    the step table still counts all 45, and a page past the end shows the last one."""
    from studies.models import Participant
    from tests.factories import ParticipantFactory, StudyFactory

    study = StudyFactory()
    for _ in range(45):
        ParticipantFactory(study=study, status=Participant.Status.WORKING)
    url = reverse("dashboard:overview", args=[study.slug])
    first = staff_client.get(url).content.decode()
    assert first.count('name="participant"') == 2 * 20  # remind + withdraw per row
    assert "1–20 of 45" in first and "page 1 of 3" in first and "?monitor_page=2#monitor" in first
    last = staff_client.get(url + "?monitor_page=99").content.decode()
    assert last.count('name="participant"') == 2 * 5 and "41–45 of 45" in last
    assert staff_client.get(url + "?monitor_page=junk").status_code == 200
