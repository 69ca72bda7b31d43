"""Task instances and their reference and hidden files."""

from __future__ import annotations

import factory

from studies import models as m
from tests.factories.files import StoredFileFactory
from tests.factories.taxonomy import SectorFactory


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


class TaskFileFactory(StoredFileFactory):
    class Meta:
        model = m.TaskFile

    task = factory.SubFactory(TaskFactory)
    kind = m.TaskFile.Kind.REFERENCE
    name = factory.Sequence(lambda n: f"reference-{n}.csv")
    content = b"region,total\nnorth,10\n"
