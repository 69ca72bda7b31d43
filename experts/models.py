"""Expert freelancers, their episode assignments and criterion-by-criterion grades.

The models began in the grading app; they keep its table names so moving them changed no table.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ExpertProfile(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="expert_profile")
    sectors = models.ManyToManyField("studyapp.Sector", related_name="experts", blank=True)
    bio = models.TextField(blank=True)
    is_active = models.BooleanField(default=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "grading_expertprofile"

    def __str__(self) -> str:
        return f"Expert {self.user}"


class ExpertAssignment(models.Model):
    """An episode routed to an expert for grading (blind by default)."""

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        IN_PROGRESS = "in_progress", "In progress"
        SUBMITTED = "submitted", "Submitted"
        CANCELLED = "cancelled", "Cancelled"

    class Role(models.TextChoices):
        PRIMARY = "primary", "Primary grade"
        SECOND = "second", "Second grade (agreement)"
        ADJUDICATION = "adjudication", "Adjudication"
        GOLD = "gold", "Gold check"

    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="expert_assignments")
    expert = models.ForeignKey(ExpertProfile, on_delete=models.CASCADE, related_name="assignments")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.PRIMARY)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ASSIGNED, db_index=True)
    assigned_at = models.DateTimeField(auto_now_add=True)
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        db_table = "grading_expertassignment"
        ordering = ["-assigned_at"]
        constraints = [models.UniqueConstraint(fields=["episode", "expert"], name="uniq_expert_per_episode")]


class ExpertGrade(models.Model):
    """An expert's criterion-by-criterion grade of one episode against one rubric version."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    class Judgement(models.TextChoices):
        ACCEPT = "accept", "Acceptable deliverable"
        REVISE = "revise", "Needs revision"
        REJECT = "reject", "Unacceptable"

    assignment = models.OneToOneField(ExpertAssignment, on_delete=models.CASCADE, related_name="grade")
    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="expert_grades")
    expert = models.ForeignKey(ExpertProfile, on_delete=models.CASCADE, related_name="grades")
    rubric = models.ForeignKey("grading.Rubric", on_delete=models.PROTECT, related_name="expert_grades")
    attempt = models.PositiveSmallIntegerField(default=1, help_text="Attempt k when re-attempts are recorded.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    overall = models.CharField(max_length=16, choices=Judgement.choices, blank=True)
    feedback = models.TextField(blank=True)
    score = models.FloatField(null=True, blank=True, help_text="0–100 rubric score: passed / evaluated.")
    time_spent_seconds = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "grading_expertgrade"
        ordering = ["-started_at"]


class ExpertCriterionGrade(models.Model):
    class Verdict(models.TextChoices):
        PASS = "pass", "Pass"
        FAIL = "fail", "Fail"
        SKIP = "skip", "Skip (cannot evaluate)"

    grade = models.ForeignKey(ExpertGrade, on_delete=models.CASCADE, related_name="criterion_grades")
    criterion = models.ForeignKey("grading.Criterion", on_delete=models.PROTECT, related_name="expert_verdicts")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    feedback = models.TextField(blank=True)

    class Meta:
        db_table = "grading_expertcriteriongrade"
        constraints = [models.UniqueConstraint(fields=["grade", "criterion"], name="uniq_expert_verdict")]


class ToMGoldSample(models.Model):
    """A study's stratified sample of ToM-coded episodes for experts to code as the gold standard (one per study).

    Strata are the LLM judges' mean ToM score band crossed with the condition, fixed when the sample is drawn;
    each item keeps its stratum's population and sample counts so estimates can be weighted by 1/pi.
    """

    study = models.OneToOneField("studyapp.Study", on_delete=models.CASCADE, related_name="tom_gold_sample")
    size = models.PositiveIntegerField(help_text="Episodes asked for (capped at the population).")
    seed = models.BigIntegerField(help_text="Seed of the draw, so it can be reproduced.")
    population = models.PositiveIntegerField(help_text="ToM-coded episodes the sample was drawn from.")
    raters_per_episode = models.PositiveSmallIntegerField(default=1)
    prompt_version = models.CharField(max_length=32, help_text="ToM instrument version the strata were read from.")
    drawn_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"ToM gold sample of study {self.study_id}"


class ToMGoldItem(models.Model):
    """One sampled episode, its stratum and its inclusion probability pi = n_h / N_h."""

    sample = models.ForeignKey(ToMGoldSample, on_delete=models.CASCADE, related_name="items")
    episode = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="tom_gold_items")
    stratum = models.CharField(max_length=64, help_text="band|condition, e.g. high|agent.")
    stratum_population = models.PositiveIntegerField(help_text="N_h: coded episodes in the stratum.")
    stratum_sample = models.PositiveIntegerField(help_text="n_h: sampled episodes in the stratum.")
    inclusion_probability = models.FloatField()
    judge_mean = models.FloatField(help_text="The judges' mean ToM score when the sample was drawn.")

    class Meta:
        ordering = ["sample", "pk"]
        constraints = [models.UniqueConstraint(fields=["sample", "episode"], name="uniq_tom_gold_item_episode")]


class ToMGoldCode(models.Model):
    """An expert's 0-5 ToM code of one sampled episode's worker prompts; created when the expert is assigned."""

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    item = models.ForeignKey(ToMGoldItem, on_delete=models.CASCADE, related_name="codes")
    expert = models.ForeignKey(ExpertProfile, on_delete=models.CASCADE, related_name="tom_gold_codes")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ASSIGNED)
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    markers = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    time_spent_seconds = models.PositiveIntegerField(default=0)
    assigned_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["item", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["item", "expert"], name="uniq_tom_gold_code_expert"),
            models.CheckConstraint(condition=models.Q(score__isnull=True) | models.Q(score__lte=5),
                                   name="tom_gold_score_0_5"),
        ]


# --------------------------------------------------------------------------------------------------------
# Blind comparisons (GDPval-style): an expert ranks two to four deliverables of one task
# --------------------------------------------------------------------------------------------------------


class ComparisonSet(models.Model):
    """Two to four deliverables of one task that experts rank against each other without knowing their arms."""

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="comparison_sets")
    task = models.ForeignKey("studyapp.TaskInstance", on_delete=models.PROTECT, related_name="comparison_sets")
    note = models.CharField(max_length=500, blank=True, help_text="Staff note (never shown to experts).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Comparison set {self.pk}"


class ComparisonItem(models.Model):
    """One deliverable of a set: a submitted episode's files, or a solo-agent run's files (the agent alone)."""

    comparison_set = models.ForeignKey(ComparisonSet, on_delete=models.CASCADE, related_name="items")
    episode = models.ForeignKey("studyapp.Episode", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="comparison_items")
    solo_run = models.ForeignKey("studyapp.SoloRun", null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="comparison_items")

    class Meta:
        ordering = ["comparison_set", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(episode__isnull=False, solo_run__isnull=True)
                           | models.Q(episode__isnull=True, solo_run__isnull=False)),
                name="comparison_item_one_source"),
            models.UniqueConstraint(fields=["comparison_set", "episode"], name="uniq_comparison_item_episode"),
            models.UniqueConstraint(fields=["comparison_set", "solo_run"], name="uniq_comparison_item_solo_run"),
        ]


class ComparisonAssignment(models.Model):
    """A set given to one expert, with the random order it is shown in, and the expert's answer.

    ``order_probability`` is the chance of the drawn order (1/n! for a uniform draw), kept so an analysis of
    position effects can weight by it.
    """

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        IN_PROGRESS = "in_progress", "In progress"
        SUBMITTED = "submitted", "Submitted"
        CANCELLED = "cancelled", "Cancelled"

    comparison_set = models.ForeignKey(ComparisonSet, on_delete=models.CASCADE, related_name="assignments")
    expert = models.ForeignKey(ExpertProfile, on_delete=models.CASCADE, related_name="comparison_assignments")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ASSIGNED, db_index=True)
    order_seed = models.BigIntegerField(help_text="Seed that drew the shown order.")
    order_probability = models.FloatField(help_text="Probability of the shown order under the draw.")
    justification = models.TextField(blank=True)
    time_spent_seconds = models.PositiveIntegerField(default=0)
    assigned_at = models.DateTimeField(auto_now_add=True)
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    opened_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-assigned_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["comparison_set", "expert"],
                                               name="uniq_comparison_per_expert")]


class ComparisonPlacement(models.Model):
    """Where one deliverable was shown to the expert (1 = first), the rank they gave it and its acceptability.

    Rank 1 is best; equal ranks are ties. Both stay empty until the expert answers.
    """

    class Acceptability(models.TextChoices):
        READY = "ready", "Ready to send to the client as is"
        MINOR = "minor", "Acceptable after minor edits"
        MAJOR = "major", "Needs major rework"
        UNUSABLE = "unusable", "Not usable"

    assignment = models.ForeignKey(ComparisonAssignment, on_delete=models.CASCADE, related_name="placements")
    item = models.ForeignKey(ComparisonItem, on_delete=models.CASCADE, related_name="placements")
    position = models.PositiveSmallIntegerField()
    rank = models.PositiveSmallIntegerField(null=True, blank=True)
    acceptability = models.CharField(max_length=16, choices=Acceptability.choices, blank=True)

    class Meta:
        ordering = ["assignment", "position"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "position"], name="uniq_comparison_position"),
            models.UniqueConstraint(fields=["assignment", "item"], name="uniq_comparison_placement_item"),
            models.CheckConstraint(condition=models.Q(position__gte=1), name="comparison_position_positive"),
        ]


class JudgeComparison(models.Model):
    """One LLM judge's ranking of a comparison set's deliverables, shown in one order.

    Each set is shown to each of the study's judges in its recorded order (items by id) and reversed, so a
    judge's position bias is measured. One row per set x order x judge x prompt version (unique), claimed RUNNING
    with a lease and finished in place, so a duplicate run or a killed worker never pays for a second ranking.
    ``shown_items`` holds the items' ids in the order shown; ``ranks[i]`` is the rank the judge gave to
    ``shown_items[i]`` (1 is best, equal ranks are ties).
    """

    class Order(models.TextChoices):
        RECORDED = "recorded", "The set's recorded order"
        REVERSED = "reversed", "The recorded order reversed"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="judge_comparisons")
    comparison_set = models.ForeignKey(ComparisonSet, on_delete=models.CASCADE, related_name="judge_comparisons")
    order = models.CharField(max_length=8, choices=Order.choices)
    shown_items = models.JSONField(default=list, help_text="Item ids in the order the judge saw them.")
    prompt_version = models.CharField(max_length=32)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=100)
    family = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    ranks = models.JSONField(default=list, blank=True, help_text="The judge's rank of each shown item.")
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    claim = models.CharField(max_length=32, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "comparison_set", "order", "provider", "model"]
        constraints = [
            models.UniqueConstraint(fields=["comparison_set", "order", "provider", "model", "prompt_version"],
                                    name="one_judge_comparison"),
        ]

    def __str__(self) -> str:
        return f"Judge comparison of set {self.comparison_set_id} ({self.order}) by {self.provider}/{self.model}"
