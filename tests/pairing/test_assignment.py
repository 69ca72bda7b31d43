"""Task matching and agent pairing: sector, fallback, no repeats, coverage, capacity, balance, connectivity,
recorded seeds, and capacity under concurrent starts."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import close_old_connections, connection

from pairing.services import episode_assign
from studies import models as m
from studies.exceptions import NoAgentAvailable, NoTaskAvailable, StepNotAvailable
from studies.task_choice import task_available
from tests.factories import (
    AgentFactory,
    EpisodeFactory,
    OccupationFactory,
    SectorFactory,
    StudyFactory,
    TaskFactory,
    UserFactory,
)
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


def _finish(episode: m.Episode, status=m.Episode.Status.SUBMITTED) -> None:
    m.Episode.objects.filter(pk=episode.pk).update(status=status)


def _run_session(participant: m.Participant, n: int) -> list[m.Episode]:
    episodes = []
    for position in range(1, n + 1):
        episode = episode_assign(participant=participant, position=position)
        _finish(episode)
        episodes.append(episode)
    return episodes


def test_worker_gets_a_task_from_their_own_sector():
    world = make_world(tasks=3)
    other = SectorFactory(code="health", name="Health")
    for i in range(5):
        TaskFactory(title=f"health {i}", sector=other, studies=[world.study])
    participant = make_participant(world)
    episodes = _run_session(participant, 3)
    assert {e.task.sector_id for e in episodes} == {world.sector.pk}


def test_fallback_sectors_are_tried_in_priority_order_when_the_own_sector_is_empty():
    world = make_world(tasks=1)
    second, first = SectorFactory(code="second"), SectorFactory(code="first")
    TaskFactory(title="second-choice", sector=second, studies=[world.study])
    TaskFactory(title="first-choice", sector=first, studies=[world.study])
    m.SectorFallback.objects.create(study=world.study, from_sector=world.sector, to_sector=second, priority=2)
    m.SectorFallback.objects.create(study=world.study, from_sector=world.sector, to_sector=first, priority=1)
    participant = make_participant(world)
    titles = [e.task.title for e in _run_session(participant, 3)]
    assert titles[0].startswith("pilot task")
    assert titles[1:] == ["first-choice", "second-choice"]


def test_no_fitting_task_gives_a_clear_message_and_assigns_nothing():
    world = make_world(tasks=0)
    TaskFactory(title="elsewhere", sector=SectorFactory(code="elsewhere"), studies=[world.study])
    participant = make_participant(world)
    with pytest.raises(NoTaskAvailable, match="no task left that fits your occupation"):
        episode_assign(participant=participant, position=1)
    assert not m.Episode.objects.exists()
    assert task_available(participant=participant) is False


def test_a_worker_never_gets_a_task_they_already_did_even_in_another_study():
    world = make_world(tasks=6)
    user = UserFactory(roles=["worker"])
    earlier_study = StudyFactory(slug="earlier")
    earlier = make_participant(world, user=UserFactory(roles=["worker"]))
    earlier.study, earlier.user = earlier_study, user
    earlier.save()
    EpisodeFactory(participant=earlier, study=earlier_study, task=world.tasks[0], agent=world.agents[0], position=1)
    participant = make_participant(world, user=user)
    episodes = _run_session(participant, 5)
    tasks = [e.task_id for e in episodes]
    assert len(set(tasks)) == 5
    assert world.tasks[0].pk not in tasks


def test_least_covered_tasks_are_chosen_first():
    world = make_world(tasks=3, capacity=10)
    busy, half, fresh = world.tasks
    for i in range(2):
        EpisodeFactory(participant=make_participant(world), study=world.study, task=busy, agent=world.agents[0],
                       position=1, status=m.Episode.Status.SUBMITTED)
    EpisodeFactory(participant=make_participant(world), study=world.study, task=half, agent=world.agents[0],
                   position=1, status=m.Episode.Status.SUBMITTED)
    participant = make_participant(world)
    assert [e.task for e in _run_session(participant, 3)] == [fresh, half, busy]


def test_capacity_is_never_exceeded_and_a_skipped_episode_frees_its_place():
    world = make_world(tasks=1, capacity=2)
    first, second, third = (make_participant(world) for _ in range(3))
    skipped = episode_assign(participant=first, position=1)
    episode_assign(participant=second, position=1)
    with pytest.raises(NoTaskAvailable):
        episode_assign(participant=third, position=1)
    _finish(skipped, m.Episode.Status.SKIPPED)
    assert episode_assign(participant=third, position=1).task == world.tasks[0]


def test_pairing_prefers_agents_the_worker_has_not_used_yet():
    world = make_world(tasks=6, agents=3)
    participant = make_participant(world)
    agents = [e.agent_id for e in _run_session(participant, 5)]
    assert len(set(agents[:3])) == 3, "the first three tasks use three different agents"
    assert max(Counter(agents).values()) == 2


def test_pairing_is_balanced_across_the_study_in_balanced_mode():
    world = make_world(tasks=40, agents=4, capacity=50, design_mode=m.Study.DesignMode.BALANCED)
    for _ in range(24):
        _run_session(make_participant(world), 5)
    counts = Counter(m.Episode.objects.filter(study=world.study).values_list("agent_id", flat=True))
    assert set(counts) == {a.pk for a in world.agents}
    assert max(counts.values()) - min(counts.values()) <= 2, counts


def test_the_human_agent_graph_stays_connected():
    world = make_world(tasks=30, agents=5, capacity=50)
    for _ in range(12):
        _run_session(make_participant(world), 3)
    edges = list(m.Episode.objects.filter(study=world.study).values_list("agent_id", "participant_id"))
    parent: dict = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for agent_id, participant_id in edges:
        parent[find(("a", agent_id))] = find(("h", participant_id))
    roots = {find(node) for node in list(parent)}
    assert len(roots) == 1, "every agent and worker is linked through shared episodes"


def test_the_pairing_seed_is_recorded_and_replays_the_same_choice():
    world = make_world(tasks=10, agents=4, capacity=10)
    participant = make_participant(world)
    first = episode_assign(participant=participant, position=1)
    assert first.pairing_seed is not None
    choice = (first.task_id, first.agent_id)
    first.delete()
    replay = episode_assign(participant=participant, position=1, seed=first.pairing_seed)
    assert (replay.task_id, replay.agent_id) == choice
    draws = set()
    for _ in range(12):
        replay.delete()
        replay = episode_assign(participant=participant, position=1)
        draws.add((replay.task_id, replay.agent_id))
    assert len(draws) > 1, "unseeded draws break ties at random"


def test_reopening_a_position_returns_the_same_episode():
    world = make_world()
    participant = make_participant(world)
    first = episode_assign(participant=participant, position=1)
    assert episode_assign(participant=participant, position=1) == first
    assert m.Episode.objects.count() == 1


def test_tasks_are_taken_in_order_and_only_after_the_current_one_is_finished():
    world = make_world()
    participant = make_participant(world)
    with pytest.raises(StepNotAvailable, match="in order"):
        episode_assign(participant=participant, position=2)
    episode_assign(participant=participant, position=1)
    with pytest.raises(StepNotAvailable, match="finish"):
        episode_assign(participant=participant, position=2)
    with pytest.raises(StepNotAvailable):
        episode_assign(participant=participant, position=world.study.tasks_per_session + 1)


def test_participants_who_have_not_finished_the_pre_survey_get_no_task():
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    with pytest.raises(StepNotAvailable):
        episode_assign(participant=participant, position=1)


def test_inactive_tasks_and_agents_and_agents_of_other_studies_are_never_used():
    world = make_world(tasks=4, agents=2)
    m.TaskInstance.objects.filter(pk__in=[t.pk for t in world.tasks[:2]]).update(is_active=False)
    world.agents[0].is_active = False
    world.agents[0].save()
    AgentFactory(slug="not-in-study")  # active, but the study links its own agents
    participant = make_participant(world)
    episodes = _run_session(participant, 2)
    assert {e.task_id for e in episodes} == {t.pk for t in world.tasks[2:]}
    assert {e.agent_id for e in episodes} == {world.agents[1].pk}


def test_a_study_without_linked_agents_uses_every_active_agent():
    world = make_world(tasks=5, agents=0)
    loose = [AgentFactory(slug=f"loose-{i}") for i in range(2)]
    participant = make_participant(world)
    assert {e.agent_id for e in _run_session(participant, 2)} == {a.pk for a in loose}


def test_no_active_agent_gives_a_clear_message():
    world = make_world(tasks=2, agents=0)
    m.Agent.objects.update(is_active=False)
    with pytest.raises(NoAgentAvailable, match="No AI agent"):
        episode_assign(participant=make_participant(world), position=1)
    assert not m.Episode.objects.exists()


def _start_together(participants) -> list[str]:
    """Call episode_assign for every participant at once, each thread on its own database connection."""
    barrier = threading.Barrier(len(participants))
    outcomes: list[str] = []
    lock = threading.Lock()

    def start(participant):
        close_old_connections()
        try:
            barrier.wait(timeout=30)
            episode_assign(participant=participant, position=1)
            result = "assigned"
        except NoTaskAvailable:
            result = "full"
        except Exception as exc:  # pragma: no cover - reported by the callers' assertions
            result = f"error: {exc!r}"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=start, args=(p,)) for p in participants]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("capacity, tasks, workers", [(1, 1, 6), (2, 3, 10)])
def test_workers_starting_together_never_over_assign_a_task(capacity, tasks, workers):
    """Real concurrent transactions (threads with their own connections); PostgreSQL locks rows, SQLite
    serialises writers with BEGIN IMMEDIATE."""
    world = make_world(tasks=tasks, agents=2, capacity=capacity)
    outcomes = _start_together([make_participant(world) for _ in range(workers)])
    assert sorted(set(outcomes)) <= ["assigned", "full"], outcomes
    per_task = Counter(m.Episode.objects.filter(study=world.study).values_list("task_id", flat=True))
    assert all(n <= capacity for n in per_task.values()), per_task
    assert outcomes.count("assigned") == min(workers, capacity * tasks) == sum(per_task.values())


@pytest.mark.django_db(transaction=True)
def test_workers_whose_fallbacks_point_at_each_other_start_together_without_deadlock():
    """Both sectors full: every worker locks its own sector's tasks and then the other sector's."""
    world = make_world(tasks=2, agents=2, capacity=1)
    other_sector = SectorFactory(code="crossing", name="Crossing")
    other_occupation = OccupationFactory(soc_code="15-1252.00", title="Software Developers", sector=other_sector)
    crossing = [TaskFactory(title=f"crossing {i}", sector=other_sector, studies=[world.study]) for i in range(2)]
    m.SectorFallback.objects.create(study=world.study, from_sector=world.sector, to_sector=other_sector)
    m.SectorFallback.objects.create(study=world.study, from_sector=other_sector, to_sector=world.sector)
    for task in [*world.tasks, *crossing]:
        EpisodeFactory(participant=make_participant(world), study=world.study, task=task, agent=world.agents[0],
                       position=1, status=m.Episode.Status.SUBMITTED)
    people = [make_participant(world) for _ in range(4)]
    people += [make_participant(world, occupation=other_occupation) for _ in range(4)]
    outcomes = _start_together(people)
    assert outcomes == ["full"] * len(people), outcomes


def test_an_abandoned_episode_expires_after_the_study_limit_and_frees_its_place():
    from datetime import timedelta

    from django.utils import timezone

    from studies.services.episodes import episodes_expire_abandoned

    world = make_world(tasks=1, capacity=1, slug="expiry", abandon_after_hours=24)
    quiet = make_participant(world)
    episode = episode_assign(participant=quiet, position=1)
    other = make_participant(world)
    with pytest.raises(NoTaskAvailable):
        episode_assign(participant=other, position=1)

    assert episodes_expire_abandoned(now=timezone.now() + timedelta(hours=23)) == 0, "not yet"
    m.Participant.objects.filter(pk=quiet.pk).update(last_activity_at=timezone.now() + timedelta(hours=20))
    assert episodes_expire_abandoned(now=timezone.now() + timedelta(hours=30)) == 0, "recent activity counts"
    assert episodes_expire_abandoned(now=timezone.now() + timedelta(hours=50)) == 1
    episode.refresh_from_db()
    assert (episode.status, episode.skip_reason) == (m.Episode.Status.SKIPPED, m.Episode.SkipReason.ABANDONED)
    assert m.AuditEvent.objects.filter(action="episode.expire_abandoned", object_id=str(episode.pk)).exists()
    assert episode_assign(participant=other, position=1).task == world.tasks[0]
    m.Participant.objects.filter(pk=other.pk).update(last_activity_at=timezone.now() + timedelta(hours=45))
    assert episodes_expire_abandoned(now=timezone.now() + timedelta(hours=50)) == 0, "expired ones stay expired"
