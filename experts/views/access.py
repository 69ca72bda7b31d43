"""Access checks shared by the expert workspace's views: a role and an active expert profile."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from experts import selectors as sel
from studies.roles import EXPERT, STAFF, has_role


def _profile_page(*roles: str) -> Callable:
    """Require one of ``roles`` and an active expert profile; pass the profile to the view.

    Anonymous visitors go to the login page; a signed-in account without the role or without an expert profile
    gets a 404 that says nothing about any particular page but is a plain page saying where to go instead, never
    the framework's technical error page (which ``make run``'s debug mode would show for a raised 404).
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not any(has_role(request.user, role) for role in roles):
                return not_for_this_account(request, "Your account is not an expert account.")
            profile = sel.expert_profile(request.user)
            if profile is None:
                return not_for_this_account(request, "Your account has no expert profile.")
            return view(request, profile, *args, **kwargs)

        return wrapped

    return decorator


def not_for_this_account(request: HttpRequest, reason: str) -> HttpResponse:
    """The plain 404 page for a signed-in account that is not an expert (or staff, where staff may enter)."""
    return render(request, "access_denied.html", {
        "title": "This page is not open to your account",
        "explanation": f"{reason} The expert workspace is for the study's experts, who join through an invitation "
                       "from the study team; if you take part in a study as a worker, your tasks are on your study "
                       "page.",
    }, status=404)


expert_page = _profile_page(EXPERT)
# Grading pages are also open to staff members who adjudicate (they grade under their own profile).
grader_page = _profile_page(EXPERT, STAFF)
