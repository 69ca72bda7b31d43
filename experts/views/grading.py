"""Blind grading pages: the grade form, its autosave endpoint, deliverable downloads, the submitted view.

Until the expert submits, the page shows the task, the rubric and the deliverables only: no agent name
or model, no automated score or judge output, no other expert's grade, and nothing saying an episode is
a gold check. After submission the reveal shows what was hidden (except gold status).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from experts import metrics
from experts import selectors as sel
from experts.exceptions import ExpertError, GradeIncomplete, GradeNotEditable, NoGradingRubric
from experts.forms import JUDGEMENTS, GradeInput, grade_input_from_json, grade_input_from_post
from experts.models import ExpertAssignment, ExpertGrade, ExpertProfile
from experts.services import preview
from experts.services.grading import grade_open, grade_save_draft, grade_submit
from experts.views.access import grader_page
from experts.views.autosave import draft_autosave_reply
from studies.files import serve_private_file


def _assignment(profile: ExpertProfile, assignment_id: int) -> ExpertAssignment:
    return get_object_or_404(sel.expert_assignments(profile).select_related("expert"), pk=assignment_id)


def _render_grade(request: HttpRequest, assignment: ExpertAssignment, grade: ExpertGrade, *,
                  posted: GradeInput | None = None, problems: dict[str, str] | None = None,
                  status: int = 200) -> HttpResponse:
    episode = assignment.episode
    context = {
        "assignment": assignment, "grade": grade, "task": episode.task,
        "rows": sel.grade_rows(grade, posted=posted.posted if posted else None, problems=problems),
        "overall": posted.overall if posted else grade.overall,
        "feedback": posted.feedback if posted else grade.feedback,
        "problems": problems or {}, "judgements": JUDGEMENTS,
        "files": sel.deliverable_files(episode), "task_files": sel.task_files_for_expert(episode.task),
    }
    if grade.status == ExpertGrade.Status.SUBMITTED:
        context["reveal"] = sel.grade_reveal(grade)
        context["completed"] = metrics.completion((row.criterion.label, row.verdict) for row in context["rows"]
                                                  if row.verdict in metrics.VERDICTS)
        return render(request, "experts/grade_submitted.html", context, status=status)
    context["preview"] = preview.deliverable_preview(episode)
    return render(request, "experts/grade.html", context, status=status)


@grader_page
def grade(request: HttpRequest, profile: ExpertProfile, assignment_id: int) -> HttpResponse:
    assignment = _assignment(profile, assignment_id)
    try:
        current = grade_open(assignment=assignment, user=request.user)
    except NoGradingRubric as exc:
        return render(request, "experts/grade_waiting.html", {"assignment": assignment, "message": exc.message})
    except GradeNotEditable:
        raise Http404
    if request.method != "POST":
        return _render_grade(request, assignment, current)
    if current.status == ExpertGrade.Status.SUBMITTED:
        messages.info(request, "This grade was already submitted; it can no longer change.")
        return redirect("expert:grade", assignment_id=assignment.pk)
    posted = grade_input_from_post(request.POST, [c.pk for c in current.rubric.criteria.all()])
    try:
        if request.POST.get("action") == "submit":
            grade_submit(grade=current, user=request.user, **posted.kwargs(), confirm_critical_accept=True,
                         accept_despite_critical=request.POST.get("accept_despite_critical") == "1")
            messages.success(request, "Grade submitted. Thank you!")
        else:
            grade_save_draft(grade=current, user=request.user, **posted.kwargs())
            messages.success(request, "Draft saved.")
    except GradeIncomplete as exc:
        current.refresh_from_db()
        messages.error(request, exc.message)
        return _render_grade(request, assignment, current, posted=posted, problems=exc.problems, status=400)
    except GradeNotEditable as exc:
        messages.error(request, exc.message)
    except ExpertError as exc:
        messages.error(request, exc.message)
        return _render_grade(request, assignment, current, posted=posted, status=400)
    return redirect("expert:grade", assignment_id=assignment.pk)


@grader_page
@require_POST
def grade_autosave(request: HttpRequest, profile: ExpertProfile, assignment_id: int) -> JsonResponse:
    """Save the page's answers as a draft; JSON in, JSON out (409 once the grade is submitted)."""
    assignment = _assignment(profile, assignment_id)
    current = ExpertGrade.objects.filter(assignment=assignment).first()
    if current is None:
        return JsonResponse({"error": "Open the grading page first."}, status=409)
    return draft_autosave_reply(
        lambda: grade_save_draft(grade=current, user=request.user, **grade_input_from_json(request.body).kwargs()),
        not_editable=(GradeNotEditable,))


@grader_page
def grade_file(request: HttpRequest, profile: ExpertProfile, assignment_id: int, file_id: int) -> HttpResponse:
    assignment = _assignment(profile, assignment_id)
    stored = get_object_or_404(sel.deliverable_files(assignment.episode), pk=file_id)
    return serve_private_file(stored.file, stored.name)
