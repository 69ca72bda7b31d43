"""Reads for the expert workspace: queues, what an expert may see, previews, and the staff metrics report.

Object-level rules live here as querysets: views fetch through them with ``get_object_or_404``, so an
object outside the expert's reach is simply not found (404), never "forbidden" (which would confirm it
exists).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, cast

from django.db.models import Count, F, OuterRef, Prefetch, Q, QuerySet, Subquery

from experts import metrics
from experts.conf import experts_settings
from experts.models import (
    ComparisonAssignment,
    ExpertAssignment,
    ExpertCriterionGrade,
    ExpertGrade,
    ExpertProfile,
    ToMGoldCode,
    ToMGoldSample,
)
from grading.conf import grading_settings
from grading.extract import Extraction as ExtractedContent
from grading.models import Criterion, CriterionScore, EpisodeTranscript, JudgeGate, JudgeRun, Rubric
from grading.models import Extraction as ExtractionRow
from grading.selectors import current_judge_runs
from grading.transcripts.process_view import bounded, worker_prompts
from studies.models import Episode, EpisodeFile, Study, TaskFile, TaskInstance

OPEN = (ExpertAssignment.Status.ASSIGNED, ExpertAssignment.Status.IN_PROGRESS)
UNUSABLE_RUBRIC = (Rubric.Status.GENERATING, Rubric.Status.FAILED)


def expert_profile(user: Any) -> ExpertProfile | None:
    """The user's active expert profile, or None (no profile, or paused by staff)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return ExpertProfile.objects.filter(user=user, is_active=True).prefetch_related("sectors").first()


# --------------------------------------------------------------------------------------------------------
# What an expert may see
# --------------------------------------------------------------------------------------------------------


def expert_assignments(profile: ExpertProfile) -> QuerySet[ExpertAssignment]:
    """The expert's own assignments (withdrawn ones disappear)."""
    return (ExpertAssignment.objects.filter(expert=profile).exclude(status=ExpertAssignment.Status.CANCELLED)
            .select_related("episode__task__sector", "episode__study"))


def expert_queue(profile: ExpertProfile) -> dict[str, list[ExpertAssignment]]:
    """Open grading work (oldest first) and the last 20 submitted grades."""
    qs = expert_assignments(profile)
    return {
        "open": list(qs.filter(status__in=OPEN).order_by("assigned_at", "pk")),
        "done": list(qs.filter(status=ExpertAssignment.Status.SUBMITTED).select_related("grade")
                     .order_by("-grade__submitted_at")[:20]),
    }


def expert_tasks(profile: ExpertProfile) -> QuerySet[TaskInstance]:
    """Active tasks in the expert's sectors, with how many rubric versions each has."""
    return (TaskInstance.objects.filter(sector__in=profile.sectors.all(), is_active=True).select_related("sector")
            .annotate(n_approved=Count("rubrics", filter=Q(rubrics__status=Rubric.Status.APPROVED), distinct=True),
                      n_mine=Count("rubrics", filter=Q(rubrics__author=profile.user), distinct=True))
            .order_by("sector__name", "title"))


def visible_rubrics(profile: ExpertProfile) -> QuerySet[Rubric]:
    """Rubrics the expert may open: generated ones and approved ones in their sectors, and all of their own."""
    in_domain = Q(task__sector__in=profile.sectors.all())
    shared = Q(origin=Rubric.Origin.AUTO) & ~Q(status__in=UNUSABLE_RUBRIC) | Q(status=Rubric.Status.APPROVED)
    return (Rubric.objects.filter(in_domain & (shared | Q(author=profile.user))).distinct()
            .select_related("task__sector", "author", "based_on"))


def own_rubrics(profile: ExpertProfile) -> QuerySet[Rubric]:
    return (Rubric.objects.filter(author=profile.user, origin=Rubric.Origin.EXPERT).select_related("task")
            .order_by("-updated_at"))


def auto_rubric_for_matching(task: TaskInstance) -> Rubric | None:
    """The generated rubric an expert compares theirs with (the latest usable one)."""
    return (task.rubrics.filter(origin=Rubric.Origin.AUTO).exclude(status__in=UNUSABLE_RUBRIC)
            .filter(criteria__isnull=False).distinct().order_by("-version").first())


def rubric_criteria(rubric: Rubric) -> list[Criterion]:
    return list(rubric.criteria.order_by("order", "pk").prefetch_related("matches_auto"))


def task_files_for_expert(task: TaskInstance) -> QuerySet[TaskFile]:
    """Reference and hidden evaluator files: experts are evaluators, so both are theirs to read."""
    return task.files.order_by("kind", "name")


def expert_may_see_task(profile: ExpertProfile, task: TaskInstance) -> bool:
    """A task is the expert's when it is in their sectors, or one of its episodes or comparisons is theirs."""
    if profile.sectors.filter(pk=task.sector_id).exists():
        return True
    if expert_assignments(profile).filter(episode__task=task).exists():
        return True
    return (ComparisonAssignment.objects.filter(expert=profile, comparison_set__task=task)
            .exclude(status=ComparisonAssignment.Status.CANCELLED).exists())


# --------------------------------------------------------------------------------------------------------
# The grading page
# --------------------------------------------------------------------------------------------------------


@dataclass
class PreviewPart:
    name: str
    kind: str
    text: str
    inspectable: bool
    note: str = ""
    truncated: bool = False


@dataclass
class DeliverablePreview:
    parts: list[PreviewPart] = field(default_factory=list)
    truncated: bool = False
    error: str = ""


def deliverable_files(episode: Episode) -> QuerySet[EpisodeFile]:
    return episode.files.filter(kind=EpisodeFile.Kind.DELIVERABLE).order_by("name")


def stored_deliverable_text(episode: Episode) -> dict[str, Any] | None:
    """The deliverables' extracted text (JSON) as the judges saw it, if grading stored it."""
    return ExtractionRow.objects.filter(episode=episode).values_list("content", flat=True).first()


def preview_from_extraction(content: dict[str, Any]) -> DeliverablePreview:
    """Turn extracted deliverable text (JSON) into the grading page's preview."""
    try:
        extracted = ExtractedContent.from_json(content)
    except (KeyError, TypeError, ValueError):
        return DeliverablePreview(error="The stored preview is unreadable; download the files instead.")
    return DeliverablePreview(
        parts=[PreviewPart(name=p.name, kind=p.kind, text=p.text, inspectable=p.inspectable, note=p.note,
                           truncated=p.truncated) for p in extracted.parts],
        truncated=extracted.truncated)


@dataclass
class GradeRow:
    criterion: Criterion
    verdict: str = ""
    feedback: str = ""
    error: str = ""


def grade_rows(grade: ExpertGrade, *, posted: dict[int, tuple[str, str]] | None = None,
               problems: dict[str, str] | None = None) -> list[GradeRow]:
    """One row per rubric criterion with the saved (or just posted) answer and any problem."""
    saved = {row.criterion_id: (row.verdict, row.feedback) for row in grade.criterion_grades.all()}
    saved.update(posted or {})
    rows = []
    for criterion in grade.rubric.criteria.order_by("order", "pk"):
        verdict, feedback = saved.get(criterion.pk, ("", ""))
        rows.append(GradeRow(criterion, verdict, feedback, (problems or {}).get(str(criterion.pk), "")))
    return rows


def grade_reveal(grade: ExpertGrade) -> dict[str, Any]:
    """What stays hidden until the expert submits: the agent, the automated score, the other grades."""
    episode = grade.episode
    others = (ExpertGrade.objects.filter(episode=episode, status=ExpertGrade.Status.SUBMITTED)
              .exclude(pk=grade.pk).exclude(assignment__role=ExpertAssignment.Role.GOLD)
              .select_related("assignment", "expert__user")
              .prefetch_related(Prefetch("criterion_grades", ExpertCriterionGrade.objects.select_related("criterion")
                                         .order_by("criterion__order"))))
    return {
        "agent": episode.agent,
        "auto_score": episode.auto_score,
        "expert_score": episode.expert_score,
        "judge_runs": list(current_judge_runs(episode)),
        "other_grades": [] if grade.assignment.role == ExpertAssignment.Role.GOLD else list(others),
    }


# --------------------------------------------------------------------------------------------------------
# Staff pages
# --------------------------------------------------------------------------------------------------------


def rubrics_awaiting_review() -> QuerySet[Rubric]:
    return (Rubric.objects.filter(status=Rubric.Status.SUBMITTED).select_related("task__sector", "author", "based_on")
            .order_by("updated_at"))


def experts_overview() -> QuerySet[ExpertProfile]:
    return (ExpertProfile.objects.select_related("user", "invited_by").prefetch_related("sectors")
            .annotate(open_count=Count("assignments", filter=Q(assignments__status__in=OPEN), distinct=True),
                      done_count=Count("assignments", filter=Q(assignments__status=ExpertAssignment.Status.SUBMITTED),
                                       distinct=True))
            .order_by("-is_active", "user__username"))


def open_assignments(study: Study | None = None) -> QuerySet[ExpertAssignment]:
    qs = (ExpertAssignment.objects.filter(status__in=OPEN)
          .select_related("expert__user", "episode__task", "episode__study").order_by("assigned_at"))
    return qs.filter(episode__study=study) if study is not None else qs


def gold_sources(study: Study | None = None) -> QuerySet[Episode]:
    """Episodes that can be copied as gold: graded originals with deliverables."""
    qs = (Episode.objects.filter(status=Episode.Status.GRADED, is_gold=False,
                                 files__kind=EpisodeFile.Kind.DELIVERABLE).distinct()
          .select_related("task__sector", "agent", "study").order_by("-submitted_at", "-pk"))
    return qs.filter(study=study) if study is not None else qs


def gold_prefill(episode: Episode, rubric: Rubric) -> dict[str, str]:
    """Suggest known answers from the episode's consensus expert grade on this rubric, if there is one."""
    grade = _consensus_grades(ExpertGrade.objects.filter(episode=episode, rubric=rubric)).get((episode.pk, 1))
    if grade is None:
        return {}
    return {row.criterion.key: row.verdict for row in grade.criterion_grades.all() if row.verdict in ("pass", "fail")}


def gold_episodes(study: Study | None = None) -> QuerySet[Episode]:
    qs = (Episode.objects.filter(is_gold=True).select_related("task", "study")
          .prefetch_related("expert_assignments__expert__user").order_by("-pk"))
    return qs.filter(study=study) if study is not None else qs


def adjudication_gap() -> float:
    return float(experts_settings()["ADJUDICATION_SCORE_GAP"])


def _submitted(study: Study | None) -> QuerySet[ExpertGrade]:
    qs = (ExpertGrade.objects.filter(status=ExpertGrade.Status.SUBMITTED)
          .select_related("assignment", "expert__user", "episode__task", "episode__agent", "rubric")
          .prefetch_related(Prefetch("criterion_grades",
                                     ExpertCriterionGrade.objects.select_related("criterion"))))
    return qs.filter(episode__study=study) if study is not None else qs


def _completed(grade: ExpertGrade) -> bool:
    return metrics.completion((row.criterion.label, row.verdict) for row in grade.criterion_grades.all()
                              if row.verdict in metrics.VERDICTS)


@dataclass
class DoubleGraded:
    episode: Episode
    attempt: int
    first: ExpertGrade
    second: ExpertGrade
    adjudication: ExpertAssignment | None
    reasons: list[str]

    @property
    def disagrees(self) -> bool:
        return bool(self.reasons)


def double_graded(study: Study | None = None) -> list[DoubleGraded]:
    """Episodes with a primary and a second grade on the same attempt, with why they disagree (if they do)."""
    pairs: dict[tuple[int, int], dict[str, ExpertGrade]] = defaultdict(dict)
    for grade in _submitted(study).exclude(assignment__role=ExpertAssignment.Role.GOLD):
        pairs[(grade.episode_id, grade.attempt)][grade.assignment.role] = grade
    adjudications = {a.episode_id: a for a in ExpertAssignment.objects.filter(
        role=ExpertAssignment.Role.ADJUDICATION).exclude(status=ExpertAssignment.Status.CANCELLED)
        .select_related("expert__user")}
    gap = adjudication_gap()
    out = []
    for (_, attempt), roles in pairs.items():
        first, second = roles.get(ExpertAssignment.Role.PRIMARY), roles.get(ExpertAssignment.Role.SECOND)
        if first is None or second is None:
            continue
        reasons = []
        if first.overall != second.overall:
            reasons.append(f"overall judgement: {first.get_overall_display()} vs {second.get_overall_display()}")
        if _completed(first) != _completed(second):
            reasons.append("completion differs")
        if first.score is not None and second.score is not None and abs(first.score - second.score) >= gap:
            reasons.append(f"scores {first.score:.0f} vs {second.score:.0f} differ by {gap:g}+ points")
        out.append(DoubleGraded(first.episode, attempt, first, second, adjudications.get(first.episode_id), reasons))
    out.sort(key=lambda d: (not d.disagrees, d.adjudication is not None, -d.episode.pk))
    return out


def _consensus_grades(grades: QuerySet[ExpertGrade]) -> dict[tuple[int, int], ExpertGrade]:
    """One grade per (episode, attempt): the adjudication if any, else the primary, else the second."""
    rank: dict[str, int] = {
        ExpertAssignment.Role.ADJUDICATION: 0, ExpertAssignment.Role.PRIMARY: 1, ExpertAssignment.Role.SECOND: 2}
    chosen: dict[tuple[int, int], ExpertGrade] = {}
    for grade in (grades.filter(status=ExpertGrade.Status.SUBMITTED)
                  .exclude(assignment__role=ExpertAssignment.Role.GOLD)
                  .select_related("assignment")
                  .prefetch_related(Prefetch("criterion_grades",
                                             ExpertCriterionGrade.objects.select_related("criterion")))
                  .order_by("submitted_at", "pk")):
        key = (grade.episode_id, grade.attempt)
        current = chosen.get(key)
        if current is None or rank[grade.assignment.role] < rank[current.assignment.role]:
            chosen[key] = grade
    return chosen


# --------------------------------------------------------------------------------------------------------
# The metrics report
# --------------------------------------------------------------------------------------------------------


def _gold_report(study: Study | None) -> list[dict[str, Any]]:
    by_expert: dict[int, list[tuple[Any, metrics.GoldAgreement, ExpertGrade]]] = defaultdict(list)
    for grade in _submitted(study).filter(assignment__role=ExpertAssignment.Role.GOLD).order_by("submitted_at"):
        verdicts = {row.criterion.key: row.verdict for row in grade.criterion_grades.all()}
        result = metrics.gold_agreement(verdicts, grade.episode.gold_verdicts or {})
        by_expert[grade.expert_id].append((grade.submitted_at, result, grade))
    report = []
    for rows in by_expert.values():
        shares = [r.share for _, r, _ in rows if r.share is not None]
        agreed, compared = sum(r.agreed for _, r, _ in rows), sum(r.compared for _, r, _ in rows)
        report.append({
            "expert": rows[0][2].expert,
            "n": len(rows),
            "agreement": agreed / compared if compared else None,
            "skipped": sum(r.skipped for _, r, _ in rows),
            "drift": metrics.gold_drift(shares, window=min(5, max(1, len(shares) // 2))) if len(shares) >= 2
            else None,
            "history": [{"at": at, "share": r.share, "episode": g.episode_id} for at, r, g in rows],
        })
    report.sort(key=lambda r: (r["agreement"] is None, r["agreement"] or 0.0))
    return report


def _score_agreement(study: Study | None) -> dict[str, Any]:
    episodes = Episode.objects.filter(is_gold=False, expert_score__isnull=False, auto_score__isnull=False)
    if study is not None:
        episodes = episodes.filter(study=study)
    pairs = cast(list[tuple[float, float]], list(episodes.values_list("expert_score", "auto_score")))  # non-null
    per_expert: dict[int, list[tuple[float, float]]] = defaultdict(list)
    experts: dict[int, ExpertProfile] = {}
    for grade in _submitted(study).exclude(assignment__role=ExpertAssignment.Role.GOLD).filter(
            score__isnull=False, episode__auto_score__isnull=False):
        per_expert[grade.expert_id].append((cast(float, grade.score), cast(float, grade.episode.auto_score)))
        experts[grade.expert_id] = grade.expert
    return {
        "n": len(pairs),
        "r": metrics.pearson_r([p[0] for p in pairs], [p[1] for p in pairs]),
        "mean_gap": (sum(e - a for e, a in pairs) / len(pairs)) if pairs else None,
        "per_expert": sorted(({"expert": experts[pk], "n": len(v),
                               "r": metrics.pearson_r([x for x, _ in v], [y for _, y in v])}
                              for pk, v in per_expert.items()), key=lambda row: str(row["expert"].user)),
    }


def _kappa_report(study: Study | None) -> dict[str, Any]:
    per_criterion: dict[int, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    criteria: dict[int, Criterion] = {}
    for pair in double_graded(study):
        if pair.first.rubric_id != pair.second.rubric_id:
            continue
        second = {row.criterion_id: row.verdict for row in pair.second.criterion_grades.all()}
        for row in pair.first.criterion_grades.all():
            other = second.get(row.criterion_id)
            # Skips mean "could not evaluate": agreement is measured where both raters evaluated.
            if row.verdict in ("pass", "fail") and other in ("pass", "fail"):
                per_criterion[row.criterion_id][0].append(row.verdict)
                per_criterion[row.criterion_id][1].append(other)
                criteria[row.criterion_id] = row.criterion
    rows: list[dict[str, Any]]
    rows, pooled_a, pooled_b = [], [], []
    for criterion_id, (a, b) in per_criterion.items():
        pooled_a += a
        pooled_b += b
        agree = sum(x == y for x, y in zip(a, b, strict=True))
        rows.append({"criterion": criteria[criterion_id], "n": len(a), "observed": agree / len(a),
                     "kappa": metrics.cohen_kappa(a, b)})
    rows.sort(key=lambda r: (r["criterion"].rubric.task_id, r["criterion"].rubric_id, r["criterion"].order))
    return {"rows": rows, "pooled_n": len(pooled_a), "pooled": metrics.cohen_kappa(pooled_a, pooled_b)}


def _coverage_report(study: Study | None) -> dict[str, Any]:
    rubrics = (Rubric.objects.filter(origin=Rubric.Origin.EXPERT,
                                     status__in=[Rubric.Status.SUBMITTED, Rubric.Status.APPROVED])
               .select_related("task", "author").prefetch_related("criteria__matches_auto").order_by("task", "version"))
    if study is not None:
        rubrics = rubrics.filter(task__studies=study)
    rows, pooled = [], metrics.Coverage(0, 0, 0, 0)
    for rubric in rubrics:
        marks = {c.pk: [m.pk for m in c.matches_auto.all()] for c in rubric.criteria.all()}
        marked_rubrics = Counter(m.rubric_id for c in rubric.criteria.all() for m in c.matches_auto.all())
        auto: Rubric | None
        if marked_rubrics:
            auto = Rubric.objects.get(pk=marked_rubrics.most_common(1)[0][0])
        else:
            auto = auto_rubric_for_matching(rubric.task)
        if auto is None:
            continue
        cov = metrics.rubric_coverage(marks, auto.criteria.values_list("pk", flat=True))
        pooled = pooled + cov
        rows.append({"rubric": rubric, "auto": auto, "coverage": cov})
    return {"rows": rows, "pooled": pooled}


def _attempt_report(study: Study | None) -> dict[str, Any]:
    grades = ExpertGrade.objects.all()
    if study is not None:
        grades = grades.filter(episode__study=study)
    consensus = _consensus_grades(grades.select_related("episode__agent"))
    jobs: dict[Any, dict[Any, dict[int, metrics.AttemptOutcome]]] = defaultdict(lambda: defaultdict(dict))
    firsts: dict[Any, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for (episode_id, attempt), grade in consensus.items():
        agent = grade.episode.agent
        # UpBench's R (skips count as not passed), from the verdicts; the stored score leaves skips out.
        verdicts = [row.verdict for row in grade.criterion_grades.all() if row.verdict in metrics.VERDICTS]
        outcome = metrics.AttemptOutcome(passed=_completed(grade), rubric_score=metrics.rubric_score(verdicts))
        jobs[agent][episode_id][attempt] = outcome
        if attempt == 1:
            firsts[agent][grade.episode.task_id].append(outcome.passed)
    has_reattempts = any(k > 1 for episodes in jobs.values() for attempts in episodes.values() for k in attempts)
    rows = []
    for agent, episodes in sorted(jobs.items(), key=lambda item: item[0].name):
        counts = [(len(v), sum(v)) for v in firsts[agent].values()]
        rows.append({
            "agent": agent,
            "summary": metrics.reattempt_summary(episodes),
            "pass_at_k": {k: metrics.pass_at_k_suite(counts, k) for k in (1, 2, 3)},
            "tasks": len(counts),
        })
    return {"rows": rows, "has_reattempts": has_reattempts}


def expert_metrics_report(study: Study | None = None) -> dict[str, Any]:
    """Everything the staff metrics page shows, computed with the pure functions in experts.metrics."""
    return {
        "gold": _gold_report(study),
        "scores": _score_agreement(study),
        "kappa": _kappa_report(study),
        "coverage": _coverage_report(study),
        "attempts": _attempt_report(study),
    }


# --------------------------------------------------------------------------------------------------------
# The expert gate and its calibration sample
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoGradedItem:
    """One criterion of a calibration episode scored by a judge and graded by experts (shares of its points)."""

    judge: str
    category: str
    episode_id: int
    agent_family: str
    judge_share: float
    expert_share: float
    weight: float


def calibration_co_graded_items(study: Study) -> list[CoGradedItem]:
    """Criterion items of the calibration sample that a current judge run and submitted expert grades share.

    Experts' verdicts on the first attempt are averaged per criterion (pass 1, fail 0, skips left out); a
    criterion worth no points carries no judge share and is left out. The weight is ``1 / pi``.
    """
    episodes = {e.pk: e for e in Episode.objects.filter(study=study, in_calibration_sample=True, is_gold=False)
                .select_related("agent")}
    verdicts: dict[tuple[int, int], list[float]] = defaultdict(list)
    for episode_id, criterion_id, verdict in (
            ExpertCriterionGrade.objects
            .filter(grade__episode_id__in=list(episodes), grade__status=ExpertGrade.Status.SUBMITTED,
                    grade__attempt=1, verdict__in=[metrics.PASS, metrics.FAIL])
            .exclude(grade__assignment__role=ExpertAssignment.Role.GOLD)
            .values_list("grade__episode_id", "criterion_id", "verdict")):
        verdicts[(episode_id, criterion_id)].append(1.0 if verdict == metrics.PASS else 0.0)
    items = []
    scores = (CriterionScore.objects
              .filter(judge_run__episode_id__in={e for e, _ in verdicts}, judge_run__is_current=True,
                      judge_run__status=JudgeRun.Status.SUCCEEDED, criterion__points__gt=0)
              .values_list("judge_run__provider", "judge_run__model", "judge_run__episode_id", "criterion_id",
                           "criterion__category", "criterion__points", "earned")
              .order_by("judge_run__episode_id", "criterion_id", "judge_run__provider", "judge_run__model"))
    for provider, model, episode_id, criterion_id, category, points, earned in scores:
        expert = verdicts.get((episode_id, criterion_id))
        episode = episodes[episode_id]
        if not expert or not episode.calibration_probability:
            continue
        items.append(CoGradedItem(
            judge=f"{provider}/{model}", category=category, episode_id=episode_id,
            agent_family=episode.agent.family if episode.agent else "",
            judge_share=min(max(float(earned) / float(points), 0.0), 1.0), expert_share=sum(expert) / len(expert),
            weight=1.0 / float(episode.calibration_probability)))
    return items


def calibration_sample_by_family(study: Study) -> list[dict[str, Any]]:
    """Per agent family: automatically graded (drawn) episodes, those sampled, and those experts graded."""
    graded = Q(expert_grades__status=ExpertGrade.Status.SUBMITTED) & ~Q(
        expert_grades__assignment__role=ExpertAssignment.Role.GOLD)
    rows = (Episode.objects.filter(study=study, calibration_probability__isnull=False, is_gold=False)
            .values("agent__family")
            .annotate(drawn=Count("pk", distinct=True),
                      sampled=Count("pk", filter=Q(in_calibration_sample=True), distinct=True),
                      expert_graded=Count("pk", filter=Q(in_calibration_sample=True) & graded, distinct=True))
            .order_by("agent__family"))
    return [{"family": r["agent__family"] or "(none)", "drawn": r["drawn"], "sampled": r["sampled"],
             "expert_graded": r["expert_graded"]} for r in rows]


def study_gate(study: Study) -> dict[str, Any]:
    """The gate page: stored verdicts per (category, judge), the settings, and the calibration sample."""
    labels = dict(Criterion.Category.choices)
    order = {code: i for i, code in enumerate(labels)}  # the rubric's own category order
    gates = sorted(JudgeGate.objects.filter(study=study), key=lambda g: (order.get(g.category, 99), g.judge))
    widths = [g.more_for_bias_width for g in gates if g.more_for_bias_width is not None]
    return {
        "gates": [{"gate": g, "category_label": labels.get(g.category, g.category)} for g in gates],
        "passing": sum(g.passes for g in gates), "failing": sum(not g.passes for g in gates),
        "computed_at": max((g.computed_at for g in gates), default=None),
        "sample": calibration_sample_by_family(study),
        "more_for_bias_width": max(widths) if widths else None,
        "held": Episode.objects.filter(study=study, grading_note__contains="expert gate",
                                       status=Episode.Status.SUBMITTED).count(),
    }


def studies_with_stale_gate() -> QuerySet[Study]:
    """Studies using the gate with an expert grade of a sampled episode newer than their last evaluation."""
    newest_grade = (ExpertGrade.objects.filter(episode__study=OuterRef("pk"), episode__in_calibration_sample=True,
                                               status=ExpertGrade.Status.SUBMITTED)
                    .exclude(assignment__role=ExpertAssignment.Role.GOLD)
                    .order_by("-submitted_at").values("submitted_at")[:1])
    last_run = JudgeGate.objects.filter(study=OuterRef("pk")).order_by("-computed_at").values("computed_at")[:1]
    return (Study.objects.exclude(gate_mode=Study.GateMode.OFF)
            .annotate(newest_grade=Subquery(newest_grade), last_run=Subquery(last_run))
            .filter(newest_grade__isnull=False)
            .filter(Q(last_run__isnull=True) | Q(newest_grade__gt=F("last_run"))).order_by("pk"))


def graded_episodes_with_current_runs(study: Study) -> QuerySet[Episode]:
    """The study's automatically graded episodes with their current judge runs (for the gate's score check)."""
    return (Episode.objects.filter(study=study, status=Episode.Status.GRADED, is_gold=False, auto_score__isnull=False)
            .prefetch_related(Prefetch("judge_runs", queryset=JudgeRun.objects.filter(
                is_current=True, status=JudgeRun.Status.SUCCEEDED).order_by("provider", "model"),
                to_attr="current_runs")).order_by("pk"))


# ------------------------------------------------------------------------------------------ ToM gold standard


def expert_tom_gold_codes(profile: ExpertProfile) -> QuerySet[ToMGoldCode]:
    """The expert's own ToM gold codings (the only ones they may open), unsubmitted first."""
    return (ToMGoldCode.objects.filter(expert=profile)
            .select_related("item").order_by("submitted_at", "pk"))


def tom_gold_prompts(code: ToMGoldCode) -> tuple[list[str], bool]:
    """The worker's prompts exactly as the ToM judges read them (same view, same budget), and whether cut."""
    transcript = EpisodeTranscript.objects.filter(episode_id=code.item.episode_id).first()
    if transcript is None:
        return [], False
    kept, cut = bounded(worker_prompts(transcript.files), int(grading_settings()["EXTRACT_MAX_CHARS"]))
    return kept, cut or transcript.truncated


def tom_gold_sample(study: Study) -> ToMGoldSample | None:
    return ToMGoldSample.objects.filter(study=study).first()


def tom_gold_progress(sample: ToMGoldSample) -> list[dict[str, Any]]:
    """Per stratum: N_h, n_h, pi, codes assigned and submitted (for the staff page)."""
    rows = (sample.items.values("stratum", "stratum_population", "stratum_sample", "inclusion_probability")
            .annotate(n_items=Count("pk", distinct=True), n_codes=Count("codes"),
                      n_submitted=Count("codes", filter=Q(codes__status=ToMGoldCode.Status.SUBMITTED)))
            .order_by("stratum"))
    return list(rows)


def tom_gold_expert_progress(sample: ToMGoldSample) -> list[dict[str, Any]]:
    return list(ToMGoldCode.objects.filter(item__sample=sample).values("expert__user__username")
                .annotate(codes=Count("pk"), submitted=Count("pk", filter=Q(status=ToMGoldCode.Status.SUBMITTED)))
                .order_by("expert__user__username"))


@dataclass(frozen=True)
class GoldToMCode:
    """One expert's submitted ToM code of one sampled episode, with the sampling design (plain data for stats).

    `weight` is 1 / inclusion_probability; within a stratum the weights of its sampled episodes sum to N_h.
    """

    episode_id: int
    expert_id: int
    stratum: str
    stratum_population: int
    stratum_sample: int
    inclusion_probability: float
    weight: float
    judge_mean: float
    score: int
    markers: tuple[str, ...]
    time_spent_seconds: int


def study_tom_gold(study_id: int) -> list[GoldToMCode]:
    """Every submitted expert ToM gold code of the study (one query), ordered by episode then expert."""
    rows = (ToMGoldCode.objects.filter(item__sample__study_id=study_id, status=ToMGoldCode.Status.SUBMITTED)
            .select_related("item").order_by("item__episode_id", "expert_id"))
    return [GoldToMCode(episode_id=r.item.episode_id, expert_id=r.expert_id, stratum=r.item.stratum,
                        stratum_population=r.item.stratum_population, stratum_sample=r.item.stratum_sample,
                        inclusion_probability=r.item.inclusion_probability,
                        weight=1.0 / r.item.inclusion_probability, judge_mean=r.item.judge_mean,
                        score=int(r.score), markers=tuple(r.markers or ()), time_spent_seconds=r.time_spent_seconds)
            for r in rows if r.score is not None]
