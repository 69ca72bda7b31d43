"""Study invitation links and signed per-participant links.

Three kinds of link reach a worker:

- the open study link ``/join/<invite_code>/``, to which a recruitment platform may append the worker's id
  (``?platform=prolific&worker_id=…``, or Prolific's own ``?PROLIFIC_PID=…``). Prolific fills the id in itself,
  so it cannot be signed; the id is taken as claimed when it has the platform's own shape
  (``OPEN_LINK_ID_FORMATS``), and the one-participant-per-id rule still holds. Such a recruit needs no
  password: the sign-up creates an account without one and a long-lived session, and the resume link (shown
  and e-mailed at sign-up) signs them in on another device; the id alone never signs anyone in;
- a signed personal invitation ``/join/<invite_code>/i/<token>/`` that the study team sends to one recruit
  (e.g. through Upwork messages); the platform id inside is signed, so nobody can change it;
- a signed resume link ``/p/<token>/`` naming one participant and the account that owns it; it opens for that
  account, and signs it in only when it has no password (``personal_link_signs_in``), for
  ``PERSONAL_LINK_MAX_AGE_DAYS`` after it was issued.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.urls import reverse

from studies.exceptions import InvalidInvitation
from studies.models import Participant, Study

_INVITE_SALT = "studies.invitations.personal-invite"
_RESUME_SALT = "studies.invitations.participant-resume"
_PLATFORM_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_WORKER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:~-]{0,127}$")
# The platforms an open link accepts, with the shape of their own ids: a mistyped or invented platform name, or
# an id the platform never issues, is refused before anything is looked up or registered. Personal links are
# signed by the study team, so they may name any platform of the generic shape.
OPEN_LINK_ID_FORMATS = {
    "prolific": re.compile(r"^[0-9a-f]{24}$"),  # Prolific participant ids: 24 hexadecimal digits
    "mturk": re.compile(r"^A[A-Z0-9]{9,20}$"),
    "upwork": _WORKER_ID_RE,
    "other": _WORKER_ID_RE,
}
# Query parameters some platforms use for their own worker ids, mapped to our platform names.
PLATFORM_ID_PARAMETERS = {"PROLIFIC_PID": "prolific", "UPWORK_ID": "upwork"}


@dataclass(frozen=True)
class PlatformClaim:
    """Who the invitation says the worker is on the recruitment platform (both empty if it says nothing)."""

    platform: str = ""
    worker_id: str = ""
    signed: bool = False


def claim_from_query(query) -> PlatformClaim:
    """Read the platform and worker id an open link carries; raise InvalidInvitation if they are malformed."""
    platform = (query.get("platform") or "").strip().lower()
    worker_id = (query.get("worker_id") or "").strip()
    for parameter, platform_name in PLATFORM_ID_PARAMETERS.items():
        if not worker_id and query.get(parameter):
            worker_id, platform = query.get(parameter).strip(), platform or platform_name
    if not worker_id:
        return PlatformClaim()
    platform = platform or "other"
    id_format = OPEN_LINK_ID_FORMATS.get(platform)
    if id_format is None:
        raise InvalidInvitation("The invitation link names an unknown recruitment platform. Please use the link "
                                "exactly as you received it.")
    if not id_format.match(worker_id):
        raise InvalidInvitation(f"The {_platform_name(platform)} id in the invitation link is not valid. Please "
                                "use the link exactly as you received it.")
    return _validated(platform, worker_id, signed=False)


def _platform_name(platform: str) -> str:
    return {"prolific": "Prolific", "mturk": "MTurk", "upwork": "Upwork"}.get(platform, "worker")


def _validated(platform: str, worker_id: str, *, signed: bool) -> PlatformClaim:
    if platform == "prolific" and not OPEN_LINK_ID_FORMATS["prolific"].match(worker_id):
        raise InvalidInvitation("The Prolific id in the invitation link is not valid. Please use the link exactly "
                                "as you received it.")
    if not _PLATFORM_RE.match(platform):
        raise InvalidInvitation("The invitation link names an unknown recruitment platform. Please use the link "
                                "exactly as you received it.")
    if not _WORKER_ID_RE.match(worker_id):
        raise InvalidInvitation("The worker id in the invitation link is not valid. Please use the link exactly as "
                                "you received it.")
    return PlatformClaim(platform=platform, worker_id=worker_id, signed=signed)


def personal_invite_token(*, study: Study, platform: str, worker_id: str) -> str:
    """Sign one recruit's platform id for a personal invitation link."""
    claim = _validated(platform.strip().lower(), worker_id.strip(), signed=True)
    return signing.dumps({"s": study.pk, "pl": claim.platform, "w": claim.worker_id}, salt=_INVITE_SALT)


def personal_invite_path(*, study: Study, platform: str, worker_id: str) -> str:
    token = personal_invite_token(study=study, platform=platform, worker_id=worker_id)
    return reverse("worker:join-personal", args=[study.invite_code, token])


def claim_from_personal_token(*, study: Study, token: str) -> PlatformClaim:
    """Return the signed claim; a forged, altered, expired or other-study token raises InvalidInvitation.

    A personal link also signs its recruit back in when their account has no password, so it expires after
    ``PERSONAL_LINK_MAX_AGE_DAYS`` (from when it was issued) like any other credential.
    """
    try:
        data = signing.loads(token, salt=_INVITE_SALT, max_age=timedelta(days=settings.PERSONAL_LINK_MAX_AGE_DAYS))
    except signing.SignatureExpired:
        raise InvalidInvitation("This personal invitation link has expired. Please ask the study team for a new "
                                "one.")
    except signing.BadSignature:
        raise InvalidInvitation("This personal invitation link is not valid. Please use the link exactly as you "
                                "received it, or ask the study team for a new one.")
    if not isinstance(data, dict) or data.get("s") != study.pk:
        raise InvalidInvitation("This personal invitation link belongs to another study.")
    return _validated(str(data.get("pl", "")), str(data.get("w", "")), signed=True)


def personal_link_signs_in(user: Any) -> bool:
    """Whether a genuine personal link (a signed invitation or the participant's resume link) may sign this
    account in by itself: only a plain worker account that chose no password (one with a password signs in
    with it, so a leaked link gives nothing away)."""
    return user.is_active and not user.has_usable_password() and not (user.is_staff or user.is_superuser)


def resume_token(participant: Participant) -> str:
    """Sign the participant together with the owning account, so the link is useless to anyone else."""
    return signing.dumps({"p": participant.pk, "u": participant.user_id}, salt=_RESUME_SALT)


def resume_path(participant: Participant) -> str:
    return reverse("worker:resume", args=[resume_token(participant)])


def participant_id_from_resume_token(*, token: str, user_id: int) -> int | None:
    """Return the participant id if the token is genuine and was issued to this account, else None."""
    owner = resume_token_owner(token=token, max_age_days=None)
    if owner is None or owner[1] != user_id:
        return None
    return owner[0]


def resume_token_owner(*, token: str, max_age_days: int | None) -> tuple[int, int] | None:
    """Return (participant id, account id) of a genuine resume token, optionally no older than ``max_age_days``
    (when the link is to sign someone in, it expires like a personal invitation)."""
    try:
        data = signing.loads(token, salt=_RESUME_SALT,
                             max_age=timedelta(days=max_age_days) if max_age_days is not None else None)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("u"), int) or not isinstance(data.get("p"), int):
        return None
    return data["p"], data["u"]
