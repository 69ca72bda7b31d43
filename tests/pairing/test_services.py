"""The study's pairing design: modes, stored probabilities, the floor, seeds, the audited switch."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.core.cache import cache

from pairing.services import DesignError, agent_pair, design_mode_set, episode_assign, posterior_cache_key
from studies import models as m
from tests.factories import UserFactory
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


def _finish(episode: m.Episode) -> None:
    m.Episode.objects.filter(pk=episode.pk).update(status=m.Episode.Status.SUBMITTED)


def _least_used_first(participant: m.Participant, rng: random.Random) -> int:
    """The pairing rule as it was before design modes existed, written out independently."""
    agent_ids = sorted(a.pk for a in participant.study.agents.filter(is_active=True))
    used = Counter(m.Episode.objects.filter(participant=participant).values_list("agent_id", flat=True))
    counts = Counter(m.Episode.objects.filter(study=participant.study).exclude(status=m.Episode.Status.SKIPPED)
                     .values_list("agent_id", flat=True))
    keyed = [(used.get(pk, 0), counts.get(pk, 0), rng.random(), pk) for pk in agent_ids]
    return min(keyed)[3]


def test_new_studies_start_uniform():
    world = make_world()
    assert world.study.design_mode == m.Study.DesignMode.UNIFORM


def test_balanced_mode_replays_the_earlier_least_used_first_pairing_for_the_same_seed():
    world = make_world(tasks=30, agents=4, capacity=30, design_mode=m.Study.DesignMode.BALANCED)
    for worker in range(6):
        participant = make_participant(world)
        for position in range(1, 5):
            seed = 1000 * worker + position
            rng = random.Random(seed)
            expected = _least_used_first(participant, rng)
            pairing = agent_pair(participant=participant, rng=random.Random(seed))
            assert pairing.agent.pk == expected
            _finish(episode_assign(participant=participant, position=position))


def test_uniform_mode_draws_the_same_random_numbers_and_agrees_with_balanced_when_counts_are_even():
    world = make_world(tasks=10, agents=4, capacity=10)
    participant = make_participant(world)
    for seed in range(25):
        uniform = agent_pair(participant=participant, rng=random.Random(seed))
        rng = random.Random(seed)
        assert uniform.agent.pk == _least_used_first(participant, rng)   # no episodes yet: counts all equal
        assert uniform.probability == pytest.approx(1 / 4)
        assert uniform.design_mode == "uniform"


def test_uniform_mode_is_random_over_unused_agents_and_stores_the_probability():
    world = make_world(tasks=40, agents=4, capacity=40)
    seen = Counter()
    for _ in range(10):
        participant = make_participant(world)
        episodes = []
        for position in range(1, 4):
            episode = episode_assign(participant=participant, position=position)
            _finish(episode)
            episodes.append(episode)
        assert len({e.agent_id for e in episodes}) == 3
        assert [e.assignment_probability for e in episodes] == pytest.approx([1 / 4, 1 / 3, 1 / 2])
        assert {e.design_mode for e in episodes} == {"uniform"}
        seen[episodes[0].agent_id] += 1
    assert len(seen) >= 2, "the first agent is drawn at random, not least-used-first"


def test_adaptive_mode_keeps_the_floor_stores_probabilities_and_is_reproducible_with_a_seed():
    world = make_world(tasks=12, agents=5, capacity=12, design_mode=m.Study.DesignMode.ADAPTIVE,
                       design_floor=0.25, design_repeat_limit=2)
    agent_ids = sorted(a.pk for a in world.agents)
    # A cached posterior in which agents 0 and 1 are close contenders and the others are far behind.
    cov = [[4.0 if i == j else 0.0 for j in range(5)] for i in range(5)]
    cache.set(posterior_cache_key(world.study.pk), {
        "version": 0, "n_observations": 100, "agent_ids": [str(pk) for pk in agent_ids],
        "mu": [60.0, 59.5, 40.0, 39.0, 38.0], "cov": cov, "human_sd": 8.0, "noise_sd": 15.0, "agent_sd": 3.0,
    })
    try:
        participant = make_participant(world)
        first = agent_pair(participant=participant, rng=random.Random(7))
        again = agent_pair(participant=participant, rng=random.Random(7))
        assert (first.agent.pk, first.probability) == (again.agent.pk, again.probability)
        probabilities = {}
        for seed in range(60):
            pairing = agent_pair(participant=participant, rng=random.Random(seed))
            probabilities[pairing.agent.pk] = pairing.probability
        assert set(probabilities) == set(agent_ids), "every agent keeps a real chance"
        assert min(probabilities.values()) >= 0.25 / 5 - 1e-12
        assert probabilities[agent_ids[0]] > probabilities[agent_ids[4]], "contenders are favoured"
        episode = episode_assign(participant=participant, position=1)
        assert episode.design_mode == "adaptive"
        assert episode.assignment_probability == pytest.approx(probabilities[episode.agent_id])
    finally:
        cache.delete(posterior_cache_key(world.study.pk))


def test_adaptive_mode_without_a_posterior_falls_back_to_the_planning_prior():
    world = make_world(tasks=6, agents=3, capacity=6, design_mode=m.Study.DesignMode.ADAPTIVE)
    cache.delete(posterior_cache_key(world.study.pk))
    episode = episode_assign(participant=make_participant(world), position=1)
    assert episode.assignment_probability == pytest.approx(1 / 3)


def test_switching_the_design_is_audited_and_bad_input_changes_nothing():
    world = make_world()
    staff = UserFactory(is_staff=True)
    design_mode_set(study=world.study, mode="adaptive", actor=staff, floor=0.3, note="pilot done")
    event = m.AuditEvent.objects.get(action="study.design_changed")
    assert event.before["design_mode"] == "uniform"
    assert event.after == {"design_mode": "adaptive", "design_floor": 0.3, "design_repeat_limit": 1}
    assert event.actor == staff and event.note == "pilot done"
    with pytest.raises(DesignError, match="Unknown design mode"):
        design_mode_set(study=world.study, mode="greedy", actor=staff)
    with pytest.raises(DesignError, match="floor"):
        design_mode_set(study=world.study, mode="uniform", actor=staff, floor=0.0)
    world.study.refresh_from_db()
    assert (world.study.design_mode, world.study.design_floor) == ("adaptive", 0.3)
    assert m.AuditEvent.objects.filter(action="study.design_changed").count() == 1


def test_a_staff_reassignment_is_marked_as_not_drawn_by_the_design():
    from studies.services import staff_actions

    world = make_world(tasks=4, agents=3)
    staff = UserFactory(is_staff=True)
    episode = episode_assign(participant=make_participant(world), position=1)
    assert episode.assignment_probability == pytest.approx(1 / 3)
    other = next(a for a in world.agents if a.pk != episode.agent_id)
    moved = staff_actions.episode_reassign(episode=episode, actor=staff, agent=other)
    moved.refresh_from_db()
    assert (moved.design_mode, moved.assignment_probability) == ("staff", None)
    event = m.AuditEvent.objects.get(action="staff.reassign_agent")
    assert event.before["assignment_probability"] == pytest.approx(1 / 3)


def test_the_admin_change_form_cannot_change_a_studys_design(client):
    from django.urls import reverse

    world = make_world()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get(reverse("admin:studyapp_study_change", args=[world.study.pk])).content.decode()
    assert 'name="design_mode"' not in page, "the audited design panel is the only way to switch"
    assert 'name="design_mode"' in client.get(reverse("admin:studyapp_study_add")).content.decode()
