"""Worker pages: the profile brings the worker to the first field to correct, and the setup checkbox speaks of
the agent's kind (a browser agent is open and signed in, not installed)."""

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


@pytest.mark.parametrize(("interface", "says"), [
    (m.Agent.Interface.BROWSER, "Manus is open in my browser and I am signed in, and I am ready to start."),
    (m.Agent.Interface.DESKTOP, "The Manus desktop app is installed and open on my computer, and I am ready to start."),
    (m.Agent.Interface.TERMINAL, "Manus is installed and running in my terminal, and I am ready to start."),
])
def test_the_setup_checkbox_speaks_of_the_agents_kind(client, interface, says):
    world = make_world(agents=1)
    m.Agent.objects.update(interface=interface, name="Manus")
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=[world.study.slug, 1]))
    html = client.get(reverse("worker:task", args=[world.study.slug, 1])).content.decode()
    assert f'<label for="agent-ready">{says}</label>' in html
    if interface == m.Agent.Interface.BROWSER:
        assert "installed" not in html.split('for="agent-ready"')[1].split("</label>")[0]
    episode = m.Episode.objects.get(participant=participant)
    page = client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "never"}, follow=True)
    assert "Tick the box that says Manus is ready once it is set up." in page.content.decode()
