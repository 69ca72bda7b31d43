"""Staff dashboard pages inside the admin. URLs wrap every view in ``admin.site.admin_view`` (active staff only).

Views parse the request, call one selector or service, and render; pages never run a long analysis — they
show the stored result for the current data, a progress bar while a job computes it, or "no data yet".
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console.dashboard import cached, counts, pages, power, selectors, services
from console.dashboard.costs import costs_page
from console.dashboard.exceptions import DashboardError
from console.dashboard.forms import ACTION_FORMS, ExportForm, PayoutForm
from console.dashboard.glossary import GLOSSARY
from console.dashboard.preferences import judge_page, preference_page
from console.dashboard.synergy import synergy_page
from console.dashboard.synergy_planning import synergy_plan_context, synergy_plan_inputs, synergy_plan_request
from console.dashboard.tom import tom_page
from console.dashboard.transcripts import transcript_overview, transcript_page
from console.payouts import payout_formats_for
from experts import comparison_selectors as csel
from experts import selectors as expert_selectors
from experts.judge_comparison_selectors import study_judge_preferences
from grading.exceptions import RetryRefused
from grading.services.pipeline import episode_grading_retry
from pairing.services import DesignError, design_mode_set
from rating import selectors as rating_selectors
from studies.conditions import crossing_summary
from studies.files import serve_private_file
from studies.models import BackgroundJob, Study
from studies.roles import can_export_pii
from studies.services import staff_actions

TABS = (
    ("overview", "Overview"),
    ("leaderboard", "Leaderboard"),
    ("gate", "Expert gate"),
    ("surveys", "Surveys"),
    ("collaboration", "Collaboration"),
    ("costs", "Time & cost"),
    ("synergy", "Who benefits"),
    ("tom", "Why some gain more"),
    ("comparisons", "Comparisons"),
    ("exports", "Exports & payouts"),
)


def _study(slug: str) -> Study:
    study = selectors.study_get(slug)
    if study is None:
        raise Http404("No such study.")
    return study


def _job(study: Study, job_id: int, request: HttpRequest) -> BackgroundJob:
    job = selectors.job_get(study, job_id, user=request.user)
    if job is None:
        raise Http404("No such job.")
    return job


def _render(
    request: HttpRequest, template: str, study: Study | None, tab: str, title: str, **extra: Any
) -> HttpResponse:
    if study is not None and "counts" not in extra:
        # Every count that two pages show comes from here, so the pages agree.
        extra["counts"] = counts.study_counts(study)
    context = {
        **admin.site.each_context(request),
        "title": title,
        "study": study,
        "tab": tab,
        "tabs": TABS,
        **extra,
    }
    return render(request, template, context)


def _analysis_context(request: HttpRequest, study: Study, kind: str, *, auto: bool) -> selectors.AnalysisState:
    """Return the analysis state; cheap analyses start by themselves when their data has no result yet."""
    snapshot = rating_selectors.latest_snapshot(study)
    state = selectors.analysis_state(study, kind, snapshot)
    if auto and state.has_data and state.result is None and state.job is None and state.failed is None:
        try:
            job = services.analysis_request(study=study, kind=kind, actor=request.user)
        except DashboardError:
            return state
        state = selectors.AnalysisState(kind, state.cache_key, None, job, state.stale, None)
    return state


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return _render(request, "console/index.html", None, "", "Study dashboard", studies=selectors.study_list())


@require_GET
def glossary(request: HttpRequest) -> HttpResponse:
    return _render(request, "console/glossary.html", None, "", "Glossary of the dashboard's terms",
                   terms=list(GLOSSARY.values()))


@require_GET
def overview(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    page = request.GET.get("monitor_page", "1")
    data = cached.overview(study, monitor_page=int(page) if page.isdigit() and len(page) < 7 else 1)
    study_counts = data["counts"]
    return _render(
        request, "console/overview.html", study, "overview", f"{study.name}: overview",
        data=data, funnel_chart=pages.funnel_chart(data["funnel"]), counts=study_counts,
        verdicts=pages.overview_verdicts(data, study_counts),
        invite_url=request.build_absolute_uri(reverse("worker:join", args=[study.invite_code])),
        demo_accounts=_demo_accounts(study),
    )


def _demo_accounts(study: Study) -> dict[str, Any] | None:
    """The demo's published accounts, shown on the demo study's overview (never in production)."""
    from console.demo import DEMO_ACCOUNTS, DEMO_PASSWORD, DEMO_SLUG, demo_refused_reason

    if study.slug != DEMO_SLUG or demo_refused_reason():
        return None
    return {"accounts": DEMO_ACCOUNTS, "password": DEMO_PASSWORD}


@require_GET
def leaderboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    cluster = selectors.stability_cluster(request.GET.get("cluster"))
    data = cached.leaderboard(study, request.GET.get("page"), cluster=cluster)
    graders = _analysis_context(request, study, "graders", auto=True)
    design = power.power_context(study)
    return _render(
        request, "console/leaderboard.html", study, "leaderboard", f"{study.name}: leaderboard",
        data=data, graders=graders, graders_shown=graders.result or (graders.stale.result if graders.stale else None),
        graded_states=rating_selectors.graded_episode_states(study) if graders.has_data else None,
        heatmap=pages.heatmap_chart(data.get("pairwise")), power=design,
        residual_chart=pages.residual_chart((data.get("model_checks") or {}).get("residual_qq")),
        **pages.leaderboard_words(study, data, design),
    )


@require_GET
def gate(request: HttpRequest, slug: str) -> HttpResponse:
    """Which judges' rubric-category scores pass the expert gate, which fail and why, and the calibration sample."""
    study = _study(slug)
    return _render(request, "console/gate.html", study, "gate", f"{study.name}: expert gate",
                   data=expert_selectors.study_gate(study), job=selectors.latest_job(study, "gate"))


@require_POST
def gate_evaluate(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    services.gate_evaluation_request(study=study, actor=request.user)
    return redirect("dashboard:gate", slug=study.slug)


@require_GET
def surveys(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    state = _analysis_context(request, study, "surveys", auto=True)
    shown = state.result or (state.stale.result if state.stale else None)
    return _render(
        request, "console/surveys.html", study, "surveys", f"{study.name}: surveys",
        state=state, result=shown, view=pages.survey_page(shown),
    )


@require_GET
def collaboration(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    state = _analysis_context(request, study, "collaboration", auto=True)
    shown = state.result or (state.stale.result if state.stale else None)
    return _render(
        request, "console/collaboration.html", study, "collaboration", f"{study.name}: collaboration",
        state=state, result=shown, view=pages.collaboration_page(shown),
        transcripts_view=transcript_page(shown, transcript_overview(study)),
    )


@require_GET
def synergy(request: HttpRequest, slug: str) -> HttpResponse:
    """Who benefits from the agent: the stored synergy fit (the solo condition against the agents)."""
    study = _study(slug)
    state = _analysis_context(request, study, "synergy", auto=True)
    shown = state.result or (state.stale.result if state.stale else None)
    return _render(
        request, "console/synergy.html", study, "synergy", f"{study.name}: who benefits from the agent",
        state=state, result=shown, view=synergy_page(shown), crossing=crossing_summary(study=study),
        plan=synergy_plan_context(study), plan_inputs=synergy_plan_inputs(study, (shown or {}).get("fit")),
    )


@require_GET
def tom(request: HttpRequest, slug: str) -> HttpResponse:
    """Why some workers gain more from the agent: the stored ToM analysis (studies with ToM coding on)."""
    study = _study(slug)
    state = _analysis_context(request, study, "tom", auto=True)
    shown = state.result or (state.stale.result if state.stale else None)
    return _render(request, "console/tom.html", study, "tom", f"{study.name}: why some gain more from the agent",
                   state=state, result=shown, view=tom_page(shown))


def comparisons(request: HttpRequest, slug: str) -> HttpResponse:
    """Which deliverable experts prefer: the stored preference fit of the blind comparisons and rubric scores,
    beside the raw counts of ranked pairs."""
    study = _study(slug)
    state = _analysis_context(request, study, "preferences", auto=True)
    shown = state.result or (state.stale.result if state.stale else None)
    return _render(
        request, "console/comparisons.html", study, "comparisons", f"{study.name}: blind comparisons",
        state=state, result=shown, view=preference_page(shown),
        pair_counts=csel.raw_arm_pair_counts(csel.study_submitted_comparisons(study)),
        judge_view=judge_page(study_judge_preferences(study)),
    )


@require_POST
def synergy_plan_run(request: HttpRequest, slug: str) -> HttpResponse:
    """Start a plan of the solo condition for a target boost-interval width."""
    study = _study(slug)
    state = selectors.analysis_state(study, "synergy", rating_selectors.latest_snapshot(study))
    shown = state.result or (state.stale.result if state.stale else None)
    try:
        synergy_plan_request(study=study, actor=request.user, fit=(shown or {}).get("fit"),
                             width=request.POST.get("width"))
    except DashboardError as exc:
        messages.error(request, f"Nothing was started. {exc}")
    return redirect(reverse("dashboard:synergy", kwargs={"slug": study.slug}) + "#plan-h")


def costs(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    return _render(request, "console/costs.html", study, "costs", f"{study.name}: time and cost",
                   **costs_page(study, request.GET))


def exports(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    may_pii = can_export_pii(request.user)
    if request.method == "POST":
        try:
            if request.POST.get("what") == "payouts":
                form = PayoutForm(request.POST)
                if not form.is_valid():
                    raise DashboardError("Choose a payout format.")
                services.payouts_request(
                    study=study, actor=request.user, file_format=form.cleaned_data["file_format"],
                    include_pii=form.cleaned_data["include_pii"],
                )
                messages.success(request, "The payout file is being prepared; it appears below when ready.")
            else:
                form = ExportForm(request.POST)
                form.is_valid()
                services.export_request(study=study, actor=request.user, include_pii=form.cleaned_data["include_pii"])
                messages.success(request, "The export is being prepared; it appears below when ready.")
        except DashboardError as exc:
            messages.error(request, str(exc))
        return redirect("dashboard:exports", slug=study.slug)
    if request.method != "GET":
        return HttpResponse(status=405)
    return _render(
        request, "console/exports.html", study, "exports", f"{study.name}: exports and payouts",
        jobs=selectors.file_jobs(study, user=request.user), may_pii=may_pii, export_form=ExportForm(),
        payout_form=PayoutForm(), payout_formats=payout_formats_for(may_export_ids=may_pii),
    )


@require_POST
def analysis_run(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    study = _study(slug)
    if kind not in selectors.ANALYSIS_KINDS:
        raise Http404
    cluster = selectors.stability_cluster(request.POST.get("cluster"))
    try:
        services.analysis_request(study=study, kind=kind, actor=request.user, cluster=cluster)
    except DashboardError as exc:
        messages.error(request, str(exc))
    target = {"stability": "dashboard:leaderboard", "graders": "dashboard:leaderboard",
              "surveys": "dashboard:surveys", "synergy": "dashboard:synergy",
              "tom": "dashboard:tom", "preferences": "dashboard:comparisons"}.get(kind, "dashboard:collaboration")
    url = reverse(target, kwargs={"slug": study.slug})
    return redirect(url + ("?cluster=human" if kind == "stability" and cluster == "human" else ""))


@require_GET
def job_status(request: HttpRequest, slug: str, job_id: int) -> JsonResponse:
    study = _study(slug)
    job = _job(study, job_id, request)
    download = None
    if job.status == BackgroundJob.Status.DONE and job.file:
        download = reverse("dashboard:job_download", kwargs={"slug": study.slug, "job_id": job.pk})
    return JsonResponse(
        {
            "id": job.pk, "kind": job.kind, "status": job.status, "done": job.progress_done,
            "total": job.progress_total, "percent": job.percent, "error": job.error, "download_url": download,
        }
    )


@require_GET
def job_download(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    study = _study(slug)
    job = _job(study, job_id, request)
    if job.status != BackgroundJob.Status.DONE or not job.file:
        raise Http404
    services.job_download_record(job=job, actor=request.user)
    name = (job.result or {}).get("file_name") or job.file.name.rsplit("/", 1)[-1]
    return serve_private_file(job.file, name)


def _run_action(action: str, data: dict[str, Any], actor: Any) -> str:
    if action == "remind":
        staff_actions.participant_remind(participant=data["participant"], actor=actor, message=data["message"])
        return f"Reminder sent to {data['participant'].pseudonym}."
    if action == "withdraw":
        staff_actions.participant_mark_withdrawn(participant=data["participant"], actor=actor, reason=data["reason"])
        return f"{data['participant'].pseudonym} is marked withdrawn; their ratings are being retracted."
    if action == "extend":
        episode = staff_actions.episode_extend_deadline(episode=data["episode"], actor=actor, hours=data["hours"])
        return f"Task {episode.pk} now ends {episode.deadline_at:%Y-%m-%d %H:%M} UTC."
    if action == "skip":
        episode = staff_actions.episode_skip(episode=data["episode"], actor=actor, reason=data["reason"])
        return f"Task {episode.pk} is skipped."
    if action == "reassign":
        episode = staff_actions.episode_reassign(episode=data["episode"], actor=actor, agent=data["agent"])
        return f"Task {episode.pk} is now paired with {data['agent'].name}."
    episode = episode_grading_retry(episode=data["episode"], actor=actor)
    return f"Task {episode.pk} is back in the grading queue."


@require_POST
def staff_action(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    study = _study(slug)
    form_class = ACTION_FORMS.get(action)
    if form_class is None:
        raise Http404
    form = form_class(request.POST, study=study)
    anchor = "#queue" if action == "retry" else "#monitor"
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
        messages.error(request, f"Nothing was changed. {problems}")
        return redirect(reverse("dashboard:overview", kwargs={"slug": study.slug}) + anchor)
    try:
        messages.success(request, _run_action(action, form.cleaned_data, request.user))
    except (staff_actions.StaffActionError, RetryRefused) as exc:
        messages.error(request, str(exc))
    cached.overview_forget(study)
    return redirect(reverse("dashboard:overview", kwargs={"slug": study.slug}) + anchor)


@require_POST
def design_set(request: HttpRequest, slug: str) -> HttpResponse:
    """Switch the study's pairing design (audited)."""
    study = _study(slug)
    try:
        floor = float(request.POST["floor"]) if request.POST.get("floor") else None
        repeat_limit = int(request.POST["repeat_limit"]) if request.POST.get("repeat_limit") else None
        design_mode_set(study=study, mode=request.POST.get("mode", ""), actor=request.user, floor=floor,
                        repeat_limit=repeat_limit, note=request.POST.get("note", "")[:500])
    except (ValueError, DesignError) as exc:
        message = str(exc) if isinstance(exc, DesignError) else "Floor and repeat limit must be numbers."
        messages.error(request, f"Nothing was changed. {message}")
    else:
        messages.success(request, "The pairing design is saved; the next assignment uses it.")
    return redirect(reverse("dashboard:leaderboard", kwargs={"slug": study.slug}) + "#design-h")


@require_POST
def power_run(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    try:
        power.power_request(study=study, actor=request.user)
    except DashboardError as exc:
        messages.error(request, str(exc))
    return redirect(reverse("dashboard:leaderboard", kwargs={"slug": study.slug}) + "#design-h")


@require_POST
def plan_run(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    try:
        power.plan_request(study=study, actor=request.user, params=request.POST.dict())
    except DashboardError as exc:
        messages.error(request, f"Nothing was started. {exc}")
    return redirect(reverse("dashboard:leaderboard", kwargs={"slug": study.slug}) + "#design-h")
