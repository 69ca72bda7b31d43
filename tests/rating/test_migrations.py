"""The grade ledger's data migration: grades the platform already held become grade rows."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from experts.models import ExpertAssignment
from rating.models import GradeObservation
from studies.models import Episode, Participant
from tests.factories import AgentFactory, EpisodeFactory, StudyFactory
from tests.factories.experts import ExpertAssignmentFactory, ExpertGradeFactory
from tests.factories.grading import JudgeRunFactory

pytestmark = pytest.mark.django_db

migration = importlib.import_module("rating.migrations.0006_grade_observations")


def test_existing_judge_runs_and_expert_grades_become_grade_rows_that_follow_their_episode() -> None:
    study = StudyFactory(judges=[{"provider": "anthropic", "model": "claude-sonnet-4-6", "family": "anthropic-lab"}])
    agent = AgentFactory(family="anthropic")
    counted = EpisodeFactory(study=study, agent=agent, status=Episode.Status.GRADED, auto_score=75.0)
    withdrawn = EpisodeFactory(study=study, agent=agent, status=Episode.Status.GRADED, auto_score=60.0)
    Participant.objects.filter(pk=withdrawn.participant_id).update(status=Participant.Status.WITHDRAWN)
    JudgeRunFactory(episode=counted, provider="openai", model="gpt-4.1", total=70.0)
    JudgeRunFactory(episode=counted, provider="anthropic", model="claude-sonnet-4-6", total=80.0)
    JudgeRunFactory(episode=counted, provider="openai", model="gpt-4o", total=10.0, is_current=False)  # old panel
    JudgeRunFactory(episode=withdrawn, provider="openai", model="gpt-4.1", total=60.0)
    expert_grade = ExpertGradeFactory(assignment=ExpertAssignmentFactory(episode=counted), score=90.0)
    ExpertGradeFactory(assignment=ExpertAssignmentFactory(episode=counted, role=ExpertAssignment.Role.GOLD),
                       score=5.0)
    GradeObservation.objects.all().delete()  # as before the migration

    migration.record_existing_grades(apps, None)

    rows = {(g.episode_id, g.grader): (g.grader_kind, g.grader_family, g.agent_family, g.y, g.active)
            for g in GradeObservation.objects.all()}
    assert rows == {
        (counted.pk, "openai/gpt-4.1"): ("judge", "openai", "anthropic", 70.0, True),
        (counted.pk, "anthropic/claude-sonnet-4-6"): ("judge", "anthropic-lab", "anthropic", 80.0, True),
        (counted.pk, f"expert:{expert_grade.expert_id}"): ("expert", "", "anthropic", 90.0, True),
        (withdrawn.pk, "openai/gpt-4.1"): ("judge", "openai", "anthropic", 60.0, False),
    }
    assert GradeObservation.objects.get(episode=withdrawn).retraction_reason == "participant withdrawn"
    # Running it again adds nothing.
    migration.record_existing_grades(apps, None)
    assert GradeObservation.objects.count() == 4
