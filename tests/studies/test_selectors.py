"""Worker-journey reads: which occupations a study can serve, and the one tally of task progress."""

from __future__ import annotations

import pytest

from studies import models as m
from studies.selectors import journey_state, occupation_search, occupations_offered, sector_reach
from studies.services.payments import payment_record_task
from tests.factories import EpisodeFactory, OccupationFactory, SectorFactory
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


def test_an_occupation_whose_sector_has_no_task_is_not_offered_until_a_fallback_reaches_one():
    world = make_world(tasks=3)
    lonely = SectorFactory(code="soc-19", name="Life, physical and social science")
    economists = OccupationFactory(soc_code="19-3011.00", title="Economists", sector=lonely)
    assert economists not in occupations_offered(world.study)
    assert occupation_search("econom", study=world.study) == []
    assert [o.title for o in occupation_search("econom")] == ["Economists"]  # without a study: the whole list

    m.SectorFallback.objects.create(study=world.study, from_sector=lonely, to_sector=world.sector, priority=1)
    assert economists in occupations_offered(world.study)
    [found] = occupation_search("econom", study=world.study)
    assert found.reach == 3


def test_full_tasks_do_not_count_towards_an_occupations_reach():
    world = make_world(tasks=2, capacity=1)
    EpisodeFactory(participant=make_participant(world), task=world.tasks[0], agent=world.agents[0], position=1,
                   status=m.Episode.Status.SUBMITTED)
    assert sector_reach(world.study) == {world.sector.pk: 1}
    EpisodeFactory(participant=make_participant(world), task=world.tasks[1], agent=world.agents[0], position=1,
                   status=m.Episode.Status.SKIPPED)
    assert sector_reach(world.study) == {world.sector.pk: 1}, "a skipped episode frees its place"
    EpisodeFactory(participant=make_participant(world), task=world.tasks[1], agent=world.agents[0], position=1,
                   status=m.Episode.Status.IN_PROGRESS)
    assert sector_reach(world.study) == {}
    assert not occupations_offered(world.study).exists()


def test_after_a_skip_the_tally_counts_submitted_skipped_and_paid_separately():
    world = make_world(tasks=5)
    participant = make_participant(world)
    for position, status in enumerate([m.Episode.Status.SUBMITTED, m.Episode.Status.SKIPPED,
                                       m.Episode.Status.GRADED], start=1):
        episode = EpisodeFactory(participant=participant, task=world.tasks[position], agent=world.agents[0],
                                 position=position, status=status)
        if status != m.Episode.Status.SKIPPED:
            payment_record_task(episode=episode)
    state = journey_state(participant)
    assert (state.submitted_count, state.skipped_count, state.paid_count) == (2, 1, 2)
    assert state.tasks_summary == "2 submitted, 1 skipped of 5"
    tasks_row = next(row for row in state.steps() if row["step"] == "task")
    assert tasks_row["label"] == "Tasks (2 submitted, 1 skipped of 5)"
    assert state.position == 4
