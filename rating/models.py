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


class LedgerChange(models.Model):
    """One change to what the posterior counts of an observation, with what it counted before: the queue of live
    updates (`rating.services.live`). Written in the transaction that changes the observation; the refresh that
    applies it (a live update or a refit) deletes it in the transaction that writes the snapshot."""

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="ledger_changes")
    observation_id = models.BigIntegerField()
    participant_id = models.BigIntegerField()
    was_active = models.BooleanField(help_text="Whether the observation counted before the change.")
    old_agent_id = models.BigIntegerField(null=True, blank=True)
    old_y = models.FloatField(null=True, blank=True)
    old_weight = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "id"]
        indexes = [models.Index(fields=["study", "id"], name="ledger_change_study")]

    def __str__(self) -> str:
        return f"change of observation {self.observation_id}"


class RatingSnapshot(models.Model):
    """A posterior computed from the active ledger at one moment; pages read these, never recompute."""

    class ProducedBy(models.TextChoices):
        REFIT = "refit", "Refit (variance components re-estimated)"
        UPDATE = "update", "Live update at the refit's variance components"

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
    produced_by = models.CharField(max_length=8, choices=ProducedBy.choices, default=ProducedBy.REFIT)
    base = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="A live update's refit: its variance components, and the participants' ratings it carries.",
    )
    participants_removed_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When retention deleted this refit's participants' rating rows (its agents' rows and fit stay).",
    )

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

    # A refit writes a row per participant (10^6 at platform scale) in the transaction that creates the snapshot,
    # so the database neither checks each row against the snapshot at commit (a deferred trigger event per row:
    # seconds at that size) nor keeps a second index on the column (the unique constraint below starts with
    # it). Rows are written only by rating.services.refresh, for the snapshot it has just created, and deleted
    # with their snapshot by the ORM's cascade.
    snapshot = models.ForeignKey(
        RatingSnapshot, on_delete=models.CASCADE, related_name="ratings", db_constraint=False, db_index=False
    )
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


class PendingRatingRows(models.Model):
    """Rating rows a refit committed ahead of its snapshot (a large participant set, written on connections of
    its own): until the sweep has seen the snapshot committed, or deleted the rows of one that never was.

    The marker is committed before the first such row, so every row that can outlive a failed refit has one,
    and the sweep reads these few rows instead of walking every snapshot id of the rating table.
    """

    snapshot_id = models.BigIntegerField(unique=True, help_text="The snapshot the rows were written for.")
    rows = models.PositiveIntegerField(help_text="How many rows the refit was about to write.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "pending rating rows"
        verbose_name_plural = "pending rating rows"  # not Django's "rowss"

    def __str__(self) -> str:
        return f"rating rows written ahead of snapshot {self.snapshot_id}"


class PosteriorState(models.Model):
    """A study's posterior in information form (`rating.live.InformationState`): what a live update starts from.

    Every refresh of the study updates this row first, so two refreshes that overlap cannot both start from
    the same state (the second waits, or under repeatable read fails and retries).
    """

    study = models.OneToOneField("studyapp.Study", on_delete=models.CASCADE, related_name="posterior_state")
    snapshot = models.ForeignKey(
        RatingSnapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The latest snapshot written from this state.",
    )
    refit = models.ForeignKey(
        RatingSnapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The refit whose variance components the state holds.",
    )
    live = models.BooleanField(default=False, help_text="Whether the state allows live updates (the model has them).")
    data = models.BinaryField(blank=True, default=b"", help_text="Empty when the model has no live updates.")
    updates = models.PositiveIntegerField(default=0, help_text="Live updates since the refit.")
    refitted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"posterior state of study {self.study_id}"
