"""Worker journey pages around the tasks: invitation, resume link, study home, consent, profile,
completion, withdrawal, and the time-on-step heartbeat."""

from __future__ import annotations

import math
from functools import wraps
from urllib.parse import quote, urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from grading.consent import consent_providers
from journey.forms import ConsentForm, ProfileForm, SignupForm, WithdrawForm
from journey.views.worker import error_response, guard, load_participant
from studies.client_address import client_address
from studies.exceptions import IdentityConflict, InvalidInvitation, StepNotAvailable, StudyError, StudyNotOpen
from studies.invitations import (
    PlatformClaim,
    claim_from_personal_token,
    claim_from_query,
    participant_id_from_resume_token,
    personal_link_signs_in,
    resume_path,
    resume_token_owner,
)
from studies.markdown import render_markdown
from studies.models import ConsentVersion, Episode, Participant, ParticipantIdentity, Study
from studies.rate_limits import parse_rate, rate_limit_hit
from studies.selectors import (
    Step,
    journey_state,
    occupation_get,
    occupation_search,
    occupations_by_sector,
    occupations_offered,
    participant_payments,
    participants_of_user,
    sector_reach,
    step_url,
)
from studies.services.consent import consent_decide
from studies.services.participants import (
    participant_join,
    participant_profile_update,
    participant_signup,
    participant_withdraw,
    resume_link_send,
    step_visit_record,
)

TRACKED_STEPS = {"consent", "profile", "pre_survey", "task", "post_survey", "complete"}


# --- Entry ---------------------------------------------------------------------------------------------------

def _throttled(view):
    """Answer 429 once a client address (as the trusted proxies report it) has opened invitation links too
    often (they create accounts); counted atomically, so a burst from one address cannot slip past."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        limit, window = parse_rate(settings.JOIN_THROTTLE_RATE)
        verdict = rate_limit_hit("join", client_address(request) or "unknown", limit=limit, window=window)
        if verdict.allowed:
            return view(request, *args, **kwargs)
        response = render(request, "journey/join_problem.html", {
            "study": None, "error": "Too many requests from your network to invitation links. "
                                    f"Please wait {_minutes(verdict.retry_after)} and open the link again.",
        }, status=429)
        response["Retry-After"] = str(verdict.retry_after)
        return response

    return wrapped


@_throttled
def join(request: HttpRequest, invite_code: str) -> HttpResponse:
    """Open study link, optionally carrying the recruitment platform's worker id."""
    study = _invited_study(invite_code)
    if study is None:
        return _unknown_invitation(request)
    try:
        claim = claim_from_query(request.GET)
    except InvalidInvitation as exc:
        return _join_problem(request, study, exc, status=400)
    return _join(request, study, claim)


@_throttled
def join_personal(request: HttpRequest, invite_code: str, token: str) -> HttpResponse:
    """Personal invitation whose platform id is signed by the study team."""
    study = _invited_study(invite_code)
    if study is None:
        return _unknown_invitation(request)
    try:
        claim = claim_from_personal_token(study=study, token=token)
    except InvalidInvitation as exc:
        return _join_problem(request, study, exc, status=400)
    return _join(request, study, claim)


def _invited_study(invite_code: str) -> Study | None:
    # Draft studies are invisible: their links answer like a wrong code.
    return Study.objects.exclude(status=Study.Status.DRAFT).filter(invite_code=invite_code).first()


def _unknown_invitation(request: HttpRequest) -> HttpResponse:
    """A friendly 404 for a mistyped, withdrawn or not-yet-open invitation link."""
    return render(request, "journey/join_problem.html", {
        "study": None, "title": "This invitation link does not work",
        "error": "We could not find an open study for this link. It may be mistyped, incomplete (some e-mail "
                 "programs cut long links), or the study may not be open yet or any more.",
    }, status=404)


def _join(request: HttpRequest, study: Study, claim: PlatformClaim) -> HttpResponse:
    if not request.user.is_authenticated:
        return _join_anonymous(request, study, claim)
    try:
        participant = participant_join(study=study, user=request.user, claim=claim)
    except (IdentityConflict, StudyNotOpen) as exc:
        return _join_problem(request, study, exc, status=409 if isinstance(exc, IdentityConflict) else 410)
    return redirect(journey_state(participant).url)


def _join_anonymous(request: HttpRequest, study: Study, claim: PlatformClaim) -> HttpResponse:
    login_url = f"{reverse('login')}?{urlencode({'next': request.get_full_path()})}"
    owner = ParticipantIdentity.objects.filter(
        study=study, platform=claim.platform, platform_worker_id=claim.worker_id
    ).select_related("participant__user", "participant__study").first() if claim.worker_id else None
    if owner is not None and claim.signed and personal_link_signs_in(owner.participant.user):
        login(request, owner.participant.user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(journey_state(owner.participant).url)
    # On the open link the page offered for a known id is the page offered for a new one (same form, same size):
    # only a sign-up that is posted learns that the id is taken, and it never signs anyone in. A signed personal
    # link is the recruit's own, so it may say at once that they should sign in.
    known_id = owner is not None and (claim.signed or request.method == "POST")
    form = SignupForm(request.POST or None, password_optional=bool(claim.worker_id)) if not known_id else None
    if request.method == "POST" and form is not None and form.is_valid():
        try:
            participant = participant_signup(
                study=study, claim=claim, username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"] or None, email=form.cleaned_data.get("email") or "",
            )
        except (IdentityConflict, StudyNotOpen) as exc:
            return _join_problem(request, study, exc, status=409 if isinstance(exc, IdentityConflict) else 410)
        _sign_in_new(request, participant)
        return redirect(journey_state(participant).url)
    # A sign-up posted for a platform id that has joined meanwhile is refused like one that loses the race
    # inside the service: 409, with the page that points to signing in.
    return render(request, "journey/join.html", {
        "study": study, "form": form, "login_url": login_url, "known_id": known_id, "claim": claim,
        "closed": study.status != Study.Status.RECRUITING,
    }, status=409 if known_id and request.method == "POST" else 200)


def _sign_in_new(request: HttpRequest, participant: Participant) -> None:
    """Sign the new account in; one without a password keeps its session as long as its personal links stay
    valid, and gets its resume link on the next page (and by e-mail when it gave one)."""
    user = participant.user
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    if user.has_usable_password():
        return
    request.session.set_expiry(settings.PERSONAL_LINK_MAX_AGE_DAYS * 24 * 3600)
    url = request.build_absolute_uri(resume_path(participant))
    messages.info(request, f"Your personal resume link (keep it: it signs you back in on any device): {url}")
    if user.email:
        resume_link_send(participant=participant, url=url)


def _join_problem(request: HttpRequest, study: Study, error: StudyError, *, status: int) -> HttpResponse:
    return render(request, "journey/join_problem.html", {"study": study, "error": error.message}, status=status)


def resume(request: HttpRequest, token: str) -> HttpResponse:
    """Signed per-participant link: opens only for the account it was issued to, and signs that account in
    when it has no password (a recruit from the open link on a second device)."""
    if not request.user.is_authenticated:
        return _resume_signed_out(request, token)
    participant_id = participant_id_from_resume_token(token=token, user_id=request.user.pk)
    if participant_id is None:
        return render(request, "journey/join_problem.html", {
            "study": None, "title": "This resume link does not work",
            "error": "This personal link is not valid for the account you are signed in with, or it was cut short. "
                     "Sign in with the account you used for the study, or open “My study” below.",
        }, status=404)
    participant = get_object_or_404(Participant.objects.select_related("study"), pk=participant_id,
                                    user_id=request.user.pk)
    return redirect(journey_state(participant).url)


def _resume_signed_out(request: HttpRequest, token: str) -> HttpResponse:
    owner = resume_token_owner(token=token, max_age_days=settings.PERSONAL_LINK_MAX_AGE_DAYS)
    participant = Participant.objects.select_related("user", "study").filter(
        pk=owner[0], user_id=owner[1]).first() if owner else None
    if participant is None or not personal_link_signs_in(participant.user):
        return redirect_to_login(request.get_full_path())
    login(request, participant.user, backend="django.contrib.auth.backends.ModelBackend")
    request.session.set_expiry(settings.PERSONAL_LINK_MAX_AGE_DAYS * 24 * 3600)
    return redirect(journey_state(participant).url)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The worker's study home: straight to the study when there is one, a list otherwise."""
    participations = list(participants_of_user(request.user))
    if len(participations) == 1:
        return redirect("worker:study", participations[0].study.slug)
    return render(request, "journey/home.html", {"participations": participations})


@login_required
def study(request: HttpRequest, study_slug: str) -> HttpResponse:
    """Overview of one participation: progress, next step, resume link, pay so far, withdrawal."""
    participant = load_participant(request, study_slug)
    state = journey_state(participant)
    payments, total = participant_payments(participant)
    return render(request, "journey/study.html", {
        "participant": participant, "study": participant.study, "state": state, "payments": payments,
        "payments_total": total, "resume_url": request.build_absolute_uri(resume_path(participant)),
        "withdrawn": participant.status == Participant.Status.WITHDRAWN,
    })


# --- Consent -------------------------------------------------------------------------------------------------

@login_required
def consent(request: HttpRequest, study_slug: str) -> HttpResponse:
    participant = load_participant(request, study_slug)
    if participant.status == Participant.Status.WITHDRAWN:
        return redirect("worker:study", study_slug)
    state = journey_state(participant)
    version = state.consent_required or participant.study.current_consent()
    if version is None:
        return render(request, "journey/consent.html", {"participant": participant, "study": participant.study,
                                                       "state": state, "version": None})
    if request.method == "POST":
        form = ConsentForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Please choose whether you agree.")
            return redirect("worker:consent", study_slug)
        shown = ConsentVersion.objects.filter(study=participant.study, version=form.cleaned_data["version"]).first()
        if shown is None:
            messages.error(request, "That consent version does not exist. Please read the current one.")
            return redirect("worker:consent", study_slug)
        accepted = form.cleaned_data["decision"] == "accept"
        try:
            participant = consent_decide(participant=participant, consent_version=shown, accepted=accepted,
                                         actor=request.user)
        except StudyError as exc:
            return error_response(request, exc, fallback_url=reverse("worker:consent", args=[study_slug]))
        if accepted:
            messages.success(request, f"Thank you. Your consent (version {shown.version}) is recorded.")
            return redirect(journey_state(participant).url)
        if participant.status == Participant.Status.WITHDRAWN:
            return redirect("worker:study", study_slug)
        return redirect("worker:declined", study_slug)
    step_visit_record(participant=participant, step="consent")
    return render(request, "journey/consent.html", {
        "participant": participant, "study": participant.study, "state": state, "version": version,
        "text_html": render_markdown(version.text), "providers": consent_providers(version),
        "needs_decision": state.consent_required is not None,
        "is_reconsent": state.consent_required is not None and participant.consent_version_id is not None,
        "ping_step": "consent",
    })


@login_required
def declined(request: HttpRequest, study_slug: str) -> HttpResponse:
    participant = load_participant(request, study_slug)
    return render(request, "journey/declined.html", {"participant": participant, "study": participant.study})


def _minutes(seconds: float) -> str:
    n = math.ceil(seconds / 60)
    return f"{n} minute" if n == 1 else f"{n} minutes"


# --- Profile -------------------------------------------------------------------------------------------------

@login_required
def profile(request: HttpRequest, study_slug: str) -> HttpResponse:
    participant = load_participant(request, study_slug)
    state, redirect_response = guard(request, participant, Step.PROFILE)
    if redirect_response is not None:
        return redirect_response
    locked = participant.status not in (Participant.Status.CONSENTED, Participant.Status.PRE_SURVEY,
                                        Participant.Status.INVITED)
    # One count of the study's open tasks per request: the form's choices, the chosen occupation's reach and the
    # browsing list all read it.
    reach = sector_reach(participant.study)
    form = ProfileForm(request.POST or None, occupations=occupations_offered(participant.study, reach=reach),
                       initial={"occupation": participant.occupation_id,
                                "years_experience": participant.years_experience})
    if request.method == "POST" and not locked and form.is_valid():
        try:
            participant_profile_update(participant=participant, occupation=form.cleaned_data["occupation"],
                                       years_experience=form.cleaned_data["years_experience"])
        except StepNotAvailable as exc:
            return error_response(request, exc, fallback_url=reverse("worker:study", args=[study_slug]))
        messages.success(request, "Your profile is saved.")
        return redirect(step_url(participant.study, Step.PRE_SURVEY))
    query = request.GET.get("q", "").strip()[:100]
    results = occupation_search(query, study=participant.study, reach=reach) if query else []
    selected = form.data.get("occupation") if form.is_bound else participant.occupation_id
    chosen = occupation_get(selected) if selected and str(selected).isdigit() else None
    if chosen is not None:
        chosen.reach = reach.get(chosen.sector_id, 0)
    step_visit_record(participant=participant, step="profile")
    offered = occupations_by_sector(participant.study, reach=reach) if not locked else []
    return render(request, "journey/profile.html", {
        "participant": participant, "study": participant.study, "state": state, "form": form, "query": query,
        "results": results, "chosen": chosen, "locked": locked, "ping_step": "profile",
        "tasks_total": participant.study.tasks_per_session, "offered": offered,
        "offered_count": sum(len(group) for _, group in offered), "browse": request.GET.get("browse") == "1",
    })


@login_required
def occupation_lookup(request: HttpRequest) -> JsonResponse:
    """Occupations matching the typed words, for the searchable picker (limited to the study's reachable
    occupations when the picker names its study)."""
    study_obj = load_participant(request, request.GET["study"]).study if request.GET.get("study") else None
    results = occupation_search(request.GET.get("q", "")[:100], study=study_obj)
    return JsonResponse({"tasks_total": study_obj.tasks_per_session if study_obj else None, "results": [
        {"id": o.pk, "title": o.title, "soc_code": o.soc_code, "sector": o.sector.name if o.sector else "",
         "reach": getattr(o, "reach", None)}
        for o in results
    ]})


# --- Completion and withdrawal -------------------------------------------------------------------------------

@login_required
def complete(request: HttpRequest, study_slug: str) -> HttpResponse:
    participant = load_participant(request, study_slug)
    state, redirect_response = guard(request, participant, Step.COMPLETE)
    if redirect_response is not None:
        return redirect_response
    if state.step != Step.COMPLETE:
        return redirect(state.url)
    study_obj = participant.study
    return_url = study_obj.return_url.replace("{code}", quote(participant.completion_code, safe="")) \
        if study_obj.return_url else ""
    step_visit_record(participant=participant, step="complete")
    payments, total = participant_payments(participant)
    return render(request, "journey/complete.html", {
        "participant": participant, "study": study_obj, "state": state, "return_url": return_url,
        "payments": payments, "payments_total": total,
    })


@login_required
def withdraw(request: HttpRequest, study_slug: str) -> HttpResponse:
    participant = load_participant(request, study_slug)
    if participant.status == Participant.Status.WITHDRAWN:
        return redirect("worker:study", study_slug)
    form = WithdrawForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        participant_withdraw(participant=participant, actor=request.user,
                             reason=form.cleaned_data["reason"] or "Withdrawn by the participant.")
        messages.success(request, "You have withdrawn from the study. Thank you for the time you gave us.")
        return redirect("worker:study", study_slug)
    open_tasks = Episode.objects.filter(participant=participant,
                                        status__in=[Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS]).count()
    return render(request, "journey/withdraw.html", {"participant": participant, "study": participant.study,
                                                    "form": form, "open_tasks": open_tasks})


@login_required
@require_POST
def heartbeat(request: HttpRequest, study_slug: str) -> HttpResponse:
    """Pages ping while visible, so long task steps are timed even without page loads."""
    participant = load_participant(request, study_slug)
    step = request.POST.get("step", "")
    if step not in TRACKED_STEPS or participant.status == Participant.Status.WITHDRAWN:
        return JsonResponse({"ok": False}, status=400)
    episode_id = request.POST.get("episode") or None
    if episode_id is not None:
        if not str(episode_id).isdigit() or not Episode.objects.filter(pk=episode_id, participant=participant).exists():
            raise Http404
        episode_id = int(episode_id)
    step_visit_record(participant=participant, step=step, episode_id=episode_id)
    return HttpResponse(status=204)
