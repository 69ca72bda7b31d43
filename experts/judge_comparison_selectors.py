"""Reads of the judges' comparison-mode rankings: plain rows for the summary (`rating/judge_preferences.py`), the
Comparisons tab, the preferences API and the export."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet

from experts.comparison_selectors import study_submitted_comparisons
from experts.models import JudgeComparison
from grading.prompts import COMPARE_PROMPT_VERSION
from grading.providers import study_judges
from rating.judge_preferences import ExpertRanking, JudgeRanking, judge_preference_summary
from studies.models import Study


def judge_label(row: JudgeComparison) -> str:
    return f"{row.provider}/{row.model}"


def study_judge_comparisons(study: Study | int) -> QuerySet[JudgeComparison]:
    """Every judge ranking of the study's sets (any prompt version, any status), oldest set first."""
    return JudgeComparison.objects.filter(study=study).order_by("comparison_set_id", "order", "provider", "model",
                                                                "prompt_version", "pk")


def study_judge_rankings(study: Study | int) -> list[JudgeRanking]:
    """The succeeded rankings under the current prompt version, as the summary reads them."""
    rows = study_judge_comparisons(study).filter(status=JudgeComparison.Status.SUCCEEDED,
                                                 prompt_version=COMPARE_PROMPT_VERSION)
    return [JudgeRanking(set_id=r.comparison_set_id, judge=judge_label(r), order=r.order,
                         shown=tuple(int(i) for i in r.shown_items), ranks=tuple(int(k) for k in r.ranks))
            for r in rows]


def study_expert_rankings(study: Study | int) -> list[ExpertRanking]:
    """The experts' submitted rankings, keyed by the same item ids as the judges'."""
    return [ExpertRanking(set_id=c.set_id, expert=str(c.expert_id), items=tuple(d.item_id for d in c.shown),
                          ranks=tuple(d.rank for d in c.shown))
            for c in study_submitted_comparisons(study)]


def _judges(study: Study, rankings: list[JudgeRanking]) -> list[str]:
    """The study's judges first (in its order), then any other judge that ranked (an earlier judge list)."""
    try:
        configured = [spec.label for spec in study_judges(study)]
    except ImproperlyConfigured:  # a misconfigured list still lets the stored rankings be summarised
        configured = []
    return list(dict.fromkeys([*configured, *sorted({r.judge for r in rankings})]))


def study_judge_preferences(study: Study, *, level: float = 0.95) -> dict[str, Any]:
    """The JSON-ready summary of the study's judge rankings against its experts', with the run's counts."""
    rankings = study_judge_rankings(study)
    counts = {status: study_judge_comparisons(study).filter(status=status).count()
              for status in JudgeComparison.Status.values}
    summary = judge_preference_summary(rankings, study_expert_rankings(study), _judges(study, rankings),
                                       level=level)
    return summary | {"counts": counts, "prompt_version": COMPARE_PROMPT_VERSION}
