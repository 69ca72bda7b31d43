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


class ToMPairCoding(models.Model):
    """One judge's pairwise ToM comparison of two episodes' worker prompts, in one display order.

    Each drawn pair (episode_a < episode_b) is shown in both orders ("ab": a as set A; "ba": b as set A) to measure
    position bias. One row per pair x order x judge x instrument version (unique), claimed RUNNING with a lease
    and finished in place, so a duplicate message or a killed worker never pays for a second comparison.
    """

    class Order(models.TextChoices):
        AB = "ab", "Episode a shown first"
        BA = "ba", "Episode b shown first"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="tom_pair_codings")
    episode_a = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="+")
    episode_b = models.ForeignKey("studyapp.Episode", on_delete=models.CASCADE, related_name="+")
    order = models.CharField(max_length=2, choices=Order.choices)
    seed = models.BigIntegerField(help_text="Seed of the pair draw that produced this pair.")
    prompt_version = models.CharField(max_length=32)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=100)
    family = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    shown_choice = models.CharField(max_length=3, blank=True, help_text="A, B or tie as the judge answered.")
    winner = models.CharField(max_length=3, blank=True,
                              help_text="a, b or tie: the shown choice mapped back to the pair's episodes.")
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    claim = models.CharField(max_length=32, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "episode_a", "episode_b", "order", "provider"]
        constraints = [
            models.UniqueConstraint(fields=["episode_a", "episode_b", "order", "provider", "model", "prompt_version"],
                                    name="one_tom_pair_coding"),
            models.CheckConstraint(condition=models.Q(episode_a__lt=models.F("episode_b")),
                                   name="tom_pair_a_before_b"),
        ]


class SimulatedEffort(models.Model):
    """Effort measures drawn from a model for a simulated (demonstration) episode that has no log: what a parsed
    transcript would give the response-quality regression as controls.

    Kept apart from EpisodeTranscript on purpose: the readers of transcripts (the coders that send text to an LLM,
    the pairwise and gold prompts, the transcripts dashboard, economics, the transcript export) never see it. Only
    the ToM analysis reads it, for simulated episodes without parsed measures, and then says its result is
    simulated. Written only through `grading.services.simulated_effort`, which refuses real episodes.
    """

    episode = models.OneToOneField("studyapp.Episode", on_delete=models.CASCADE, related_name="simulated_effort")
    worker_turns = models.PositiveIntegerField(help_text="Simulated count of the worker's prompts.")
    worker_chars = models.PositiveIntegerField(help_text="Simulated characters the worker wrote.")
    edit_ratio = models.FloatField(help_text="Simulated normalised edit distance of the prompts from the task text.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(edit_ratio__gte=0) & models.Q(edit_ratio__lte=1),
                                   name="simulated_effort_edit_ratio_0_1"),
            models.CheckConstraint(condition=models.Q(worker_turns__gte=1), name="simulated_effort_turns_1"),
        ]

    def __str__(self) -> str:
        return f"simulated effort of episode {self.episode_id}"
