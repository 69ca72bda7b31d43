"""Login, per-role navigation, and an admin page for every model (lockouts: test_flow_sign_in_lockout)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import NoReverseMatch, reverse

from studies import context_processors
from studies.context_processors import NAV_ITEMS
from studies.roles import ROLES, STAFF
from tests.factories import EpisodeFactory, UserFactory

pytestmark = pytest.mark.django_db


def _nav_labels(response) -> list[str]:
    return [item["label"] for item in response.context["nav_items"]]


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_login_page_renders_a_form_with_csrf(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"csrfmiddlewaretoken" in response.content


def test_worker_navigation_hides_staff_and_expert_links(client):
    client.force_login(UserFactory(roles=["worker"]))
    labels = _nav_labels(client.get("/"))
    assert "Admin" not in labels and "Dashboard" not in labels and "Expert workspace" not in labels


def test_staff_navigation_shows_the_admin(client):
    client.force_login(UserFactory(roles=["staff"]))
    labels = _nav_labels(client.get("/"))
    assert "Admin" in labels
    assert "Expert workspace" not in labels  # staff manage experts from their own pages, not the grading queue


def test_a_user_with_every_role_gets_every_navigation_link_rendered(client):
    client.force_login(UserFactory(roles=list(ROLES)))
    response = client.get("/")
    assert response.status_code == 200
    assert _nav_labels(response) == [label for _, label, _ in NAV_ITEMS]
    for _, _, name in NAV_ITEMS:
        assert f'href="{reverse(name)}"'.encode() in response.content


def test_a_misspelt_navigation_url_name_fails_loudly(rf, monkeypatch):
    monkeypatch.setattr(context_processors, "NAV_ITEMS", ((STAFF, "Dashboard", "dashboard:indx"),))
    request = rf.get("/")
    request.user = UserFactory(roles=[STAFF])
    with pytest.raises(NoReverseMatch):
        context_processors.navigation(request)


def test_expert_does_not_get_into_the_admin(client):
    client.force_login(UserFactory(roles=["expert"]))
    response = client.get(reverse("admin:index"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def _registered_models():
    return [model for model in apps.get_models() if model in admin.site._registry
            and model._meta.app_label in {"studyapp", "grading", "rating", "surveys"}]


def test_every_domain_model_has_an_admin():
    domain = [m for m in apps.get_models() if m._meta.app_label in {"studyapp", "grading", "rating", "surveys"}]
    missing = [m.__name__ for m in domain if m not in admin.site._registry]
    assert missing == []


@pytest.mark.parametrize("model", _registered_models(), ids=lambda m: m._meta.label)
def test_admin_changelist_and_change_pages_load(client, model):
    EpisodeFactory()
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    opts = model._meta
    response = client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    assert response.status_code == 200
    obj = model.objects.first()
    if obj is not None:
        response = client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))
        assert response.status_code == 200


def test_the_rating_ledger_is_read_only_in_the_admin(client):
    from rating.models import Observation

    client.force_login(UserFactory(username="root2", is_superuser=True, is_staff=True))
    response = client.get(reverse("admin:rating_observation_add"))
    assert response.status_code == 403
    assert not admin.site._registry[Observation].has_change_permission(type("R", (), {"user": None})())


def test_staff_members_can_work_in_the_admin_but_not_see_identities(client):
    user = UserFactory(roles=["staff"])
    assert user.has_perm("studyapp.change_episode")
    assert user.has_perm("grading.change_rubric")
    assert user.has_perm("rating.view_observation")
    assert not user.has_perm("studyapp.view_participantidentity")
    client.force_login(user)
    response = client.get(reverse("admin:index"))
    assert b"Episodes" in response.content
    assert client.get(reverse("admin:studyapp_participant_changelist")).status_code == 200
    assert client.get(reverse("admin:studyapp_participantidentity_changelist")).status_code == 403


def test_signing_out_says_so_on_the_next_page(client):
    user = UserFactory(roles=["worker"])
    client.force_login(user)
    page = client.post(reverse("logout"), follow=True)
    assert b"You are signed out" in page.content
    assert "_auth_user_id" not in client.session


def test_favicon_requests_are_answered_instead_of_404(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")
    assert b'rel="icon"' in client.get(reverse("login")).content


def test_a_bad_invitation_or_resume_link_gets_a_friendly_page_not_a_bare_404(client):
    page = client.get(reverse("worker:join", args=["no-such-code"]))
    assert page.status_code == 404
    html = page.content.decode()
    assert "This invitation link does not work" in html and "reply to the message" in html
    client.force_login(UserFactory(roles=["worker"]))
    resume = client.get(reverse("worker:resume", args=["garbage-token"]))
    assert resume.status_code == 404 and b"This resume link does not work" in resume.content


@pytest.fixture
def fresh_reset_budget():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def test_a_worker_resets_a_forgotten_password_by_e_mail(client, mailoutbox, fresh_reset_budget):
    import re

    user = UserFactory(username="forgetful", email="forgetful@example.org", roles=["worker"])
    assert b"Forgot your password?" in client.get(reverse("login")).content
    sent = client.post(reverse("password_reset"), {"email": "forgetful@example.org"})
    assert sent["Location"] == reverse("password_reset_done")
    unknown = client.post(reverse("password_reset"), {"email": "nobody@example.org"})
    assert unknown["Location"] == reverse("password_reset_done"), "does not reveal which addresses have accounts"
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["forgetful@example.org"]
    link = re.search(r"http://testserver(/accounts/reset/\S+)", mailoutbox[0].body).group(1)
    form_page = client.get(link, follow=True)
    assert b"Choose a new password" in form_page.content
    done = client.post(form_page.redirect_chain[-1][0], {"new_password1": "a-New-pass-9931",
                                                         "new_password2": "a-New-pass-9931"})
    assert done["Location"] == reverse("password_reset_complete")
    user.refresh_from_db()
    assert user.check_password("a-New-pass-9931")
    assert b"does not work" in client.get(link, follow=True).content, "a link works once"


def test_password_reset_requests_are_limited_per_address(client, mailoutbox, fresh_reset_budget):
    UserFactory(username="target", email="target@example.org")
    for _ in range(5):
        assert client.post(reverse("password_reset"), {"email": "target@example.org"}).status_code == 302
    refused = client.post(reverse("password_reset"), {"email": "target@example.org"})
    assert refused.status_code == 200 and b"Too many reset requests" in refused.content
    assert len(mailoutbox) == 5


def test_the_menu_reads_its_roles_once_a_minute_and_a_new_role_shows_at_once(client, django_assert_num_queries):
    from django.contrib.auth.models import Group

    from studies.roles import grant_role, navigation_roles

    user = UserFactory(roles=["worker"])
    assert navigation_roles(user) == {"worker"}
    fresh = type(user).objects.get(pk=user.pk)  # another request: no roles remembered on the object
    with django_assert_num_queries(0):
        assert navigation_roles(fresh) == {"worker"}
    grant_role(user, "expert")
    assert navigation_roles(type(user).objects.get(pk=user.pk)) == {"worker", "expert"}
    # A change made elsewhere (the admin's group editor) shows within NAVIGATION_ROLES_SECONDS; the staff
    # flag is part of the key and shows at once. Pages themselves never trust the menu's roles.
    user.groups.remove(Group.objects.get(name="expert"))
    type(user).objects.filter(pk=user.pk).update(is_staff=True)
    assert navigation_roles(type(user).objects.get(pk=user.pk)) == {"worker", "staff"}
