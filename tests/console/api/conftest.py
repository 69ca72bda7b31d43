"""A small study world seen through the API by each role, and clients signed in as each role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.base import ContentFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from experts import models as x
from grading import models as g
from rating.models import EntityRating
from studies import models as m
from tests.factories import (
    AgentFactory,
    EpisodeFactory,
    OccupationFactory,
    ParticipantFactory,
    SectorFactory,
    StudyFactory,
    TaskFactory,
    UserFactory,
)
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import ExpertAssignmentFactory, ExpertGradeFactory, make_expert
from tests.factories.grading import JudgeRunFactory, make_rubric
from tests.factories.jobs import BackgroundJobFactory
from tests.factories.rating import EntityRatingFactory, RatingSnapshotFactory
from tests.factories.tasks import TaskFileFactory


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Throttle counters live in the cache; each test starts with none so permission checks are not 429s."""
    cache.clear()
    yield
    cache.clear()


@dataclass
class World:
    study: m.Study
    other_study: m.Study
    sector: m.Sector
    occupation: m.Occupation
    agent: m.Agent
    task: m.TaskInstance
    other_task: m.TaskInstance
    reference_file: m.TaskFile
    hidden_file: m.TaskFile
    staff: Any
    worker: Any
    other_worker: Any
    expert: Any
    other_expert: Any
    participant: m.Participant
    other_participant: m.Participant
    episode: m.Episode
    other_episode: m.Episode
    deliverable: m.EpisodeFile
    log_file: m.EpisodeFile
    judge_run: g.JudgeRun
    expert_grade: x.ExpertGrade
    other_grade: x.ExpertGrade
    export_job: m.BackgroundJob
    stability_job: m.BackgroundJob


@pytest.fixture
def world(db) -> World:
    sector = SectorFactory(code="finance", name="Finance and Insurance")
    occupation = OccupationFactory(soc_code="13-2011.00", title="Accountants and Auditors", sector=sector)
    study = StudyFactory(slug="alpha", name="Alpha study")
    other_study = StudyFactory(slug="beta", name="Beta study")
    agent = AgentFactory(slug="claude-code", name="Claude Code")
    agent.studies.add(study)
    task = TaskFactory(title="Quarterly summary", sector=sector, studies=[study])
    task.occupations.add(occupation)
    other_task = TaskFactory(title="Audit memo", sector=sector, studies=[study])
    reference_file = TaskFileFactory(task=task, name="ledger.csv", content=b"account,amount\ncash,10\n")
    hidden_file = TaskFileFactory(task=task, kind=m.TaskFile.Kind.HIDDEN, name="gold.txt",
                                  content=b"GOLD: the total is 10\n")
    TaskFileFactory(task=other_task, name="memo-brief.txt", content=b"write a memo\n")

    staff = UserFactory(username="staffer", roles=["staff"])
    worker = UserFactory(username="worker1", roles=["worker"])
    other_worker = UserFactory(username="worker2", roles=["worker"])
    participant = ParticipantFactory(study=study, user=worker, occupation=occupation)
    other_participant = ParticipantFactory(study=study, user=other_worker, occupation=occupation)
    episode = EpisodeFactory(participant=participant, agent=agent, task=task, position=1,
                             status=m.Episode.Status.GRADED, score=72.5, auto_score=72.5,
                             score_source=m.Episode.ScoreSource.AUTO, grading_note="judges agreed")
    other_episode = EpisodeFactory(participant=other_participant, agent=agent, task=other_task, position=1,
                                   status=m.Episode.Status.SUBMITTED)
    deliverable = EpisodeFileFactory(episode=episode, name="summary.txt", content=b"total: 10\n")
    log_file = EpisodeFileFactory(episode=episode, kind=m.EpisodeFile.Kind.LOG, name="session.log",
                                  content=b"> agent run\n")

    criterion = make_rubric(task, rows=[("correctness", 40.0, "", "The total matches the workbook.")]).criteria.get()
    judge_run = JudgeRunFactory(episode=episode, rubric=criterion.rubric)
    g.CriterionScore.objects.create(judge_run=judge_run, criterion=criterion, earned=30.0, reason="close")

    expert_profile = make_expert(username="expert1")
    other_profile = make_expert(username="expert2")
    assignment = ExpertAssignmentFactory(episode=episode, expert=expert_profile)
    expert_grade = ExpertGradeFactory(assignment=assignment, rubric=criterion.rubric)
    x.ExpertCriterionGrade.objects.create(grade=expert_grade, criterion=criterion, verdict="pass")
    other_assignment = ExpertAssignmentFactory(episode=other_episode, expert=other_profile)
    other_rubric = make_rubric(other_task, rows=[("correctness", 40.0, "", "The total matches the workbook.")])
    other_grade = ExpertGradeFactory(assignment=other_assignment, rubric=other_rubric)

    snapshot = RatingSnapshotFactory(study=study, version=3)
    EntityRatingFactory(snapshot=snapshot, entity_kind=EntityRating.Kind.AGENT, entity_id=agent.pk,
                        label=agent.name, rank=1)
    EntityRatingFactory(snapshot=snapshot, entity_kind=EntityRating.Kind.HUMAN, entity_id=participant.pk,
                        label=participant.pseudonym, mu=5.0, conservative=2.0, rank=1)
    stability_job = BackgroundJobFactory(kind="stability", study=study,
                                         result={"bootstrap": {"rounds": 100}, "agents": [agent.name]})
    export_job = BackgroundJobFactory(kind="export", study=study, requested_by=staff,
                                      result={"file_name": "alpha-export.zip", "include_pii": False})
    export_job.file.save("alpha-export.zip", ContentFile(b"PK\x05\x06" + b"\x00" * 18))
    return World(
        study=study, other_study=other_study, sector=sector, occupation=occupation, agent=agent, task=task,
        other_task=other_task, reference_file=reference_file, hidden_file=hidden_file, staff=staff, worker=worker,
        other_worker=other_worker, expert=expert_profile.user, other_expert=other_profile.user,
        participant=participant, other_participant=other_participant, episode=episode, other_episode=other_episode,
        deliverable=deliverable, log_file=log_file, judge_run=judge_run, expert_grade=expert_grade,
        other_grade=other_grade, export_job=export_job, stability_job=stability_job,
    )


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user=user)
    return client


@pytest.fixture
def staff_client(world) -> APIClient:
    """A staff client authenticated the way scripts are: with a token header."""
    token, _ = Token.objects.get_or_create(user=world.staff)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
