"""Episodes — one worker × one agent × one task — and their uploaded files."""

from __future__ import annotations

import uuid

from django.core.validators import MinValueValidator
from django.db import models


class Episode(models.Model):
    """The data point of the study: a human working with an agent on a task, and its score y."""

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        IN_PROGRESS = "in_progress", "In progress"
        SUBMITTED = "submitted", "Submitted"
        GRADING = "grading", "Grading"
        GRADED = "graded", "Graded"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Grading failed"

    class PriorExperience(models.TextChoices):
        NEVER = "never", "Never"
        FEW = "few", "A few times"
        REGULAR = "regular", "Regularly"

    class SkipReason(models.TextChoices):
        SETUP_FAILED = "setup_failed", "Agent setup failed"
        OUTSIDE_EXPERTISE = "outside_expertise", "Outside the worker's expertise"
        STAFF = "staff", "Skipped by staff"
        TIMED_OUT = "timed_out", "Time limit passed without a submission"
        ABANDONED = "abandoned", "Abandoned: no activity within the study's limit"

    class Condition(models.TextChoices):
        WITH_AGENT = "with_agent", "With an agent"
        SOLO = "solo", "Solo (no AI tool)"

    class ScoreSource(models.TextChoices):
        AUTO = "auto", "Automated judges"
        EXPERT = "expert", "Expert grades"
        BLENDED = "blended", "Blended"

    participant = models.ForeignKey("studyapp.Participant", on_delete=models.CASCADE, related_name="episodes")
    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="episodes")
    # Empty exactly for a solo episode (the constraint below): no agent was paired, so none can be rated.
    agent = models.ForeignKey("studyapp.Agent", on_delete=models.PROTECT, related_name="episodes", null=True,
                              blank=True)
    condition = models.CharField(
        max_length=16, choices=Condition.choices, default=Condition.WITH_AGENT,
        help_text="Whether the task was done with the paired agent or without any AI tool.")
    condition_order = models.CharField(
        max_length=16, blank=True,
        help_text="The worker's order of conditions drawn for a study with solo tasks (solo_first / agent_first); "
                  "empty in a study without solo tasks.")
    condition_order_probability = models.FloatField(
        null=True, blank=True, help_text="Probability with which that order was drawn (1 when the study fixes it).")
    used_ai_anyway = models.BooleanField(
        default=False, help_text="The worker said they used an AI tool on this solo task after all.")
    task = models.ForeignKey("studyapp.TaskInstance", on_delete=models.PROTECT, related_name="episodes")
    position = models.PositiveSmallIntegerField(help_text="1-based position in the participant's session.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ASSIGNED, db_index=True)
    pairing_seed = models.BigIntegerField(null=True, blank=True, help_text="Seed that drew this agent pairing.")
    design_mode = models.CharField(
        max_length=16, null=True, blank=True, help_text="The study's pairing design when the agent was chosen."
    )
    assignment_probability = models.FloatField(
        null=True, blank=True, help_text="Probability the design gave this agent for this task (for weighting)."
    )
    prior_experience = models.CharField(max_length=16, choices=PriorExperience.choices, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True, help_text="When the worker confirmed the agent ran.")
    assigned_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    timed_out = models.BooleanField(default=False, help_text="Submitted after the deadline; kept and flagged.")
    skip_reason = models.CharField(max_length=20, choices=SkipReason.choices, blank=True)
    skip_description = models.TextField(blank=True)
    share_url = models.URLField(blank=True, max_length=500, help_text="Shared-session link to the agent log.")
    notes = models.TextField(blank=True, help_text="Anything the worker wants the study team to know.")
    self_reported_minutes = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Minutes the worker said they spent on the task, asked at submission (optional; empty if not "
                  "given). Kept beside the timestamps, never merged with them.")
    score = models.FloatField(null=True, blank=True, help_text="Final 0–100 score y used by the rating.")
    auto_score = models.FloatField(null=True, blank=True, help_text="Mean of the current judge runs' totals.")
    expert_score = models.FloatField(null=True, blank=True, help_text="Score from submitted expert grades.")
    score_source = models.CharField(max_length=16, choices=ScoreSource.choices, blank=True)
    needs_expert_review = models.BooleanField(default=False, db_index=True)
    in_calibration_sample = models.BooleanField(
        default=False, db_index=True, help_text="Drawn at random for expert grading to measure the judges.")
    calibration_probability = models.FloatField(
        null=True, blank=True,
        help_text="Probability with which the calibration draw would include this episode, fixed when it was "
                  "first graded automatically; empty: not drawn (never graded automatically, or sampling off).")
    grading_note = models.TextField(blank=True, help_text="Why grading is waiting or failed (staff only).")
    is_simulated = models.BooleanField(default=False)
    is_gold = models.BooleanField(default=False, help_text="Known-answer episode planted for expert QA.")
    gold_verdicts = models.JSONField(
        default=dict, blank=True, help_text='Known answers for a gold episode: {"criterion key": "pass"|"fail"}.'
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["participant", "position"]
        constraints = [
            models.UniqueConstraint(fields=["participant", "position"], name="uniq_episode_position"),
            # Gold QA copies all belong to the study's one holder participant, and the same task may be
            # planted again (for other experts), so they are outside this rule.
            models.UniqueConstraint(
                fields=["participant", "task"], condition=models.Q(is_gold=False),
                name="uniq_episode_task_per_participant",
            ),
            models.CheckConstraint(condition=models.Q(position__gte=1), name="episode_position_positive"),
            models.CheckConstraint(
                condition=(models.Q(condition="solo", agent__isnull=True)
                           | (~models.Q(condition="solo") & models.Q(agent__isnull=False))),
                name="episode_agent_matches_condition",
            ),
            models.CheckConstraint(
                condition=models.Q(score__isnull=True) | (models.Q(score__gte=0) & models.Q(score__lte=100)),
                name="episode_score_in_range",
            ),
        ]
        indexes = [
            models.Index(fields=["study", "status"]),
            models.Index(fields=["study", "agent"]),
            models.Index(fields=["task", "status"]),
        ]

    def __str__(self) -> str:
        return f"Episode {self.pk} ({self.participant_id} #{self.position})"

    # What a worker may be told: grading states and their outcome all read "submitted".
    WORKER_STATUSES = ("assigned", "in_progress", "submitted", "skipped")

    @property
    def is_solo(self) -> bool:
        return self.condition == self.Condition.SOLO

    @property
    def worker_status(self) -> str:
        """Return the status a worker sees; grading, graded and failed are not theirs to know."""
        return self.status if self.status in self.WORKER_STATUSES else self.Status.SUBMITTED.value


def episode_file_path(instance: EpisodeFile, filename: str) -> str:
    return f"episodes/{instance.episode_id}/{instance.kind}/{uuid.uuid4().hex}"


class EpisodeFile(models.Model):
    """A deliverable, a collaboration-log file, or a setup-failure screenshot."""

    class Kind(models.TextChoices):
        DELIVERABLE = "deliverable", "Deliverable"
        LOG = "log", "Collaboration log"
        SKIP_SCREENSHOT = "skip_screenshot", "Setup-failure screenshot"

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="files")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=255, help_text="Sanitised original file name.")
    # Stored under a random name: the original never reaches the filesystem path.
    file = models.FileField(upload_to=episode_file_path, max_length=500)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    content_type = models.CharField(max_length=100, blank=True)
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["episode", "kind", "name"]
        constraints = [models.UniqueConstraint(fields=["episode", "kind", "name"], name="uniq_episode_file_name")]

    def __str__(self) -> str:
        return self.name


def solo_file_path(instance: SoloRunFile, filename: str) -> str:
    return f"solo/{instance.run_id}/{uuid.uuid4().hex}"


class SoloRun(models.Model):
    """An agent's autonomous attempt at a task, graded by the same pipeline as a baseline."""

    task = models.ForeignKey("studyapp.TaskInstance", on_delete=models.CASCADE, related_name="solo_runs")
    agent = models.ForeignKey("studyapp.Agent", on_delete=models.CASCADE, related_name="solo_runs")
    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="solo_runs")
    system_prompt = models.TextField(blank=True)
    score = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Episode.Status.choices, default=Episode.Status.SUBMITTED)
    grading_note = models.TextField(blank=True)
    model_cost_usd = models.DecimalField(
        max_digits=10, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="What the run's model calls cost in US dollars, from the provider's bill. A bill beats an "
                  "estimate: when given it is used as is; empty: the cost is priced from the usage the run's "
                  "session files recorded, and is unknown when they recorded none.")
    # Read from the session files when they are attached; None: no session file recorded usage (unknown, not 0).
    usage = models.JSONField(
        null=True, blank=True, help_text="Tokens per model recorded in the run's session files; empty: unknown.")
    usage_fingerprint = models.CharField(
        max_length=64, blank=True, help_text="Hash of the parser version and the session files the usage was read "
                                             "from; empty: never read. A change means the usage is read again.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["study", "agent"])]

    def __str__(self) -> str:
        return f"Solo {self.agent} on {self.task_id}"


class SoloRunFile(models.Model):
    """A file of a solo run: a deliverable (graded and compared) or a session file (read for its usage only)."""

    class Kind(models.TextChoices):
        # The values of `EpisodeFile.Kind`: a solo run's session file is what a log file is to an episode.
        DELIVERABLE = EpisodeFile.Kind.DELIVERABLE.value, "Deliverable"
        LOG = EpisodeFile.Kind.LOG.value, "Session file"

    run = models.ForeignKey(SoloRun, on_delete=models.CASCADE, related_name="files")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.DELIVERABLE)
    name = models.CharField(max_length=255)
    file = models.FileField(upload_to=solo_file_path, max_length=500)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="uniq_solo_file_name")]
