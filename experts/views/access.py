"""Access checks shared by the expert workspace's views: a role and an active expert profile."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse

from experts import selectors as sel
from studies.roles import EXPERT, STAFF, has_role


def _profile_page(*roles: str) -> Callable:
    """Require one of ``roles`` and an active expert profile; pass the profile to the view.

    Anonymous visitors go to the login page; anyone else without access gets a 404, which says nothing
    about whether the page exists.
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not any(has_role(request.user, role) for role in roles):
                raise Http404
            profile = sel.expert_profile(request.user)
            if profile is None:
                raise Http404
            return view(request, profile, *args, **kwargs)

        return wrapped

    return decorator


expert_page = _profile_page(EXPERT)
# Grading pages are also open to staff members who adjudicate (they grade under their own profile).
grader_page = _profile_page(EXPERT, STAFF)
