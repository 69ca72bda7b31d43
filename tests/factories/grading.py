"""Rubrics (one builder for every shape the tests need) and judge runs."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import factory

from grading.models import Criterion, JudgeRun, Rubric
from grading.schemas import RUBRIC_CATEGORIES
from tests.factories.episodes import EpisodeFactory

# (category, points, label, description) of one criterion.
Row = tuple[str, float, str, str]

# Five criteria whose points fit the four fixed categories (40 / 20 / 25 / 15).
FIVE: list[Row] = [
    ("correctness", 20.0, "critical", "Workbook total on the Summary sheet equals 1,234,567"),
    ("correctness", 20.0, "important", "Each of the 12 monthly rows shows revenue and cost"),
    ("completeness", 20.0, "important", "Deliverable includes the file summary.xlsx"),
    ("requirements", 25.0, "optional", "Summary sheet includes a chart of monthly revenue"),
    ("technical", 15.0, "pitfall", "Totals contain hard-coded numbers instead of formulas"),
]

# What a generated rubric carries beside its criteria, and the judge prompt shows.
JUDGE_DETAILS = {"evaluation_notes": "Be strict.",
                 "expected_specific_values": [{"item": "Total", "value": "1,234,567"}],
                 "critical_requirements": ["Workbook delivered"]}


def make_rubric(task, *, rows: Sequence[Row] = FIVE, per_category: int | None = None,
                status: str = Rubric.Status.APPROVED, origin: str = Rubric.Origin.AUTO, author=None,
                version: int | None = None, details: dict | None = None) -> Rubric:
    """A rubric version of `task` (its next one unless `version` is given) whose criteria add up, keyed C1..Cn.

    The criteria are `rows`, ordered from 0 (the shape the expert editor saves). With `per_category`, they are
    instead that many criteria for each fixed category, ordered from 1, with expected values and evaluation
    methods, and the details default to JUDGE_DETAILS (the shape rubric generation stores for the judges).
    """
    if version is None:
        version = (task.rubrics.order_by("-version").values_list("version", flat=True).first() or 0) + 1
    if details is None:
        details = copy.deepcopy(JUDGE_DETAILS) if per_category else {}
    rubric = Rubric.objects.create(task=task, version=version, status=status, origin=origin, author=author,
                                   details=details)
    if per_category:
        order = 0
        for code, name, points in RUBRIC_CATEGORIES:
            for i in range(per_category):
                order += 1
                Criterion.objects.create(rubric=rubric, order=order, key=f"C{order}", category=code,
                                         description=f"{name} item {i + 1}", points=points / per_category,
                                         expected_value="as stated", evaluation_method="Compare with the prompt.")
        return rubric
    for order, (category, points, label, text) in enumerate(rows):
        Criterion.objects.create(rubric=rubric, order=order, key=f"C{order + 1}", category=category, points=points,
                                 label=label, description=text)
    return rubric


class JudgeRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JudgeRun

    episode = factory.SubFactory(EpisodeFactory)
    rubric = factory.LazyAttribute(lambda run: make_rubric(run.episode.task))
    provider = "openai"
    model = "gpt-4.1"
    prompt_version = "v1"
    status = JudgeRun.Status.SUCCEEDED
    is_current = True
    total = 72.5
    raw_response = '{"scores": []}'
