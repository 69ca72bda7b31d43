"""An episode's automated score under the study's expert gate.

With the gate enforced, a judge's points for a rubric category count only where the stored verdict for that
(judge, category) passes (`grading.models.JudgeGate`, written by the gate evaluation from the calibration
sample). The score is the sum over categories of the passing judges' mean points -- with every judge passing
that is exactly the panel mean of totals. A category no judge passes cannot be scored automatically: the
episode is then held out of the rating and sent to experts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean

from grading.models import JudgeRun
from grading.selectors import judge_gates
from studies.models import Study


@dataclass(frozen=True)
class GatedScore:
    score: float | None
    left_out: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)


def judge_name(run: JudgeRun) -> str:
    return f"{run.provider}/{run.model}"


def gated_score(*, study: Study, runs: list[JudgeRun]) -> GatedScore | None:
    """Return the gated score of succeeded runs, or ``None`` when the study does not enforce the gate."""
    if study.gate_mode != Study.GateMode.ENFORCE:
        return None
    verdicts = judge_gates(study)
    categories = sorted({category for run in runs for category in run.category_totals})
    points: list[float] = []
    left_out: list[str] = []
    blocked: dict[str, str] = {}
    for category in categories:
        passing = []
        for run in runs:
            verdict = verdicts.get((judge_name(run), category))
            if verdict is not None and verdict.passes:
                passing.append(float(run.category_totals.get(category, 0.0)))
            else:
                left_out.append(f"{judge_name(run)} on {category}")
        if passing:
            points.append(fmean(passing))
        else:
            why = [f"{judge_name(r)}: " + ("; ".join(verdicts[(judge_name(r), category)].reasons)
                                           if (judge_name(r), category) in verdicts else "not evaluated yet")
                   for r in runs]
            blocked[category] = " | ".join(why)
    if blocked:
        return GatedScore(score=None, left_out=left_out, blocked=blocked)
    return GatedScore(score=round(sum(points), 4), left_out=left_out)
