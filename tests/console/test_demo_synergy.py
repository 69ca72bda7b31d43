"""The demo's solo condition: every simulated worker also does two tasks alone, counterbalanced, and the
synergy model recovers each agent's planted boost within its interval, while the agent episodes and the
CollabSkill leaderboard stay as the demo always drew them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.core.management import call_command

from console.demo import SOLO_TASKS, planted_boosts
from rating.models import Observation
from rating.services.synergy import study_synergy
from studies.models import Episode, Study

DATA = Path(__file__).parent / "data"


def agent_episode_digest(study: Study) -> str:
    rows = sorted(Episode.objects.filter(study=study, is_simulated=True, condition=Episode.Condition.WITH_AGENT)
                  .values_list("participant__pseudonym", "task__uuid", "agent__slug", "auto_score"))
    return hashlib.sha256(repr([(p, str(t), a, s) for p, t, a, s in rows]).encode()).hexdigest()

pytestmark = pytest.mark.django_db


def test_the_demo_plants_a_boost_per_agent_that_the_synergy_model_recovers():
    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    # The study's own settings carry the condition its simulated cohort has: a newcomer sees it and does it.
    assert (study.solo_tasks_per_session, study.condition_order) == (SOLO_TASKS, Study.ConditionOrder.COUNTERBALANCED)
    solo = Episode.objects.filter(study=study, condition=Episode.Condition.SOLO)
    assert solo.exists() and not solo.filter(agent__isnull=False).exists()
    assert set(solo.values_list("is_simulated", flat=True)) == {True}
    assert set(Episode.objects.filter(study=study, is_simulated=True).values_list("condition_order", flat=True)) \
        == {"solo_first", "agent_first"}
    assert not Observation.objects.filter(episode__in=solo).exists(), "solo episodes never count as an agent"
    result = study_synergy(study, test=False)  # the boosts only: the θ = κ test has its own tests
    boosts = result["fit"]["boosts"]
    truth = planted_boosts(study)
    assert set(boosts) == set(truth) and len(truth) == 5
    for name, value in truth.items():
        assert boosts[name]["lower"] < value < boosts[name]["upper"], (name, boosts[name], value)
    assert result["crossing"]["one_sided"] == []


def test_the_demo_agent_episodes_and_their_scores_are_drawn_as_before():
    """The digest of every agent episode's (participant, task, agent, score) as the demo drew them before the solo
    condition was added (tests/console/data/demo_agent_episodes.sha256)."""
    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    assert agent_episode_digest(study) == (DATA / "demo_agent_episodes.sha256").read_text().strip()
