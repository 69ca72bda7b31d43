"""The payment ledger: what each participant is owed and when it was paid."""

from __future__ import annotations

from django.db import models


class Payment(models.Model):
    """A payment ledger line: base pay per completed task, rank bonuses, manual adjustments."""

    class Kind(models.TextChoices):
        TASK = "task", "Completed task"
        BONUS = "bonus", "Rank bonus"
        ADJUSTMENT = "adjustment", "Adjustment"

    participant = models.ForeignKey("studyapp.Participant", on_delete=models.CASCADE, related_name="payments")
    episode = models.ForeignKey(
        "studyapp.Episode", null=True, blank=True, on_delete=models.SET_NULL, related_name="payments"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    currency = models.CharField(max_length=3, default="USD")
    note = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["episode", "kind"], condition=models.Q(kind="task"), name="uniq_task_payment_per_episode"
            )
        ]
