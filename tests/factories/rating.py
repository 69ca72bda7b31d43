"""Rating snapshots and the entity ratings they hold."""

from __future__ import annotations

import factory

from rating import models as r


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
