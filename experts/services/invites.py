"""Expert invitations: staff create a signed, expiring, single-use link; the invitee sets up an account.

The link carries everything it needs (sectors, inviter, a nonce) signed with the project key, so no
invitation table is needed. Single use is enforced through the audit log: creating an invitation writes an
``expert.invite`` event keyed by the nonce, accepting it writes ``expert.invite_accepted`` with the same key
while holding a lock on the first event, so two browsers racing on one link cannot both create accounts.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from experts.conf import experts_settings
from experts.exceptions import InviteInvalid
from experts.models import ExpertProfile
from studies.models import AuditEvent, Sector
from studies.roles import EXPERT, grant_role
from studies.services.audit import audit_record

# Signed under the app the workspace began in; changing it would void every invitation already sent.
_SALT = "grading.expert-invite"
INVITE_OBJECT = "expert_invite"


def invite_max_age_seconds() -> int:
    return int(float(experts_settings()["INVITE_DAYS"]) * 24 * 3600)


@dataclass(frozen=True)
class Invitation:
    """What a valid link says: who is invited, to which sectors, by whom."""

    nonce: str
    email: str
    sector_ids: list[int]
    invited_by_id: int | None
    token: str = ""
    link: str = ""
    emailed: bool = False

    def sectors(self) -> list[Sector]:
        return list(Sector.objects.filter(pk__in=self.sector_ids).order_by("name"))


def expert_invite_create(
    *,
    actor: Any,
    sectors: Iterable[Sector],
    email: str = "",
    note: str = "",
    build_link: Callable[[str], str] | None = None,
) -> Invitation:
    """Create a signed invitation; e-mail the link when an address is given and ``build_link`` is passed."""
    sector_ids = sorted({sector.pk for sector in sectors})
    if not sector_ids:
        raise InviteInvalid("Choose at least one sector the expert will work in.")
    nonce = secrets.token_urlsafe(12)
    email = (email or "").strip()
    token = signing.dumps({"n": nonce, "e": email, "s": sector_ids, "b": getattr(actor, "pk", None)},
                          salt=_SALT, compress=True)
    audit_record(actor=actor, action="expert.invite", object_type=INVITE_OBJECT, object_id=nonce,
                 after={"email": email, "sectors": sector_ids}, note=note)
    link = build_link(token) if build_link else ""
    emailed = False
    if email and link:
        days = invite_max_age_seconds() // (24 * 3600)
        send_mail(
            subject="Invitation to grade for the CollabSkill study",
            message=(f"You have been invited to join the CollabSkill study as an expert reviewer.\n\n"
                     f"Open this link within {days} days to set up your account:\n{link}\n\n"
                     + (f"Note from the study team: {note}\n" if note else "")),
            from_email=None,
            recipient_list=[email],
        )
        emailed = True
    return Invitation(nonce=nonce, email=email, sector_ids=sector_ids, invited_by_id=getattr(actor, "pk", None),
                      token=token, link=link, emailed=emailed)


def expert_invite_read(*, token: str) -> Invitation:
    """Return the invitation a token stands for, or raise InviteInvalid saying why it cannot be used."""
    try:
        data = signing.loads(token, salt=_SALT, max_age=invite_max_age_seconds())
    except signing.SignatureExpired:
        raise InviteInvalid("This invitation has expired. Ask the study team for a new link.")
    except signing.BadSignature:
        raise InviteInvalid("This invitation link is not valid. Check that you copied the whole link.")
    if not isinstance(data, dict) or not isinstance(data.get("n"), str) or not isinstance(data.get("s"), list):
        raise InviteInvalid("This invitation link is not valid. Check that you copied the whole link.")
    invitation = Invitation(nonce=data["n"], email=str(data.get("e") or ""),
                            sector_ids=[int(pk) for pk in data["s"]], invited_by_id=data.get("b"), token=token)
    if _accepted(invitation.nonce):
        raise InviteInvalid("This invitation has already been used. Sign in with the account you created, or "
                            "ask the study team for a new link.")
    return invitation


def _accepted(nonce: str) -> bool:
    return AuditEvent.objects.filter(action="expert.invite_accepted", object_type=INVITE_OBJECT,
                                     object_id=nonce).exists()


def expert_invite_accept(*, token: str, username: str, password: str, email: str = "") -> Any:
    """Create the invitee's account with the expert role and an expert profile in the invited sectors.

    The password must already have passed Django's validators (the form does that with the username).
    """
    invitation = expert_invite_read(token=token)
    user_model = get_user_model()
    with transaction.atomic():
        # Lock the invitation's creation event so a second accept of the same link waits, then sees ours.
        list(AuditEvent.objects.select_for_update().filter(action="expert.invite", object_type=INVITE_OBJECT,
                                                           object_id=invitation.nonce))
        if _accepted(invitation.nonce):
            raise InviteInvalid("This invitation has already been used.")
        if user_model.objects.filter(username__iexact=username).exists():
            raise InviteInvalid(f"The username “{username}” is taken. Choose another one.")
        try:
            user = user_model.objects.create_user(username=username, email=email or invitation.email,
                                                  password=password)
        except IntegrityError:
            raise InviteInvalid(f"The username “{username}” is taken. Choose another one.")
        grant_role(user, EXPERT)
        inviter = user_model.objects.filter(pk=invitation.invited_by_id).first() if invitation.invited_by_id else None
        profile = ExpertProfile.objects.create(user=user, invited_by=inviter)
        profile.sectors.set(Sector.objects.filter(pk__in=invitation.sector_ids))
        audit_record(actor=user, action="expert.invite_accepted", object_type=INVITE_OBJECT,
                     object_id=invitation.nonce, after={"user": user.pk, "sectors": invitation.sector_ids})
    return user


def expert_profile_update(*, profile: ExpertProfile, actor: Any, sectors: Iterable[Sector], is_active: bool) -> None:
    """Change an expert's sectors or pause them (paused experts get no new work and cannot open pages)."""
    before = {"sectors": sorted(profile.sectors.values_list("pk", flat=True)), "is_active": profile.is_active}
    with transaction.atomic():
        profile.is_active = is_active
        profile.save(update_fields=["is_active"])
        profile.sectors.set(list(sectors))
        after = {"sectors": sorted(profile.sectors.values_list("pk", flat=True)), "is_active": is_active}
        audit_record(actor=actor, action="expert.profile_update", obj=profile, before=before, after=after)
