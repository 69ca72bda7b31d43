"""Studies, their consent versions and rating/grading configuration."""

from __future__ import annotations

import secrets
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from studies.model_families import tom_coder_problem


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

    class DesignMode(models.TextChoices):
        UNIFORM = "uniform", "Uniform: random agent, no repeats for a worker (the paper)"
        BALANCED = "balanced", "Balanced: least-used agent first"
        ADAPTIVE = "adaptive", "Adaptive: random, favouring information about the agent ranking"

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
    abandon_after_hours = models.PositiveIntegerField(
        null=True, blank=True, default=72,
        help_text="A task with no activity from its worker for this many hours is skipped as abandoned, which "
                  "frees its place for someone else. Empty keeps open tasks forever.",
    )
    minutes_per_task_estimate = models.PositiveIntegerField(
        null=True, blank=True, default=90, help_text="Expected working time per task, stated on the consent page."
    )
    ethics_approval = models.CharField(
        max_length=300, blank=True,
        help_text="Ethics board and approval reference shown on the consent page, e.g. “University X IRB, "
                  "protocol 2026-117”.",
    )
    pay_outside_expertise_skips = models.BooleanField(
        default=False,
        help_text="Pay the task rate when a worker skips a task as outside their expertise (a task from a related "
                  "sector, or one they cannot judge). Off: such a skip is recorded but not paid.",
    )
    max_paid_outside_expertise_skips = models.PositiveSmallIntegerField(
        default=2,
        help_text="When outside-expertise skips are paid: at most this many are paid per worker; later ones are "
                  "recorded but not paid. Without a cap a worker could be paid for skipping every task "
                  "(with 'only after all tasks are submitted' each skip is replaced by another task).",
    )
    contact_name = models.CharField(max_length=200, blank=True, help_text="Research-team contact shown to workers.")
    contact_email = models.EmailField(blank=True, help_text="Shown on every worker page and on setup failures.")

    class ConditionOrder(models.TextChoices):
        SOLO_FIRST = "solo_first", "Solo tasks first"
        AGENT_FIRST = "agent_first", "Agent tasks first"
        COUNTERBALANCED = "counterbalanced", "Counterbalanced at random per worker"

    class PostSurveyGate(models.TextChoices):
        ALL_POSITIONS = "all_positions", "After every task position is submitted or skipped"
        ALL_SUBMITTED = "all_submitted", "Only after all tasks are submitted (a skipped task is replaced)"

    post_survey_gate = models.CharField(
        max_length=16, choices=PostSurveyGate.choices, default=PostSurveyGate.ALL_POSITIONS,
        help_text="When the final survey opens. The paper asked it only of workers who finished all their tasks: "
                  "then a skipped task is replaced by another, and a worker who stops early completes without it.",
    )
    return_url = models.URLField(
        blank=True, help_text="Recruitment platform URL a worker returns to; {code} is replaced."
    )
    class RatingModel(models.TextChoices):
        # The same values as rating.fit.RATING_MODELS (the domain imports no app above it, so they are spelled
        # here too; tests/studies/test_models.py proves the two lists agree).
        PAPER = "paper", "Paper (fixed μ0, σ0, β)"
        CALIBRATED = "calibrated", "Calibrated (level and variances fitted)"
        CALIBRATED_TASK = "calibrated_task", "Calibrated + task difficulty"
        JUDGE_AWARE = "judge_aware", "Judge-aware (every grade, grader leniency and self-preference removed)"

    class GradeReference(models.TextChoices):
        PANEL = "panel", "The LLM judge panel's average grader"
        EXPERTS = "experts", "The experts' average grader"

    # Rating model. "paper" is paper §4 bit-for-bit: y = s_agent + s_human + ε, ε ~ N(0, β²), priors
    # N(μ0, σ0²) with the fields below; the calibrated models fit the level and variance components instead
    # and use only k (and integrate_hyper). Existing studies were migrated as "paper" so their numbers stay.
    rating_model = models.CharField(
        max_length=24, choices=RatingModel.choices, default=RatingModel.CALIBRATED,
        help_text="Which rating model the leaderboard, analyses, API and exports use.",
    )
    rating_integrate_hyper = models.BooleanField(
        default=True,
        help_text="Calibrated models: carry the variance components' uncertainty into intervals and P(A>B).",
    )
    rating_mu0 = models.FloatField(default=0.0)
    rating_sigma0 = models.FloatField(default=1.0, validators=[MinValueValidator(1e-9)])
    rating_beta = models.FloatField(default=1.0, validators=[MinValueValidator(1e-9)])
    rating_k = models.FloatField(default=3.0, validators=[MinValueValidator(0.0)])
    grade_reference = models.CharField(
        max_length=8, choices=GradeReference.choices, default=GradeReference.PANEL,
        help_text="Judge-aware model: whose level the reported skills are on -- the judge panel's average "
                  "grader, or the experts' (then at least one expert must grade episodes of every agent).",
    )
    score_source = models.CharField(max_length=16, choices=ScoreSource.choices, default=ScoreSource.AUTO)
    blend_expert_weight = models.FloatField(
        default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Weight of the expert score in the blended source.",
    )
    judges = models.JSONField(
        default=list, blank=True,
        help_text='Judge list, e.g. [{"provider": "openai", "model": "gpt-4.1", "family": "openai"}]; empty uses '
                  'the defaults. "family" (for the judge-aware rating) defaults to the model name\'s family.',
    )
    tom_coding = models.BooleanField(
        default=False,
        help_text="Code each episode's log for theory of mind in the worker's prompts and for the quality of the "
                  "agent's responses (0-5, by two judges of different model families).",
    )
    tom_coders = models.JSONField(
        default=list, blank=True,
        help_text='The two ToM/response-quality judges, of different families, e.g. [{"provider": "openai", '
                  '"model": "gpt-4.1"}, {"provider": "anthropic", "model": "claude-sonnet-4-6"}]; empty uses '
                  "GRADING['TOM_CODERS'].",
    )
    tom_pairwise_pairs = models.PositiveIntegerField(
        default=0,
        help_text="Pairwise ToM robustness run: at most this many pairs of ToM-coded episodes, each compared in both "
                  "orders by both ToM judges (manage.py code_tom_pairs); 0 turns the pairwise run off.",
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
    class GateMode(models.TextChoices):
        OFF = "off", "Off: judges' criterion scores always count"
        REPORT = "report", "Report: measure judges against the experts, change no score"
        ENFORCE = "enforce", "Enforce: a judge's category scores count only where it passes the gate"

    # The expert-anchored gate and its calibration sample (rating/expert_gate.py; docs/rating-models.md).
    calibration_rate = models.FloatField(
        default=0.1, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of automatically graded episodes drawn at random for expert grading, so judges are "
                  "measured against experts without selection bias (0 turns the sample off).",
    )
    calibration_min_per_family = models.PositiveSmallIntegerField(
        default=5, validators=[MaxValueValidator(1000)],
        help_text="The first this many graded episodes of each agent family are always sampled (then the rate), "
                  "so a rarely used agent is measured too; weights of 1 / probability undo the over-sampling.",
    )
    gate_mode = models.CharField(
        max_length=8, choices=GateMode.choices, default=GateMode.REPORT,
        help_text="Enforce leaves a failing judge's scores of a rubric category out of the automated score; "
                  "an episode whose category no judge passes is held and sent to experts.",
    )
    gate_min_agreement = models.FloatField(
        default=0.4, validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Lowest acceptable lower bound of the 95 % interval of the judge–expert quadratic-weighted kappa.",
    )
    gate_max_bias = models.FloatField(
        default=10.0, validators=[MinValueValidator(0.0), MaxValueValidator(100.0)],
        help_text="Largest acceptable |bias| of the judge against the experts, in points per 100 of a criterion.",
    )
    gate_min_episodes = models.PositiveIntegerField(
        default=10, validators=[MinValueValidator(2), MaxValueValidator(100000)],
        help_text="Co-graded calibration episodes a judge needs before its category scores can pass.",
    )
    gate_bias_width = models.FloatField(
        default=10.0, validators=[MinValueValidator(0.1), MaxValueValidator(100.0)],
        help_text="Target width (points) of the judge-bias interval; the gate page says how many more expert "
                  "grades reach it.",
    )
    # Agent pairing design (pairing/design.py). New studies start uniform: every assignment then has a known,
    # positive probability, so weighted analyses work from the first session. Studies that existed before the
    # field keep the least-used-first pairing they ran under (the migration sets them to balanced).
    design_mode = models.CharField(
        max_length=16, choices=DesignMode.choices, default=DesignMode.UNIFORM,
        help_text="How the agent for a worker's next task is chosen. Changes are audited; change it from the "
                  "study dashboard.",
    )
    design_floor = models.FloatField(
        default=0.25, validators=[MinValueValidator(0.01), MaxValueValidator(1.0)],
        help_text="Adaptive mode: share of the assignment probability spread evenly over the eligible agents, so "
                  "each keeps at least floor / (number eligible).",
    )
    design_repeat_limit = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="Adaptive mode: how many of a worker's tasks may go to the same agent (1: no repeats while an "
                  "unused agent is left).",
    )
    # The solo condition (seed 004): some of a worker's tasks are done without any agent, so the synergy model
    # can separate a worker's ability alone from their ability with an agent (studies/conditions.py).
    # 0 keeps a study as it always was: every task with an agent.
    solo_tasks_per_session = models.PositiveSmallIntegerField(
        default=0, validators=[MaxValueValidator(50)],
        help_text="How many of a worker's tasks are done without an agent (0: every task with an agent).",
    )
    condition_order = models.CharField(
        max_length=16, choices=ConditionOrder.choices, default=ConditionOrder.COUNTERBALANCED,
        help_text="Whether a worker's solo tasks come first, last, or (counterbalanced) first or last at random "
                  "per worker; the order drawn and its probability are stored on each episode.",
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

    def clean(self) -> None:
        super().clean()
        if self.solo_tasks_per_session and self.solo_tasks_per_session >= (self.tasks_per_session or 0):
            raise ValidationError({"solo_tasks_per_session": "At least one task per session must be done with an "
                                                             "agent; choose fewer solo tasks than tasks per "
                                                             "session."})
        if self.gate_mode == self.GateMode.ENFORCE and self.score_source == self.ScoreSource.AUTO:
            raise ValidationError({"gate_mode": "Enforcing the gate holds episodes for experts, but with the "
                                                "automated score source their expert grades never count; choose "
                                                "the blended or expert score source first."})
        if self.tom_coders is None:  # an emptied admin field: "use the default pair", stored as the empty list
            self.tom_coders = []
        if self.tom_coders and (problem := tom_coder_problem(self.tom_coders)) is not None:
            raise ValidationError({"tom_coders": problem})

    def current_consent(self) -> ConsentVersion | None:
        return self.consent_versions.order_by("-version").first()

    def rank_bonus_list(self) -> list[tuple[str, str]]:
        """The rank bonuses as (“1st”, “100.00”) pairs, in the form workers are told about them."""
        suffixes = {1: "st", 2: "nd", 3: "rd"}
        pairs = []
        for rank, amount in enumerate(self.rank_bonuses or [], start=1):
            suffix = "th" if 10 <= rank % 100 <= 20 else suffixes.get(rank % 10, "th")
            pairs.append((f"{rank}{suffix}", str(amount)))
        return pairs


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
