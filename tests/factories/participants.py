"""Participants of a study."""

from __future__ import annotations

import factory

from studies import models as m
from tests.factories.studies import StudyFactory
from tests.factories.taxonomy import OccupationFactory
from tests.factories.users import UserFactory


class ParticipantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Participant

    study = factory.SubFactory(StudyFactory)
    user = factory.SubFactory(UserFactory, roles=["worker"])
    status = m.Participant.Status.WORKING
    occupation = factory.SubFactory(OccupationFactory)
    years_experience = 5
