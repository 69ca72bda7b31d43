"""Expert grading: drafts, validation, scores, the episode's expert score and the rating hand-off."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from experts.exceptions import ExpertError, GradeIncomplete, GradeNotEditable, NoGradingRubric
from experts.models import ExpertAssignment, ExpertGrade
from experts.services.grading import VerdictInput, grade_open, grade_save_draft, grade_submit
from rating.models import GradeObservation, Observation
from studies.models import AuditEvent, Episode
from tests.factories import SectorFactory, StudyFactory, TaskFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup():
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    rubric = make_rubric(task)
    episode = make_episode(task=task, study=StudyFactory())
    expert = make_expert(sectors=[sector])
    assignment = ExpertAssignment.objects.create(episode=episode, expert=expert)
    criteria = list(rubric.criteria.order_by("order"))
    return episode, expert, assignment, criteria


def verdicts(criteria, *values, feedback="Missing the March row."):
    return {c.pk: VerdictInput(v, feedback if v == "fail" else "") for c, v in zip(criteria, values, strict=True)}


def test_opening_starts_a_draft_against_the_grading_rubric(setup):
    episode, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    assignment.refresh_from_db()
    assert grade.status == ExpertGrade.Status.DRAFT and grade.rubric.criteria.count() == 5
    assert assignment.status == ExpertAssignment.Status.IN_PROGRESS
    assert grade_open(assignment=assignment, user=expert.user) == grade


def test_opening_without_any_rubric_says_so():
    sector = SectorFactory()
    expert = make_expert(sectors=[sector])
    assignment = ExpertAssignment.objects.create(episode=make_episode(sector=sector), expert=expert)
    with pytest.raises(NoGradingRubric):
        grade_open(assignment=assignment, user=expert.user)


def test_someone_elses_assignment_cannot_be_opened_or_saved(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    intruder = make_expert(sectors=[])
    with pytest.raises(GradeNotEditable):
        grade_open(assignment=assignment, user=intruder.user)
    with pytest.raises(GradeNotEditable):
        grade_save_draft(grade=grade, user=intruder.user, verdicts={})


def test_a_draft_keeps_partial_answers_and_typed_feedback(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    grade_save_draft(grade=grade, user=expert.user, overall="revise",
                     verdicts={criteria[0].pk: VerdictInput("pass"), criteria[1].pk: VerdictInput("", "thinking…")})
    saved = {r.criterion_id: (r.verdict, r.feedback) for r in grade.criterion_grades.all()}
    assert saved == {criteria[0].pk: ("pass", ""), criteria[1].pk: ("", "thinking…")}
    grade.refresh_from_db()
    assert grade.overall == "revise"


def test_a_draft_refuses_unknown_verdicts_and_criteria(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    with pytest.raises(ExpertError):
        grade_save_draft(grade=grade, user=expert.user, verdicts={criteria[0].pk: VerdictInput("maybe")})
    with pytest.raises(ExpertError):
        grade_save_draft(grade=grade, user=expert.user, verdicts={999999: VerdictInput("pass")})


def test_submission_needs_every_verdict_and_an_overall_judgement_and_keeps_the_draft(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    partial = verdicts(criteria[:3], "pass", "pass", "skip")
    with pytest.raises(GradeIncomplete) as caught:
        grade_submit(grade=grade, user=expert.user, verdicts=partial)
    assert set(caught.value.problems) == {str(criteria[3].pk), str(criteria[4].pk), "overall"}
    grade.refresh_from_db()
    assert grade.status == ExpertGrade.Status.DRAFT and grade.criterion_grades.count() == 3


@pytest.mark.parametrize("feedback", ["", "   \n"])
def test_a_fail_without_feedback_cannot_be_submitted(setup, feedback):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    answers = verdicts(criteria, "pass", "fail", "pass", "pass", "pass", feedback=feedback)
    with pytest.raises(GradeIncomplete) as caught:
        grade_submit(grade=grade, user=expert.user, verdicts=answers, overall="revise")
    assert caught.value.problems == {str(criteria[1].pk): "C2: say what is wrong. Feedback is required on a fail."}


def test_the_score_is_passed_over_evaluated_and_becomes_the_episode_expert_score(setup, sent_tasks,
                                                                                  django_capture_on_commit_callbacks):
    episode, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    answers = verdicts(criteria, "pass", "fail", "skip", "pass", "pass")  # 3 passed of 4 evaluated
    with django_capture_on_commit_callbacks(execute=True):
        done = grade_submit(grade=grade, user=expert.user, verdicts=answers, overall="revise")
    assert done.score == 75.0 and done.status == ExpertGrade.Status.SUBMITTED and done.submitted_at
    episode.refresh_from_db()
    assert episode.expert_score == 75.0
    assignment.refresh_from_db()
    assert assignment.status == ExpertAssignment.Status.SUBMITTED
    # The ledger row commits with the grade (no message in between); only the debounced refresh is sent.
    observation = Observation.objects.get(episode=episode)
    episode.refresh_from_db()
    assert observation.active and observation.y == episode.score and observation.source == episode.score_source
    assert sent_tasks == [("rating.tasks.refresh_posterior", [episode.study_id])]
    # The expert's grade is also a grade row of the judge-aware rating: an expert has no model family.
    row = GradeObservation.objects.get(episode=episode, grader_kind="expert")
    assert (row.grader, row.grader_family, row.y, row.active) == (f"expert:{expert.pk}", "", 75.0, True)
    event = AuditEvent.objects.get(action="episode.expert_score", object_id=str(episode.pk))
    assert (event.before, event.after) == ({"expert_score": None}, {"expert_score": 75.0})


def test_a_grade_that_skipped_everything_has_no_score(setup):
    episode, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    done = grade_submit(grade=grade, user=expert.user, verdicts=verdicts(criteria, *["skip"] * 5), overall="revise")
    assert done.score is None
    episode.refresh_from_db()
    assert episode.expert_score is None


def test_two_grades_are_averaged_and_an_adjudication_decides(setup, sent_tasks):
    episode, expert, assignment, criteria = setup
    second = ExpertAssignment.objects.create(episode=episode, expert=make_expert(sectors=[episode.task.sector]),
                                             role=ExpertAssignment.Role.SECOND)
    for a, answers in ((assignment, ("pass",) * 5), (second, ("pass", "fail", "fail", "fail", "pass"))):
        grade_submit(grade=grade_open(assignment=a, user=a.expert.user), user=a.expert.user,
                     verdicts=verdicts(criteria, *answers), overall="accept")
    episode.refresh_from_db()
    assert episode.expert_score == pytest.approx((100 + 40) / 2)
    judge = ExpertAssignment.objects.create(episode=episode, expert=make_expert(sectors=[episode.task.sector]),
                                            role=ExpertAssignment.Role.ADJUDICATION)
    grade_submit(grade=grade_open(assignment=judge, user=judge.expert.user), user=judge.expert.user,
                 verdicts=verdicts(criteria, "pass", "pass", "pass", "fail", "pass"), overall="accept")
    episode.refresh_from_db()
    assert episode.expert_score == 80.0


def test_a_gold_grade_never_changes_the_episode_score_or_the_rating(setup, sent_tasks,
        django_capture_on_commit_callbacks):
    episode, expert, assignment, criteria = setup
    assignment.role = ExpertAssignment.Role.GOLD
    assignment.save()
    with django_capture_on_commit_callbacks(execute=True):
        grade_submit(grade=grade_open(assignment=assignment, user=expert.user), user=expert.user,
                     verdicts=verdicts(criteria, *["pass"] * 5), overall="accept")
    episode.refresh_from_db()
    assert episode.expert_score is None and sent_tasks == []


def test_a_submitted_grade_cannot_change(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    grade_submit(grade=grade, user=expert.user, verdicts=verdicts(criteria, *["pass"] * 5), overall="accept")
    with pytest.raises(GradeNotEditable):
        grade_save_draft(grade=grade, user=expert.user, verdicts=verdicts(criteria, *["fail"] * 5))


def test_a_withdrawn_assignment_cannot_be_saved(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    ExpertAssignment.objects.filter(pk=assignment.pk).update(status=ExpertAssignment.Status.CANCELLED)
    with pytest.raises(GradeNotEditable, match="withdrawn"):
        grade_save_draft(grade=grade, user=expert.user, verdicts={})


def test_reported_visible_time_adds_up_but_never_beyond_the_wall_clock(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    opened = timezone.now() - timedelta(seconds=100)
    ExpertGrade.objects.filter(pk=grade.pk).update(started_at=opened)
    grade.refresh_from_db()
    grade_save_draft(grade=grade, user=expert.user, verdicts={}, visible_seconds=40)
    grade_save_draft(grade=grade, user=expert.user, verdicts={}, visible_seconds=30)
    grade.refresh_from_db()
    assert grade.time_spent_seconds == 70
    grade_save_draft(grade=grade, user=expert.user, verdicts={}, visible_seconds=500)
    wall = (timezone.now() - opened).total_seconds()  # the clock's bound, however slow the machine was meanwhile
    grade.refresh_from_db()
    assert 100 <= grade.time_spent_seconds <= math.ceil(wall)


def test_without_a_report_the_time_is_the_wall_clock_since_opening(setup):
    _, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    opened = timezone.now() - timedelta(seconds=300)
    ExpertGrade.objects.filter(pk=grade.pk).update(started_at=opened)
    grade.refresh_from_db()
    grade_save_draft(grade=grade, user=expert.user, verdicts={}, visible_seconds=None)
    wall = (timezone.now() - opened).total_seconds()
    grade.refresh_from_db()
    assert 300 <= grade.time_spent_seconds <= math.ceil(wall)


def test_the_expert_score_does_not_clobber_a_concurrent_auto_score(setup):
    episode, expert, assignment, criteria = setup
    grade = grade_open(assignment=assignment, user=expert.user)
    Episode.objects.filter(pk=episode.pk).update(auto_score=12.5)  # a judge finished meanwhile
    grade_submit(grade=grade, user=expert.user, verdicts=verdicts(criteria, *["pass"] * 5), overall="accept")
    episode.refresh_from_db()
    assert (episode.auto_score, episode.expert_score) == (12.5, 100.0)
