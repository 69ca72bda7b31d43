"""The synergy service: which episodes it reads, how it codes them for the model, what it stores, and that a
planted boost per agent is recovered within its interval."""

from __future__ import annotations

import json

import pytest

from rating.services.synergy import study_synergy
from rating.synergy_episodes import synergy_episodes, synergy_fingerprint
from studies import models as m
from tests.factories.scenarios import make_participant, make_world
from tests.factories.synergy import planted_synergy_study

pytestmark = pytest.mark.django_db


def test_planted_boosts_are_recovered_within_their_intervals_and_the_result_is_json():
    planted = planted_synergy_study()
    result = study_synergy(planted.world.study)
    json.dumps(result)  # stored as a job result
    boosts = result["fit"]["boosts"]
    assert set(boosts) == set(planted.boosts)
    for name, truth in planted.boosts.items():
        assert boosts[name]["lower"] < truth < boosts[name]["upper"], (name, boosts[name], truth)
    assert result["n_solo"] == 2 * 60 and result["n_episodes"] == 5 * 60
    assert result["crossing"]["one_sided"] == []
    assert [w["pseudonym"] for w in result["workers"]][:2] == ["SYN-000", "SYN-001"]


def test_solo_episodes_with_ai_used_anyway_are_left_out_and_counted():
    planted = planted_synergy_study(workers=20, tasks=6)
    study = planted.world.study
    solo = m.Episode.objects.filter(study=study, condition="solo").order_by("pk")
    m.Episode.objects.filter(pk__in=list(solo.values_list("pk", flat=True)[:3])).update(used_ai_anyway=True)
    coded = synergy_episodes(study)
    assert coded.n_used_ai_anyway == 3 and int((coded.data.arm == 0).sum()) == 40 - 3
    assert coded.data.arm_labels[0] == "solo" and coded.agent_ids[0] is None


def test_skipped_gold_and_withdrawn_episodes_are_not_read():
    planted = planted_synergy_study(workers=10, tasks=6)
    study = planted.world.study
    before = synergy_episodes(study).data.n
    first = m.Episode.objects.filter(study=study).order_by("pk")
    m.Episode.objects.filter(pk=first[0].pk).update(status=m.Episode.Status.SKIPPED)
    m.Episode.objects.filter(pk=first[1].pk).update(is_gold=True)
    withdrawn = first[10].participant
    m.Participant.objects.filter(pk=withdrawn.pk).update(status=m.Participant.Status.WITHDRAWN)
    left = m.Episode.objects.filter(participant=withdrawn).exclude(pk__in=[first[0].pk, first[1].pk]).count()
    assert synergy_episodes(study).data.n == before - 2 - left


def test_the_fingerprint_follows_the_episodes_and_is_none_without_a_solo_episode():
    world = make_world(tasks=3)
    participant = make_participant(world)
    m.Episode.objects.create(participant=participant, study=world.study, task=world.tasks[0], position=1,
                             agent=world.agents[0], status=m.Episode.Status.GRADED, score=50.0)
    assert synergy_fingerprint(world.study) is None
    solo = m.Episode.objects.create(participant=participant, study=world.study, task=world.tasks[1], position=2,
                                    condition="solo", agent=None, status=m.Episode.Status.GRADED, score=40.0)
    stamp = synergy_fingerprint(world.study)
    assert stamp is not None
    m.Episode.objects.filter(pk=solo.pk).update(score=41.0)
    assert synergy_fingerprint(world.study) != stamp


def test_a_study_without_solo_episodes_says_no_boost_can_be_estimated_and_gives_no_number():
    world = make_world(tasks=3)
    for i in range(3):
        participant = make_participant(world)
        for position, task in enumerate(world.tasks[:2], start=1):
            m.Episode.objects.create(participant=participant, study=world.study, task=task, position=position,
                                     agent=world.agents[position % 3], status=m.Episode.Status.GRADED,
                                     score=50.0 + i + position)
    result = study_synergy(world.study)
    assert result["fit"]["boosts"] == {}
    assert "no episode was done without an agent" in result["not_identifiable"]["boost"]
