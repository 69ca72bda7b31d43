"""factory_boy factories for the study domain, shared by every test package."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from studyapp import models as m
from studyapp.roles import grant_role


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw-correct-horse")

    @factory.post_generation
    def roles(self, create: bool, extracted, **kwargs) -> None:  # noqa: ARG002
        for role in extracted or ():
            grant_role(self, role)


class SectorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Sector
        django_get_or_create = ("code",)

    code = factory.Sequence(lambda n: f"sector-{n}")
    name = factory.Sequence(lambda n: f"Sector {n}")


class OccupationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Occupation
        django_get_or_create = ("soc_code",)

    soc_code = factory.Sequence(lambda n: f"99-{n:04d}.00")
    title = factory.Sequence(lambda n: f"Occupation {n}")
    sector = factory.SubFactory(SectorFactory)


class StudyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Study
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Study {n}")
    slug = factory.Sequence(lambda n: f"study-{n}")
    status = m.Study.Status.RECRUITING


class ConsentVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ConsentVersion

    study = factory.SubFactory(StudyFactory)
    version = 1
    text = "You agree to take part. Deliverables are sent to OpenAI and Anthropic for grading."
    llm_providers = factory.LazyFunction(lambda: ["openai", "anthropic"])


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Agent
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Agent {n}")
    slug = factory.Sequence(lambda n: f"agent-{n}")
    model_version = "model-1"
    setup_guide = "Install the agent, then run `agent --version`."


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.TaskInstance

    title = factory.Sequence(lambda n: f"Task {n}")
    prompt = "Prepare the quarterly summary described in the attached workbook."
    sector = factory.SubFactory(SectorFactory)
    expected_deliverables = factory.LazyFunction(lambda: ["summary.xlsx"])
    hidden_info = "GOLD: the correct total is 1,234,567."

    @factory.post_generation
    def studies(self, create: bool, extracted, **kwargs) -> None:  # noqa: ARG002
        for study in extracted or ():
            self.studies.add(study)


class ParticipantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Participant

    study = factory.SubFactory(StudyFactory)
    user = factory.SubFactory(UserFactory, roles=["worker"])
    status = m.Participant.Status.WORKING
    occupation = factory.SubFactory(OccupationFactory)
    years_experience = 5


class EpisodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Episode

    participant = factory.SubFactory(ParticipantFactory)
    study = factory.LazyAttribute(lambda e: e.participant.study)
    agent = factory.SubFactory(AgentFactory)
    task = factory.SubFactory(TaskFactory)
    position = factory.Sequence(lambda n: n + 1)
