"""A signed personal invitation is the recruit's credential: sign-up without a password (no hash on the launch's
critical path), sign-in back by the same link, a password only as an extra way in; forged or expired links
refused, and the password lockout unchanged."""

from __future__ import annotations

import re
import time
from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse

from studies import models as m
from studies.invitations import personal_invite_path
from tests.factories.scenarios import make_world
from tests.tampering import tampered_link

pytestmark = pytest.mark.django_db
PASSWORD = "a-Long-enough-pass-9"


def _link(world, worker_id="up-1"):
    return personal_invite_path(study=world.study, platform="upwork", worker_id=worker_id)


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_a_personal_link_signs_up_without_a_password_and_without_hashing_one(client):
    world = make_world()
    link = _link(world)
    assert b"(optional)" in client.get(link).content
    with mock.patch("django.contrib.auth.hashers.MD5PasswordHasher.encode") as encode:
        response = client.post(link, {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    assert response.status_code == 302 and response["Location"] == reverse("worker:consent", args=["pilot"])
    assert encode.call_count == 0
    participant = m.Participant.objects.get()
    assert participant.identity.platform_worker_id == "up-1" and not participant.user.has_usable_password()
    assert _signed_in(client)


def test_the_same_link_signs_the_recruit_back_in_on_another_device():
    world = make_world()
    link = _link(world)
    Client().post(link, {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    other_device = Client()
    response = other_device.get(link)
    assert response.status_code == 302 and response["Location"] == reverse("worker:consent", args=["pilot"])
    assert _signed_in(other_device) and m.Participant.objects.count() == 1
    assert int(other_device.session["_auth_user_id"]) == m.Participant.objects.get().user_id


def test_an_account_without_a_password_cannot_be_entered_with_an_empty_or_any_password(client):
    world = make_world()
    Client().post(_link(world), {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    for password in ("", "!", PASSWORD):
        client.post(reverse("login"), {"username": "linkworker", "password": password})
        assert not _signed_in(client)


def test_a_recruit_who_chose_a_password_signs_in_with_it_not_by_the_link():
    world = make_world()
    link = _link(world)
    Client().post(link, {"username": "careful", "email": "", "password1": PASSWORD, "password2": PASSWORD})
    assert m.Participant.objects.get().user.check_password(PASSWORD)
    other_device = Client()
    page = other_device.get(link)
    assert page.status_code == 200 and b"Sign in to continue" in page.content and not _signed_in(other_device)


def test_one_password_field_alone_is_refused_with_a_clear_message(client):
    world = make_world()
    response = client.post(_link(world), {"username": "half", "email": "", "password1": PASSWORD, "password2": ""})
    assert response.status_code == 200 and b"leave both fields empty" in response.content
    assert not m.Participant.objects.exists()


PROLIFIC_ID = "5f0c3a1b2c3d4e5f60718293"


def _open_link(world, query=f"PROLIFIC_PID={PROLIFIC_ID}") -> str:
    return reverse("worker:join", args=[world.study.invite_code]) + "?" + query


def test_the_open_link_with_a_platform_id_signs_up_without_a_password_or_a_hash(client, mailoutbox):
    world = make_world()
    page = client.get(_open_link(world))
    assert page.status_code == 200 and b"Start the study" in page.content
    with mock.patch("django.contrib.auth.hashers.PBKDF2PasswordHasher.encode") as hashing:
        response = client.post(_open_link(world), {"username": "", "email": "r@example.org", "password1": "",
                                                   "password2": ""})
    assert response.status_code == 302 and _signed_in(client) and not hashing.called
    participant = m.Participant.objects.get()
    assert participant.identity.platform_worker_id == PROLIFIC_ID
    assert not participant.user.has_usable_password() and PROLIFIC_ID not in participant.user.username
    assert client.session.get_expiry_age() > 30 * 24 * 3600, "a long-lived session, not the default two weeks"
    # The resume link is shown on the next page and e-mailed; in another browser it signs the recruit in.
    shown = client.get(response["Location"], follow=True).content.decode()
    link = re.search(r"http://testserver(/p/[^\s<\"]+/)", shown).group(1)
    assert len(mailoutbox) == 1 and link in mailoutbox[0].body
    other = Client()
    back = other.get(link)
    assert back.status_code == 302 and "_auth_user_id" in other.session
    assert other.session["_auth_user_id"] == str(participant.user_id)


def test_a_known_platform_id_alone_signs_nobody_in_and_a_resume_link_expires(client, settings):
    world = make_world()
    client.post(_open_link(world), {"username": "", "email": "", "password1": "", "password2": ""})
    participant = m.Participant.objects.get()
    from studies.invitations import resume_path

    link = resume_path(participant)
    stranger = Client()
    assert stranger.post(_open_link(world), {"username": "", "email": "", "password1": "",
                                             "password2": ""}).status_code == 409
    assert "_auth_user_id" not in stranger.session and m.Participant.objects.count() == 1
    settings.PERSONAL_LINK_MAX_AGE_DAYS = 1
    with mock.patch("django.core.signing.time.time", return_value=time.time() + 2 * 86400):
        expired = stranger.get(link)
    assert expired.status_code == 302 and reverse("login") in expired["Location"]
    assert "_auth_user_id" not in stranger.session


def test_a_resume_link_never_signs_in_an_account_with_a_password():
    world = make_world()
    first = Client()
    first.post(_open_link(world), {"username": "chooser", "email": "", "password1": PASSWORD,
                                   "password2": PASSWORD})
    participant = m.Participant.objects.get()
    assert participant.user.has_usable_password()
    from studies.invitations import resume_path

    other = Client()
    response = other.get(resume_path(participant))
    assert response.status_code == 302 and reverse("login") in response["Location"]
    assert "_auth_user_id" not in other.session


def test_the_open_link_without_a_platform_id_still_needs_a_password(client):
    world = make_world()
    url = reverse("worker:join", args=[world.study.invite_code])
    response = client.post(url, {"username": "open", "email": "", "password1": "", "password2": ""})
    assert response.status_code == 200 and not m.Participant.objects.exists() and not _signed_in(client)


@pytest.mark.parametrize("query", ["PROLIFIC_PID=abc", "PROLIFIC_PID=5F0C3A1B2C3D4E5F60718293",
                                   "platform=prolific&worker_id=PRO-1", "platform=myspace&worker_id=abc",
                                   "platform=mturk&worker_id=lower-case"])
def test_the_open_link_refuses_unknown_platforms_and_ids_the_platform_never_issues(client, query):
    world = make_world()
    response = client.get(_open_link(world, query))
    assert response.status_code == 400 and not m.Participant.objects.exists()


def test_a_forged_link_neither_signs_up_nor_signs_in(client):
    world = make_world()
    link = _link(world)
    Client().post(link, {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    forged = tampered_link(link)
    assert client.get(forged).status_code == 400 and not _signed_in(client)
    assert client.post(forged, {"username": "x", "password1": "", "password2": ""}).status_code == 400
    assert m.Participant.objects.count() == 1


def test_an_expired_link_is_refused_for_sign_up_and_sign_in(client, settings):
    settings.PERSONAL_LINK_MAX_AGE_DAYS = 30
    world = make_world()
    link = _link(world)
    Client().post(link, {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    later = time.time() + 31 * 86400
    with mock.patch("django.core.signing.time.time", return_value=later):
        response = client.get(link)
        fresh = client.get(_link(world, "up-2"))  # issued now, so valid later only if younger than 30 days
    assert response.status_code == 400 and b"expired" in response.content and not _signed_in(client)
    assert fresh.status_code == 200


def test_password_failures_still_lock_out_and_do_not_lock_the_owner_out_of_their_link(settings):
    settings.AXES_FAILURE_LIMIT = 3
    world = make_world()
    link = _link(world)
    Client().post(link, {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    attacker = Client()
    answers = [attacker.post(reverse("login"), {"username": "linkworker", "password": "guess"}).status_code
               for _ in range(3)]
    assert answers[-1] == 429
    owner = Client()
    assert owner.get(link).status_code == 302 and _signed_in(owner)


def test_a_staff_account_is_never_signed_in_by_a_link(client):
    world = make_world()
    link = _link(world)
    Client().post(link, {"username": "linkworker", "email": "", "password1": "", "password2": ""})
    user = m.Participant.objects.get().user
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    assert client.get(link).status_code == 200 and not _signed_in(client)
