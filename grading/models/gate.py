"""The expert-anchored gate's stored verdicts: may a judge's scores of one rubric category count?"""

from __future__ import annotations

from django.db import models


class JudgeGate(models.Model):
    """One judge × rubric category verdict of a study's gate, with the numbers behind it.

    Written by the gate evaluation (experts/services/gate.py) from the calibration sample; read by grading
    when it combines the judges' scores (under the study's ``enforce`` mode) and by the staff gate page.
    A judge is ``"provider/model"``, as in the grade observations.
    """

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="judge_gates")
    judge = models.CharField(max_length=140)
    category = models.CharField(max_length=16)
    passes = models.BooleanField(default=False)
    reasons = models.JSONField(default=list, blank=True)
    n_episodes = models.PositiveIntegerField(default=0)
    n_items = models.PositiveIntegerField(default=0)
    agreement = models.FloatField(null=True, blank=True, help_text="Quadratic-weighted kappa against the experts.")
    agreement_low = models.FloatField(null=True, blank=True)
    agreement_high = models.FloatField(null=True, blank=True)
    bias = models.FloatField(null=True, blank=True, help_text="Judge minus experts, points per 100 of a criterion.")
    bias_low = models.FloatField(null=True, blank=True)
    bias_high = models.FloatField(null=True, blank=True)
    more_for_bias_width = models.PositiveIntegerField(
        null=True, blank=True, help_text="More co-graded episodes the bias interval needs to reach the target width.")
    rule = models.JSONField(default=dict, blank=True, help_text="The study's gate settings this was judged under.")
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["study", "category", "judge"]
        constraints = [models.UniqueConstraint(fields=["study", "judge", "category"], name="uniq_judge_gate")]

    def __str__(self) -> str:
        return f"{self.judge} on {self.category}: {'passes' if self.passes else 'fails'}"
