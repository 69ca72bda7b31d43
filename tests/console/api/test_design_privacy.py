"""No readable API endpoint shows a worker or expert anything of the pairing design."""

from __future__ import annotations

import pytest

from studies import models as m
from tests.console.api.conftest import client_for
from tests.console.api.test_permissions import ENDPOINTS
from tests.journey.test_flow_design_privacy import MARKERS, PROBABILITY

pytestmark = pytest.mark.django_db


def _assert_clean(content: bytes, where: str) -> None:
    for marker in MARKERS:
        assert marker not in content, f"{where} shows {marker!r}"


@pytest.mark.parametrize("role", ["worker", "expert"])
def test_no_readable_api_endpoint_shows_the_design(world, role):
    m.Study.objects.filter(pk=world.study.pk).update(design_mode=m.Study.DesignMode.ADAPTIVE, design_floor=0.3)
    m.Episode.objects.filter(pk__in=[world.episode.pk, world.other_episode.pk]).update(
        design_mode="adaptive", assignment_probability=PROBABILITY)
    client = client_for(world.worker if role == "worker" else world.expert)
    readable = 0
    for endpoint in ENDPOINTS:
        if endpoint.method != "get":
            continue
        response = client.get(endpoint.url(world))
        if response.status_code != 200:
            continue
        readable += 1
        content = b"".join(response.streaming_content) if response.streaming else response.content
        _assert_clean(content, endpoint.template)
    assert readable >= 5
