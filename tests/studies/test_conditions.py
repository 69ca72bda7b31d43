"""The solo condition: which of a worker's tasks are done alone, the order of conditions drawn per worker and
stored on every episode, crossing of tasks between the two conditions, and nothing drawn without solo tasks."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pairing.services import episode_assign
from studies import models as m
from studies.conditions import condition_draw, condition_of_next, crossing_summary
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db

SOLO, AGENT = m.Episode.Condition.SOLO, m.Episode.Condition.WITH_AGENT


def _session(participant: m.Participant, n: int, *, seed: int | None = None) -> list[m.Episode]:
    episodes = []
    for position in range(1, n + 1):
        episode = episode_assign(participant=participant, position=position,
                                 seed=None if seed is None else seed + position)
        m.Episode.objects.filter(pk=episode.pk).update(status=m.Episode.Status.SUBMITTED)
        episodes.append(episode)
    return episodes


@pytest.mark.parametrize(("order", "expected"), [
    ("solo_first", [SOLO, SOLO, AGENT, AGENT, AGENT]),
    ("agent_first", [AGENT, AGENT, AGENT, SOLO, SOLO]),
])
def test_the_order_puts_the_solo_tasks_first_or_last(order, expected):
    got, solo_done, agent_done = [], 0, 0
    for _ in range(5):
        c = condition_of_next(solo_total=2, session_total=5, order=order, solo_done=solo_done, agent_done=agent_done)
        got.append(c)
        solo_done += c == SOLO
        agent_done += c == AGENT
    assert got == expected


def test_a_study_without_solo_tasks_draws_nothing_and_pairs_every_task_with_an_agent():
    world = make_world(tasks=6, capacity=5)
    participant = make_participant(world)
    rng = random.Random(7)
    state = rng.getstate()
    draw = condition_draw(participant=participant, rng=rng)
    assert (draw.condition, draw.order, draw.order_probability) == (AGENT, "", None)
    assert rng.getstate() == state, "no random number may be spent: seeds replay the pairings they always gave"
    episodes = _session(participant, 5)
    assert all(e.condition == AGENT and e.agent_id is not None and e.condition_order == "" for e in episodes)
    assert all(e.condition_order_probability is None for e in episodes)


def test_solo_tasks_have_no_agent_and_every_episode_stores_the_fixed_order_with_probability_one():
    world = make_world(tasks=8, capacity=5, solo_tasks_per_session=2, condition_order="solo_first")
    episodes = _session(make_participant(world), 5)
    assert [e.condition for e in episodes] == [SOLO, SOLO, AGENT, AGENT, AGENT]
    assert [e.agent_id is None for e in episodes] == [True, True, False, False, False]
    assert {(e.condition_order, e.condition_order_probability) for e in episodes} == {("solo_first", 1.0)}
    assert episodes[0].design_mode is None and episodes[0].assignment_probability is None
    assert len({e.task_id for e in episodes}) == 5


def test_counterbalancing_draws_one_order_per_worker_with_probability_one_half():
    world = make_world(tasks=10, capacity=40, solo_tasks_per_session=2, condition_order="counterbalanced")
    orders = Counter()
    for i in range(16):
        episodes = _session(make_participant(world), 5, seed=1000 * i)
        drawn = {(e.condition_order, e.condition_order_probability) for e in episodes}
        assert len(drawn) == 1, "one worker keeps one order"
        order, probability = drawn.pop()
        assert probability == 0.5
        orders[order] += 1
        solo_positions = [e.position for e in episodes if e.condition == SOLO]
        assert solo_positions == ([1, 2] if order == "solo_first" else [4, 5])
    assert set(orders) == {"solo_first", "agent_first"}, "both orders occur"


def test_a_skipped_solo_task_is_replaced_by_another_solo_task():
    world = make_world(tasks=8, capacity=5, solo_tasks_per_session=2, condition_order="solo_first",
                       post_survey_gate=m.Study.PostSurveyGate.ALL_SUBMITTED)
    participant = make_participant(world)
    first = episode_assign(participant=participant, position=1)
    m.Episode.objects.filter(pk=first.pk).update(status=m.Episode.Status.SKIPPED)
    conditions = [first.condition] + [e.condition for e in _session_from(participant, 2, 6)]
    assert conditions == [SOLO, SOLO, SOLO, AGENT, AGENT, AGENT]


def _session_from(participant, start, end):
    out = []
    for position in range(start, end + 1):
        episode = episode_assign(participant=participant, position=position)
        m.Episode.objects.filter(pk=episode.pk).update(status=m.Episode.Status.SUBMITTED)
        out.append(episode)
    return out


def test_task_choice_crosses_every_task_between_the_conditions():
    # Four tasks, two solo tasks of four per worker: after a few workers every task was done both ways.
    world = make_world(tasks=4, capacity=40, solo_tasks_per_session=2, tasks_per_session=4,
                       condition_order="counterbalanced")
    for i in range(4):
        _session(make_participant(world), 4, seed=77 * i)
    summary = crossing_summary(study=world.study)
    assert summary["tasks_seen"] == 4 and summary["tasks_crossed"] == 4 and summary["one_sided"] == []


def test_the_crossing_summary_names_tasks_seen_in_one_condition_only():
    world = make_world(tasks=3, capacity=40, solo_tasks_per_session=1, tasks_per_session=3,
                       condition_order="solo_first")
    episodes = _session(make_participant(world), 3)
    summary = crossing_summary(study=world.study)
    assert summary["enabled"] and summary["tasks_seen"] == 3 and summary["tasks_crossed"] == 0
    solo_task = next(e.task_id for e in episodes if e.condition == SOLO)
    assert {t["task_id"]: (t["solo"], t["with_agent"]) for t in summary["one_sided"]}[solo_task] == (1, 0)
    assert len(summary["one_sided"]) == 3


def test_a_study_refuses_as_many_solo_tasks_as_tasks_per_session():
    from django.core.exceptions import ValidationError
    world = make_world(tasks=2)
    world.study.solo_tasks_per_session = world.study.tasks_per_session
    with pytest.raises(ValidationError, match="At least one task per session"):
        world.study.full_clean()


@pytest.mark.parametrize("order", ["solo_first", "agent_first"])
def test_a_skip_that_uses_up_its_place_keeps_the_solo_tasks_in_their_positions(order):
    # The default gate: a skipped task is not replaced, so it counts where it stood and both orders keep two solo
    # tasks in a session of five (a skipped agent task under "agent first" does not cost a solo task).
    world = make_world(tasks=8, capacity=5, solo_tasks_per_session=2, condition_order=order)
    participant = make_participant(world)
    conditions = []
    for position in range(1, 6):
        episode = episode_assign(participant=participant, position=position)
        skipped = episode.condition == AGENT and not any(c == AGENT for c in conditions)
        status = m.Episode.Status.SKIPPED if skipped else m.Episode.Status.SUBMITTED
        m.Episode.objects.filter(pk=episode.pk).update(status=status)
        conditions.append(episode.condition)
    assert conditions == ([SOLO, SOLO, AGENT, AGENT, AGENT] if order == "solo_first"
                          else [AGENT, AGENT, AGENT, SOLO, SOLO])
