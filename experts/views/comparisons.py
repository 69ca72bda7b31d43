"""Blind comparison pages: rank two to four deliverables of one task, autosave, downloads by shown position.

The page shows the task brief and each deliverable under its shown number only; file links are addressed
by (shown position, file number), so not even a URL tells an episode from a solo-agent run. Nothing is
revealed after submission (the expert may grade one of these deliverables later).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from experts import comparison_selectors as csel
from experts import selectors as sel
from experts.comparison_forms import ComparisonInput, comparison_input_from_json, comparison_input_from_post
from experts.exceptions import ComparisonIncomplete, ComparisonNotEditable, ExpertError
from experts.models import ComparisonAssignment, ComparisonPlacement, ExpertProfile
from experts.services import preview
from experts.services.comparisons import comparison_open, comparison_save_draft, comparison_submit
from experts.views.access import grader_page
from experts.views.autosave import draft_autosave_reply
from studies.files import serve_private_file


def _assignment(profile: ExpertProfile, assignment_id: int) -> ComparisonAssignment:
    return get_object_or_404(csel.expert_comparisons(profile), pk=assignment_id)


def _render(request: HttpRequest, assignment: ComparisonAssignment, *, posted: ComparisonInput | None = None,
            problems: dict[str, str] | None = None, status: int = 200) -> HttpResponse:
    shown = csel.shown_deliverables(assignment, posted=posted.posted if posted else None, problems=problems)
    submitted = assignment.status == ComparisonAssignment.Status.SUBMITTED
    if not submitted:
        for deliverable in shown:
            deliverable.preview = preview.placement_preview(deliverable.placement)
    task = assignment.comparison_set.task
    return render(request, "experts/compare.html", {
        "assignment": assignment, "task": task, "shown": shown, "ranks": list(range(1, len(shown) + 1)),
        "acceptability": ComparisonPlacement.Acceptability.choices, "submitted": submitted,
        "justification": posted.justification if posted else assignment.justification,
        "problems": problems or {}, "task_files": sel.task_files_for_expert(task),
    }, status=status)


@grader_page
def compare(request: HttpRequest, profile: ExpertProfile, assignment_id: int) -> HttpResponse:
    assignment = _assignment(profile, assignment_id)
    try:
        assignment = comparison_open(assignment=assignment, user=request.user)
    except ComparisonNotEditable:
        raise Http404
    if request.method != "POST":
        return _render(request, assignment)
    if assignment.status == ComparisonAssignment.Status.SUBMITTED:
        messages.info(request, "This comparison was already submitted; it can no longer change.")
        return redirect("expert:compare", assignment_id=assignment.pk)
    positions = list(assignment.placements.values_list("position", flat=True))
    posted = comparison_input_from_post(request.POST, positions)
    try:
        if request.POST.get("action") == "submit":
            comparison_submit(assignment=assignment, user=request.user, **posted.kwargs())
            messages.success(request, "Comparison submitted. Thank you!")
        else:
            comparison_save_draft(assignment=assignment, user=request.user, **posted.kwargs())
            messages.success(request, "Draft saved.")
    except ComparisonIncomplete as exc:
        assignment.refresh_from_db()
        messages.error(request, exc.message)
        return _render(request, assignment, posted=posted, problems=exc.problems, status=400)
    except ComparisonNotEditable as exc:
        messages.error(request, exc.message)
    except ExpertError as exc:
        messages.error(request, exc.message)
        return _render(request, assignment, posted=posted, status=400)
    return redirect("expert:compare", assignment_id=assignment.pk)


@grader_page
@require_POST
def compare_autosave(request: HttpRequest, profile: ExpertProfile, assignment_id: int) -> JsonResponse:
    """Save the page's answers as a draft; JSON in, JSON out (409 once submitted or withdrawn)."""
    assignment = _assignment(profile, assignment_id)
    return draft_autosave_reply(
        lambda: comparison_save_draft(assignment=assignment, user=request.user,
                                      **comparison_input_from_json(request.body).kwargs()),
        not_editable=(ComparisonNotEditable,))


@grader_page
def compare_file(request: HttpRequest, profile: ExpertProfile, assignment_id: int, position: int,
                 number: int) -> HttpResponse:
    assignment = _assignment(profile, assignment_id)
    placement = get_object_or_404(assignment.placements.select_related("item"), position=position)
    shown = next((f for f in csel.placement_files(placement) if f.index == number), None)
    if shown is None:
        raise Http404
    return serve_private_file(shown.file, shown.shown_name)
