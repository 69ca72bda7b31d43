"""Worker time by timestamps beside the worker's own report, and expert time per grade and per comparison."""

from __future__ import annotations

import statistics
from decimal import Decimal

import pytest
from django.urls import reverse
from statsmodels.stats.weightstats import DescrStatsW

from console.time_reports import ALL, expert_time, time_report_summary
from experts.models import ComparisonAssignment, ComparisonItem, ComparisonSet, ExpertGrade
from grading.costs import UsageCost
from studies.models import Participant
from tests.console.test_workflows import _row
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.experts import ExpertAssignmentFactory, ExpertGradeFactory, make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

STAMPED = [1800.0, 2400.0, 600.0, None]  # seconds
REPORTED = [35, None, 15, 50]  # minutes


def _rows():
    return [_row(episode_id=i, worker_seconds=s, self_reported_minutes=r, cost=UsageCost(amount=Decimal(0)))
            for i, (s, r) in enumerate(zip(STAMPED, REPORTED, strict=True))]


def test_each_measure_has_its_own_median_and_the_difference_is_paired_with_a_t_interval():
    (everything, agent) = time_report_summary(_rows())
    assert everything["group"] == "All episodes" and agent["group"] == "A"
    assert everything["stamped_n"] == 3 and everything["stamped_median"] == statistics.median([30, 40, 10])
    assert everything["reported_n"] == 3 and everything["reported_median"] == statistics.median([35, 15, 50])
    paired = [35 - 30, 15 - 10]  # only the episodes with both measures
    low, high = DescrStatsW(paired).tconfint_mean(alpha=0.05)
    difference = everything["difference"]
    assert difference["n"] == 2 and difference["mean"] == pytest.approx(5.0)
    assert (difference["low"], difference["high"]) == pytest.approx((low, high), abs=1e-12)


def test_without_any_self_report_the_difference_is_empty_not_zero():
    (everything, _) = time_report_summary([_row(self_reported_minutes=None)])
    assert everything["reported_median"] is None and everything["difference"]["mean"] is None


@pytest.fixture
def timed(db):
    """Two submitted grades (7 and 11 minutes) in one sector, three comparisons (10, 14 and a draft) in another."""
    study, grading, comparing = StudyFactory(), SectorFactory(name="Legal"), SectorFactory(name="Finance")
    for minutes in (7, 11):
        episode = make_episode(study=study, sector=grading)
        grade = ExpertGradeFactory(assignment=ExpertAssignmentFactory(episode=episode, expert=make_expert()),
                                   rubric=make_rubric(episode.task, rows=[("correctness", 40.0, "", "Right.")]))
        ExpertGrade.objects.filter(pk=grade.pk).update(status=ExpertGrade.Status.SUBMITTED,
                                                       time_spent_seconds=minutes * 60)
    withdrawn = make_episode(study=study, sector=grading)
    Participant.objects.filter(pk=withdrawn.participant_id).update(status=Participant.Status.WITHDRAWN)
    grade = ExpertGradeFactory(assignment=ExpertAssignmentFactory(episode=withdrawn, expert=make_expert()),
                               rubric=make_rubric(withdrawn.task, rows=[("correctness", 40.0, "", "Right.")]))
    ExpertGrade.objects.filter(pk=grade.pk).update(status=ExpertGrade.Status.SUBMITTED, time_spent_seconds=99 * 60)
    the_set = ComparisonSet.objects.create(study=study, task=TaskFactory(sector=comparing))
    ComparisonItem.objects.create(comparison_set=the_set, episode=make_episode(study=study, task=the_set.task))
    for minutes, status in ((10, "submitted"), (14, "submitted"), (30, "in_progress")):
        ComparisonAssignment.objects.create(comparison_set=the_set, expert=make_expert(), order_seed=1,
                                            order_probability=1.0, status=status, time_spent_seconds=minutes * 60)
    return study


def test_expert_time_is_per_submitted_grade_and_per_submitted_comparison_overall_and_per_sector(timed):
    rows = {r["group"]: r for r in expert_time(timed)}
    assert list(rows) == [ALL, "Finance", "Legal"]
    assert rows[ALL]["grade"]["n"] == 2 and rows[ALL]["grade"]["mean"] == pytest.approx(9.0)
    assert rows[ALL]["comparison"]["n"] == 2 and rows[ALL]["comparison"]["mean"] == pytest.approx(12.0)
    low, high = DescrStatsW([10.0, 14.0]).tconfint_mean(alpha=0.05)
    assert (rows[ALL]["comparison"]["low"], rows[ALL]["comparison"]["high"]) == pytest.approx((low, high))
    assert rows["Legal"]["comparison"]["n"] == 0 and rows["Finance"]["grade"]["n"] == 0


def test_the_page_shows_both_time_measures_and_the_expert_time_per_comparison(timed, client):
    client.force_login(UserFactory(username="staff-times", roles=["staff"], is_staff=True))
    page = client.get(reverse("dashboard:costs", args=[timed.slug])).content.decode()
    assert 'id="time-report-table"' in page and "Self report: median minutes" in page
    assert 'id="expert-time-table"' in page and "Per comparison" in page and "12.0 [" in page
