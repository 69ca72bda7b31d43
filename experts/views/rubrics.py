"""Rubric authoring pages: task overview, draft editor with live linting, read-only versions, task files."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from experts import selectors as sel
from experts.exceptions import RubricIncomplete, RubricNotEditable, StaleRubricEdit
from experts.forms import (
    CriterionFormSet,
    RubricMetaForm,
    RubricStartForm,
    criterion_initial,
    formset_inputs,
)
from experts.models import ExpertProfile
from experts.rubric_lint import MAX_CRITERIA, MIN_CRITERIA, criteria_count, lint_rubric
from experts.services.rubric_authoring import (
    CriterionInput,
    category_point_problems,
    draft_rows,
    rubric_draft_save,
    rubric_draft_start,
)
from experts.views.access import expert_page
from grading.models import Rubric
from grading.schemas import RUBRIC_CATEGORIES
from studies.files import serve_private_file
from studies.models import TaskInstance

PREFIX = "criteria"


def _domain_task(profile: ExpertProfile, task_id: int) -> TaskInstance:
    return get_object_or_404(TaskInstance.objects.filter(sector__in=profile.sectors.all()).select_related("sector"),
                             pk=task_id)


@expert_page
def task_detail(request: HttpRequest, profile: ExpertProfile, task_id: int) -> HttpResponse:
    task = _domain_task(profile, task_id)
    rubrics = sel.visible_rubrics(profile).filter(task=task).order_by("-version")
    auto = sel.auto_rubric_for_matching(task)
    return render(request, "experts/task_detail.html", {
        "task": task, "rubrics": rubrics, "auto": auto, "files": sel.task_files_for_expert(task),
        "start_form": RubricStartForm(rubrics=rubrics)})


@expert_page
@require_POST
def rubric_start(request: HttpRequest, profile: ExpertProfile, task_id: int) -> HttpResponse:
    task = _domain_task(profile, task_id)
    form = RubricStartForm(request.POST, rubrics=sel.visible_rubrics(profile).filter(task=task))
    if not form.is_valid():
        messages.error(request, "That rubric cannot be used as a starting point.")
        return redirect("expert:task_detail", task_id=task.pk)
    try:
        rubric = rubric_draft_start(task=task, author=request.user, based_on=form.cleaned_data["based_on"])
    except RubricNotEditable as exc:
        messages.error(request, exc.message)
        return redirect("expert:task_detail", task_id=task.pk)
    messages.success(request, f"Draft version {rubric.version} started.")
    return redirect("expert:rubric_edit", rubric_id=rubric.pk)


@expert_page
def rubric_detail(request: HttpRequest, profile: ExpertProfile, rubric_id: int) -> HttpResponse:
    rubric = get_object_or_404(sel.visible_rubrics(profile), pk=rubric_id)
    criteria = sel.rubric_criteria(rubric)
    return render(request, "experts/rubric_detail.html", {
        "rubric": rubric, "criteria": criteria, "own": rubric.author_id == request.user.pk,
        "hints": lint_rubric({"description": c.description, "label": c.label} for c in criteria)})


def _auto_choices(rubric: Rubric) -> tuple[Rubric | None, list[tuple[int, str]]]:
    auto = sel.auto_rubric_for_matching(rubric.task)
    if auto is None:
        return None, []
    return auto, [(c.pk, f"{c.key}: {c.description[:90]}") for c in auto.criteria.order_by("order", "pk")]


def _blank_formset(rows: list[CriterionInput], choices: list[tuple[int, str]]) -> Any:
    initial = [criterion_initial(row) for row in rows]
    while len(initial) < MIN_CRITERIA:
        initial.append({"category": "requirements"})
    return CriterionFormSet(prefix=PREFIX, initial=initial, form_kwargs={"auto_choices": choices})


def _render_editor(request: HttpRequest, rubric: Rubric, formset: Any, meta: RubricMetaForm, *,
                   problems: list[tuple[int | None, str]] | None = None, stale: str = "",
                   status: int = 200) -> HttpResponse:
    auto, _ = _auto_choices(rubric)
    row_problems: dict[int, list[str]] = {}
    general = []
    for index, message in problems or []:
        if index is None:
            general.append(message)
        else:
            row_problems.setdefault(index, []).append(message)
    rows = [(form, row_problems.get(i, [])) for i, form in enumerate(formset.forms)]
    categories = [{"code": code, "name": name, "points": points} for code, name, points in RUBRIC_CATEGORIES]
    return render(request, "experts/rubric_edit.html", {
        "rubric": rubric, "formset": formset, "rows": rows, "meta": meta, "auto": auto,
        "problems": problems or [], "general_problems": general, "stale": stale,
        "saved_criteria": sel.rubric_criteria(rubric) if stale else [],
        "categories": categories, "min_criteria": MIN_CRITERIA, "max_criteria": MAX_CRITERIA,
    }, status=status)


@expert_page
def rubric_edit(request: HttpRequest, profile: ExpertProfile, rubric_id: int) -> HttpResponse:
    rubric = get_object_or_404(sel.own_rubrics(profile).select_related("task__sector"), pk=rubric_id)
    if rubric.status != Rubric.Status.DRAFT:
        messages.info(request, f"Version {rubric.version} is {rubric.get_status_display().lower()}; it can no "
                               "longer be edited.")
        return redirect("expert:rubric_detail", rubric_id=rubric.pk)
    _, choices = _auto_choices(rubric)
    if request.method != "POST":
        meta = RubricMetaForm(initial={"lock_version": rubric.lock_version,
                                       "notes": (rubric.details or {}).get("notes", "")})
        return _render_editor(request, rubric, _blank_formset(draft_rows(rubric), choices), meta)

    formset = CriterionFormSet(request.POST, prefix=PREFIX, form_kwargs={"auto_choices": choices})
    meta = RubricMetaForm(request.POST)
    if not (formset.is_valid() and meta.is_valid()):
        messages.error(request, "Some fields need fixing (see below). Nothing was saved yet.")
        return _render_editor(request, rubric, formset, meta, status=400)
    submit = request.POST.get("action") == "submit"
    try:
        saved = rubric_draft_save(rubric=rubric, author=request.user, lock_version=meta.cleaned_data["lock_version"],
                                  criteria=formset_inputs(formset), notes=meta.cleaned_data["notes"], submit=submit)
    except StaleRubricEdit as exc:
        # Keep what the expert typed; the current lock version lets them deliberately save over the other copy.
        fresh = RubricMetaForm(initial={"lock_version": exc.current_lock_version, "notes": meta.cleaned_data["notes"]})
        unbound = CriterionFormSet(prefix=PREFIX, initial=[criterion_initial(r) for r in formset_inputs(formset)],
                                   form_kwargs={"auto_choices": choices})
        rubric.refresh_from_db()
        return _render_editor(request, rubric, unbound, fresh, stale=exc.message, status=409)
    except RubricIncomplete as exc:
        rubric.refresh_from_db()
        fresh = RubricMetaForm(initial={"lock_version": rubric.lock_version,
                                        "notes": (rubric.details or {}).get("notes", "")})
        return _render_editor(request, rubric, _blank_formset(draft_rows(rubric), choices), fresh,
                              problems=exc.problems, status=400)
    except RubricNotEditable as exc:
        messages.error(request, exc.message)
        return redirect("expert:rubric_detail", rubric_id=rubric.pk)
    if submit:
        messages.success(request, f"Version {saved.version} was submitted for approval. The study team will "
                                  "review it.")
        return redirect("expert:rubric_detail", rubric_id=saved.pk)
    messages.success(request, f"Draft saved ({criteria_count(saved.criteria.count())}).")
    return redirect(reverse("expert:rubric_edit", kwargs={"rubric_id": saved.pk}))


@expert_page
@require_POST
def rubric_lint(request: HttpRequest, profile: ExpertProfile) -> JsonResponse:
    """Return lint findings for the editor's current rows (``{"criteria": [{description, label}, ...]}``)."""
    try:
        data = json.loads(request.body or b"{}")
        rows = data["criteria"]
        if not isinstance(rows, list) or len(rows) > 60:
            raise ValueError
        criteria = [{"description": str(r.get("description", ""))[:2000], "label": str(r.get("label", ""))[:16],
                     "category": str(r.get("category", ""))[:32], "points": str(r.get("points", "") or "")[:20]}
                    for r in rows]
    except (ValueError, KeyError, TypeError, AttributeError):
        return JsonResponse({"error": "Send {\"criteria\": [{\"description\": ..., \"label\": ...}]}."}, status=400)
    hints = [hint.to_json() for hint in lint_rubric(criteria)]
    if any(row["category"] for row in criteria):
        hints += _category_point_hints(criteria)
    return JsonResponse({"hints": hints})


def _category_point_hints(criteria: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The category and points rules submission enforces, as live hints on the rows the expert sees."""
    used = [(index, row) for index, row in enumerate(criteria) if row["description"].strip() or row["label"]]
    inputs, hints = [], []
    for index, row in used:
        raw = row["points"].strip().replace(",", ".")
        try:
            points = float(raw) if raw else None
        except ValueError:
            hints.append({"code": "points", "severity": "error", "index": index,
                          "message": "Points must be a number (or blank to share the category's points)."})
            points = None
        inputs.append(CriterionInput(description=row["description"], label=row["label"], category=row["category"],
                                     points=points))
    for position, message in category_point_problems(inputs):
        hints.append({"code": "points", "severity": "error", "message": message,
                      "index": None if position is None else used[position][0]})
    return hints


@expert_page
def task_file(request: HttpRequest, profile: ExpertProfile, task_id: int, file_id: int) -> HttpResponse:
    task = get_object_or_404(TaskInstance, pk=task_id)
    if not sel.expert_may_see_task(profile, task):
        raise Http404
    stored = get_object_or_404(sel.task_files_for_expert(task), pk=file_id)
    return serve_private_file(stored.file, stored.name)
