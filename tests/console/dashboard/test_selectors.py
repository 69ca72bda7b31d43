"""Dashboard reads: funnel, monitor, queue, spend, and query counts that do not grow with the data."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.dashboard import selectors
from grading.models import JudgeRun
from studies.models import Episode, Participant
from tests.factories import EpisodeFactory, ParticipantFactory, StudyFactory
from tests.factories.scenarios import populated_study


@pytest.mark.django_db
def test_the_funnel_counts_who_is_at_and_who_reached_each_step():
    study = StudyFactory()
    for status, n in (("invited", 2), ("consented", 1), ("working", 3), ("complete", 4), ("withdrawn", 2),
                      ("declined", 1)):
        for _ in range(n):
            ParticipantFactory(study=study, status=status)
    funnel = selectors.funnel(study)
    steps = {row["status"]: row for row in funnel["steps"]}
    assert steps["invited"]["current"] == 2
    assert steps["invited"]["reached"] == 13
    assert steps["consented"]["reached"] == 1 + 3 + 4 + 2
    assert steps["working"]["reached"] == 7
    assert steps["complete"]["reached"] == 4
    assert funnel["withdrawn"] == 2 and funnel["declined"] == 1 and funnel["total"] == 13


@pytest.mark.django_db
def test_the_monitor_lists_the_longest_idle_first_with_their_open_task():
    study = StudyFactory()
    now = timezone.now()
    idle = ParticipantFactory(study=study, status="working", last_activity_at=now - timedelta(days=3))
    busy = ParticipantFactory(study=study, status="working", last_activity_at=now - timedelta(minutes=5))
    ParticipantFactory(study=study, status="complete", last_activity_at=now - timedelta(days=9))
    EpisodeFactory(participant=idle, position=1, status=Episode.Status.GRADED)
    open_task = EpisodeFactory(participant=idle, position=2, status=Episode.Status.IN_PROGRESS,
                               deadline_at=now - timedelta(hours=1))
    monitor = selectors.monitor(study, now=now)
    assert [p["pk"] for p in monitor["people"]] == [idle.pk, busy.pk]
    first = monitor["people"][0]
    assert first["episode_id"] == open_task.pk and first["overdue"] and first["stale"]
    assert first["episode_agent"] == open_task.agent.name
    working = next(step for step in monitor["steps"] if step["status"] == "working")
    assert working["n"] == 2 and working["stale"] == 1
    assert working["longest_idle"] >= timedelta(days=3)


@pytest.mark.django_db
def test_the_grading_queue_reports_counts_and_failure_reasons(populated):
    episode = populated.episodes[0]
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.FAILED, grading_note="All judges failed")
    JudgeRun.objects.filter(episode=episode).update(status=JudgeRun.Status.FAILED, error="HTTP 500 from provider")
    Episode.objects.filter(pk=populated.episodes[1].pk).update(
        status=Episode.Status.SUBMITTED, submitted_at=timezone.now() - timedelta(hours=5)
    )
    queue = selectors.grading_queue(populated.study)
    assert queue["failed"] == 1 and queue["submitted"] == 1
    assert queue["oldest_waiting"] >= timedelta(hours=5)
    (failed,) = queue["failed_episodes"]
    assert failed["grading_note"] == "All judges failed" and failed["judge_error"] == "HTTP 500 from provider"
    assert queue["judge_runs"]["Failed"] == 1


@pytest.mark.django_db
def test_llm_spend_is_summed_per_purpose_against_the_budget(populated):
    populated.study.llm_budget_usd = Decimal("0.05")
    populated.study.save()
    spend = selectors.llm_spend(populated.study)
    assert spend["total"] == Decimal("0.042")
    assert spend["percent"] == pytest.approx(84.0)
    assert not spend["over_budget"]
    assert {row["purpose"]: row["failed"] for row in spend["rows"]} == {"judge": 0, "rubric": 1}


def _page_queries(client, study, page: str) -> int:
    url = reverse(f"dashboard:{page}", args=[study.slug])
    client.get(url)  # warm caches (content types, permissions) so both sizes are measured alike
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


@pytest.mark.django_db
def test_page_query_counts_do_not_grow_with_the_number_of_episodes(staff_client):
    small = populated_study(n_participants=4, per_participant=2, seed=1, slug="small-study")
    large = populated_study(n_participants=24, per_participant=3, seed=2, slug="large-study")
    Participant.objects.filter(pk=large.participants[0].pk).update(status="working")
    Participant.objects.filter(pk=small.participants[0].pk).update(status="working")
    for page in ("overview", "leaderboard", "surveys", "collaboration", "exports"):
        assert _page_queries(staff_client, small.study, page) == _page_queries(staff_client, large.study, page), page


@pytest.mark.django_db
def test_a_worker_waiting_with_no_task_left_is_flagged_for_staff(client):
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    from console.dashboard.selectors import stranded_workers
    from pairing.services import episode_assign
    from tests.factories.scenarios import make_participant, make_world

    world = make_world(tasks=1, capacity=1, slug="stranded")
    first = make_participant(world)
    episode = episode_assign(participant=first, position=1)
    waiting = make_participant(world)
    assert [row["pseudonym"] for row in stranded_workers(world.study)] == [waiting.pseudonym]
    assert first.pseudonym not in [row["pseudonym"] for row in stranded_workers(world.study)], "has an open task"
    staff = get_user_model().objects.create_superuser("boss", "boss@example.org", "pw-boss-123456")
    client.force_login(staff)
    page = client.get(reverse("dashboard:overview", args=[world.study.slug]))
    assert b"Waiting with no task: 1 participant" in page.content and waiting.pseudonym.encode() in page.content
    episode.status = "skipped"
    episode.save()
    # The skipped task is free again for the waiting worker; the one who skipped it cannot take it twice.
    assert [row["pseudonym"] for row in stranded_workers(world.study)] == [first.pseudonym]


@pytest.mark.django_db
def test_the_grading_queue_says_why_submissions_wait():
    from console.dashboard.selectors import grading_queue
    from studies.models import Episode as EpisodeModel
    from tests.factories import EpisodeFactory, StudyFactory

    study = StudyFactory(slug="waiting")
    for note in ("No API key is configured for openai.", "No API key is configured for openai.", ""):
        episode = EpisodeFactory(participant__study=study, status=EpisodeModel.Status.SUBMITTED)
        EpisodeModel.objects.filter(pk=episode.pk).update(grading_note=note)
    reasons = {row["reason"]: row["n"] for row in grading_queue(study)["waiting_reasons"]}
    assert reasons["No API key is configured for openai."] == 2
    assert any(reason.startswith("Not picked up yet") and n == 1 for reason, n in reasons.items())


@pytest.mark.django_db
def test_under_the_all_submitted_gate_a_skipped_task_does_not_count_as_done_for_the_alert():
    from console.dashboard.selectors import stranded_workers
    from pairing.services import episode_assign
    from studies.models import Study as StudyModel
    from tests.factories.scenarios import make_participant, make_world

    world = make_world(tasks=1, capacity=5, slug="gate", tasks_per_session=1,
                       post_survey_gate=StudyModel.PostSurveyGate.ALL_SUBMITTED)
    worker = make_participant(world)
    episode = episode_assign(participant=worker, position=1)
    episode.status = "skipped"
    episode.save()
    assert [row["pseudonym"] for row in stranded_workers(world.study)] == [worker.pseudonym]
