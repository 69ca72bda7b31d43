"""Rubric versions: LLM generation with bounded repair, staff copies, approval.

A GENERATING row doubles as a lock so two workers grading the same new task generate one rubric. It holds a
short lease renewed while the generator is called; a row whose lease lapsed (its worker died) is retired as
FAILED by the next claim, so a crash parks the task's episodes for about a minute, not the soft time limit.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from grading import llm
from grading.conf import grading_settings
from grading.exceptions import (
    GradingWaiting,
    RetryLater,
    RubricBusy,
    RubricGenerationFailed,
    RubricInvalid,
)
from grading.models import Criterion, LLMUsage, Rubric
from grading.prompts import RUBRIC_PROMPT_VERSION, render_rubric_prompt
from grading.providers import (
    not_configured_note,
    provider_config,
    provider_configured,
    rubric_generator,
)
from grading.schemas import CATEGORY_POINTS, RubricOut, category_code, category_point_problems, rubric_problems
from grading.selectors import rubric_for_grading, rubric_generating
from grading.services.budget import budget_ensure_available, llm_usage_record
from grading.services.extraction import task_hidden_text, task_reference_text
from grading.services.judging import lease_seconds
from grading.services.leases import LeaseKeeper
from studies.models import Study, TaskInstance
from studies.services.audit import audit_record

logger = logging.getLogger(__name__)


def _next_version(task: TaskInstance) -> int:
    return (task.rubrics.aggregate(v=Max("version"))["v"] or 0) + 1


def _claim(task: TaskInstance, model: str, prompt_version: str) -> Rubric:
    """Create the GENERATING version under a lock on the task row, or raise RubricBusy."""
    with transaction.atomic():
        TaskInstance.objects.select_for_update().filter(pk=task.pk).first()
        if rubric_generating(task) is not None:
            raise RubricBusy("another worker is generating this task's rubric", countdown=lease_seconds() + 1)
        task.rubrics.filter(status=Rubric.Status.GENERATING).update(
            status=Rubric.Status.FAILED, failure_reason="Generation was interrupted (the worker stopped).")
        return Rubric.objects.create(task=task, version=_next_version(task), status=Rubric.Status.GENERATING,
                                     origin=Rubric.Origin.AUTO, generator_model=model,
                                     prompt_version=prompt_version,
                                     lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()))


def _renew(rubric_id: int) -> int:
    return Rubric.objects.filter(pk=rubric_id, status=Rubric.Status.GENERATING).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()))


def _fail(rubric: Rubric, reason: str) -> None:
    Rubric.objects.filter(pk=rubric.pk).update(status=Rubric.Status.FAILED, failure_reason=reason[:4000],
                                               updated_at=timezone.now())


def _criteria_from(out: RubricOut, rubric: Rubric) -> list[Criterion]:
    criteria = []
    order = 0
    by_code = {category_code(c.name): c for c in out.categories}
    for code in CATEGORY_POINTS:  # always in the fixed category order, keys C1..Cn across categories
        for item in by_code[code].criteria:
            order += 1
            criteria.append(Criterion(
                rubric=rubric, order=order, key=f"C{order}", category=code, description=item.description,
                points=item.points, expected_value=item.expected_value, evaluation_method=item.evaluation_method,
                label=item.label))
    return criteria


def rubric_generate(*, task: TaskInstance, study: Study | None = None, actor: Any = None) -> Rubric:
    """Generate a new rubric version for the task with the configured generator.

    Raises GradingWaiting (no generator configured / budget reached), RubricBusy, RetryLater (provider
    trouble after the client's retries) or RubricGenerationFailed (unusable output after the repairs).
    """
    spec = rubric_generator()
    if not provider_configured(spec.provider):
        raise GradingWaiting(not_configured_note((spec.provider,)) + " (needed to generate the task's rubric)")
    budget_ensure_available(study=study)
    conf = grading_settings()
    rubric = _claim(task, spec.model, RUBRIC_PROMPT_VERSION)
    try:
        prompt = render_rubric_prompt(
            task_id=str(task.uuid), title=task.title, prompt=task.prompt,
            deliverables=[str(d) for d in task.expected_deliverables or []],
            software=[str(s) for s in task.required_software or []],
            reference=task_reference_text(task), hidden=task_hidden_text(task))
        with LeaseKeeper(lambda: _renew(rubric.pk), lease_seconds() / 3):
            out, responses = llm.complete_json(
                provider_config(spec), system=prompt.system, user_text=prompt.user, schema=RubricOut,
                extra_validate=rubric_problems, repair_attempts=int(conf["RUBRIC_REPAIR_ATTEMPTS"]),
                max_tokens=int(conf["RUBRIC_MAX_TOKENS"]))
    except llm.LLMNotConfigured as exc:
        rubric.delete()
        raise GradingWaiting(exc.reason) from exc
    except llm.LLMError as exc:
        llm_usage_record(study=study, purpose=LLMUsage.Purpose.RUBRIC, prompt_version=rubric.prompt_version,
                         responses=exc.responses, accepted_last=False)
        reason = f"Rubric generation failed ({spec.label}): {exc.reason}"
        _fail(rubric, reason)
        logger.warning("rubric v%s for task %s failed: %s", rubric.version, task.pk, exc.reason)
        if exc.retryable:
            raise RetryLater(reason) from exc
        raise RubricGenerationFailed(reason) from exc
    except BaseException:
        _fail(rubric, "Generation was interrupted before the generator answered.")
        raise
    with transaction.atomic():
        llm_usage_record(study=study, purpose=LLMUsage.Purpose.RUBRIC, prompt_version=rubric.prompt_version,
                         responses=responses, accepted_last=True)
        Criterion.objects.bulk_create(_criteria_from(out, rubric))
        rubric.details = {
            "expected_specific_values": [v.model_dump() for v in out.expected_specific_values],
            "critical_requirements": out.critical_requirements,
            "evaluation_notes": out.evaluation_notes,
            "reference_files_analyzed": out.reference_files_analyzed,
            "generation": {"provider": spec.provider, "model": spec.model, "rounds": len(responses),
                           "input_tokens": sum(r.input_tokens for r in responses),
                           "output_tokens": sum(r.output_tokens for r in responses)},
        }
        rubric.status = Rubric.Status.DRAFT
        rubric.total_points = 100.0
        rubric.lease_expires_at = None
        rubric.save(update_fields=["details", "status", "total_points", "lease_expires_at", "updated_at"])
        audit_record(actor=actor, action="rubric.generated", obj=rubric, study=study,
                     after={"task": str(task.uuid), "version": rubric.version, "model": spec.label,
                            "criteria": rubric.criteria.count()})
    return rubric


def rubric_ensure(*, task: TaskInstance, study: Study | None = None) -> Rubric:
    """Return the rubric grading should use, generating the first one when the task has none."""
    rubric = rubric_for_grading(task)
    if rubric is not None:
        return rubric
    if rubric_generating(task) is not None:
        raise RubricBusy("this task's rubric is being generated by another worker", countdown=lease_seconds() + 1)
    return rubric_generate(task=task, study=study)


def rubric_validate(rubric: Rubric) -> list[str]:
    """Return the problems that keep a rubric's current criteria from being used (empty when fine)."""
    points: dict[str, list[float]] = {}
    problems = []
    keys: set[str] = set()
    for criterion in rubric.criteria.all():
        points.setdefault(criterion.category, []).append(criterion.points)
        if criterion.points <= 0:
            problems.append(f"criterion {criterion.key} must be worth more than 0 points")
        if criterion.key in keys:
            problems.append(f"criterion key {criterion.key} is used twice")
        keys.add(criterion.key)
        if not criterion.description.strip():
            problems.append(f"criterion {criterion.key} has no description")
    return problems + category_point_problems(points)


def rubric_used(rubric: Rubric) -> bool:
    """True once any judge run or expert grade refers to the rubric (its criteria are then frozen)."""
    return rubric.judge_runs.exists() or rubric.expert_grades.exists()


def rubric_approve(*, rubric: Rubric, actor: Any, note: str = "") -> Rubric:
    """Approve a rubric whose criteria add up; it becomes the version grading uses for its task."""
    problems = rubric_validate(rubric)
    if problems:
        raise RubricInvalid(f"Rubric v{rubric.version} cannot be approved: " + "; ".join(problems),
                            problems=problems)
    if rubric.status in (Rubric.Status.GENERATING, Rubric.Status.FAILED):
        raise RubricInvalid(f"Rubric v{rubric.version} is {rubric.get_status_display().lower()} and cannot be "
                            "approved", problems=[])
    with transaction.atomic():
        before = rubric.status
        rubric.status = Rubric.Status.APPROVED
        rubric.approved_by = actor if getattr(actor, "is_authenticated", False) else None
        rubric.approved_at = timezone.now()
        if note:
            rubric.reviewer_note = note
        rubric.save(update_fields=["status", "approved_by", "approved_at", "reviewer_note", "updated_at"])
        audit_record(actor=actor, action="rubric.approved", obj=rubric, before={"status": before},
                     after={"status": rubric.status, "version": rubric.version, "task": str(rubric.task.uuid)},
                     note=note)
    return rubric


def rubric_copy(*, rubric: Rubric, actor: Any) -> Rubric:
    """Start a new editable version from an existing one (used rubrics are frozen for audit)."""
    with transaction.atomic():
        TaskInstance.objects.select_for_update().filter(pk=rubric.task_id).first()
        copy = Rubric.objects.create(
            task=rubric.task, version=_next_version(rubric.task), status=Rubric.Status.DRAFT,
            origin=Rubric.Origin.EXPERT, based_on=rubric, details=rubric.details,
            author=actor if getattr(actor, "is_authenticated", False) else None)
        Criterion.objects.bulk_create([
            Criterion(rubric=copy, order=c.order, key=c.key, category=c.category, description=c.description,
                      points=c.points, expected_value=c.expected_value, evaluation_method=c.evaluation_method,
                      label=c.label)
            for c in rubric.criteria.all()])
        audit_record(actor=actor, action="rubric.copied", obj=copy,
                     after={"from_version": rubric.version, "version": copy.version})
    return copy
