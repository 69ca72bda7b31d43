"""A browser can sign in and sees the navigation of its role."""

from __future__ import annotations

import pytest

from tests.e2e.steps import login
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_staff_member_signs_in_and_sees_the_admin_link(page):
    UserFactory(username="alice", roles=["staff"])
    login(page, "alice", "pw-correct-horse")
    assert page.locator("nav[aria-label=Main] a", has_text="Admin").count() == 1
    page.screenshot(path="var/e2e-login.png")


@pytest.mark.django_db(transaction=True)
def test_wrong_password_keeps_the_visitor_on_the_login_form(page):
    UserFactory(username="bob", roles=["worker"])
    login(page, "bob", "nope")
    assert "/accounts/login/" in page.url
    assert page.locator("[role=alert]").is_visible()
