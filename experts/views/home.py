"""Expert workspace: the home page and the invitation page.

The rubric editor, the grading pages and the staff pages live in ``experts.views.rubrics``,
``experts.views.grading`` and ``experts.views.staff``; the access checks they share in ``experts.views.access``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from experts import comparison_selectors
from experts import selectors as sel
from experts.exceptions import InviteInvalid
from experts.forms import InviteAcceptForm
from experts.models import ExpertProfile
from experts.services.invites import expert_invite_accept, expert_invite_read
from experts.services.routing import routable_episodes
from experts.views.access import not_for_this_account
from studies.roles import EXPERT, STAFF, has_role


def home(request: HttpRequest) -> HttpResponse:
    """The expert's queues, tasks and rubrics; staff also see the workspace's staff tools."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    is_expert, is_staff = has_role(request.user, EXPERT), has_role(request.user, STAFF)
    if not (is_expert or is_staff):
        return not_for_this_account(request, "Your account is not an expert account.")
    profile = ExpertProfile.objects.filter(user=request.user).prefetch_related("sectors").first()
    context: dict[str, Any] = {"profile": profile, "is_expert": is_expert, "is_staff": is_staff,
                               "paused": profile is not None and not profile.is_active}
    if profile is not None and profile.is_active:
        context["queue"] = sel.expert_queue(profile)
        context["tom_gold_open"] = sel.expert_tom_gold_codes(profile).exclude(status="submitted").count()
        context["comparisons"] = comparison_selectors.expert_comparison_queue(profile)
        if is_expert:
            context["tasks"] = list(sel.expert_tasks(profile)[:200])
            context["rubrics"] = list(sel.own_rubrics(profile)[:50])
    if is_staff:
        context["staff_counts"] = {
            "rubrics": sel.rubrics_awaiting_review().count(),
            "routable": routable_episodes().count(),
            "open": sel.open_assignments().count(),
        }
    return render(request, "experts/home.html", context)


def invite_accept(request: HttpRequest, token: str) -> HttpResponse:
    """Let an invitee create their expert account from a signed link."""
    try:
        invitation = expert_invite_read(token=token)
    except InviteInvalid as exc:
        return render(request, "experts/invite_accept.html", {"invalid": exc.message}, status=400)
    if request.user.is_authenticated:
        return render(request, "experts/invite_accept.html", {"signed_in": True, "invitation": invitation})
    form = InviteAcceptForm(request.POST if request.method == "POST" else None, initial={"email": invitation.email})
    if request.method == "POST" and form.is_valid():
        try:
            user = expert_invite_accept(token=token, username=form.cleaned_data["username"],
                                        password=form.cleaned_data["password1"],
                                        email=form.cleaned_data.get("email") or "")
        except InviteInvalid as exc:
            form.add_error(None, exc.message)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, "Welcome! Your expert account is ready.")
            return redirect(reverse("expert:home"))
    return render(request, "experts/invite_accept.html", {"form": form, "invitation": invitation,
                                                         "sectors": invitation.sectors()})
