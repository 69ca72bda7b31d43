"""Staff pages of the expert workspace: invitations, rubric approval, routing, gold, adjudication, metrics."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from experts import selectors as sel
from experts.exceptions import ExpertError, InviteInvalid, RubricReviewError
from experts.forms import (
    AdjudicationForm,
    DoubleGradingForm,
    ExpertAssignForm,
    ExpertChoiceForm,
    ExpertProfileForm,
    GoldPlantForm,
    InviteCreateForm,
    ReviewForm,
    ScoreSourceForm,
)
from experts.models import ExpertAssignment, ExpertCriterionGrade, ExpertGrade, ExpertProfile
from experts.rubric_lint import lint_rubric
from experts.services import routing
from experts.services.invites import expert_invite_create, expert_profile_update
from experts.services.rubric_authoring import rubric_review_approve, rubric_review_reject
from experts.services.score_source import study_set_score_source
from grading.models import Rubric
from grading.selectors import current_judge_runs, rubric_for_grading
from studies.models import Episode, Study
from studies.roles import staff_required


def _study_filter(request: HttpRequest) -> tuple[Study | None, list[Study]]:
    studies = list(Study.objects.order_by("-created_at"))
    raw = request.GET.get("study") or request.POST.get("study") or ""
    chosen = next((s for s in studies if str(s.pk) == raw), None)
    return chosen, studies


def _back(request: HttpRequest, name: str, study: Study | None = None) -> HttpResponse:
    url = reverse(name)
    return redirect(f"{url}?study={study.pk}" if study is not None else url)


# --------------------------------------------------------------------------------------------------------
# Experts and invitations
# --------------------------------------------------------------------------------------------------------


@staff_required
def experts(request: HttpRequest) -> HttpResponse:
    form = InviteCreateForm(request.POST if request.method == "POST" else None)
    invitation = None
    if request.method == "POST" and form.is_valid():
        try:
            invitation = expert_invite_create(
                actor=request.user, sectors=form.cleaned_data["sectors"], email=form.cleaned_data["email"],
                note=form.cleaned_data["note"],
                build_link=lambda token: request.build_absolute_uri(reverse("expert:invite_accept", args=[token])))
        except InviteInvalid as exc:
            form.add_error(None, exc.message)
        else:
            form = InviteCreateForm()
    return render(request, "experts/staff_experts.html", {
        "form": form, "invitation": invitation, "experts": sel.experts_overview()})


@staff_required
def expert_edit(request: HttpRequest, profile_id: int) -> HttpResponse:
    profile = get_object_or_404(ExpertProfile.objects.select_related("user"), pk=profile_id)
    form = ExpertProfileForm(request.POST if request.method == "POST" else None,
                             initial={"sectors": profile.sectors.all(), "is_active": profile.is_active})
    if request.method == "POST" and form.is_valid():
        expert_profile_update(profile=profile, actor=request.user, sectors=form.cleaned_data["sectors"],
                              is_active=form.cleaned_data["is_active"])
        messages.success(request, f"Saved {profile.user.get_username()}'s profile.")
        return redirect("expert:staff_experts")
    return render(request, "experts/staff_expert_edit.html", {"profile": profile, "form": form})


# --------------------------------------------------------------------------------------------------------
# Rubric approval
# --------------------------------------------------------------------------------------------------------


@staff_required
def rubrics(request: HttpRequest) -> HttpResponse:
    return render(request, "experts/staff_rubrics.html", {"rubrics": sel.rubrics_awaiting_review()})


@staff_required
def rubric_review(request: HttpRequest, rubric_id: int) -> HttpResponse:
    rubric = get_object_or_404(Rubric.objects.select_related("task__sector", "author", "based_on"), pk=rubric_id)
    form = ReviewForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            if form.cleaned_data["decision"] == "approve":
                rubric_review_approve(rubric=rubric, actor=request.user, note=form.cleaned_data["note"])
                messages.success(request, f"Approved version {rubric.version}: it now grades “{rubric.task}”.")
            else:
                rubric_review_reject(rubric=rubric, actor=request.user, note=form.cleaned_data["note"])
                messages.success(request, f"Sent version {rubric.version} back to its author.")
        except RubricReviewError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("expert:staff_rubrics")
    criteria = sel.rubric_criteria(rubric)
    return render(request, "experts/staff_rubric_review.html", {
        "rubric": rubric, "criteria": criteria, "form": form,
        "hints": lint_rubric({"description": c.description, "label": c.label} for c in criteria),
        "in_use": rubric_for_grading(rubric.task)})


# --------------------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------------------


@staff_required
def routing_page(request: HttpRequest) -> HttpResponse:
    study, studies = _study_filter(request)
    share_form = DoubleGradingForm(initial={"share": study.double_grading_share}) if study else None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "route":
            report = routing.episodes_route_pending(study=study, actor=request.user)
            messages.success(request, f"Routed {report.episodes_routed} episodes ({report.assignments} assignments).")
            if report.without_expert:
                messages.warning(request, f"{len(report.without_expert)} episodes have no active expert in their "
                                          "task's sector; invite one or widen someone's sectors.")
            return _back(request, "expert:staff_routing", study)
        if action == "share" and study is not None:
            share_form = DoubleGradingForm(request.POST)
            if share_form.is_valid():
                routing.study_set_double_grading_share(study=study, share=share_form.cleaned_data["share"],
                                                       actor=request.user)
                messages.success(request, "Double-grading share saved; it applies to episodes routed from now on.")
                return _back(request, "expert:staff_routing", study)
    return render(request, "experts/staff_routing.html", {
        "study": study, "studies": studies, "share_form": share_form,
        "routable": routing.routable_episodes(study).select_related("task__sector")[:100],
        "routable_count": routing.routable_episodes(study).count(),
        "assignments": sel.open_assignments(study)[:300], "experts": sel.experts_overview()})


@staff_required
@require_POST
def assignment_cancel(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = get_object_or_404(ExpertAssignment, pk=assignment_id)
    try:
        routing.assignment_cancel(assignment=assignment, actor=request.user, reason=request.POST.get("reason", ""))
        messages.success(request, "Assignment withdrawn.")
    except ExpertError as exc:
        messages.error(request, exc.message)
    study, _ = _study_filter(request)
    return _back(request, "expert:staff_routing", study)


# --------------------------------------------------------------------------------------------------------
# Gold episodes
# --------------------------------------------------------------------------------------------------------


@staff_required
def gold(request: HttpRequest) -> HttpResponse:
    study, studies = _study_filter(request)
    return render(request, "experts/staff_gold.html", {
        "study": study, "studies": studies, "sources": sel.gold_sources(study)[:100],
        "gold": sel.gold_episodes(study)[:100]})


@staff_required
def gold_plant(request: HttpRequest, episode_id: int) -> HttpResponse:
    source = get_object_or_404(Episode.objects.select_related("task__sector", "study", "agent"), pk=episode_id,
                               is_gold=False)
    rubric = rubric_for_grading(source.task)
    if rubric is None:
        messages.error(request, "This task has no rubric yet, so known answers cannot be given.")
        return redirect("expert:staff_gold")
    criteria = sel.rubric_criteria(rubric)
    experts = (routing.experts_by_load(sector_id=source.task.sector_id,
                                       exclude_profiles=source.expert_assignments.values_list("expert_id", flat=True))
               .select_related("user"))
    form = GoldPlantForm(request.POST if request.method == "POST" else None, criteria=criteria, experts=experts,
                         initial_answers=sel.gold_prefill(source, rubric))
    if request.method == "POST" and form.is_valid():
        try:
            copy = routing.gold_plant(source=source, answers=form.answers(), experts=form.cleaned_data["experts"],
                                      actor=request.user)
        except ExpertError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Gold copy #{copy.pk} planted in {len(form.cleaned_data['experts'])} "
                                      "queues.")
            return redirect("expert:staff_gold")
    return render(request, "experts/staff_gold_plant.html", {"source": source, "rubric": rubric, "form": form})


# --------------------------------------------------------------------------------------------------------
# Adjudication, re-attempts, one episode's grades
# --------------------------------------------------------------------------------------------------------


@staff_required
def adjudication(request: HttpRequest) -> HttpResponse:
    study, studies = _study_filter(request)
    pairs = sel.double_graded(study)
    return render(request, "experts/staff_adjudication.html", {
        "study": study, "studies": studies, "pairs": pairs, "gap": sel.adjudication_gap(),
        "n_disagree": sum(p.disagrees for p in pairs)})


@staff_required
def episode_grades(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Every expert grade of one episode side by side, with the staff actions that apply to it."""
    episode = get_object_or_404(Episode.objects.select_related("task__sector", "agent", "study", "participant"),
                                pk=episode_id)
    grades = (ExpertGrade.objects.filter(episode=episode).select_related("assignment", "expert__user", "rubric")
              .prefetch_related(Prefetch("criterion_grades",
                                         ExpertCriterionGrade.objects.select_related("criterion")
                                         .order_by("criterion__order")))
              .order_by("attempt", "started_at"))
    experts = routing.experts_by_load(sector_id=episode.task.sector_id,
                                      exclude_profiles=episode.expert_assignments.values_list("expert_id", flat=True)
                                      ).select_related("user")
    return render(request, "experts/staff_episode.html", {
        "episode": episode, "grades": grades, "judge_runs": current_judge_runs(episode),
        "assignments": episode.expert_assignments.select_related("expert__user"),
        "adjudication_form": AdjudicationForm(experts=experts), "reattempt_form": ExpertChoiceForm(experts=experts),
        "assign_form": ExpertAssignForm(experts=_assignable_experts(episode)),
        "assignable": episode.status in routing.ASSIGNABLE_STATUSES and not episode.is_simulated})


def _assignable_experts(episode: Episode):
    return (ExpertProfile.objects.filter(is_active=True, user__is_active=True)
            .exclude(pk__in=episode.expert_assignments.values_list("expert_id", flat=True))
            .select_related("user").prefetch_related("sectors").order_by("user__username"))


@staff_required
@require_POST
def assign(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Hand the episode to an expert chosen by name (any sector, any grading state)."""
    episode = get_object_or_404(Episode, pk=episode_id)
    form = ExpertAssignForm(request.POST, experts=_assignable_experts(episode))
    if not form.is_valid():
        messages.error(request, "Choose an active expert from the list.")
        return redirect("expert:staff_episode", episode_id=episode.pk)
    try:
        assignment = routing.episode_assign_expert(episode=episode, expert=form.cleaned_data["expert"],
                                                   actor=request.user)
    except ExpertError as exc:
        messages.error(request, exc.message)
        return redirect("expert:staff_episode", episode_id=episode.pk)
    messages.success(request, f"Episode #{episode.pk} is in {assignment.expert.user.get_username()}'s grading queue "
                              f"({assignment.get_role_display().lower()}).")
    return redirect("expert:staff_episode", episode_id=episode.pk)


@staff_required
@require_POST
def adjudicate(request: HttpRequest, episode_id: int) -> HttpResponse:
    episode = get_object_or_404(Episode.objects.select_related("task"), pk=episode_id)
    form = AdjudicationForm(request.POST, experts=ExpertProfile.objects.filter(is_active=True))
    if not form.is_valid():
        messages.error(request, "Choose an active expert, or adjudicate yourself.")
        return redirect("expert:staff_episode", episode_id=episode.pk)
    try:
        assignment = routing.adjudication_request(episode=episode, actor=request.user,
                                                  adjudicator=form.cleaned_data["adjudicator"])
    except ExpertError as exc:
        messages.error(request, exc.message)
        return redirect("expert:staff_episode", episode_id=episode.pk)
    if assignment.expert.user_id == request.user.pk:
        messages.success(request, "The episode is in your grading queue; grade it blind like the others.")
        return redirect("expert:grade", assignment_id=assignment.pk)
    messages.success(request, f"Sent to {assignment.expert.user.get_username()} for adjudication.")
    return redirect("expert:staff_episode", episode_id=episode.pk)


@staff_required
@require_POST
def reattempt(request: HttpRequest, episode_id: int) -> HttpResponse:
    episode = get_object_or_404(Episode, pk=episode_id)
    form = ExpertChoiceForm(request.POST, experts=ExpertProfile.objects.filter(is_active=True))
    if form.is_valid():
        try:
            assignment = routing.episode_route_reattempt(episode=episode, actor=request.user,
                                                         expert=form.cleaned_data["expert"])
            messages.success(request, f"Re-attempt routed to {assignment.expert.user.get_username()}.")
        except ExpertError as exc:
            messages.error(request, exc.message)
    else:
        messages.error(request, "Choose an active expert.")
    return redirect("expert:staff_episode", episode_id=episode.pk)


# --------------------------------------------------------------------------------------------------------
# Metrics and the score source
# --------------------------------------------------------------------------------------------------------


@staff_required
def metrics_page(request: HttpRequest) -> HttpResponse:
    study, studies = _study_filter(request)
    context: dict[str, Any] = {"study": study, "studies": studies, "report": sel.expert_metrics_report(study)}
    if study is not None:
        context["source_form"] = ScoreSourceForm(initial={"source": study.score_source,
                                                          "blend_expert_weight": study.blend_expert_weight})
    return render(request, "experts/staff_metrics.html", context)


@staff_required
@require_POST
def score_source(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    form = ScoreSourceForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a score source and an expert weight between 0 and 1.")
    else:
        try:
            changed = study_set_score_source(study=study, source=form.cleaned_data["source"], actor=request.user,
                                             blend_expert_weight=form.cleaned_data["blend_expert_weight"])
        except ExpertError as exc:
            messages.error(request, exc.message)
        else:
            if changed:
                messages.success(request, f"“{study}” now rates with {study.get_score_source_display().lower()}. "
                                          "Every observation is being re-recorded; the leaderboard follows shortly.")
            else:
                messages.info(request, "Nothing changed.")
    return _back(request, "expert:staff_metrics", study)
