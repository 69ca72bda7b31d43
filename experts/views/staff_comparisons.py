"""Staff pages for blind comparisons: build a set, give it to experts, withdraw it, read the answers and raw counts.

Staff see arms here (that is the point of the page); experts never do.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from experts import comparison_selectors as csel
from experts.comparison_forms import ComparisonSetForm
from experts.exceptions import ExpertError
from experts.models import ComparisonAssignment, ComparisonSet, ExpertProfile
from experts.services.comparisons import comparison_assign, comparison_cancel, comparison_set_create
from studies.models import Study, TaskInstance
from studies.roles import staff_required


def _page_url(study: Study | None, task: TaskInstance | None = None) -> str:
    url = reverse("expert:staff_comparisons")
    if study is None:
        return url
    return f"{url}?study={study.pk}" + (f"&task={task.pk}" if task is not None else "")


def _choices(candidates: list[csel.Candidate]) -> list[tuple[str, str]]:
    return [(f"{c.kind}:{c.pk}", f"{c.arm.label} · {'run' if c.kind == 'solo_run' else 'episode'} #{c.pk}"
             f"{' · ' + c.who if c.kind == 'episode' else ''}"
             f"{'' if c.score is None else f' · score {c.score:.1f}'}") for c in candidates]


def _selection(request: HttpRequest) -> tuple[Study | None, list[Study], TaskInstance | None]:
    studies = list(Study.objects.order_by("-created_at"))
    raw = request.GET.get("study") or request.POST.get("study") or ""
    study = next((s for s in studies if str(s.pk) == raw), None)
    task_raw = request.GET.get("task") or request.POST.get("task") or ""
    task = None
    if study is not None and task_raw.isdigit():
        task = csel.tasks_with_deliverables(study).filter(pk=int(task_raw)).first()
    return study, studies, task


@staff_required
def comparisons(request: HttpRequest) -> HttpResponse:
    """Choose a study and a task, tick two to four deliverables and the experts; see every set of the study."""
    study, studies, task = _selection(request)
    candidates = csel.comparison_candidates(study, task) if study and task else []
    form = None
    if task is not None:
        form = ComparisonSetForm(request.POST if request.method == "POST" else None, choices=_choices(candidates),
                                 experts=csel.assignable_experts(),
                                 initial={"deliverables": [f"{k}:{pk}" for k, pk in
                                                           csel.proposed_candidates(candidates)]})
    if request.method == "POST" and form is not None and form.is_valid():
        episode_ids, run_ids = form.sources()
        try:
            created = comparison_set_create(study=study, task=task, episode_ids=episode_ids, solo_run_ids=run_ids,
                                            experts=list(form.cleaned_data["experts"]), actor=request.user,
                                            note=form.cleaned_data["note"])
        except ExpertError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Comparison set #{created.pk} created with "
                                      f"{len(episode_ids) + len(run_ids)} deliverables for "
                                      f"{len(form.cleaned_data['experts'])} expert(s).")
            return redirect(_page_url(study, task))
    context = {"study": study, "studies": studies, "task": task, "form": form, "candidates": candidates}
    if study is not None:
        context["tasks"] = list(csel.tasks_with_deliverables(study)[:500])
        context["sets"] = _sets_view(study)
        context["pair_counts"] = csel.raw_arm_pair_counts(csel.study_submitted_comparisons(study))
        context["experts"] = list(csel.assignable_experts())
    status = 400 if request.method == "POST" and form is not None and form.errors else 200
    return render(request, "experts/staff_comparisons.html", context, status=status)


def _sets_view(study: Study) -> list[dict]:
    """Each set with its deliverables' arms and each expert's answer, labelled for staff."""
    out = []
    for comparison_set in csel.comparison_sets(study)[:200]:
        items = {item.pk: item for item in comparison_set.items.all()}
        arms = {pk: csel.item_arm(item) for pk, item in items.items()}
        answers = []
        for assignment in comparison_set.assignments.all():
            answers.append({"assignment": assignment, "rows": [
                {"position": p.position, "arm": arms[p.item_id].label, "rank": p.rank,
                 "acceptability": p.get_acceptability_display() if p.acceptability else "",
                 "source": (f"episode #{items[p.item_id].episode_id}" if items[p.item_id].episode_id
                            else f"run #{items[p.item_id].solo_run_id}")}
                for p in assignment.placements.all()]})
        out.append({"set": comparison_set, "arms": [arms[pk].label for pk in items], "answers": answers})
    return out


@staff_required
@require_POST
def comparison_set_assign(request: HttpRequest, set_id: int) -> HttpResponse:
    comparison_set = get_object_or_404(ComparisonSet.objects.select_related("study", "task"), pk=set_id)
    expert = ExpertProfile.objects.filter(pk=request.POST.get("expert") or 0).select_related("user").first()
    if expert is None:
        messages.error(request, "Choose an expert to give this set to.")
    else:
        try:
            comparison_assign(comparison_set=comparison_set, expert=expert, actor=request.user)
            messages.success(request, f"Set #{comparison_set.pk} given to {expert.user.get_username()}.")
        except ExpertError as exc:
            messages.error(request, exc.message)
    return redirect(_page_url(comparison_set.study))


@staff_required
@require_POST
def comparison_assignment_cancel(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = get_object_or_404(ComparisonAssignment.objects.select_related("comparison_set__study"),
                                   pk=assignment_id)
    try:
        comparison_cancel(assignment=assignment, actor=request.user)
        messages.success(request, "Comparison withdrawn.")
    except ExpertError as exc:
        messages.error(request, exc.message)
    return redirect(_page_url(assignment.comparison_set.study))
