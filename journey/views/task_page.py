"""The task page (paper App. B): setup panel, prompt, reference files, uploads, log, final submission."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from grading.selectors import episode_log_file_notes, episode_log_format_warnings
from journey.drafts import form_draft, form_draft_fields, form_draft_keep
from journey.forms import (
    NOTES_MAX_LENGTH,
    LogForm,
    OutsideExpertiseForm,
    SetupFailedForm,
    SetupForm,
    SoloForm,
    SubmitForm,
)
from journey.views.worker import error_response, guard, load_participant, wants_json
from pairing.services import episode_assign
from studies.conf import upload_limits
from studies.exceptions import InvalidShareUrl, NoAgentAvailable, NoTaskAvailable, StudyError
from studies.log_sources import agent_log_source
from studies.markdown import render_markdown
from studies.models import Agent, Episode, EpisodeFile, Participant, Payment
from studies.selectors import (
    FINISHED,
    Step,
    episode_files,
    episode_for_task_page,
    episode_for_user,
    journey_state,
    participant_for_user,
    reference_files,
    task_match,
)
from studies.services.episodes import (
    episode_log_save,
    episode_setup_save,
    episode_skip_outside_expertise,
    episode_skip_setup_failed,
    episode_submit,
    submission_checklist,
    submission_problems,
)
from studies.services.participants import participant_finish_tasks_early, step_visit_record
from studies.services.solo_episodes import episode_solo_save
from studies.services.uploads import EDITABLE_STATUSES, allowed_extensions

WORKER_STATUS = {
    Episode.Status.ASSIGNED: "Not started",
    Episode.Status.IN_PROGRESS: "In progress",
    Episode.Status.SKIPPED: "Skipped",
}


# The setup panel's "ready" box in the words of the agent's kind: a browser agent is not installed.
READY_LABELS = {
    Agent.Interface.TERMINAL: "{name} is installed and running in my terminal, and I am ready to start.",
    Agent.Interface.DESKTOP: "The {name} desktop app is installed and open on my computer, and I am ready to start.",
    Agent.Interface.BROWSER: "{name} is open in my browser and I am signed in, and I am ready to start.",
}


def worker_status_label(episode: Episode) -> str:
    """What the worker is told about an episode: grading states and outcomes are not theirs to see."""
    return WORKER_STATUS.get(episode.worker_status, "Submitted")


def task_url(episode: Episode) -> str:
    return reverse("worker:task", args=[episode.participant.study.slug, episode.position])


@login_required
def task(request: HttpRequest, study_slug: str, position: int) -> HttpResponse:
    try:
        episode = episode_for_task_page(user=request.user, study_slug=study_slug, position=position)
    except Episode.DoesNotExist:
        return _task_not_started(request, study_slug, position)
    participant = episode.participant
    if participant.status == Participant.Status.WITHDRAWN:
        return redirect("worker:study", study_slug)
    if episode.reconsent_needed:
        messages.warning(request, "The consent form was updated. Please read it and decide before continuing.")
        return redirect("worker:consent", study_slug)
    step_visit_record(participant=participant, step="task", episode_id=episode.pk)
    return _render_task(request, episode)


def _render_task(request: HttpRequest, episode: Episode, *, status: int = 200, setup_failed_form=None,
                 log_form=None, setup_form=None, outside_form=None, solo_form=None,
                 section: str = "") -> HttpResponse:
    """Render the task page; after a refused form, ``section`` names where the worker lands (the address bar is
    set back to the task page's address with that anchor, so a reload opens the page, never a bare 405)."""
    participant, study, agent, task_obj = episode.participant, episode.participant.study, episode.agent, episode.task
    files = episode_files(episode)
    uploaded_names = {f.name for f in files if f.kind == EpisodeFile.Kind.DELIVERABLE}
    limits = upload_limits()
    editable = episode.status in EDITABLE_STATUSES and participant.status != Participant.Status.WITHDRAWN
    now = timezone.now()
    checklist = submission_checklist(episode, files) if editable else []
    notes = episode_log_file_notes(episode, files) if editable else {}
    for f in files:
        note = notes.get(f.pk)
        f.format_warning = note.text if note and note.warning else ""
        f.format_confirmation = note.text if note and not note.warning else ""
    if editable and log_form is None and solo_form is None:
        # Text refused earlier (kept in the session) comes back marked, so a reload loses nothing.
        log_form, solo_form = _kept_drafts(request, episode)
    log_unsaved = bool(log_form is not None and log_form.errors)
    solo_unsaved = bool(solo_form is not None and solo_form.errors)
    context = {
        "episode": episode, "participant": participant, "study": study, "agent": agent, "task": task_obj,
        "total": study.tasks_per_session, "editable": editable, "status_label": worker_status_label(episode),
        "setup_guide_html": render_markdown(agent.setup_guide) if agent else "",
        "ready_label": READY_LABELS.get(agent.interface, READY_LABELS[Agent.Interface.TERMINAL]).format(
            name=agent.name) if agent else "",
        "log_instructions_html": render_markdown(agent.log_instructions) if agent else "",
        "log_source": agent_log_source(agent) if agent else None,
        "reference_files": reference_files(task_obj.pk),
        "deliverables": [f for f in files if f.kind == EpisodeFile.Kind.DELIVERABLE],
        "logs": [f for f in files if f.kind == EpisodeFile.Kind.LOG],
        "screenshots": [f for f in files if f.kind == EpisodeFile.Kind.SKIP_SCREENSHOT],
        "expected": [{"name": n, "uploaded": n in uploaded_names} for n in task_obj.expected_deliverables or []],
        "checklist": checklist,
        "checklist_complete": all(c.done for c in checklist) and not (log_unsaved or solo_unsaved),
        "setup_form": setup_form or SetupForm(initial={"prior_experience": episode.prior_experience}),
        "setup_failed_form": setup_failed_form or SetupFailedForm(),
        "outside_form": outside_form or OutsideExpertiseForm(),
        "match": task_match(episode),
        "log_unsaved": log_unsaved, "solo_unsaved": solo_unsaved,
        "page_address": f"{task_url(episode)}#{section}" if section else "",
        "log_form": log_form or LogForm(initial={"share_url": episode.share_url, "notes": episode.notes}),
        "wants_files_log": bool(agent) and agent.log_mode in (Agent.LogMode.UPLOAD, Agent.LogMode.EITHER),
        "wants_share_url": bool(agent) and agent.log_mode in (Agent.LogMode.SHARE_URL, Agent.LogMode.EITHER),
        "share_hosts": (agent.share_url_hosts or []) if agent else [],
        "solo": episode.is_solo, "solo_form": solo_form or SoloForm(initial={
            "used_ai_anyway": episode.used_ai_anyway, "notes": episode.notes}),
        "deadline": episode.deadline_at, "overdue": bool(episode.deadline_at and now > episode.deadline_at),
        "seconds_left": max(0, int((episode.deadline_at - now).total_seconds())) if episode.deadline_at else None,
        "limits": {"max_file": limits["MAX_FILE_BYTES"], "max_episode": limits["MAX_EPISODE_BYTES"],
                   "max_files": limits["MAX_FILES_PER_EPISODE"]},
        "allowed": allowed_extensions(EpisodeFile.Kind.DELIVERABLE),
        "screenshot_types": allowed_extensions(EpisodeFile.Kind.SKIP_SCREENSHOT),
        "prior_choices": Episode.PriorExperience.choices, "ping_step": "task" if editable else "",
        "notes_max": NOTES_MAX_LENGTH,
    }
    return render(request, "journey/task.html", context, status=status)


def _kept_drafts(request: HttpRequest, episode: Episode) -> tuple[LogForm | None, SoloForm | None]:
    """The log and solo forms as the worker left them, if a refused field of either is kept for correction."""
    log_form = form_draft(request.session, episode_id=episode.pk, form_name="log", form_class=LogForm,
                          saved={"share_url": episode.share_url, "notes": episode.notes})
    solo_form = form_draft(request.session, episode_id=episode.pk, form_name="solo", form_class=SoloForm,
                           saved={"used_ai_anyway": episode.used_ai_anyway, "notes": episode.notes})
    return log_form, solo_form  # type: ignore[return-value]


def _task_not_started(request: HttpRequest, study_slug: str, position: int) -> HttpResponse:
    participant = load_participant(request, study_slug)
    state, redirect_response = guard(request, participant, Step.TASK)
    if redirect_response is not None:
        return redirect_response
    if state.step != Step.TASK or state.position != position:
        if position > len(state.episodes) + 1 or position < 1:
            raise Http404("No such task position.")
        return redirect(state.url)
    return render(request, "journey/task_start.html", {
        "participant": participant, "study": participant.study, "state": state, "position": position,
    })


@login_required
@require_POST
def task_start(request: HttpRequest, study_slug: str, position: int) -> HttpResponse:
    """Match the next task and agent (one at a time, as the worker reaches each position)."""
    participant = load_participant(request, study_slug)
    state, redirect_response = guard(request, participant, Step.TASK)
    if redirect_response is not None:
        return redirect_response
    try:
        episode = episode_assign(participant=participant, position=position)
    except (NoTaskAvailable, NoAgentAvailable) as exc:
        can_finish = any(e.status in FINISHED and e.status != Episode.Status.SKIPPED for e in state.episodes)
        return render(request, "journey/no_task.html", {
            "participant": participant, "study": participant.study, "state": state, "message": exc.message,
            "can_finish_early": can_finish,
        }, status=409)
    except StudyError as exc:
        return error_response(request, exc, fallback_url=reverse("worker:study", args=[study_slug]))
    return redirect("worker:task", study_slug, episode.position)


@login_required
@require_POST
def finish_early(request: HttpRequest, study_slug: str) -> HttpResponse:
    participant = load_participant(request, study_slug)
    try:
        participant_finish_tasks_early(participant=participant)
    except StudyError as exc:
        return error_response(request, exc, fallback_url=reverse("worker:study", args=[study_slug]))
    return redirect(journey_state(participant_for_user(user=request.user, study_slug=study_slug)).url)


def _episode(request: HttpRequest, episode_id: int) -> Episode:
    try:
        return episode_for_user(user=request.user, episode_id=episode_id)
    except Episode.DoesNotExist:
        raise Http404("No such task.")


def _back_to_section(request: HttpRequest, episode_id: int, section: str) -> HttpResponse | None:
    """A form address opened directly (a reload, a bookmark) leads back to its section of the task page."""
    if request.method == "POST":
        return None
    if request.method in ("GET", "HEAD"):
        return redirect(task_url(_episode(request, episode_id)) + f"#{section}")
    return HttpResponseNotAllowed(["GET", "POST"])


@login_required
def setup(request: HttpRequest, episode_id: int) -> HttpResponse:
    if (back_response := _back_to_section(request, episode_id, "setup")) is not None:
        return back_response
    episode = _episode(request, episode_id)
    form = SetupForm(request.POST)
    back = task_url(episode) + "#setup"
    if not form.is_valid():
        return _render_task(request, episode, status=400, setup_form=form, section="setup")
    try:
        episode = episode_setup_save(episode=episode, prior_experience=form.cleaned_data["prior_experience"],
                                     ready=form.cleaned_data["ready"])
    except StudyError as exc:
        return error_response(request, exc, fallback_url=back)
    if episode.ready_at is not None:
        messages.success(request, "Setup saved. The agent is marked as ready; you can work on the task now.")
    else:
        messages.info(request, f"Saved. Tick the box that says {episode.agent.name} is ready once it is set up."
                      if episode.agent else "Saved.")
    return redirect(back)


@login_required
def setup_failed(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Skip the task because the agent could not be set up (description and screenshots required)."""
    if (back_response := _back_to_section(request, episode_id, "setup-failed")) is not None:
        return back_response
    episode = _episode(request, episode_id)
    form = SetupFailedForm(request.POST, request.FILES)
    if not form.is_valid():
        return _render_task(request, episode, status=400, setup_failed_form=form, section="setup-failed")
    try:
        # The returned episode carries the participant as the skip left it (maybe on to the final survey).
        episode = episode_skip_setup_failed(episode=episode, description=form.cleaned_data["description"],
                                            screenshots=request.FILES.getlist("screenshots"), actor=request.user)
    except StudyError as exc:
        form.add_error(None, exc.message)
        return _render_task(request, episode, status=400, setup_failed_form=form, section="setup-failed")
    messages.success(request, f"Task {episode.position} was skipped and your report sent to the study team.")
    return redirect(journey_state(episode.participant).url)


@login_required
def skip_outside_expertise(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Skip a task the worker cannot do honestly because it is outside their expertise (a reason is required)."""
    if (back_response := _back_to_section(request, episode_id, "outside-expertise")) is not None:
        return back_response
    episode = _episode(request, episode_id)
    form = OutsideExpertiseForm(request.POST)
    if not form.is_valid():
        return _render_task(request, episode, status=400, outside_form=form, section="outside-expertise")
    try:
        episode = episode_skip_outside_expertise(episode=episode, reason=form.cleaned_data["reason"],
                                                 actor=request.user)
    except StudyError as exc:
        form.add_error(None, exc.message)
        return _render_task(request, episode, status=400, outside_form=form, section="outside-expertise")
    paid = ""
    if episode.study.pay_outside_expertise_skips:
        paid = (" It is paid at the task rate, as this study's rules say."
                if Payment.objects.filter(episode=episode, kind=Payment.Kind.ADJUSTMENT).exists() else
                f" It is not paid: this study pays at most {episode.study.max_paid_outside_expertise_skips} such "
                "skips per worker.")
    messages.success(request, f"Task {episode.position} was skipped as outside your expertise; the study team can "
                              f"see your reason.{paid}")
    return redirect(journey_state(episode.participant).url)


@login_required
def log(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Save the shared-session link and notes without submitting (the page autosaves here as the worker types).

    ``next=review`` (the "Review and submit" button) saves what was typed first, then opens the review page, so
    notes typed but not yet saved are never dropped on the way to submitting.
    """
    if (back_response := _back_to_section(request, episode_id, "log")) is not None:
        return back_response
    episode = _episode(request, episode_id)

    def save(form: forms.Form) -> Episode:
        valid = form.cleaned_data
        try:
            return episode_log_save(episode=episode, share_url=valid.get("share_url"), notes=valid.get("notes"))
        except InvalidShareUrl as exc:
            # The link is still being typed or points elsewhere: the notes are saved anyway.
            form.add_error("share_url", exc.message)
            return episode_log_save(episode=episode, share_url=None, notes=valid.get("notes"))

    return _save_notes_panel(request, episode, form=LogForm(request.POST), section="log", save=save,
                             saved_message="Collaboration log details saved.")


# How the review page names a field still waiting for a correction on the task page.
_FIELD_NAMES = {"notes": "your notes", "share_url": "your shared-session link"}


@login_required
def submit(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Review page (GET) and final submission (POST)."""
    episode = _episode(request, episode_id)
    back = task_url(episode)
    if request.method == "POST":
        form = SubmitForm(request.POST)
        if not form.is_valid():
            # Nothing is submitted; the refused answer is kept and shown marked on the review page.
            form_draft_keep(request.session, episode_id=episode.pk, form_name="submit", form=form)
            if wants_json(request):
                return JsonResponse({"ok": False, "errors": {k: [str(e) for e in v] for k, v in form.errors.items()}},
                                    status=400)
            return redirect("worker:episode-submit", episode_id=episode.pk)
        try:
            episode = episode_submit(episode=episode, actor=request.user,
                                     self_reported_minutes=form.cleaned_data["self_reported_minutes"])
        except StudyError as exc:
            return error_response(request, exc, fallback_url=back + "#submit")
        form_draft_keep(request.session, episode_id=episode.pk, form_name="submit", form=form)
        note = " It arrived after the time limit; it is kept and marked as late." if episode.timed_out else ""
        messages.success(request, f"Task {episode.position} submitted. Thank you! Grading will start shortly.{note}")
        return redirect(journey_state(episode.participant).url)
    if episode.status not in EDITABLE_STATUSES:
        messages.info(request, "This task was already submitted.")
        return redirect(back)
    files = episode_files(episode)
    uploaded = {f.name for f in files if f.kind == EpisodeFile.Kind.DELIVERABLE}
    warnings = episode_log_format_warnings(episode, files)
    section = "solo" if episode.is_solo else "log"
    unsaved = form_draft_fields(request.session, episode_id=episode.pk, form_name=section)
    form = form_draft(request.session, episode_id=episode.pk, form_name="submit", form_class=SubmitForm,
                      saved={}) or SubmitForm()
    return render(request, "journey/submit_confirm.html", {"form": form,
        "unsaved": [_FIELD_NAMES.get(name, name) for name in unsaved], "unsaved_url": f"{back}#{section}",
        "episode": episode, "participant": episode.participant, "study": episode.participant.study,
        "agent": episode.agent, "files": files, "problems": submission_problems(episode, files),
        "missing_expected": [n for n in episode.task.expected_deliverables or [] if n not in uploaded],
        "log_warnings": [(f.name, warnings[f.pk]) for f in files if f.pk in warnings],
        "late": bool(episode.deadline_at and timezone.now() > episode.deadline_at), "back": back,
    })


@login_required
def solo(request: HttpRequest, episode_id: int) -> HttpResponse:
    """Save a solo task's "I used an AI tool anyway" answer and notes; ``next=review`` then opens the review."""
    if (back_response := _back_to_section(request, episode_id, "solo")) is not None:
        return back_response
    episode = _episode(request, episode_id)

    def save(form: forms.Form) -> Episode:
        return episode_solo_save(episode=episode, used_ai_anyway=form.cleaned_data["used_ai_anyway"],
                                 notes=form.cleaned_data.get("notes"), actor=request.user)

    return _save_notes_panel(request, episode, form=SoloForm(request.POST), section="solo", save=save,
                             saved_message="Saved.")


def _save_notes_panel(request: HttpRequest, episode: Episode, *, form: forms.Form, section: str,
                      save: Callable[[forms.Form], Episode], saved_message: str) -> HttpResponse:
    """Save every valid field of a notes panel (the log, or a solo task's) and keep the refused ones.

    A refused field (notes over the limit, a wrong link) keeps its stored value; its text is kept in the session
    (journey/drafts.py), so the page and a reload show it marked for correction, and the other fields are saved.
    """
    form.is_valid()  # cleaned_data then holds exactly the valid fields
    try:
        episode = save(form)
    except StudyError as exc:
        return error_response(request, exc, fallback_url=task_url(episode))
    form_draft_keep(request.session, episode_id=episode.pk, form_name=section, form=form)
    if form.errors:
        if wants_json(request):
            return JsonResponse({"ok": False, "errors": {k: [str(e) for e in v] for k, v in form.errors.items()},
                                 "saved": sorted(form.cleaned_data), "share_url_saved": bool(episode.share_url)},
                                status=400)
        return _render_task(request, episode, status=400, section=section, **{f"{section}_form": form})
    if wants_json(request):
        return JsonResponse({"ok": True, "share_url_saved": bool(episode.share_url)})
    if request.POST.get("next") == "review":
        return redirect("worker:episode-submit", episode.pk)
    messages.success(request, saved_message)
    return redirect(task_url(episode) + f"#{section}")
