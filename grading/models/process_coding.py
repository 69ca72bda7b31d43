"""Process codings of an episode's parsed log: theory of mind in the worker's prompts, quality of the agent's turns."""

from __future__ import annotations

from django.db import models


class ProcessCoding(models.Model):
    """One judge's 0-5 coding of one episode under one instrument version; never overwritten.

    A row is created RUNNING when a worker claims the coding (its lease renewed while the paid call is in flight)
    and finished in place, so a killed worker's claim lapses and is taken over rather than paid for twice. A new
    instrument version or a staff re-run adds a row that becomes current; earlier rows stay.
    """

    class Instrument(models.TextChoices):
        TOM = "tom", "Theory of mind in the worker's prompts"
        RESPONSE_QUALITY = "response_quality", "Quality of the agent's responses"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        NOT_CODED = "not_coded", "Not coded (no parsable log)"

    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="process_codings")
    instrument = models.CharField(max_length=16, choices=Instrument.choices)
    prompt_version = models.CharField(max_length=32, help_text="Hash of the instrument's prompt and schema.")
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=100)
    family = models.CharField(max_length=32, blank=True, help_text="Model family of the judge.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    score = models.PositiveSmallIntegerField(null=True, blank=True, help_text="0-5; empty unless succeeded.")
    markers = models.JSONField(default=list, blank=True, help_text="Marker codes the judge found (ToM only).")
    reason = models.TextField(blank=True, help_text="The judge's short reason.")
    error = models.TextField(blank=True, help_text="Why the episode was not coded, or why the coding failed.")
    is_current = models.BooleanField(default=False)
    is_simulated = models.BooleanField(default=False, help_text="Demonstration coding drawn from a model, not a judge.")
    claim = models.CharField(max_length=32, blank=True, help_text="Token of the worker holding the claim.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["episode", "instrument", "provider", "model"],
                                    condition=models.Q(is_current=True), name="one_current_process_coding"),
            models.UniqueConstraint(fields=["episode", "instrument", "provider", "model"],
                                    condition=models.Q(status="running"), name="one_running_process_coding"),
            models.CheckConstraint(condition=models.Q(score__isnull=True) | models.Q(score__lte=5),
                                   name="process_coding_score_0_5"),
        ]
        indexes = [models.Index(fields=["episode", "instrument", "is_current"], name="process_coding_current")]

    def __str__(self) -> str:
        return f"{self.instrument} of episode {self.episode_id} by {self.provider}/{self.model}"
