"""Shared plumbing of the worker pages: loading the participant, step guards, and domain errors → responses."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect

from studies.exceptions import DuplicateFileName, StudyError
from studies.models import Participant
from studies.selectors import JourneyState, Step, journey_state, participant_for_user, step_url

# Status codes for domain errors answered as JSON (page requests get a message and a redirect instead).
_ERROR_STATUS = {
    "DuplicateFileName": 409,
    "EpisodeLocked": 409,
    "IdentityConflict": 409,
    "StudyNotOpen": 410,
}


def wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def error_response(request: HttpRequest, error: StudyError, *, fallback_url: str) -> HttpResponse:
    """The one place domain errors become responses: JSON for scripts, a message + redirect for pages."""
    if wants_json(request):
        payload = {"ok": False, "error": error.message}
        if isinstance(error, DuplicateFileName):
            payload.update({"duplicate": True, "name": error.name})
        return JsonResponse(payload, status=_ERROR_STATUS.get(type(error).__name__, 400))
    messages.error(request, error.message)
    return redirect(fallback_url)


def load_participant(request: HttpRequest, study_slug: str) -> Participant:
    """The requesting account's participant in the study, or 404 (never someone else's)."""
    try:
        return participant_for_user(user=request.user, study_slug=study_slug)
    except Participant.DoesNotExist:
        raise Http404("No participation in this study.")


def guard(request: HttpRequest, participant: Participant, step: Step) -> tuple[JourneyState, HttpResponse | None]:
    """Return the journey state and, when the step is not open to the participant, a redirect to where they
    should be (with a short explanation)."""
    state = journey_state(participant)
    if state.step == Step.WITHDRAWN:
        return state, redirect(step_url(participant.study, Step.WITHDRAWN))
    if state.step == Step.CONSENT and step != Step.CONSENT:
        if participant.consent_version_id is not None:
            messages.warning(request, "The consent form was updated. Please read it and decide before continuing.")
        return state, redirect(state.url)
    if not state.reached(step):
        messages.info(request, "Please finish the earlier steps first; here is where you left off.")
        return state, redirect(state.url)
    return state, None
