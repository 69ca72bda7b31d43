"""ToM gold standard pages: the expert's list and blind coding page (with autosave), the staff draw and progress.

Blinding: before and after submitting, the coding page shows the worker's prompts only (the ToM judges' view):
no agent turn, agent, condition, task score, stratum or judge code. Codes are fetched through the expert's own
queryset, so another expert's coding is simply not found.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from experts import selectors as sel
from experts.exceptions import ExpertError
from experts.forms import ToMGoldDrawForm
from experts.models import ExpertProfile, ToMGoldCode
from experts.services.tom_gold import tom_gold_open, tom_gold_sample_draw, tom_gold_save
from experts.views.access import grader_page
from experts.views.autosave import draft_autosave_reply
from grading.schemas import TOM_MARKERS
from studies.models import Study
from studies.roles import staff_required


def _code(profile: ExpertProfile, code_id: int) -> ToMGoldCode:
    return get_object_or_404(sel.expert_tom_gold_codes(profile).select_related("expert"), pk=code_id)


@grader_page
def tom_gold_list(request: HttpRequest, profile: ExpertProfile) -> HttpResponse:
    return render(request, "experts/tom_gold_list.html", {"codes": sel.expert_tom_gold_codes(profile)})


def _posted(data: dict) -> dict:
    raw = str(data.get("score", "")).strip()
    if raw and not raw.isdigit():
        raise ExpertError("The score must be a whole number from 0 to 5.")
    markers = data.get("markers", [])
    seconds = data.get("visible_seconds")
    try:
        visible = float(seconds) if seconds not in (None, "") else None
    except (TypeError, ValueError) as exc:
        raise ExpertError("visible_seconds must be a number.") from exc
    return {"score": int(raw) if raw else None, "markers": [str(m) for m in markers],
            "reason": str(data.get("reason", "")), "visible_seconds": visible}


def _render(request: HttpRequest, code: ToMGoldCode, *, posted: dict | None = None, status: int = 200) -> HttpResponse:
    prompts, truncated = sel.tom_gold_prompts(code)
    shown = posted or {"score": code.score, "markers": code.markers, "reason": code.reason}
    return render(request, "experts/tom_gold_code.html", {
        "code": code, "prompts": prompts, "truncated": truncated, "markers": TOM_MARKERS, "shown": shown,
        "scores": range(6), "submitted": code.status == ToMGoldCode.Status.SUBMITTED}, status=status)


@grader_page
def tom_gold_code(request: HttpRequest, profile: ExpertProfile, code_id: int) -> HttpResponse:
    code = tom_gold_open(code=_code(profile, code_id), user=request.user)
    if request.method != "POST":
        return _render(request, code)
    data = {"score": request.POST.get("score", ""), "markers": request.POST.getlist("markers"),
            "reason": request.POST.get("reason", ""), "visible_seconds": request.POST.get("visible_seconds")}
    try:
        posted = _posted(data)
        tom_gold_save(code=code, user=request.user, submit=request.POST.get("action") == "submit", **posted)
    except ExpertError as exc:
        messages.error(request, exc.message)
        code.refresh_from_db()
        return _render(request, code, posted=data, status=400)
    messages.success(request, "ToM code submitted. Thank you!" if request.POST.get("action") == "submit"
                     else "Draft saved.")
    return redirect("expert:tom_gold_code", code_id=code.pk)


@grader_page
@require_POST
def tom_gold_autosave(request: HttpRequest, profile: ExpertProfile, code_id: int) -> JsonResponse:
    """Save the page as a draft; JSON in, JSON out (409 once submitted)."""
    code = _code(profile, code_id)
    if code.status == ToMGoldCode.Status.SUBMITTED:
        return JsonResponse({"error": "This ToM code was already submitted."}, status=409)
    return draft_autosave_reply(lambda: tom_gold_save(code=code, user=request.user, **_posted(_json_object(request))))


def _json_object(request: HttpRequest) -> dict:
    data = json.loads(request.body or b"{}")
    if not isinstance(data, dict):
        raise ExpertError("Send a JSON object.")
    return data


@staff_required
def staff_tom_gold(request: HttpRequest) -> HttpResponse:
    """Draw a ToM study's gold sample (size, seed, experts) and follow its coding per stratum and expert."""
    studies = Study.objects.filter(tom_coding=True).order_by("-created_at")
    chosen = studies.filter(pk=(request.GET.get("study") or request.POST.get("study") or 0)
                            if str(request.GET.get("study") or request.POST.get("study") or "").isdigit()
                            else 0).first()
    form = ToMGoldDrawForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and chosen is not None and form.is_valid():
        try:
            tom_gold_sample_draw(study=chosen, user=request.user, **form.draw_kwargs())
        except ExpertError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, "Gold sample drawn and assigned.")
            return redirect(f"{reverse('expert:staff_tom_gold')}?study={chosen.pk}")
    sample = sel.tom_gold_sample(chosen) if chosen is not None else None
    return render(request, "experts/staff_tom_gold.html", {
        "studies": studies, "study": chosen, "form": form, "sample": sample,
        "strata": sel.tom_gold_progress(sample) if sample else [],
        "experts": sel.tom_gold_expert_progress(sample) if sample else []},
        status=400 if form.errors else 200)
