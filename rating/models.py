"""The rating ledger (one observation per scored episode, and one grade row per grade of it) and posterior
snapshots."""

from __future__ import annotations

from django.db import models


class Observation(models.Model):
    """One scored episode's contribution (A, H, y) to the rating; retraction flips `active`."""

    class Source(models.TextChoices):
        AUTO = "auto", "Automated judges"
        EXPERT = "expert", "Expert grades"
        BLENDED = "blended", "Blended"
        IMPORTED = "imported", "Imported sessions"

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="observations")
    episode = models.OneToOneField(
        "studyapp.Episode", null=True, blank=True, on_delete=models.CASCADE, related_name="observation"
    )
    agent = models.ForeignKey("studyapp.Agent", on_delete=models.PROTECT, related_name="observations")
    participant = models.ForeignKey(
        "studyapp.Participant", on_delete=models.CASCADE, related_name="observations"
    )
    task = models.ForeignKey(
        "studyapp.TaskInstance", null=True, blank=True, on_delete=models.SET_NULL, related_name="observations"
    )
    task_uuid = models.UUIDField(
        null=True, blank=True,
        help_text="The task's stable UUID; kept for imported sessions whose task is not in this database.",
    )
    external_id = models.CharField(max_length=128, blank=True, help_text="Session id for imported data.")
    y = models.FloatField()
    weight = models.FloatField(default=1.0)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.AUTO)
    active = models.BooleanField(default=True, db_index=True)
    retraction_reason = models.CharField(max_length=255, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study", "recorded_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(weight__gt=0), name="observation_weight_positive"),
            models.UniqueConstraint(
                fields=["study", "external_id"], condition=~models.Q(external_id=""),
                name="uniq_imported_session",
            ),
        ]
        indexes = [models.Index(fields=["study", "active"])]

    def __str__(self) -> str:
        return f"obs {self.pk}: y={self.y:.2f}"


class GradeObservation(models.Model):
    """One grade of an episode -- a judge run's total or an expert's rubric score -- as an observation of the
    judge-aware model, with the grader's and the agent's model families as they were when it was recorded.

    Grading and the expert workspace replace an episode's rows of their kind whenever its current grades change
    (``rating.services.ledger.episode_grades_record``); an episode that must not count (skipped, gold copy,
    participant withdrawn) keeps its rows inactive with the reason, as the observation ledger does.
    """

    class GraderKind(models.TextChoices):
        JUDGE = "judge", "LLM judge"
        EXPERT = "expert", "Expert"

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="grade_observations")
    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="grade_observations")
    agent = models.ForeignKey("studyapp.Agent", on_delete=models.PROTECT, related_name="grade_observations")
    participant = models.ForeignKey(
        "studyapp.Participant", on_delete=models.CASCADE, related_name="grade_observations"
    )
    task = models.ForeignKey(
        "studyapp.TaskInstance", null=True, blank=True, on_delete=models.SET_NULL, related_name="grade_observations"
    )
    grader = models.CharField(max_length=120, help_text='"provider/model" for a judge, "expert:<id>" for an expert.')
    grader_kind = models.CharField(max_length=8, choices=GraderKind.choices)
    grader_family = models.CharField(max_length=32, blank=True, help_text="Empty for experts (no stake).")
    agent_family = models.CharField(max_length=32, blank=True)
    y = models.FloatField()
    source_id = models.BigIntegerField(help_text="The judge run or expert grade the score comes from.")
    active = models.BooleanField(default=True, db_index=True)
    retraction_reason = models.CharField(max_length=255, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study", "episode", "grader"]
        constraints = [
            models.UniqueConstraint(fields=["episode", "grader"], name="uniq_grade_per_grader"),
            models.CheckConstraint(condition=models.Q(y__gte=0) & models.Q(y__lte=100), name="grade_on_score_scale"),
        ]
        indexes = [models.Index(fields=["study", "active"], name="grade_obs_study_active")]

    def __str__(self) -> str:
        return f"grade {self.grader} of episode {self.episode_id}: {self.y:.2f}"


class RatingSnapshot(models.Model):
    """A posterior computed from the active ledger at one moment; pages read these, never recompute."""

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="rating_snapshots")
    version = models.PositiveIntegerField()
    n_observations = models.PositiveIntegerField(default=0)
    config = models.JSONField(
        default=dict, help_text="The rating model it was computed with (rating.fit.ModelSpec.to_dict())."
    )
    fit = models.JSONField(
        default=dict, blank=True,
        help_text="Fitted hyperparameters and their uncertainty, level, likelihood and fit diagnostics.",
    )
    timings = models.JSONField(default=dict, blank=True)
    connectivity = models.JSONField(default=dict, blank=True)
    ledger_digest = models.CharField(
        max_length=64, blank=True, default="",
        help_text="Hash of the active ledger and model settings it was computed from; an unchanged one is not "
                  "computed again by a refresh request.")
    computed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "-version"]
        get_latest_by = "version"
        constraints = [models.UniqueConstraint(fields=["study", "version"], name="uniq_snapshot_version")]

    def __str__(self) -> str:
        return f"{self.study} posterior v{self.version}"


class EntityRating(models.Model):
    class Kind(models.TextChoices):
        AGENT = "agent", "Agent"
        HUMAN = "human", "Human"

    snapshot = models.ForeignKey(RatingSnapshot, on_delete=models.CASCADE, related_name="ratings")
    entity_kind = models.CharField(max_length=8, choices=Kind.choices)
    entity_id = models.BigIntegerField(help_text="Agent or Participant primary key.")
    label = models.CharField(max_length=200, help_text="Agent name, or the participant's pseudonym.")
    mu = models.FloatField()
    sigma = models.FloatField()
    conservative = models.FloatField(help_text="μ − kσ")
    n = models.PositiveIntegerField()
    rank = models.PositiveIntegerField()

    class Meta:
        ordering = ["snapshot", "entity_kind", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "entity_kind", "entity_id"], name="uniq_entity_rating")
        ]
