"""Task instances with reference files and hidden evaluator information."""

from __future__ import annotations

import uuid

from django.db import models


class TaskInstance(models.Model):
    """An occupational task (paper §3.1 TaskInstance): prompt, files, O*NET tags, hidden evaluator info."""

    class Source(models.TextChoices):
        GDPVAL = "gdpval", "GDPval"
        APEX = "apex", "APEX"
        APEX_AGENTS = "apex_agents", "APEX-Agents"
        CUSTOM = "custom", "Custom"

    uuid = models.UUIDField(unique=True, default=uuid.uuid4, help_text="Stable id from the source dataset.")
    title = models.CharField(max_length=255)
    prompt = models.TextField()
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CUSTOM)
    sector = models.ForeignKey("studyapp.Sector", on_delete=models.PROTECT, related_name="tasks")
    occupations = models.ManyToManyField("studyapp.Occupation", related_name="tasks", blank=True)
    required_software = models.JSONField(default=list, blank=True)
    expected_deliverables = models.JSONField(default=list, blank=True, help_text="Expected file names.")
    # Never shown to workers: gold deliverable notes, domain knowledge for graders.
    hidden_info = models.TextField(blank=True)
    time_limit_minutes = models.PositiveIntegerField(null=True, blank=True)
    is_active = models.BooleanField(default=True, db_index=True)
    studies = models.ManyToManyField("studyapp.Study", related_name="tasks", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]
        indexes = [models.Index(fields=["sector", "is_active"])]

    def __str__(self) -> str:
        return self.title


def task_file_path(instance: TaskFile, filename: str) -> str:
    return f"tasks/{instance.task.uuid}/{instance.kind}/{uuid.uuid4().hex}/{filename}"


class TaskFile(models.Model):
    """A reference file workers download, or a hidden (gold) file only evaluators see."""

    class Kind(models.TextChoices):
        REFERENCE = "reference", "Reference (shown to workers)"
        HIDDEN = "hidden", "Hidden evaluator file"

    task = models.ForeignKey(TaskInstance, on_delete=models.CASCADE, related_name="files")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.REFERENCE)
    name = models.CharField(max_length=255)
    file = models.FileField(upload_to=task_file_path, max_length=500)
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    content_type = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["task", "kind", "name"]
        constraints = [models.UniqueConstraint(fields=["task", "kind", "name"], name="uniq_task_file_name")]

    def __str__(self) -> str:
        return f"{self.task_id}:{self.kind}:{self.name}"
