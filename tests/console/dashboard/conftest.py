"""Users with each role and a populated study for the dashboard tests."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from tests.factories import StudyFactory, UserFactory
from tests.factories.scenarios import populated_study


@pytest.fixture
def staff_user(db):
    """A staff member without permission to see identities."""
    return UserFactory(username="staff-member", roles=["staff"])


@pytest.fixture
def pii_user(db):
    """A staff member allowed to export identities."""
    user = UserFactory(username="pii-officer", roles=["staff"])
    user.user_permissions.add(Permission.objects.get(codename="view_participantidentity"))
    return user


@pytest.fixture
def worker_user(db):
    return UserFactory(username="a-worker", roles=["worker"])


@pytest.fixture
def expert_user(db):
    return UserFactory(username="an-expert", roles=["expert"])


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def empty_study(db):
    return StudyFactory(slug="empty-study", name="Empty study")


@pytest.fixture
def populated(db):
    return populated_study()
