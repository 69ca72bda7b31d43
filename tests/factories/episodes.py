"""Episodes (one participant, one agent, one task) and their deliverables and logs."""

from __future__ import annotations

import factory

from studies import models as m
from tests.factories.agents import AgentFactory
from tests.factories.files import StoredFileFactory
from tests.factories.participants import ParticipantFactory
from tests.factories.tasks import TaskFactory


class EpisodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Episode

    participant = factory.SubFactory(ParticipantFactory)
    study = factory.LazyAttribute(lambda e: e.participant.study)
    agent = factory.SubFactory(AgentFactory)
    task = factory.SubFactory(TaskFactory)
    position = factory.Sequence(lambda n: n + 1)


class EpisodeFileFactory(StoredFileFactory):
    """A deliverable (or, with `kind`, a log) of the episode; pass `content` for its bytes."""

    class Meta:
        model = m.EpisodeFile

    episode = factory.SubFactory(EpisodeFactory)
    kind = m.EpisodeFile.Kind.DELIVERABLE
    name = factory.Sequence(lambda n: f"deliverable-{n}.txt")
    content = b"the finished deliverable\n"

    class Params:
        # A small monthly-revenue table, as the expert workspace previews it.
        csv = factory.Trait(name="summary.csv", content=b"month,revenue\nJan,100\n", content_type="text/csv")
