"""Experts, their assignments and grades: the only test module that imports the expert models."""

from __future__ import annotations

import factory

from experts.models import ExpertAssignment, ExpertGrade, ExpertProfile
from tests.factories.episodes import EpisodeFactory
from tests.factories.grading import make_rubric
from tests.factories.users import UserFactory


def make_expert(*, username: str | None = None, sectors=(), active: bool = True) -> ExpertProfile:
    user = UserFactory(**({"username": username} if username else {}), roles=["expert"])
    profile = ExpertProfile.objects.create(user=user, is_active=active)
    profile.sectors.set(sectors)
    return profile


class ExpertAssignmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ExpertAssignment

    episode = factory.SubFactory(EpisodeFactory)
    expert = factory.LazyFunction(make_expert)


class ExpertGradeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ExpertGrade

    assignment = factory.SubFactory(ExpertAssignmentFactory)
    episode = factory.SelfAttribute("assignment.episode")
    expert = factory.SelfAttribute("assignment.expert")
    rubric = factory.LazyAttribute(lambda grade: make_rubric(grade.assignment.episode.task))
    status = ExpertGrade.Status.SUBMITTED
    overall = ExpertGrade.Judgement.ACCEPT
    score = 80.0


def make_solo_run(*, study, task, agent, content: bytes = b"the agent's own deliverable\n", name: str = "report.txt"):
    """A solo-agent baseline run with one deliverable file, attached through its service (no grading queued)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from grading.services.solo_runs import solo_run_attach

    return solo_run_attach(study=study, task=task, agent=agent, actor=None, grade=False,
                           files=[SimpleUploadedFile(name, content, content_type="text/plain")])


def make_comparison_world(*, study=None, task=None):
    """One task with three deliverables from three arms: a worker with an agent, a worker alone, the agent alone."""
    from studies.models import Episode
    from tests.factories import AgentFactory, SectorFactory, StudyFactory, TaskFactory
    from tests.factories.episodes import EpisodeFileFactory
    from tests.factories.participants import ParticipantFactory
    from tests.factories.scenarios import make_episode

    study = study or StudyFactory()
    task = task or TaskFactory(sector=SectorFactory())
    agent = AgentFactory(name="Claude Code")
    with_agent = make_episode(task=task, study=study, agent=agent, status=Episode.Status.GRADED, score=71.0)
    EpisodeFileFactory(episode=with_agent, name="memo.txt", content=b"Memo written with the agent.\n")
    alone = EpisodeFactory(task=task, participant=ParticipantFactory(study=study), agent=None,
                           condition=Episode.Condition.SOLO, status=Episode.Status.SUBMITTED)
    EpisodeFileFactory(episode=alone, name="memo.txt", content=b"Memo written by hand.\n")
    run = make_solo_run(study=study, task=task, agent=agent, content=b"Memo the agent wrote by itself.\n")
    return {"study": study, "task": task, "agent": agent, "with_agent": with_agent, "alone": alone, "run": run}
