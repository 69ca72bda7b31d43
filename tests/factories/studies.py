"""Studies and their consent versions."""

from __future__ import annotations

import factory

from studies import models as m


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
