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
