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



def _stranded_one_by_one(study) -> list[int]:
    """The per-worker check the set-based one replaced, kept verbatim as the reference."""
    from django.db.models import Count, Q

    from console.dashboard.selectors import MONITOR_LIMIT, OPEN_EPISODE
    from studies.models import Study
    from studies.selectors import sector_reach
    from studies.task_choice import task_available

    counted = (~Q(episodes__status=Episode.Status.SKIPPED)
               if study.post_survey_gate == Study.PostSurveyGate.ALL_SUBMITTED else None)
    candidates = (
        Participant.objects.filter(study=study, status=Participant.Status.WORKING, is_simulated=False)
        .exclude(episodes__status__in=OPEN_EPISODE)
        .annotate(done=Count("episodes", distinct=True, filter=counted))
        .filter(done__lt=study.tasks_per_session)
        .select_related("study", "occupation", "occupation__sector")
        .order_by("last_activity_at", "pk")
    )
    stranded = []
    reach = sector_reach(study)
    for participant in candidates[: MONITOR_LIMIT * 4]:
        sector = participant.occupation.sector_id if participant.occupation else None
        if sector in reach and task_available(participant=participant):
            continue
        stranded.append(participant.pk)
        if len(stranded) >= MONITOR_LIMIT:
            break
    return stranded


def _sectors_world():
    """A study whose sectors cover every case of the matching rule (capacity 2, three tasks per session):
    A full with an open fallback B; C full with a full fallback D; E open although two episodes were skipped;
    F's only task inactive; G's task and fallback belong to another study; H open."""
    from studies.models import SectorFallback
    from tests.factories import OccupationFactory, SectorFactory, TaskFactory

    study = StudyFactory(slug="sectors", max_episodes_per_task=2, tasks_per_session=3)
    other = StudyFactory(slug="sectors-other")
    sectors = {name: SectorFactory(code=f"sectors-{name}", name=f"Sector {name}") for name in "ABCDEFGH"}
    SectorFallback.objects.create(study=study, from_sector=sectors["A"], to_sector=sectors["B"])
    SectorFallback.objects.create(study=study, from_sector=sectors["C"], to_sector=sectors["D"])
    SectorFallback.objects.create(study=other, from_sector=sectors["G"], to_sector=sectors["B"])

    def task(name, *, active=True, studies=(study,), taken=0, skipped=0):
        row = TaskFactory(sector=sectors[name], is_active=active, studies=list(studies))
        for status, n in (("submitted", taken), ("skipped", skipped)):
            for _ in range(n):
                EpisodeFactory(participant__study=study, participant__status="complete", task=row, status=status)
        return row

    tasks = {"A": task("A", taken=2), "B": task("B"), "B-full": task("B", taken=2), "C": task("C", taken=2),
             "D": task("D", taken=2), "E": task("E", skipped=2), "F": task("F", active=False),
             "G": task("G", studies=(other,)), "H": task("H")}
    jobs = {name: OccupationFactory(sector=sector) for name, sector in sectors.items()}
    jobs["no-sector"] = OccupationFactory(sector=None)
    return study, other, tasks, jobs


def _add_workers(world, suffix: str) -> dict[str, Participant]:
    """One worker per case, labelled by what the rule should answer for them."""
    from tests.factories import UserFactory

    study, other, tasks, jobs = world
    workers = {}

    def worker(label, occupation, **fields):
        workers[label + suffix] = ParticipantFactory(study=study, occupation=occupation, **fields)
        return workers[label + suffix]

    for name in "ABCDEFGH":
        worker(name, jobs[name])
    # A task once skipped stays done for that worker, though it takes no capacity from others.
    EpisodeFactory(participant=worker("A-did-B", jobs["A"]), task=tasks["B"], status="skipped")
    EpisodeFactory(participant=worker("E-did-E", jobs["E"]), task=tasks["E"], status="skipped")
    worker("H-no-account", jobs["H"], user=None)
    EpisodeFactory(participant=worker("H-no-account-did-H", jobs["H"], user=None), task=tasks["H"],
                   status="skipped")
    account = UserFactory(roles=["worker"])
    worker("H-did-H-elsewhere", jobs["H"], user=account)
    EpisodeFactory(participant__study=other, participant__user=account, task=tasks["H"], status="submitted")
    worker("no-sector", jobs["no-sector"])
    worker("no-occupation", None)
    # Not candidates at all: a task open, not yet working, simulated.
    EpisodeFactory(participant=worker("H-busy", jobs["H"]), task=tasks["H"], status="assigned")
    worker("H-consenting", jobs["H"], status="consented")
    worker("H-simulated", jobs["H"], is_simulated=True)
    return workers


@pytest.mark.django_db
def test_stranded_workers_across_sectors_and_fallbacks_are_those_the_per_worker_rule_finds():
    world = _sectors_world()
    workers = _add_workers(world, "")
    stranded = [row["pk"] for row in selectors.stranded_workers(world[0])]
    assert stranded == _stranded_one_by_one(world[0])
    labels = {label for label, participant in workers.items() if participant.pk in stranded}
    assert labels == {"A-did-B", "C", "D", "E-did-E", "F", "G", "H-no-account-did-H", "H-did-H-elsewhere",
                      "no-sector", "no-occupation"}


@pytest.mark.django_db
def test_the_stranded_check_sends_the_same_few_queries_whatever_the_number_of_workers(
        django_assert_max_num_queries):
    world = _sectors_world()
    _add_workers(world, "")
    with CaptureQueriesContext(connection) as few:
        selectors.stranded_workers(world[0])
    for batch in range(1, 8):
        _add_workers(world, f"-{batch}")
    with django_assert_max_num_queries(4):  # the candidates, open tasks, fallbacks, tasks had
        stranded = [row["pk"] for row in selectors.stranded_workers(world[0])]
    with CaptureQueriesContext(connection) as many:
        selectors.stranded_workers(world[0])
    assert len(many) == len(few)
    assert len(stranded) > 20 and stranded == _stranded_one_by_one(world[0])
