"""Participants (research data, pseudonymous) kept apart from their identities (PII)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models


def _pseudonym() -> str:
    return "P-" + secrets.token_hex(5).upper()


def _completion_code() -> str:
    return secrets.token_hex(4).upper()


class Participant(models.Model):
    """One worker in one study; exports identify them only by the pseudonym."""

    class Status(models.TextChoices):
        INVITED = "invited", "Invited"
        CONSENTED = "consented", "Consented"
        PRE_SURVEY = "pre_survey", "Pre-survey"
        WORKING = "working", "Working on tasks"
        POST_SURVEY = "post_survey", "Post-survey"
        COMPLETE = "complete", "Complete"
        WITHDRAWN = "withdrawn", "Withdrawn"
        DECLINED = "declined", "Declined consent"

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="participations"
    )
    pseudonym = models.CharField(max_length=16, unique=True, default=_pseudonym)
    is_simulated = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.INVITED, db_index=True)
    occupation = models.ForeignKey(
        "studyapp.Occupation", null=True, blank=True, on_delete=models.PROTECT, related_name="participants"
    )
    # Whole or half years, the same rule as the pre-survey's experience question (D3).
    years_experience = models.FloatField(null=True, blank=True)
    consent_version = models.ForeignKey(
        "studyapp.ConsentVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    consented_at = models.DateTimeField(null=True, blank=True)
    completion_code = models.CharField(max_length=16, default=_completion_code)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity_at = models.DateTimeField(null=True, blank=True, db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawal_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["study", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "user"], condition=models.Q(user__isnull=False), name="uniq_participant_per_user"
            )
        ]
        indexes = [models.Index(fields=["study", "status"])]

    def __str__(self) -> str:
        return self.pseudonym


class ParticipantIdentity(models.Model):
    """Personally identifying data, stored apart so research exports stay pseudonymous."""

    participant = models.OneToOneField(Participant, on_delete=models.CASCADE, related_name="identity")
    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="+")
    email = models.EmailField(blank=True)
    full_name = models.CharField(max_length=200, blank=True)
    platform = models.CharField(max_length=32, blank=True, help_text="Recruitment platform, e.g. prolific.")
    platform_worker_id = models.CharField(max_length=128, blank=True)

    class Meta:
        verbose_name_plural = "participant identities"
        constraints = [
            models.UniqueConstraint(
                fields=["study", "platform", "platform_worker_id"],
                condition=~models.Q(platform_worker_id=""),
                name="uniq_platform_worker_per_study",
            )
        ]

    def __str__(self) -> str:
        return f"identity of {self.participant_id}"


class ConsentRecord(models.Model):
    """Each consent decision, kept forever for the IRB record."""

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="consent_records")
    consent_version = models.ForeignKey("studyapp.ConsentVersion", on_delete=models.PROTECT, related_name="+")
    accepted = models.BooleanField()
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-decided_at"]


class StepVisit(models.Model):
    """Time a participant spent on one step, to reconcile with what the recruitment platform reports."""

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="step_visits")
    episode = models.ForeignKey(
        "studyapp.Episode", null=True, blank=True, on_delete=models.CASCADE, related_name="step_visits"
    )
    step = models.CharField(max_length=32)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["participant", "started_at"]
        indexes = [models.Index(fields=["participant", "step"])]

    @property
    def seconds(self) -> float:
        return (self.last_seen_at - self.started_at).total_seconds()
