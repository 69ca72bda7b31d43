"""Worker pages: the profile brings the worker to the first field to correct, and a browser agent's setup
checkbox speaks of the browser, not of an installation."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from studies import models as m
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


def test_a_profile_with_both_fields_empty_marks_the_occupation_first_for_correction(client):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.CONSENTED, occupation=None)
    client.force_login(participant.user)
    page = client.post(reverse("worker:profile", args=["pilot"]), {"occupation": "", "years_experience": ""})
    html = page.content.decode()
    invalid = re.findall(r'<(?:input|select|textarea)[^>]*aria-invalid="true"[^>]*>', html)
    # The page's script focuses the first field marked invalid: it must be the occupation search, the first field.
    assert len(invalid) == 2 and 'id="occupation-query"' in invalid[0]
    assert 'aria-describedby="occupation-search-help occupation-errors"' in invalid[0]
    assert 'id="occupation-errors"' in html


def test_the_setup_checkbox_of_a_browser_agent_speaks_of_the_browser(client):
    world = make_world(agents=1)
    m.Agent.objects.update(interface=m.Agent.Interface.BROWSER, name="Manus")
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=[world.study.slug, 1]))
    html = client.get(reverse("worker:task", args=[world.study.slug, 1])).content.decode()
    assert "Manus is open in my browser and I am signed in" in html
    assert "installed and running on my computer" not in html
    m.Agent.objects.update(interface=m.Agent.Interface.TERMINAL)
    html = client.get(reverse("worker:task", args=[world.study.slug, 1])).content.decode()
    assert "Manus is installed and running on my computer" in html
