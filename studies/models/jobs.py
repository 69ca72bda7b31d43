"""Background jobs: long-running staff work (analysis, export, payouts) with progress a page can poll."""

from __future__ import annotations

from django.conf import settings
from django.db import models


def job_file_path(instance: BackgroundJob, filename: str) -> str:
    return f"jobs/{instance.pk}/{filename}"


class BackgroundJob(models.Model):
    """A long-running staff job (analysis, export) with progress a page can poll."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    kind = models.CharField(max_length=32, db_index=True)
    study = models.ForeignKey("studyapp.Study", null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    params = models.JSONField(default=dict, blank=True)
    cache_key = models.CharField(max_length=128, blank=True, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    file = models.FileField(upload_to=job_file_path, blank=True, max_length=500)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def percent(self) -> int:
        if not self.progress_total:
            return 100 if self.status == self.Status.DONE else 0
        return min(100, int(100 * self.progress_done / self.progress_total))
