"""Evaluate a study's expert gate from its calibration sample and store the verdicts grading reads.

For every judge of the study and every rubric category, `rating/expert_gate.py:gate_evaluate` compares the
judge's criterion scores with the experts' verdicts on the calibration sample's co-graded episodes (weighted
by ``1 / pi``) under the study's settings. Verdicts are stored in `grading.models.JudgeGate`. Under the
``enforce`` mode a changed verdict re-combines the scores it touches: the affected episodes are sent to
grading again, which never re-calls a judge that already scored and recomputes the score (or holds it for
experts) from the stored runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from experts.selectors import (
    CoGradedItem,
    calibration_co_graded_items,
    graded_episodes_with_current_runs,
    studies_with_stale_gate,
)
from experts.task_names import EVALUATE_EXPERT_GATE
from grading.models import Criterion, JudgeGate, JudgeRun
from grading.providers import study_judges
from grading.selectors import HELD_MARK
from grading.services.gated_score import gated_score
from rating.expert_gate import GateResult, GateRule, gate_evaluate
from studies.models import Episode, Study
from studies.services.audit import audit_record
from studies.task_names import GRADE_EPISODE
from studies.task_sending import send_task_on_commit

BOOTSTRAP_ROUNDS = 2000


def study_gate_rule(study: Study) -> GateRule:
    return GateRule(min_agreement=study.gate_min_agreement, max_bias=study.gate_max_bias,
                    min_episodes=study.gate_min_episodes)


def _families_drawn(study: Study) -> set[str]:
    # A solo episode has no agent (family None); it counts with the agents of no family, as its items do.
    return {family or "" for family in Episode.objects.filter(
        study=study, calibration_probability__isnull=False, is_gold=False).values_list("agent__family", flat=True)}


def _evaluate(items: list[CoGradedItem], *, rule: GateRule, width: float, families: set[str],
              seed: int) -> GateResult:
    covered = {i.agent_family for i in items}
    return gate_evaluate(
        np.array([i.judge_share for i in items]), np.array([i.expert_share for i in items]),
        np.array([i.episode_id for i in items]), np.array([i.weight for i in items]), rule=rule, bias_width=width,
        uncovered_families=tuple(sorted(f or "(none)" for f in families - covered)) if items else (),
        rounds=BOOTSTRAP_ROUNDS, seed=seed)


def study_gate_evaluate(*, study_id: int) -> list[JudgeGate]:
    """Recompute every (judge, category) verdict of the study; return the stored rows."""
    study = Study.objects.get(pk=study_id)
    rule = study_gate_rule(study)
    items = calibration_co_graded_items(study)
    grouped: dict[tuple[str, str], list[CoGradedItem]] = defaultdict(list)
    for item in items:
        grouped[(item.judge, item.category)].append(item)
    judges = sorted({f"{s.provider}/{s.model}" for s in study_judges(study)} | {i.judge for i in items})
    families = _families_drawn(study)
    now = timezone.now()
    settings = {"min_agreement": rule.min_agreement, "max_bias": rule.max_bias, "min_episodes": rule.min_episodes,
                "bias_width": study.gate_bias_width, "mode": study.gate_mode}
    changed: list[str] = []
    rows = []
    with transaction.atomic():
        before = {(g.judge, g.category): g.passes for g in JudgeGate.objects.select_for_update().filter(study=study)}
        for index, (judge, category) in enumerate((j, c) for j in judges for c in Criterion.Category.values):
            result = _evaluate(grouped.get((judge, category), []), rule=rule, width=study.gate_bias_width,
                               families=families, seed=study.pk * 1000 + index)
            agreement = result.agreement_interval or (None, None)
            bias = result.bias_interval or (None, None)
            row, _ = JudgeGate.objects.update_or_create(study=study, judge=judge, category=category, defaults={
                "passes": result.passes, "reasons": result.reasons, "n_episodes": result.n_episodes,
                "n_items": result.n_items, "agreement": result.agreement, "agreement_low": agreement[0],
                "agreement_high": agreement[1], "bias": result.bias, "bias_low": bias[0], "bias_high": bias[1],
                "more_for_bias_width": result.more_for_bias_width, "rule": settings, "computed_at": now})
            rows.append(row)
            if before.get((judge, category)) != result.passes:
                changed.append(f"{judge} on {category}: {'passes' if result.passes else 'fails'}")
        JudgeGate.objects.filter(study=study).exclude(pk__in=[r.pk for r in rows]).delete()
        if changed:
            audit_record(actor=None, action="study.expert_gate", obj=study, study=study,
                         after={"changed": changed, "settings": settings})
            if study.gate_mode == Study.GateMode.ENFORCE:
                _regrade_affected(study, judges={c.split(" on ")[0] for c in changed})
    return rows


def _regrade_affected(study: Study, *, judges: Iterable[str]) -> None:
    """Send the episodes whose score a changed verdict touches back through grading (stored runs only)."""
    runs = Q()
    for judge in judges:
        provider, _, model = judge.partition("/")
        runs |= Q(judge_runs__provider=provider, judge_runs__model=model, judge_runs__is_current=True)
    held = Q(status=Episode.Status.SUBMITTED, grading_note__startswith=HELD_MARK)
    affected = (Episode.objects.filter(study=study, is_gold=False)
                .filter((Q(status=Episode.Status.GRADED) & runs) | held)
                .values_list("pk", flat=True).distinct())
    for episode_id in affected:
        send_task_on_commit(GRADE_EPISODE, [episode_id])


def episode_gate_follow_up(*, episode: Episode) -> None:
    """After an expert grade of a calibration episode, queue the study's gate evaluation (unless it is off)."""
    if episode.study.gate_mode == Study.GateMode.OFF:
        return
    if episode.in_calibration_sample and not episode.is_gold and JudgeRun.objects.filter(
            episode=episode, is_current=True).exists():
        send_task_on_commit(EVALUATE_EXPERT_GATE, [episode.study_id])


def gates_reconcile() -> dict[str, int]:
    """Finish what a lost message left undone: evaluations after expert grades, re-grades after a verdict.

    A study whose newest calibration expert grade is newer than its last evaluation is evaluated again. Under
    ``enforce``, a graded episode whose automated score is not the one its current judge runs give under the
    stored verdicts (or that no judge can score any more) is sent back to grading.
    """
    evaluated = regraded = 0
    for study in studies_with_stale_gate():
        study_gate_evaluate(study_id=study.pk)
        evaluated += 1
    for study in Study.objects.filter(gate_mode=Study.GateMode.ENFORCE).order_by("pk"):
        for episode in graded_episodes_with_current_runs(study):
            runs = episode.current_runs  # type: ignore[attr-defined]
            gate = gated_score(study=study, runs=runs) if runs else None
            if gate is not None and episode.auto_score is not None and (
                    gate.score is None or abs(gate.score - episode.auto_score) > 1e-6):
                with transaction.atomic():
                    send_task_on_commit(GRADE_EPISODE, [episode.pk])
                regraded += 1
    return {"evaluated": evaluated, "regraded": regraded}
