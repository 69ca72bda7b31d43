"""Taking the pre- and post-study surveys: one page per phase, answers autosaved as they change."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from journey.views.worker import guard, load_participant
from studies.exceptions import StepNotAvailable, SurveyIncomplete
from studies.models import Participant
from studies.selectors import Step, journey_state
from studies.services.participants import step_visit_record
from surveys.forms import AutosaveInvalid, autosave_answers, raw_answers
from surveys.models import SurveyResponse
from surveys.selectors import has_levels, instrument_for, questions_for, response_for, survey_items
from surveys.services import answers_save, response_submit

_STEP = {SurveyResponse.Phase.PRE: Step.PRE_SURVEY, SurveyResponse.Phase.POST: Step.POST_SURVEY}
_TITLES = {SurveyResponse.Phase.PRE: "First survey", SurveyResponse.Phase.POST: "Final survey"}


def _check_phase(phase: str) -> str:
    if phase not in _STEP:
        raise Http404("No such survey.")
    return phase


@login_required
def take(request: HttpRequest, study_slug: str, phase: str) -> HttpResponse:
    phase = _check_phase(phase)
    participant = load_participant(request, study_slug)
    state, redirect_response = guard(request, participant, _STEP[phase])
    if redirect_response is not None:
        if phase == SurveyResponse.Phase.POST and state.step == Step.TASK:
            messages.info(request, "The final survey opens after your last task.")
        return redirect_response
    response = response_for(participant, phase)
    if response is not None and response.submitted_at is not None:
        messages.info(request, "You already submitted this survey; thank you.")
        return redirect(state.url)
    instrument = response.instrument if response else instrument_for(participant, phase)
    if instrument is None:
        return render(request, "journey/survey_unavailable.html",
                      {"participant": participant, "study": participant.study}, status=503)
    errors: dict[str, str] = {}
    overrides = None
    if request.method == "POST":
        raw = raw_answers(request.POST, questions_for(instrument, phase))
        try:
            if request.POST.get("action") == "save":
                errors = answers_save(participant=participant, phase=phase, raw=raw)
                if not errors:
                    messages.success(request, "Your answers are saved. You can come back any time to finish.")
                    return redirect("worker:survey", study_slug, phase)
            else:
                response_submit(participant=participant, phase=phase, raw=raw)
                participant.refresh_from_db()
                messages.success(request, "Thank you, your answers are submitted.")
                return redirect(journey_state(participant).url)
        except SurveyIncomplete as exc:
            errors = exc.errors
            messages.error(request, exc.message)
        except StepNotAvailable as exc:
            messages.error(request, exc.message)
            return redirect("worker:study", study_slug)
        overrides = raw
        response = response_for(participant, phase)
    else:
        step_visit_record(participant=participant, step=_STEP[phase].value)
    items = survey_items(participant=participant, instrument=instrument, phase=phase, response=response,
                         overrides=overrides, errors=errors)
    return render(request, "journey/survey.html", {
        "participant": participant, "study": participant.study, "state": state, "phase": phase,
        "title": _TITLES[phase], "instrument": instrument, "items": items, "has_levels": has_levels(items),
        "errors": errors, "autosave_url": reverse("worker:survey-autosave", args=[study_slug, phase]),
        "autosave_ms": round(1000 * settings.SURVEY_AUTOSAVE_SECONDS),
        "is_post": phase == SurveyResponse.Phase.POST, "ping_step": _STEP[phase].value,
        "first_has_code": next((i.question.code for i in items if i.question.kind == "has"), ""),
    }, status=400 if errors else 200)


@login_required
@require_POST
def autosave(request: HttpRequest, study_slug: str, phase: str) -> JsonResponse:
    """Save the answers changed since the page's last save; a bad value is refused without touching the saved
    one (the others in the request are saved)."""
    phase = _check_phase(phase)
    participant = load_participant(request, study_slug)
    if participant.status == Participant.Status.WITHDRAWN:
        return JsonResponse({"ok": False, "error": "You have withdrawn from this study."}, status=409)
    try:
        raw = autosave_answers(request.POST)
    except AutosaveInvalid as exc:
        return JsonResponse({"ok": False, "error": str(exc)}, status=400)
    try:
        errors = answers_save(participant=participant, phase=phase, raw=raw)
    except StepNotAvailable as exc:
        return JsonResponse({"ok": False, "error": exc.message}, status=409)
    saved = [code for code in raw if code not in errors]
    reply: dict[str, object] = {"ok": not errors, "saved": saved, "errors": errors,
                                "saved_at": timezone.now().isoformat()}
    if errors:
        reply["error"] = (next(iter(errors.values())) if len(errors) == 1
                          else f"{len(errors)} answers need a correction.")
    return JsonResponse(reply, status=400 if errors else 200)
