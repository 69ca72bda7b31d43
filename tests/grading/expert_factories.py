"""Builders for expert-workspace tests: experts, rubrics that satisfy the category rules, graded episodes."""

from __future__ import annotations

import hashlib

from django.core.files.base import ContentFile

from experts.models import ExpertProfile
from grading.models import Criterion, Rubric
from studyapp.models import Episode, EpisodeFile
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, SectorFactory, TaskFactory, UserFactory

# Five criteria whose points fit the four fixed categories (40 / 20 / 25 / 15).
FIVE = [
    ("correctness", 20.0, "critical", "Workbook total on the Summary sheet equals 1,234,567"),
    ("correctness", 20.0, "important", "Each of the 12 monthly rows shows revenue and cost"),
    ("completeness", 20.0, "important", "Deliverable includes the file summary.xlsx"),
    ("requirements", 25.0, "optional", "Summary sheet includes a chart of monthly revenue"),
    ("technical", 15.0, "pitfall", "Totals contain hard-coded numbers instead of formulas"),
]


def make_expert(*, username: str | None = None, sectors=(), active: bool = True) -> ExpertProfile:
    user = UserFactory(**({"username": username} if username else {}), roles=["expert"])
    profile = ExpertProfile.objects.create(user=user, is_active=active)
    profile.sectors.set(sectors)
    return profile


def make_rubric(task, *, status=Rubric.Status.APPROVED, origin=Rubric.Origin.AUTO, author=None,
                rows=FIVE, version: int | None = None) -> Rubric:
    if version is None:
        version = (task.rubrics.order_by("-version").values_list("version", flat=True).first() or 0) + 1
    rubric = Rubric.objects.create(task=task, version=version, status=status, origin=origin, author=author)
    for order, (category, points, label, text) in enumerate(rows):
        Criterion.objects.create(rubric=rubric, order=order, key=f"C{order + 1}", category=category, points=points,
                                 label=label, description=text)
    return rubric


def make_episode(*, task=None, sector=None, study=None, agent=None, status=Episode.Status.GRADED,
                 auto_score: float | None = 70.0, participant=None, **extra) -> Episode:
    if task is None:
        task = TaskFactory(sector=sector or SectorFactory())
    kwargs = {"task": task, "status": status, "auto_score": auto_score, **extra}
    if participant is not None:
        kwargs["participant"] = participant
    elif study is not None:
        kwargs["participant"] = ParticipantFactory(study=study)
    if agent is not None:
        kwargs["agent"] = agent
    episode = EpisodeFactory(**kwargs)
    if study is not None:
        task.studies.add(study)
    return episode


def add_deliverable(episode: Episode, name: str = "summary.csv", content: bytes = b"month,revenue\nJan,100\n"
                    ) -> EpisodeFile:
    stored = EpisodeFile(episode=episode, kind=EpisodeFile.Kind.DELIVERABLE, name=name, size=len(content),
                         sha256=hashlib.sha256(content).hexdigest(), content_type="text/csv")
    stored.file.save(name, ContentFile(content), save=False)
    stored.save()
    return stored


def agent(name: str = "Secret Agent X"):
    return AgentFactory(name=name, model_version="sx-9000")
