"""Consent decisions: every accept or decline is kept with the version and the time (IRB record)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from studies.exceptions import StepNotAvailable
from studies.models import ConsentRecord, ConsentVersion, Participant
from studies.services.audit import audit_record
from studies.services.participants import participant_withdraw


def consent_decide(*, participant: Participant, consent_version: ConsentVersion, accepted: bool,
                   actor: Any) -> Participant:
    """Record an accept or decline of the version shown to the participant.

    Declining before ever consenting leaves politely (status ``declined``, nothing else kept but the record);
    declining a new version after consenting to an earlier one is a withdrawal from the study.
    """
    with transaction.atomic():
        locked = Participant.objects.select_for_update(of=("self",)).select_related("study", "consent_version").get(
            pk=participant.pk
        )
        if locked.status == Participant.Status.WITHDRAWN:
            raise StepNotAvailable("You have withdrawn from this study, so there is nothing left to consent to.")
        current = locked.study.current_consent()
        if current is None or current.pk != consent_version.pk:
            raise StepNotAvailable("The consent text was updated while you were reading it. Please read the current "
                                   "version below and decide again.")
        ConsentRecord.objects.create(participant=locked, consent_version=consent_version, accepted=accepted)
        before = {"consent_version": locked.consent_version.version if locked.consent_version else None,
                  "status": locked.status}
        if accepted:
            locked.consent_version = consent_version
            locked.consented_at = timezone.now()
            if locked.status in (Participant.Status.INVITED, Participant.Status.DECLINED):
                locked.status = Participant.Status.CONSENTED
            locked.save(update_fields=["consent_version", "consented_at", "status"])
            audit_record(actor=actor, action="consent.accept", obj=locked, study=locked.study, before=before,
                         after={"consent_version": consent_version.version, "status": locked.status})
            return locked
        audit_record(actor=actor, action="consent.decline", obj=locked, study=locked.study, before=before,
                     after={"declined_version": consent_version.version})
        if locked.consent_version_id is None:
            locked.status = Participant.Status.DECLINED
            locked.save(update_fields=["status"])
            return locked
        return participant_withdraw(participant=locked, actor=actor,
                                    reason=f"Declined consent version {consent_version.version}.")
