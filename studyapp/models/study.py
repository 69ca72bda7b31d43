"""Studies, their consent versions and rating/grading configuration."""

from __future__ import annotations

import secrets
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


def _invite_code() -> str:
    return secrets.token_urlsafe(12)


def _default_rank_bonuses() -> list[str]:
    return ["100.00", "50.00", "50.00"]


class Study(models.Model):
    """One research study: its tasks, agents, consent, compensation and rating settings."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        RECRUITING = "recruiting", "Recruiting"
        CLOSED = "closed", "Closed"

    class ScoreSource(models.TextChoices):
        AUTO = "auto", "Automated judges"
        EXPERT = "expert", "Expert grades"
        BLENDED = "blended", "Blend of automated and expert"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT, db_index=True)
    is_simulated = models.BooleanField(
        default=False, help_text="Data drawn from a generative model for demonstration, not from real people."
    )
    invite_code = models.CharField(max_length=32, unique=True, default=_invite_code)
    tasks_per_session = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    max_episodes_per_task = models.PositiveIntegerField(
        default=3, help_text="How many workers may be assigned the same task in this study."
    )
    task_time_limit_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Optional default time limit per task; a task may override it."
    )
    compensation_per_task = models.DecimalField(max_digits=8, decimal_places=2, default=Decimal("20.00"))
    currency = models.CharField(max_length=3, default="USD")
    rank_bonuses = models.JSONField(
        default=_default_rank_bonuses, blank=True, help_text="Bonus amounts for rank 1, 2, 3, … as strings."
    )
    return_url = models.URLField(
        blank=True, help_text="Recruitment platform URL a worker returns to; {code} is replaced."
    )
    # Rating model (paper §4): y = s_agent + s_human + ε, ε ~ N(0, β²), priors N(μ0, σ0²).
    rating_mu0 = models.FloatField(default=0.0)
    rating_sigma0 = models.FloatField(default=1.0, validators=[MinValueValidator(1e-9)])
    rating_beta = models.FloatField(default=1.0, validators=[MinValueValidator(1e-9)])
    rating_k = models.FloatField(default=3.0, validators=[MinValueValidator(0.0)])
    score_source = models.CharField(max_length=16, choices=ScoreSource.choices, default=ScoreSource.AUTO)
    blend_expert_weight = models.FloatField(
        default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Weight of the expert score in the blended source.",
    )
    judges = models.JSONField(
        default=list, blank=True,
        help_text='Judge list, e.g. [{"provider": "openai", "model": "gpt-4.1"}]; empty uses the defaults.',
    )
    disagreement_threshold = models.FloatField(
        null=True, blank=True, help_text="Judge spread (points) that flags an episode for expert review."
    )
    llm_budget_usd = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True,
        help_text="Grading stops starting new LLM calls once this study's spend reaches the cap.",
    )
    class PartialPanel(models.TextChoices):
        HOLD = "hold", "Hold the episode out of the rating until every judge scored it or an expert graded it"
        ACCEPT = "accept", "Accept the judges that did score it (recorded with which judges)"

    partial_panel = models.CharField(
        max_length=8, choices=PartialPanel.choices, default=PartialPanel.HOLD,
        help_text="When a judge family keeps failing: judge families differ systematically, so a one-judge score "
                  "is a different measurement from the panel's.",
    )
    double_grading_share = models.FloatField(
        default=0.2, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of episodes graded by two experts for agreement statistics.",
    )
    survey_instrument = models.ForeignKey(
        "surveys.Instrument", null=True, blank=True, on_delete=models.PROTECT, related_name="studies"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name

    def current_consent(self) -> ConsentVersion | None:
        return self.consent_versions.order_by("-version").first()


class ConsentVersion(models.Model):
    """A versioned consent text; a new version may require everyone to consent again."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="consent_versions")
    version = models.PositiveIntegerField()
    text = models.TextField(help_text="Markdown shown on the consent page.")
    llm_providers = models.JSONField(
        default=list, blank=True,
        help_text="Outside LLM providers named in this text that may receive deliverables and logs.",
    )
    requires_reconsent = models.BooleanField(
        default=False, help_text="Participants who accepted an earlier version must accept this one again."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["study", "-version"]
        constraints = [models.UniqueConstraint(fields=["study", "version"], name="uniq_consent_version")]

    def __str__(self) -> str:
        return f"{self.study} consent v{self.version}"
