"""Factories for the objects the API exposes beyond the shared study factories."""

from __future__ import annotations

import hashlib

import factory
from django.core.files.base import ContentFile

from experts import models as x
from grading import models as g
from rating import models as r
from studyapp import models as m
from tests.factories import EpisodeFactory, TaskFactory, UserFactory


class StoredFileFactory(factory.django.DjangoModelFactory):
    """Store `content` in private storage and record its size and hash, as the upload services do."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class, *args, content: bytes = b"", **kwargs):
        record = model_class(*args, **kwargs)
        record.file.save(record.name, ContentFile(content), save=False)
        record.size = len(content)
        record.sha256 = hashlib.sha256(content).hexdigest()
        record.save()
        return record


class TaskFileFactory(StoredFileFactory):
    class Meta:
        model = m.TaskFile

    task = factory.SubFactory(TaskFactory)
    kind = m.TaskFile.Kind.REFERENCE
    name = factory.Sequence(lambda n: f"reference-{n}.csv")
    content = b"region,total\nnorth,10\n"


class EpisodeFileFactory(StoredFileFactory):
    class Meta:
        model = m.EpisodeFile

    episode = factory.SubFactory(EpisodeFactory)
    kind = m.EpisodeFile.Kind.DELIVERABLE
    name = factory.Sequence(lambda n: f"deliverable-{n}.txt")
    content = b"the finished deliverable\n"


class RubricFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = g.Rubric

    task = factory.SubFactory(TaskFactory)
    version = 1
    status = g.Rubric.Status.APPROVED


class CriterionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = g.Criterion

    rubric = factory.SubFactory(RubricFactory)
    key = factory.Sequence(lambda n: f"C{n}")
    category = g.Criterion.Category.CORRECTNESS
    description = "The total matches the workbook."
    points = 40.0


class JudgeRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = g.JudgeRun

    episode = factory.SubFactory(EpisodeFactory)
    rubric = factory.SubFactory(RubricFactory, task=factory.SelfAttribute("..episode.task"))
    provider = "openai"
    model = "gpt-4.1"
    prompt_version = "v1"
    status = g.JudgeRun.Status.SUCCEEDED
    is_current = True
    total = 72.5
    raw_response = '{"scores": []}'


class ExpertProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = x.ExpertProfile

    user = factory.SubFactory(UserFactory, roles=["expert"])


class ExpertAssignmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = x.ExpertAssignment

    episode = factory.SubFactory(EpisodeFactory)
    expert = factory.SubFactory(ExpertProfileFactory)


class ExpertGradeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = x.ExpertGrade

    assignment = factory.SubFactory(ExpertAssignmentFactory)
    episode = factory.SelfAttribute("assignment.episode")
    expert = factory.SelfAttribute("assignment.expert")
    rubric = factory.SubFactory(RubricFactory, task=factory.SelfAttribute("..assignment.episode.task"))
    status = x.ExpertGrade.Status.SUBMITTED
    overall = x.ExpertGrade.Judgement.ACCEPT
    score = 80.0


class RatingSnapshotFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = r.RatingSnapshot

    version = factory.Sequence(lambda n: n + 1)
    n_observations = 1
    config = factory.LazyFunction(lambda: {"mu0": 0.0, "sigma0": 1.0, "beta": 1.0, "k": 3.0})


class EntityRatingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = r.EntityRating

    snapshot = factory.SubFactory(RatingSnapshotFactory)
    entity_kind = r.EntityRating.Kind.AGENT
    entity_id = factory.Sequence(lambda n: n + 1)
    label = factory.Sequence(lambda n: f"Agent {n}")
    mu = 30.0
    sigma = 1.0
    conservative = 27.0
    n = 1
    rank = 1


class BackgroundJobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.BackgroundJob

    kind = "export"
    status = m.BackgroundJob.Status.DONE
