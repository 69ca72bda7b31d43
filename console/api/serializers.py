"""API representations. Worker and expert variants are strict subsets of the staff ones: no scores, judge
data, gold flags, hidden information or (for experts, who grade blind) agent and participant identities."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.api.permissions import episode_file_kinds
from experts.models import ExpertCriterionGrade, ExpertGrade
from grading.models import CriterionScore, JudgeRun
from rating import selectors as rating_selectors
from rating.models import EntityRating, RatingSnapshot
from studies.models import (
    Agent,
    BackgroundJob,
    Episode,
    EpisodeFile,
    Occupation,
    Participant,
    Sector,
    Study,
    TaskFile,
    TaskInstance,
)


def _absolute(context: dict[str, Any], url: str) -> str:
    request = context.get("request")
    return request.build_absolute_uri(url) if request is not None else url


# --------------------------------------------------------------------------------------------- taxonomy
class SectorSerializer(serializers.ModelSerializer):
    occupation_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Sector
        fields = ["code", "name", "occupation_count"]


class OccupationSerializer(serializers.ModelSerializer):
    sector = serializers.SlugRelatedField(slug_field="code", read_only=True, allow_null=True)

    class Meta:
        model = Occupation
        fields = ["soc_code", "title", "description", "sector"]


# ------------------------------------------------------------------------------------ studies and agents
class StudySerializer(serializers.ModelSerializer):
    participant_count = serializers.IntegerField(read_only=True)
    episode_count = serializers.IntegerField(read_only=True)
    task_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Study
        fields = [
            "slug", "name", "description", "status", "is_simulated", "tasks_per_session", "max_episodes_per_task",
            "task_time_limit_minutes", "compensation_per_task", "currency", "rank_bonuses", "rating_model",
            "rating_integrate_hyper", "rating_mu0", "rating_sigma0", "rating_beta", "rating_k", "score_source",
            "blend_expert_weight", "judges",
            "disagreement_threshold", "llm_budget_usd", "double_grading_share", "participant_count",
            "episode_count", "task_count", "created_at", "updated_at",
        ]
        read_only_fields = fields


class AgentSerializer(serializers.ModelSerializer):
    studies = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)

    class Meta:
        model = Agent
        fields = [
            "slug", "name", "product", "model_version", "interface", "log_mode", "share_url_hosts", "is_active",
            "setup_guide", "log_instructions", "studies",
        ]
        read_only_fields = fields


# ---------------------------------------------------------------------------------------------- tasks
class TaskSerializer(serializers.ModelSerializer):
    sector = serializers.SlugRelatedField(slug_field="code", read_only=True)
    occupations = serializers.SlugRelatedField(slug_field="soc_code", many=True, read_only=True)
    studies = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    reference_files = serializers.SerializerMethodField()
    hidden_files = serializers.SerializerMethodField()

    class Meta:
        model = TaskInstance
        fields = [
            "uuid", "title", "prompt", "source", "sector", "occupations", "required_software",
            "expected_deliverables", "hidden_info", "time_limit_minutes", "is_active", "studies",
            "reference_files", "hidden_files", "created_at", "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_reference_files(self, task: TaskInstance) -> str:
        return _absolute(self.context, reverse("api-task-reference-files-list", args=[task.uuid]))

    @extend_schema_field(OpenApiTypes.URI)
    def get_hidden_files(self, task: TaskInstance) -> str:
        return _absolute(self.context, reverse("api-task-hidden-files-list", args=[task.uuid]))


class TaskFileSerializer(serializers.ModelSerializer):
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = TaskFile
        fields = ["id", "kind", "name", "size", "sha256", "content_type", "download_url"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_download_url(self, task_file: TaskFile) -> str:
        name = "api-task-hidden-files-download" if task_file.kind == TaskFile.Kind.HIDDEN \
            else "api-task-reference-files-download"
        return _absolute(self.context, reverse(name, args=[task_file.task.uuid, task_file.pk]))


class TaskImportSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="A .zip of one or many task bundles (or of a task table with its files), or a .csv/.jsonl "
                  "task table whose rows list no files.",
    )
    study = serializers.SlugRelatedField(
        slug_field="slug", queryset=Study.objects.all(), required=False, allow_null=True,
        help_text="Slug of a study the imported tasks are added to.",
    )
    dry_run = serializers.BooleanField(default=False, help_text="Validate and report; write nothing.")


class TaskOutcomeSerializer(serializers.Serializer):
    uuid = serializers.UUIDField()
    title = serializers.CharField()
    action = serializers.ChoiceField(choices=["created", "updated", "unchanged"])
    files_added = serializers.ListField(child=serializers.CharField())
    files_replaced = serializers.ListField(child=serializers.CharField())
    files_removed = serializers.ListField(child=serializers.CharField())
    files_unchanged = serializers.IntegerField()
    attached_to_study = serializers.BooleanField()


class ImportReportSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    study = serializers.CharField(allow_null=True)
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    tasks = TaskOutcomeSerializer(many=True)


# ------------------------------------------------------------------------------------------ participants
class ParticipantSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    occupation = serializers.SlugRelatedField(slug_field="soc_code", read_only=True, allow_null=True)
    consent_version = serializers.IntegerField(source="consent_version.version", read_only=True, allow_null=True)
    episode_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Participant
        fields = [
            "pseudonym", "study", "status", "is_simulated", "occupation", "years_experience", "consent_version",
            "consented_at", "created_at", "last_activity_at", "completed_at", "withdrawn_at", "episode_count",
        ]
        read_only_fields = fields


# -------------------------------------------------------------------------------------------- episodes
class EpisodeFileSerializer(serializers.ModelSerializer):
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = EpisodeFile
        fields = ["id", "kind", "name", "size", "sha256", "content_type", "uploaded_at", "download_url"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_download_url(self, episode_file: EpisodeFile) -> str:
        url = reverse("api-episode-download-file", kwargs={"pk": episode_file.episode_id, "file_pk": episode_file.pk})
        return _absolute(self.context, url)


class _EpisodeFilesMixin(serializers.Serializer):
    files = serializers.SerializerMethodField()

    @extend_schema_field(EpisodeFileSerializer(many=True))
    def get_files(self, episode: Episode) -> list[dict[str, Any]]:
        request = self.context.get("request")
        kinds = episode_file_kinds(request.user, episode) if request is not None else set()
        files = [f for f in episode.files.all() if kinds is None or f.kind in kinds]
        return EpisodeFileSerializer(files, many=True, context=self.context).data


class EpisodeSerializer(_EpisodeFilesMixin, serializers.ModelSerializer):
    """The staff view of an episode: everything, including scores and grading state."""

    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    participant = serializers.SlugRelatedField(slug_field="pseudonym", read_only=True)
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    task = serializers.SlugRelatedField(slug_field="uuid", read_only=True)
    task_title = serializers.CharField(source="task.title", read_only=True)
    sector = serializers.CharField(source="task.sector.code", read_only=True)

    class Meta:
        model = Episode
        fields = [
            "id", "study", "participant", "agent", "task", "task_title", "sector", "position", "status",
            "prior_experience", "ready_at", "assigned_at", "started_at", "deadline_at", "submitted_at", "timed_out",
            "skip_reason", "skip_description", "share_url", "notes", "score", "auto_score", "expert_score",
            "score_source", "needs_expert_review", "grading_note", "is_simulated", "is_gold", "updated_at", "files",
        ]
        read_only_fields = fields


class WorkerEpisodeSerializer(EpisodeSerializer):
    """A worker's own episode: what they did and uploaded, never how it was scored or how grading goes."""

    schema_closed = True  # documented with additionalProperties: false -- these fields and no others

    status = serializers.ChoiceField(choices=Episode.WORKER_STATUSES, source="worker_status", read_only=True,
                                     help_text="Grading states all read `submitted`.")

    class Meta(EpisodeSerializer.Meta):
        fields = [
            "id", "study", "agent", "task", "task_title", "position", "status", "prior_experience", "ready_at",
            "assigned_at", "started_at", "deadline_at", "submitted_at", "timed_out", "skip_reason",
            "skip_description", "share_url", "notes", "files",
        ]
        read_only_fields = fields


class ExpertEpisodeSerializer(EpisodeSerializer):
    """An episode assigned to an expert: blind to the agent, the participant, every score and the grading state
    (whether the judges have finished is not shown on the grade page either)."""

    schema_closed = True

    class Meta(EpisodeSerializer.Meta):
        fields = ["id", "study", "task", "task_title", "sector", "submitted_at", "files"]
        read_only_fields = fields


# -------------------------------------------------------------------------------------------- grading
class CriterionScoreSerializer(serializers.ModelSerializer):
    criterion = serializers.CharField(source="criterion.key", read_only=True)
    category = serializers.CharField(source="criterion.category", read_only=True)
    points = serializers.FloatField(source="criterion.points", read_only=True)

    class Meta:
        model = CriterionScore
        fields = ["criterion", "category", "points", "earned", "reason"]
        read_only_fields = fields


class JudgeRunSerializer(serializers.ModelSerializer):
    rubric_version = serializers.IntegerField(source="rubric.version", read_only=True)
    task = serializers.UUIDField(source="rubric.task.uuid", read_only=True)
    criterion_scores = CriterionScoreSerializer(many=True, read_only=True)

    class Meta:
        model = JudgeRun
        fields = [
            "id", "episode", "solo_run", "task", "rubric", "rubric_version", "provider", "model", "prompt_version",
            "status", "is_current", "total", "category_totals", "summary", "attempts", "input_tokens",
            "output_tokens", "cost_usd", "latency_ms", "error", "created_at", "started_at", "finished_at",
            "criterion_scores", "raw_response",
        ]
        read_only_fields = fields


class ExpertCriterionGradeSerializer(serializers.ModelSerializer):
    criterion = serializers.CharField(source="criterion.key", read_only=True)

    class Meta:
        model = ExpertCriterionGrade
        fields = ["criterion", "verdict", "feedback"]
        read_only_fields = fields


class ExpertGradeSerializer(serializers.ModelSerializer):
    expert = serializers.CharField(source="expert.user.get_username", read_only=True)
    role = serializers.CharField(source="assignment.role", read_only=True)
    rubric_version = serializers.IntegerField(source="rubric.version", read_only=True)
    criterion_grades = ExpertCriterionGradeSerializer(many=True, read_only=True)

    class Meta:
        model = ExpertGrade
        fields = [
            "id", "episode", "expert", "role", "rubric", "rubric_version", "attempt", "status", "overall",
            "feedback", "score", "time_spent_seconds", "started_at", "submitted_at", "criterion_grades",
        ]
        read_only_fields = fields


class ExpertOwnGradeSerializer(ExpertGradeSerializer):
    """An expert's own grade, without the assignment's role (a gold check must look like any other grade)."""

    schema_closed = True

    class Meta(ExpertGradeSerializer.Meta):
        fields = [name for name in ExpertGradeSerializer.Meta.fields if name != "role"]
        read_only_fields = fields


# ------------------------------------------------------------------------------------ ratings, analyses
class EntityRatingSerializer(serializers.ModelSerializer):
    class Meta:
        model = EntityRating
        fields = ["entity_kind", "entity_id", "label", "mu", "sigma", "conservative", "n", "rank"]
        read_only_fields = fields


class LeaderboardSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    agents = serializers.SerializerMethodField()
    humans = serializers.SerializerMethodField()
    base_version = serializers.IntegerField(
        source="base.version", default=None, read_only=True, allow_null=True,
        help_text="For a live update: the refit whose variance components and participants' ratings it carries.",
    )

    class Meta:
        model = RatingSnapshot
        fields = [
            "study", "version", "computed_at", "produced_by", "base_version", "n_observations", "config", "fit",
            "connectivity", "agents", "humans",
        ]
        read_only_fields = fields

    def _ratings(self, snapshot: RatingSnapshot, kind: str) -> list[dict[str, Any]]:
        wanted = self.context.get("kind")
        if wanted and wanted != kind:
            return []
        return EntityRatingSerializer(rating_selectors.snapshot_ratings(snapshot, kind), many=True).data

    @extend_schema_field(EntityRatingSerializer(many=True))
    def get_agents(self, snapshot: RatingSnapshot) -> list[dict[str, Any]]:
        return self._ratings(snapshot, EntityRating.Kind.AGENT)

    @extend_schema_field(EntityRatingSerializer(many=True))
    def get_humans(self, snapshot: RatingSnapshot) -> list[dict[str, Any]]:
        return self._ratings(snapshot, EntityRating.Kind.HUMAN)


class StabilitySerializer(serializers.ModelSerializer):
    """The latest finished stability analysis (bootstrap, leave-one-out, connectivity) of a study."""

    job = serializers.IntegerField(source="pk", read_only=True)
    result = serializers.JSONField(read_only=True)
    params = serializers.JSONField(read_only=True)

    class Meta:
        model = BackgroundJob
        fields = ["job", "params", "created_at", "finished_at", "result"]
        read_only_fields = fields


class ExportJobSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    params = serializers.JSONField(read_only=True)
    result = serializers.JSONField(read_only=True, allow_null=True)
    percent = serializers.IntegerField(read_only=True)
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = BackgroundJob
        fields = [
            "id", "study", "status", "params", "progress_done", "progress_total", "percent", "result", "error",
            "created_at", "started_at", "finished_at", "download_url",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_download_url(self, job: BackgroundJob) -> str | None:
        if job.status != BackgroundJob.Status.DONE or not job.file:
            return None
        url = reverse("api-study-exports-download", kwargs={"slug": job.study.slug, "pk": job.pk})
        return _absolute(self.context, url)


class ExportRequestSerializer(serializers.Serializer):
    include_pii = serializers.BooleanField(
        default=False,
        help_text="Include participants' identities (email, name, platform id); needs the permission to view "
                  "participant identities.",
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(read_only=True)


@extend_schema_field({
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "Stable machine-readable code, e.g. not_found, invalid."},
        "message": {"type": "string", "description": "A sentence for people."},
        "fields": {
            "type": "object",
            "description": "Messages per field (for task bundles: per `path:field`); empty when not about fields.",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
    },
    "required": ["code", "message", "fields"],
})
class _ErrorDetailField(serializers.JSONField):
    pass


class ErrorSerializer(serializers.Serializer):
    """The body of every API error (documentation only)."""

    error = _ErrorDetailField(read_only=True)


# ----------------------------------------------------------------------------------------- time and cost
class _Interval(serializers.Serializer):
    n = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)


class _CostGroup(serializers.Serializer):
    group = serializers.CharField()
    episodes = serializers.IntegerField()
    score, worker_minutes, log_active_minutes = _Interval(), _Interval(), _Interval()
    pay, expert_minutes, model_cost = _Interval(), _Interval(), _Interval()
    cost_unknown = serializers.IntegerField()


class _EpisodeCost(serializers.Serializer):
    episode = serializers.IntegerField(source="episode_id")
    agent = serializers.CharField()
    task = serializers.CharField(source="task_uuid")
    worker_seconds = serializers.FloatField(allow_null=True)
    log_active_seconds = serializers.FloatField(allow_null=True)
    pay = serializers.DecimalField(max_digits=10, decimal_places=2, allow_null=True)
    currency = serializers.CharField(allow_blank=True)
    expert_review_seconds = serializers.FloatField(source="expert_seconds", allow_null=True)
    expert_grades = serializers.IntegerField()
    model_cost_usd = serializers.DecimalField(source="cost.amount", max_digits=14, decimal_places=6, allow_null=True)
    model_cost_note = serializers.CharField(source="cost.reason", allow_blank=True)
    tokens = serializers.DictField(child=serializers.IntegerField(), allow_null=True)
    prices_used = serializers.ListField(source="cost.prices_used", child=serializers.IntegerField())
    self_reported_minutes = serializers.IntegerField(
        allow_null=True, help_text="The worker's own answer at submission; null when not given. Never merged with "
                                   "worker_seconds.")


class StudyCostsSerializer(serializers.Serializer):
    agents = _CostGroup(many=True)
    sectors = _CostGroup(many=True)
    episodes = _EpisodeCost(many=True)
    prices = serializers.ListField(child=serializers.DictField())


class _ComparedDeliverable(serializers.Serializer):
    shown_position = serializers.IntegerField(source="position")
    deliverable_kind = serializers.SerializerMethodField()
    episode = serializers.IntegerField(source="episode_id", allow_null=True)
    solo_run = serializers.IntegerField(source="solo_run_id", allow_null=True)
    arm = serializers.CharField()
    arm_label = serializers.CharField()
    agent = serializers.CharField(source="agent_name", allow_blank=True)
    participant = serializers.IntegerField(source="participant_id", allow_null=True)
    rank = serializers.IntegerField()
    acceptability = serializers.CharField()
    acceptability_code = serializers.IntegerField()
    length_chars = serializers.IntegerField(allow_null=True)
    size_bytes = serializers.IntegerField()

    def get_deliverable_kind(self, obj: Any) -> str:
        return "episode" if obj.episode_id is not None else "solo_run"


class _SubmittedComparison(serializers.Serializer):
    id = serializers.IntegerField(source="assignment_id")
    set = serializers.IntegerField(source="set_id")
    expert = serializers.IntegerField(source="expert_id")
    task = serializers.IntegerField(source="task_id")
    order_probability = serializers.FloatField()
    time_spent_seconds = serializers.IntegerField()
    submitted_at = serializers.DateTimeField()
    justification = serializers.CharField(allow_blank=True)
    shown = _ComparedDeliverable(many=True)


class _ArmPairCount(serializers.Serializer):
    arm_a = serializers.CharField()
    arm_b = serializers.CharField()
    a_wins = serializers.IntegerField()
    b_wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    pairs = serializers.IntegerField(source="n")


class StudyComparisonsSerializer(serializers.Serializer):
    comparisons = _SubmittedComparison(many=True)
    raw_arm_pair_counts = _ArmPairCount(many=True)
