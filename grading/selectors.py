"""Reads for grading: which rubric grades a task, LLM spend, queues of pending work, audit views."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from grading.models import FluencyCoding, JudgeGate, JudgeRun, LLMUsage, Rubric
from studies.models import Episode, Participant, SoloRun, Study, TaskInstance


def rubric_for_grading(task: TaskInstance) -> Rubric | None:
    """Return the latest approved rubric, else the latest auto-generated draft, else None (generate one)."""
    approved = task.rubrics.filter(status=Rubric.Status.APPROVED).order_by("-version").first()
    if approved is not None:
        return approved
    return (task.rubrics.filter(status=Rubric.Status.DRAFT, origin=Rubric.Origin.AUTO)
            .order_by("-version").first())


def rubric_generating(task: TaskInstance) -> Rubric | None:
    """Return a rubric version being generated right now (not yet stale), if any."""
    return task.rubrics.filter(status=Rubric.Status.GENERATING, lease_expires_at__gte=timezone.now()).first()


def study_llm_spend(study: Study) -> Decimal:
    """Return the study's LLM spend in USD over every recorded call (rubrics, judges, log coding)."""
    total = LLMUsage.objects.filter(study=study).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal("0")


def studies_over_budget() -> list[tuple[Study, Decimal]]:
    """Return capped studies whose spend reached the cap, with the spend, for warnings."""
    spend_by_study = dict(LLMUsage.objects.filter(study__llm_budget_usd__isnull=False)
                          .values_list("study_id").annotate(total=Sum("cost_usd")))
    over = []
    for study in Study.objects.filter(llm_budget_usd__isnull=False).order_by("name"):
        spend = spend_by_study.get(study.pk) or Decimal("0")
        if study.llm_budget_usd is not None and spend >= study.llm_budget_usd:
            over.append((study, spend))
    return over


def _live_lease(subject: str) -> Exists:
    return Exists(JudgeRun.objects.filter(**{subject: OuterRef("pk")}, status=JudgeRun.Status.RUNNING,
                                          lease_expires_at__gte=timezone.now()))


def episodes_pending_grading(*, quiet_for: float = 0.0, waiting_quiet_for: float = 0.0) -> QuerySet[Episode]:
    """Episodes grading owes work: submitted (incl. waiting) or grading with no judge call under a live lease.

    `quiet_for` skips episodes touched in the last so many seconds (a message for them is probably on its way);
    waiting ones (a note says why: no key, budget) use the longer `waiting_quiet_for`.
    """
    now = timezone.now()
    recent = now - timedelta(seconds=quiet_for)
    waiting_recent = now - timedelta(seconds=waiting_quiet_for)
    due = (Q(status=Episode.Status.SUBMITTED, grading_note="", updated_at__lte=recent)
           | Q(status=Episode.Status.SUBMITTED, updated_at__lte=waiting_recent) & ~Q(grading_note="")
           | Q(status=Episode.Status.GRADING, updated_at__lte=recent))
    return (Episode.objects.filter(due).filter(~_live_lease("episode"))
            .exclude(participant__status=Participant.Status.WITHDRAWN)
            .order_by("submitted_at", "pk"))


HELD_MARK = "Held out of the rating"


def episodes_held(study: Study) -> QuerySet[Episode]:
    """Episodes a partial judge panel holds out of the rating (study policy 'hold'); the note says why."""
    return (Episode.objects.filter(study=study, grading_note__contains=HELD_MARK)
            .filter(status__in=[Episode.Status.SUBMITTED, Episode.Status.GRADED]).order_by("submitted_at", "pk"))


def episodes_pending_log_coding() -> QuerySet[Episode]:
    """Submitted or graded episodes without a current log coding."""
    coded = FluencyCoding.objects.filter(episode=OuterRef("pk"), is_current=True)
    return (Episode.objects.filter(status__in=[Episode.Status.SUBMITTED, Episode.Status.GRADING,
                                               Episode.Status.GRADED])
            .exclude(participant__status=Participant.Status.WITHDRAWN)
            .filter(~Exists(coded)).order_by("pk"))


def solo_runs_pending_grading() -> QuerySet[SoloRun]:
    """Solo runs submitted, or grading with no judge call under a live lease."""
    return SoloRun.objects.filter(Q(status=Episode.Status.SUBMITTED) | Q(status=Episode.Status.GRADING)).filter(
        ~_live_lease("solo_run")).order_by("pk")


def current_judge_runs(episode: Episode) -> QuerySet[JudgeRun]:
    """The judge runs that make up the episode's current auto score, with their criterion scores."""
    return (episode.judge_runs.filter(is_current=True).select_related("rubric")
            .prefetch_related("criterion_scores__criterion").order_by("provider", "model"))


def current_fluency_coding(episode: Episode) -> FluencyCoding | None:
    return episode.fluency_codings.filter(is_current=True).order_by("-created_at").first()


def episodes_with_outdated_scores(study: Study | None = None) -> list[int]:
    """Graded episodes whose current judge runs differ from what grading would use now.

    "Now" means the task's rubric for grading, the study's judge list (as the participant's consent allows)
    and the current judge prompt version; a new approved rubric, judge model or prompt makes scores outdated.
    """
    from grading.consent import judges_allowed
    from grading.prompts import JUDGE_PROMPT_VERSION
    from grading.providers import study_judges

    episodes = (Episode.objects.filter(status=Episode.Status.GRADED)
                .exclude(participant__status=Participant.Status.WITHDRAWN)
                .select_related("study", "task", "participant__consent_version").order_by("pk"))
    if study is not None:
        episodes = episodes.filter(study=study)
    rubrics: dict[int, Rubric | None] = {}
    judges: dict[int, list] = {}
    current: dict[int, set[tuple]] = {}
    for run in JudgeRun.objects.filter(episode__in=episodes, is_current=True).values_list(
            "episode_id", "rubric_id", "provider", "model", "prompt_version"):
        current.setdefault(run[0], set()).add(run[1:])
    outdated = []
    for episode in episodes:
        if episode.task_id not in rubrics:
            rubrics[episode.task_id] = rubric_for_grading(episode.task)
        if episode.study_id not in judges:
            judges[episode.study_id] = study_judges(episode.study)
        rubric = rubrics[episode.task_id]
        if rubric is None:
            continue
        allowed = judges_allowed(participant=episode.participant, judges=judges[episode.study_id]).allowed
        expected = {(rubric.pk, j.provider, j.model, JUDGE_PROMPT_VERSION) for j in allowed}
        if expected and current.get(episode.pk, set()) != expected:
            outdated.append(episode.pk)
    return outdated


def judge_gates(study: Study) -> dict[tuple[str, str], JudgeGate]:
    """The study's stored gate verdicts by (judge "provider/model", rubric category)."""
    return {(g.judge, g.category): g for g in JudgeGate.objects.filter(study=study)}
