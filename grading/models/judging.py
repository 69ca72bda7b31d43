"""Extractions, judge runs, per-criterion scores, LLM spend and AI-fluency codings."""

from __future__ import annotations

from django.db import models

from studies.models import Episode


class Extraction(models.Model):
    """Judge-ready content extracted from an episode's or a solo run's deliverables."""

    episode = models.OneToOneField(
        "studyapp.Episode", null=True, blank=True, on_delete=models.CASCADE, related_name="extraction"
    )
    solo_run = models.OneToOneField(
        "studyapp.SoloRun", null=True, blank=True, on_delete=models.CASCADE, related_name="extraction"
    )
    content = models.JSONField(default=dict)
    total_chars = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(episode__isnull=False, solo_run__isnull=True)
                | models.Q(episode__isnull=True, solo_run__isnull=False),
                name="extraction_has_one_subject",
            )
        ]


class JudgeRun(models.Model):
    """One judge model scoring one submission against one rubric version; never overwritten."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        WAITING = "waiting", "Waiting for configuration or budget"

    episode = models.ForeignKey(
        "studyapp.Episode", null=True, blank=True, on_delete=models.CASCADE, related_name="judge_runs"
    )
    solo_run = models.ForeignKey(
        "studyapp.SoloRun", null=True, blank=True, on_delete=models.CASCADE, related_name="judge_runs"
    )
    rubric = models.ForeignKey("grading.Rubric", on_delete=models.PROTECT, related_name="judge_runs")
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=100)
    prompt_version = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    is_current = models.BooleanField(default=False, help_text="Part of the submission's current score.")
    total = models.FloatField(null=True, blank=True)
    category_totals = models.JSONField(default=dict, blank=True)
    raw_response = models.TextField(blank=True)
    summary = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="A RUNNING run whose lease has lapsed belongs to a dead worker.")
    reserved_usd = models.DecimalField(
        max_digits=10, decimal_places=6, null=True, blank=True,
        help_text="Budget held for the call in flight (an upper bound of its cost); cleared when its cost is "
                  "recorded or the run is released. Counts against the cap only while the lease is live.")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["episode", "rubric", "provider", "model", "prompt_version"],
                condition=models.Q(episode__isnull=False),
                name="uniq_judge_run_per_episode",
            ),
            models.UniqueConstraint(
                fields=["solo_run", "rubric", "provider", "model", "prompt_version"],
                condition=models.Q(solo_run__isnull=False),
                name="uniq_judge_run_per_solo_run",
            ),
            models.CheckConstraint(
                condition=models.Q(episode__isnull=False, solo_run__isnull=True)
                | models.Q(episode__isnull=True, solo_run__isnull=False),
                name="judge_run_has_one_subject",
            ),
        ]
        indexes = [models.Index(fields=["episode", "is_current"]),
                   models.Index(fields=["status", "lease_expires_at"], name="judge_run_status_lease")]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} on {self.episode_id or self.solo_run_id}"


class CriterionScore(models.Model):
    judge_run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="criterion_scores")
    criterion = models.ForeignKey("grading.Criterion", on_delete=models.PROTECT, related_name="scores")
    earned = models.FloatField()
    reason = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judge_run", "criterion"], name="uniq_score_per_criterion"),
            models.CheckConstraint(condition=models.Q(earned__gte=0), name="criterion_score_non_negative"),
        ]


class LLMUsage(models.Model):
    """Every LLM call's tokens and cost, for the per-study budget cap and the spend view."""

    class Purpose(models.TextChoices):
        RUBRIC = "rubric", "Rubric generation"
        JUDGE = "judge", "Judging"
        FLUENCY = "fluency", "Log coding"
        TOM = "tom", "Theory-of-mind coding"
        RESPONSE_QUALITY = "response_quality", "Response-quality coding"
        TOM_PAIRWISE = "tom_pairwise", "Pairwise theory-of-mind comparison"
        JUDGE_COMPARISON = "judge_comparison", "Judge comparison of deliverables"

    study = models.ForeignKey("studyapp.Study", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=100)
    prompt_version = models.CharField(max_length=32, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    succeeded = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["study", "purpose"])]


class FluencyCoding(models.Model):
    """The 11 AI-fluency behaviours coded from one episode's collaboration log (paper App. H)."""

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        NO_LOG = "no_log", "No inspectable log"

    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="fluency_codings")
    provider = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=100, blank=True)
    prompt_version = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    behaviours = models.JSONField(default=dict, blank=True, help_text='{"code": {"present": bool, "reason": str}}')
    behaviour_count = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    is_current = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Two codings finishing at once cannot both stay current (the writer also locks the episode row).
            models.UniqueConstraint(fields=["episode"], condition=models.Q(is_current=True),
                                    name="one_current_fluency_coding"),
        ]


class EpisodeGrading(Episode):
    """Episodes seen from the grading side (status, reasons, retry) in the admin; no table of its own."""

    class Meta:
        proxy = True
        verbose_name = "episode grading"
        verbose_name_plural = "episode grading"


class GradingFollowUp(models.Model):
    """Outbox row: work a grade owes (written in the grade's transaction), done by message or by the sweep.

    The message sent after commit is only the fast path; when it is lost (broker down, worker killed) the
    reconciliation sweep finds the open row and does the work, so no grade can miss the rating ledger.
    """

    class Kind(models.TextChoices):
        OBSERVATION = "observation", "Record the rating observation"
        FLUENCY = "fluency", "Code the collaboration log"
        PROCESS = "process", "Code theory of mind and response quality"

    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="grading_follow_ups")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Messages the sweep sent again.")
    last_sent_at = models.DateTimeField(
        null=True, blank=True, help_text="When the sweep last sent its message; the next re-send waits from here.")
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="A log coding in flight holds this (renewed while its call runs), so a "
                                         "duplicate message or a re-send does not pay for a second coding.")
    done_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["created_at"], condition=models.Q(done_at__isnull=True),
                                name="grading_follow_up_open")]

    def __str__(self) -> str:
        return f"{self.kind} for episode {self.episode_id}"
