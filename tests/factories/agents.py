"""AI agents the participants work with."""

from __future__ import annotations

import factory

from studies import models as m


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Agent
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Agent {n}")
    slug = factory.Sequence(lambda n: f"agent-{n}")
    model_version = "model-1"
    setup_guide = "Install the agent, then run `agent --version`."
