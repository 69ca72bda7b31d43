"""Study invitation links and signed per-participant links.

Three kinds of link reach a worker:

- the open study link ``/join/<invite_code>/``, to which a recruitment platform may append the worker's id
  (``?platform=prolific&worker_id=…``, or Prolific's own ``?PROLIFIC_PID=…``). Prolific fills the id in itself,
  so it cannot be signed; the id is taken as claimed, and the one-participant-per-id rule still holds;
- a signed personal invitation ``/join/<invite_code>/i/<token>/`` that the study team sends to one recruit
  (e.g. through Upwork messages); the platform id inside is signed, so nobody can change it;
- a signed resume link ``/p/<token>/`` naming one participant and the account that owns it; it only opens for
  that account, so passing it on does not let anyone act as someone else.
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
    return _validated(platform or "other", worker_id, signed=False)


def _validated(platform: str, worker_id: str, *, signed: bool) -> PlatformClaim:
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
    """Whether a genuine personal link may sign this account in by itself: only a plain worker account that
    chose no password (one with a password signs in with it, so a leaked link gives nothing away)."""
    return user.is_active and not user.has_usable_password() and not (user.is_staff or user.is_superuser)


def resume_token(participant: Participant) -> str:
    """Sign the participant together with the owning account, so the link is useless to anyone else."""
    return signing.dumps({"p": participant.pk, "u": participant.user_id}, salt=_RESUME_SALT)


def resume_path(participant: Participant) -> str:
    return reverse("worker:resume", args=[resume_token(participant)])


def participant_id_from_resume_token(*, token: str, user_id: int) -> int | None:
    """Return the participant id if the token is genuine and was issued to this account, else None."""
    try:
        data = signing.loads(token, salt=_RESUME_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("u") != user_id or not isinstance(data.get("p"), int):
        return None
    return data["p"]
