"""Sectors and occupations (the O*NET taxonomy tasks and participants are matched on)."""

from __future__ import annotations

import factory

from studies import models as m


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
