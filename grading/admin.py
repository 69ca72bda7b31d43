"""Admin for rubrics, judge runs, log codings, solo runs and the grading queue.

Actions call grading services (which audit and enqueue); nothing here decides a score.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from grading import models as m
from grading import task_names
from grading.costs import ENTERED, run_model_cost, usage_tokens
from grading.exceptions import RetryRefused, RubricInvalid
from grading.providers import PROVIDERS, not_configured_note, provider_configured
from grading.selectors import log_format_warning, price_table, studies_over_budget
from grading.services import pipeline, rubric_generation, solo_runs
from grading.transcripts import Format
from studies import models as sm
from studies.files import FileRejected, sanitize_filename
from studies.log_sources import agent_log_source
from studies.read_only_admin import ReadOnlyAdmin
from studies.task_sending import send_task_on_commit


def _warn_about_blockers(request: HttpRequest) -> None:
    """Say on the grading pages why new grading may be stopped: spent budgets, no judge configured."""
    for study, spend in studies_over_budget():
        messages.warning(request, f"LLM budget reached for “{study}”: ${spend:.2f} of ${study.llm_budget_usd:.2f}. "
                                  "Grading of its episodes waits until the cap is raised.")
    if not any(provider_configured(p) for p in PROVIDERS):
        messages.warning(request, not_configured_note())


def _short(text: str, limit: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------------------- rubrics


class CriterionInline(admin.TabularInline):
    model = m.Criterion
    extra = 0
    fields = ("order", "key", "category", "label", "description", "points", "expected_value", "evaluation_method")

    def _locked(self, obj: m.Rubric | None) -> bool:
        return obj is not None and (obj.status in (m.Rubric.Status.APPROVED, m.Rubric.Status.GENERATING)
                                    or rubric_generation.rubric_used(obj))

    def get_readonly_fields(self, request, obj=None):  # noqa: ARG002
        return self.fields if self._locked(obj) else ()

    def has_add_permission(self, request, obj=None) -> bool:
        return not self._locked(obj) and super().has_add_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return not self._locked(obj) and super().has_delete_permission(request, obj)


@admin.register(m.Rubric)
class RubricAdmin(admin.ModelAdmin):
    list_display = ("task", "version", "status", "origin", "criteria_count", "generator_model", "failure",
                    "approved_at", "created_at")
    list_filter = ("status", "origin")
    search_fields = ("task__title", "task__uuid")
    raw_id_fields = ("task", "based_on", "author", "approved_by")
    readonly_fields = ("point_check", "generator_model", "prompt_version", "failure_reason", "approved_by",
                       "approved_at", "based_on", "lock_version")
    inlines = [CriterionInline]
    actions = ["approve_rubrics", "copy_for_editing", "generate_new_version"]

    @admin.display(description="criteria")
    def criteria_count(self, obj: m.Rubric) -> int:
        return obj.criteria.count()

    @admin.display(description="failure reason")
    def failure(self, obj: m.Rubric) -> str:
        return _short(obj.failure_reason)

    @admin.display(description="point check")
    def point_check(self, obj: m.Rubric) -> str:
        if obj.pk is None:
            return "—"
        problems = rubric_generation.rubric_validate(obj)
        if not problems:
            return "Four categories, points add up to 100."
        return format_html("<ul class='errorlist'>{}</ul>", format_html_join("", "<li>{}</li>",
                                                                             ((p,) for p in problems)))

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields += ["task", "version", "status", "origin"]
        return fields

    @admin.action(description="Approve selected rubrics (criteria must add up to 100)")
    def approve_rubrics(self, request: HttpRequest, queryset: QuerySet[m.Rubric]) -> None:
        approved = 0
        for rubric in queryset.select_related("task"):
            try:
                rubric_generation.rubric_approve(rubric=rubric, actor=request.user)
                approved += 1
            except RubricInvalid as exc:
                self.message_user(request, exc.reason, messages.ERROR)
        if approved:
            self.message_user(request, f"Approved {approved} rubric(s); new grading uses them.", messages.SUCCESS)

    @admin.action(description="Create an editable copy (new version) of selected rubrics")
    def copy_for_editing(self, request: HttpRequest, queryset: QuerySet[m.Rubric]) -> None:
        for rubric in queryset.select_related("task"):
            copy = rubric_generation.rubric_copy(rubric=rubric, actor=request.user)
            self.message_user(request, f"Created v{copy.version} of the rubric for “{rubric.task}” as an "
                                       "editable draft; approve it to use it for grading.", messages.SUCCESS)

    @admin.action(description="Generate a new version with the LLM for these rubrics' tasks")
    def generate_new_version(self, request: HttpRequest, queryset: QuerySet[m.Rubric]) -> None:
        task_ids = sorted(set(queryset.values_list("task_id", flat=True)))
        for task_id in task_ids:
            send_task_on_commit(task_names.GENERATE_RUBRIC, [task_id])
        self.message_user(request, f"Queued rubric generation for {len(task_ids)} task(s).", messages.SUCCESS)


@admin.register(m.Criterion)
class CriterionAdmin(admin.ModelAdmin):
    list_display = ("key", "rubric", "category", "label", "points")
    list_filter = ("category", "label")
    search_fields = ("description",)
    raw_id_fields = ("rubric",)
    filter_horizontal = ("matches_auto",)


@admin.register(m.Extraction)
class ExtractionAdmin(ReadOnlyAdmin):
    list_display = ("id", "episode", "solo_run", "total_chars", "truncated", "created_at")


# ---------------------------------------------------------------------------------------- judge runs


class CriterionScoreInline(admin.TabularInline):
    model = m.CriterionScore
    extra = 0
    readonly_fields = ("criterion", "earned", "reason")

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.JudgeRun)
class JudgeRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "episode", "solo_run", "provider", "model", "rubric", "status", "is_current", "total",
                    "cost_usd", "short_error", "created_at")
    list_filter = ("status", "provider", "model", "is_current")
    search_fields = ("episode__participant__pseudonym", "error")
    list_select_related = ("rubric", "episode", "solo_run")
    inlines = [CriterionScoreInline]
    actions = ["retry_runs"]

    @admin.display(description="error / note")
    def short_error(self, obj: m.JudgeRun) -> str:
        return _short(obj.error)

    def changelist_view(self, request, extra_context=None):
        _warn_about_blockers(request)
        return super().changelist_view(request, extra_context)

    @admin.action(description="Retry selected failed or waiting judge runs")
    def retry_runs(self, request: HttpRequest, queryset: QuerySet[m.JudgeRun]) -> None:
        retried = skipped = 0
        for run in queryset.select_related("episode", "solo_run", "rubric"):
            if pipeline.judge_run_retry(run=run, actor=request.user):
                retried += 1
            else:
                skipped += 1
        if retried:
            self.message_user(request, f"Queued {retried} judge run(s) for another attempt.", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"Skipped {skipped} run(s): only failed, waiting or abandoned runs of the "
                                       "current rubric version, judge list and prompt can be retried; a run in "
                                       "flight under a live lease finishes on its own.", messages.WARNING)


@admin.register(m.GradingFollowUp)
class GradingFollowUpAdmin(ReadOnlyAdmin):
    """The grading outbox: open rows are work a grade still owes; the reconciliation sweep completes them."""

    list_display = ("id", "episode", "kind", "created_at", "attempts", "done_at", "note")
    list_filter = ("kind", ("done_at", admin.EmptyFieldListFilter))
    list_select_related = ("episode",)


@admin.register(m.CriterionScore)
class CriterionScoreAdmin(ReadOnlyAdmin):
    list_display = ("judge_run", "criterion", "earned")


@admin.register(m.LLMUsage)
class LLMUsageAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "study", "purpose", "provider", "model", "input_tokens", "output_tokens",
                    "cost_usd", "latency_ms", "succeeded")
    list_filter = ("purpose", "provider", "succeeded", "study")

    def changelist_view(self, request, extra_context=None):
        _warn_about_blockers(request)
        return super().changelist_view(request, extra_context)


@admin.register(m.FluencyCoding)
class FluencyCodingAdmin(ReadOnlyAdmin):
    list_display = ("episode", "status", "behaviour_count", "model", "is_current", "short_error", "created_at")
    list_filter = ("status", "is_current")

    @admin.display(description="note")
    def short_error(self, obj: m.FluencyCoding) -> str:
        return _short(obj.error)


@admin.register(m.ProcessCoding)
class ProcessCodingAdmin(ReadOnlyAdmin):
    """Theory-of-mind and response-quality codings, per judge and instrument version (re-run with the command)."""

    list_display = ("episode", "instrument", "provider", "model", "status", "score", "is_current", "short_reason",
                    "created_at")
    list_filter = ("instrument", "status", "is_current", "provider", "is_simulated")
    search_fields = ("episode__id",)

    @admin.display(description="reason")
    def short_reason(self, obj: m.ProcessCoding) -> str:
        return _short(obj.reason or obj.error)


@admin.register(m.SimulatedEffort)
class SimulatedEffortAdmin(ReadOnlyAdmin):
    """Effort controls drawn for simulated (demonstration) episodes without a log; never a real episode's."""

    list_display = ("episode", "worker_turns", "worker_chars", "edit_ratio", "created_at")
    search_fields = ("episode__id",)


@admin.register(m.ToMPairCoding)
class ToMPairCodingAdmin(ReadOnlyAdmin):
    """Pairwise ToM comparisons per pair, order and judge (run with manage.py code_tom_pairs)."""

    list_display = ("study", "episode_a", "episode_b", "order", "provider", "model", "status", "shown_choice",
                    "winner", "finished_at")
    list_filter = ("status", "order", "provider", "winner")
    search_fields = ("episode_a__id", "episode_b__id")


@admin.register(m.ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """The dated price table that turns recorded usage into model cost (Time & cost page, exports)."""

    list_display = ("model", "effective_from", "input_per_million", "cache_read_per_million",
                    "cache_write_per_million", "output_per_million", "source", "updated_at")
    search_fields = ("model",)
    date_hierarchy = "effective_from"


@admin.register(m.EpisodeTranscript)
class EpisodeTranscriptAdmin(ReadOnlyAdmin):
    """Staff see how each log file was read: format, problems, and the per-episode process metrics."""

    list_display = ("episode", "status", "user_prompts", "agent_turns", "tool_calls", "interventions",
                    "screenshots", "heuristic", "agent_format_check", "parsed_at")
    list_filter = ("status", "heuristic", "truncated")
    list_select_related = ("episode__agent",)
    exclude = ("files",)
    readonly_fields = ("file_reports", "agent_format_check")

    @admin.display(description="agent's own log?")
    def agent_format_check(self, obj: m.EpisodeTranscript) -> str:
        """What the worker was warned about: a file that is not the session file of the episode's agent."""
        source = agent_log_source(obj.episode.agent)
        if source is None:
            return "—"
        problems = [f["name"] for f in obj.files
                    if log_format_warning(expected=source.format, agent_name=obj.episode.agent.name,
                                          found=next((x for x in Format if x == f.get("format")), Format.UNKNOWN))]
        return f"not for {len(problems)} file(s): {', '.join(problems)}" if problems else "yes"

    @admin.display(description="files")
    def file_reports(self, obj: m.EpisodeTranscript) -> str:
        return format_html_join(
            "", "<p><strong>{}</strong> — {} ({}): {}, {}. {}</p>",
            ((f["name"], f["format"], f["status"], _counted(f["user_prompts"], "prompt"),
              _counted(f["tool_calls"], "tool call"), f["note"]) for f in obj.files))


def _counted(n: object, noun: str) -> str:
    """Return "1 prompt", "14 prompts" (a count the parser could not make is shown as it is)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# ------------------------------------------------------------------------------------ grading queue


class JudgeRunInline(admin.TabularInline):
    model = m.JudgeRun
    fk_name = "episode"
    extra = 0
    fields = ("provider", "model", "rubric", "prompt_version", "status", "is_current", "total", "cost_usd", "error")
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.EpisodeGrading)
class EpisodeGradingAdmin(ReadOnlyAdmin):
    list_display = ("id", "study", "task", "agent", "participant", "status", "auto_score", "score",
                    "needs_expert_review", "note", "updated_at")
    list_filter = ("status", "needs_expert_review", "study")
    search_fields = ("participant__pseudonym", "task__title", "grading_note")
    list_select_related = ("study", "task", "agent", "participant")
    fields = ("study", "task", "agent", "participant", "status", "submitted_at", "auto_score", "expert_score",
              "score", "score_source", "needs_expert_review", "grading_note")
    readonly_fields = fields
    inlines = [JudgeRunInline]
    actions = ["retry_grading", "code_logs", "code_processes"]

    @admin.display(description="grading note")
    def note(self, obj: sm.Episode) -> str:
        return _short(obj.grading_note)

    def changelist_view(self, request, extra_context=None):
        _warn_about_blockers(request)
        return super().changelist_view(request, extra_context)

    @admin.action(description="Retry / re-grade selected episodes")
    def retry_grading(self, request: HttpRequest, queryset: QuerySet[sm.Episode]) -> None:
        done = 0
        for episode in queryset.select_related("study"):
            try:
                pipeline.episode_grading_retry(episode=episode, actor=request.user)
            except RetryRefused:
                continue
            done += 1
        self.message_user(request, f"Queued {done} episode(s) for grading.", messages.SUCCESS)
        if done < queryset.count():
            self.message_user(request, "Episodes that were never submitted, or were skipped, were left alone.",
                              messages.WARNING)

    @admin.action(description="Code the collaboration logs of selected episodes")
    def code_logs(self, request: HttpRequest, queryset: QuerySet[sm.Episode]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        for pk in ids:
            send_task_on_commit(task_names.CODE_LOG, [pk])
        self.message_user(request, f"Queued log coding for {len(ids)} episode(s).", messages.SUCCESS)


    @admin.action(description="Code theory of mind and response quality of selected episodes")
    def code_processes(self, request: HttpRequest, queryset: QuerySet[sm.Episode]) -> None:
        """Queue the coding for episodes of ToM studies; the coding skips what each judge already coded."""
        ids = list(queryset.filter(study__tom_coding=True).values_list("pk", flat=True))
        for pk in ids:
            send_task_on_commit(task_names.CODE_PROCESS, [pk])
        self.message_user(request, f"Queued ToM and response-quality coding for {len(ids)} episode(s).",
                          messages.SUCCESS)
        if len(ids) < queryset.count():
            self.message_user(request, "Episodes of studies that do not code theory of mind were left alone (turn "
                                       "ToM coding on in the study first).", messages.WARNING)
        self.message_user(request, "To replace current codings run `manage.py code_processes --episode ID --sync "
                                   "--force`.", messages.INFO)

# --------------------------------------------------------------------------------------- solo runs


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)] if data else []


class SoloRunForm(forms.ModelForm):
    deliverables = MultipleFileField(
        required=False, help_text="The agent's deliverable files (several allowed). They are graded with the "
                                  "task's rubric and the study's judges.")
    session_files = MultipleFileField(
        required=False, label="Session files",
        help_text="The run's own session logs (Claude Code, Codex or Gemini CLI; several allowed). They are "
                  "never graded or shown as deliverables: the model names and tokens they record price the "
                  "run's model cost when no cost is entered above.")

    class Meta:
        model = sm.SoloRun
        fields = ("study", "task", "agent", "system_prompt", "model_cost_usd")

    def clean_deliverables(self) -> list:
        files = self.cleaned_data.get("deliverables") or []
        if self.instance.pk is None and not files:
            raise forms.ValidationError("Attach at least one deliverable file.")
        taken = set(self.instance.files.values_list("name", flat=True)) if self.instance.pk else set()
        try:
            solo_runs.solo_run_files_check(files, taken)
        except FileRejected as exc:
            raise forms.ValidationError(str(exc)) from exc
        return files

    def clean_session_files(self) -> list:
        files = self.cleaned_data.get("session_files") or []
        taken = set(self.instance.files.values_list("name", flat=True)) if self.instance.pk else set()
        taken |= {sanitize_filename(f.name or "") for f in self.cleaned_data.get("deliverables") or []}
        try:
            solo_runs.solo_run_files_check(files, taken, kind=solo_runs.SESSION)
        except FileRejected as exc:
            raise forms.ValidationError(str(exc)) from exc
        return files


def _tokens_text(usage: dict | None) -> str:
    tokens = usage_tokens(usage)
    if tokens is None:
        return "Unknown: no session file recorded model usage."
    models = ", ".join(sorted(usage or {}))
    return (f"{tokens['calls']} calls of {models}: {tokens['input']} input, {tokens['cache_read']} cache read, "
            f"{tokens['cache_write']} cache write, {tokens['output']} output ({tokens['reasoning']} reasoning) "
            "tokens.")


class SoloRunFileInline(admin.TabularInline):
    model = sm.SoloRunFile
    extra = 0
    readonly_fields = ("kind", "name", "size", "sha256")
    exclude = ("file",)

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(sm.SoloRun)
class SoloRunAdmin(admin.ModelAdmin):
    form = SoloRunForm
    list_display = ("id", "task", "agent", "study", "status", "score", "note", "created_at")
    list_filter = ("study", "agent", "status")
    search_fields = ("task__title",)
    raw_id_fields = ("task",)
    inlines = [SoloRunFileInline]
    actions = ["grade_runs"]

    @admin.display(description="grading note")
    def note(self, obj: sm.SoloRun) -> str:
        return _short(obj.grading_note)

    def get_readonly_fields(self, request, obj=None):
        base = ("status", "score", "grading_note")
        return (*base, "study", "task", "agent", "tokens", "model_cost") if obj is not None else base

    @admin.display(description="tokens recorded")
    def tokens(self, obj: sm.SoloRun) -> str:
        return _tokens_text(obj.usage)

    @admin.display(description="model cost used")
    def model_cost(self, obj: sm.SoloRun) -> str:
        """The cost the workflow comparison uses, with its source: the entered bill, else the priced usage."""
        found = run_model_cost(obj.model_cost_usd, obj.usage, obj.created_at.date(), price_table())
        if found.cost.amount is None:
            return f"Unknown: {found.cost.reason}."
        if found.source == ENTERED:
            return f"{found.cost.amount} USD, entered by staff (a bill beats an estimate)."
        return (f"{found.cost.amount} USD, priced from the session files' usage with the price table on "
                f"{obj.created_at.date().isoformat()}.")

    def save_model(self, request, obj, form, change) -> None:
        files = form.cleaned_data.get("deliverables") or []
        sessions = form.cleaned_data.get("session_files") or []
        if change:
            obj.save(update_fields=["system_prompt", "model_cost_usd"])
            if files:
                solo_runs.solo_run_add_files(solo_run=obj, files=files, actor=request.user)
            if sessions:
                solo_runs.solo_run_add_files(solo_run=obj, files=sessions, actor=request.user,
                                             kind=solo_runs.SESSION)
            return
        created = solo_runs.solo_run_attach(study=obj.study, task=obj.task, agent=obj.agent, files=files,
                                            actor=request.user, system_prompt=obj.system_prompt,
                                            model_cost_usd=obj.model_cost_usd, session_files=sessions)
        obj.pk = created.pk
        obj._state.adding = False
        self.message_user(request, "Solo run saved; its grading is queued.", messages.SUCCESS)

    @admin.action(description="Grade (or re-grade) selected solo runs")
    def grade_runs(self, request: HttpRequest, queryset: QuerySet[sm.SoloRun]) -> None:
        done = sum(1 for run in queryset.select_related("study")
                   if pipeline.solo_run_grading_retry(solo_run=run, actor=request.user))
        self.message_user(request, f"Queued {done} solo run(s) for grading.", messages.SUCCESS)


@admin.register(sm.SoloRunFile)
class SoloRunFileAdmin(ReadOnlyAdmin):
    list_display = ("name", "kind", "run", "size")
    exclude = ("file",)


@admin.register(m.JudgeGate)
class JudgeGateAdmin(ReadOnlyAdmin):
    """Written only by the gate evaluation; the study dashboard's Expert gate tab explains each verdict."""

    list_display = ("study", "judge", "category", "passes", "n_episodes", "agreement", "bias", "computed_at")
    list_filter = ("study", "passes", "category")
