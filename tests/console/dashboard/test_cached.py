"""The overview's and leaderboard's figures come from the cache for a short window: refreshes within it send
few queries, a staff action or a new snapshot shows at once, anything else after the window."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.dashboard import cached
from studies.models import Participant
from tests.factories import ParticipantFactory
from tests.factories.rating import RatingSnapshotFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cache_on(settings):
    settings.DASHBOARD_CACHE_SECONDS = 60
    cache.clear()
    yield
    cache.clear()


def _queries(client, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries), response.content.decode()


@pytest.mark.parametrize("page", ["overview", "leaderboard"])
def test_a_refresh_within_the_window_reads_the_figures_from_the_cache(staff_client, populated, page):
    url = reverse(f"dashboard:{page}", args=[populated.study.slug])
    first, _ = _queries(staff_client, url)
    again, html = _queries(staff_client, url)
    # The figures' own queries are gone; what stays is the session, the study and the analysis-job look-ups.
    assert again <= first - {"overview": 8, "leaderboard": 5}[page], (first, again)
    if page == "overview":
        assert 'id="figures-age"' in html and "recomputed at most every 60 s" in html


def test_a_new_participant_shows_after_the_window_not_before(populated, settings):
    settings.DASHBOARD_CACHE_SECONDS = 1
    study = populated.study
    before = cached.overview(study)["funnel"]["total"]
    ParticipantFactory(study=study, status=Participant.Status.WORKING)
    assert cached.overview(study)["funnel"]["total"] == before
    time.sleep(1.5)  # expiry only needs the window to have passed, however busy the machine
    assert cached.overview(study)["funnel"]["total"] == before + 1


def test_a_staff_action_shows_on_the_next_overview(staff_client, populated):
    study = populated.study
    participant = populated.participants[0]
    participant.status = Participant.Status.WORKING
    participant.save(update_fields=["status"])
    url = reverse("dashboard:overview", args=[study.slug])
    staff_client.get(url)
    withdrawn = cached.overview(study)["funnel"]["withdrawn"]
    response = staff_client.post(reverse("dashboard:staff_action", args=[study.slug, "withdraw"]),
                                 {"participant": participant.pk, "reason": "asked by e-mail"})
    assert response.status_code == 302
    assert cached.overview(study)["funnel"]["withdrawn"] == withdrawn + 1


def test_a_new_snapshot_shows_on_the_next_leaderboard(populated):
    study = populated.study
    first = cached.leaderboard(study)["snapshot"]
    newer = RatingSnapshotFactory(study=study, version=(first.version if first else 0) + 1)
    assert cached.leaderboard(study)["snapshot"].pk == newer.pk


@pytest.mark.parametrize("page", ["overview", "leaderboard"])
def test_computing_the_figures_stays_within_a_small_query_bound(staff_client, populated, page):
    queries, _ = _queries(staff_client, reverse(f"dashboard:{page}", args=[populated.study.slug]))
    assert queries <= 32  # the page's figures plus the shared counts every staff page shows (six queries)


def test_a_crowd_stranded_in_a_full_sector_costs_the_overview_no_query_per_worker():
    from console.dashboard.selectors import stranded_workers
    from pairing.services import episode_assign
    from tests.factories.scenarios import make_participant, make_world

    world = make_world(tasks=1, capacity=1, slug="crowd")
    episode_assign(participant=make_participant(world), position=1)
    crowd = [make_participant(world) for _ in range(30)]
    with CaptureQueriesContext(connection) as queries:
        stranded = stranded_workers(world.study)
    assert {row["pk"] for row in stranded} <= {p.pk for p in crowd} and len(stranded) >= 10
    assert len(queries) <= 5, len(queries)


def test_a_requested_stability_analysis_shows_its_progress_at_once_and_its_result_when_done(
        staff_client, populated, settings, monkeypatch, django_capture_on_commit_callbacks):
    """Like every background job: "Queued · 0 %" on the very next page (which reloads itself), then the result."""
    from console.dashboard import services
    from studies.models import BackgroundJob

    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 50}
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: None)
    slug = populated.study.slug
    url = reverse("dashboard:leaderboard", args=[slug])
    _, before = _queries(staff_client, url)  # fills the cache
    assert "Run stability analysis" in before
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("dashboard:analysis_run", args=[slug, "stability"]), follow=True)
    job = BackgroundJob.objects.get(study=populated.study, kind="stability")
    html = response.content.decode()
    status_url = reverse("dashboard:job_status", args=[slug, job.pk])
    assert f'data-status-url="{status_url}" data-reload="1"' in html
    assert "Queued · 0%" in html and "Run stability analysis" not in html
    services.analysis_job_run(job_id=job.pk)
    _, after = _queries(staff_client, url)
    assert "data-status-url" not in after.split('id="design-h"')[0]
    assert "50 bootstrap rounds" in after
