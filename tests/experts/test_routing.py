"""Routing episodes to experts: domain, load balance, double grading, gold copies, adjudication, re-attempts."""

from __future__ import annotations

import pytest

from experts.exceptions import NoGradingRubric, RoutingError
from experts.models import ExpertAssignment, ExpertGrade
from experts.services.grading import VerdictInput, grade_open, grade_submit
from experts.services.routing import (
    adjudication_request,
    assignment_cancel,
    episode_route,
    episode_route_reattempt,
    episodes_route_pending,
    gold_plant,
    routable_episodes,
    study_set_double_grading_share,
    wants_second_grade,
)
from grading.models import Extraction, Rubric
from studies.models import Episode, Participant
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def sector():
    return SectorFactory()


@pytest.fixture
def study():
    return StudyFactory(double_grading_share=0.0)


def _grade(assignment, verdict="pass", overall="accept"):
    grade = grade_open(assignment=assignment, user=assignment.expert.user)
    verdicts = {c.pk: VerdictInput(verdict, "not met" if verdict == "fail" else "")
                for c in grade.rubric.criteria.all()}
    return grade_submit(grade=grade, user=assignment.expert.user, verdicts=verdicts, overall=overall)


def test_an_episode_goes_to_the_least_loaded_expert_of_its_sector(sector, study):
    busy, free = make_expert(sectors=[sector]), make_expert(sectors=[sector])
    make_expert(sectors=[SectorFactory()])  # another domain: never chosen
    for _ in range(2):
        ExpertAssignment.objects.create(episode=make_episode(sector=sector, study=study), expert=busy)
    episode = make_episode(sector=sector, study=study)
    [assignment] = episode_route(episode=episode)
    assert (assignment.expert, assignment.role) == (free, ExpertAssignment.Role.PRIMARY)


def test_routing_is_idempotent(sector, study):
    make_expert(sectors=[sector])
    episode = make_episode(sector=sector, study=study)
    assert len(episode_route(episode=episode)) == 1
    assert episode_route(episode=episode) == []
    assert episode.expert_assignments.count() == 1


def test_an_expert_never_grades_their_own_work(sector, study):
    worker_expert = make_expert(sectors=[sector])
    other = make_expert(sectors=[sector])
    participant = Participant.objects.create(study=study, user=worker_expert.user)
    episode = make_episode(sector=sector, participant=participant)
    for _ in range(3):  # make the worker the least loaded, so only the conflict rule can skip them
        ExpertAssignment.objects.create(episode=make_episode(sector=sector, study=study), expert=other)
    [assignment] = episode_route(episode=episode)
    assert assignment.expert == other


def test_flagged_episodes_are_routed_first_and_ungraded_ones_wait(sector, study):
    make_expert(sectors=[sector])
    graded = make_episode(sector=sector, study=study)
    flagged = make_episode(sector=sector, study=study, status=Episode.Status.SUBMITTED, needs_expert_review=True)
    make_episode(sector=sector, study=study, status=Episode.Status.SUBMITTED)  # not graded, not flagged
    assert list(routable_episodes(study)) == [flagged, graded]


def test_a_second_independent_grader_is_added_when_drawn(sector):
    study = StudyFactory(double_grading_share=1.0)
    first, second = make_expert(sectors=[sector]), make_expert(sectors=[sector])
    episode = make_episode(sector=sector, study=study)
    created = episode_route(episode=episode)
    assert {a.role for a in created} == {ExpertAssignment.Role.PRIMARY, ExpertAssignment.Role.SECOND}
    assert {a.expert for a in created} == {first, second}


def test_the_double_grading_draw_is_reproducible_and_meets_the_share():
    draws = [wants_second_grade(share=0.2, episode_id=i) for i in range(1, 4001)]
    assert draws == [wants_second_grade(share=0.2, episode_id=i) for i in range(1, 4001)]
    assert 0.18 < sum(draws) / len(draws) < 0.22
    assert not any(wants_second_grade(share=0.0, episode_id=i) for i in range(100))


def test_route_pending_reports_episodes_without_an_expert(sector, study):
    episode = make_episode(sector=sector, study=study)
    report = episodes_route_pending(study=study)
    assert report.without_expert == [episode.pk] and report.episodes_routed == 0
    make_expert(sectors=[sector])
    assert episodes_route_pending(study=study).episodes_routed == 1


def test_paused_experts_get_no_work(sector, study):
    make_expert(sectors=[sector], active=False)
    assert episode_route(episode=make_episode(sector=sector, study=study)) == []


def test_withdrawing_a_primary_returns_the_episode_to_the_backlog(sector, study):
    make_expert(sectors=[sector])
    episode = make_episode(sector=sector, study=study)
    [assignment] = episode_route(episode=episode)
    assert episode not in routable_episodes(study)
    assignment_cancel(assignment=assignment, actor=UserFactory(roles=["staff"]))
    assert episode in routable_episodes(study)


def test_the_double_grading_share_is_validated_and_audited(study):
    staff = UserFactory(roles=["staff"])
    with pytest.raises(RoutingError):
        study_set_double_grading_share(study=study, share=1.5, actor=staff)
    assert study_set_double_grading_share(study=study, share=0.3, actor=staff).double_grading_share == 0.3


# --------------------------------------------------------------------------------------------- gold


def test_gold_plant_queues_a_blind_copy_with_pinned_rubric(sector, study):
    task = TaskFactory(sector=sector)
    rubric = make_rubric(task)
    source = make_episode(task=task, study=study, expert_score=80.0)
    EpisodeFileFactory(episode=source, csv=True)
    Extraction.objects.create(episode=source, content={"version": 1, "truncated": False, "total_chars": 3,
                                                       "parts": []})
    expert = make_expert(sectors=[sector])
    copy = gold_plant(source=source, answers={"C1": "pass", "C3": "fail"}, experts=[expert],
                      actor=UserFactory(roles=["staff"]))
    assert copy.is_gold and copy.gold_verdicts == {"C1": "pass", "C3": "fail"}
    assert (copy.task, copy.agent, copy.study) == (source.task, source.agent, source.study)
    assert copy.participant != source.participant and copy.participant.user is None
    assert copy.files.get().file.read() == source.files.get().file.read()
    assert Extraction.objects.filter(episode=copy).exists()
    [assignment] = copy.expert_assignments.all()
    assert assignment.role == ExpertAssignment.Role.GOLD
    assert assignment.grade.rubric == rubric and assignment.grade.status == ExpertGrade.Status.DRAFT
    assert copy not in routable_episodes()


def test_gold_plant_refuses_unknown_keys_and_experts_who_saw_the_original(sector, study):
    task = TaskFactory(sector=sector)
    make_rubric(task)
    source = make_episode(task=task, study=study)
    seen = make_expert(sectors=[sector])
    ExpertAssignment.objects.create(episode=source, expert=seen)
    staff = UserFactory(roles=["staff"])
    with pytest.raises(RoutingError, match="C9"):
        gold_plant(source=source, answers={"C9": "pass"}, experts=[make_expert(sectors=[sector])], actor=staff)
    with pytest.raises(RoutingError, match="blind"):
        gold_plant(source=source, answers={"C1": "pass"}, experts=[seen], actor=staff)
    with pytest.raises(RoutingError, match="sector"):
        gold_plant(source=source, answers={"C1": "pass"}, experts=[make_expert(sectors=[SectorFactory()])],
                   actor=staff)


def test_gold_plant_needs_a_rubric(sector, study):
    source = make_episode(sector=sector, study=study)
    with pytest.raises(NoGradingRubric):
        gold_plant(source=source, answers={"C1": "pass"}, experts=[make_expert(sectors=[sector])],
                   actor=UserFactory(roles=["staff"]))


# ----------------------------------------------------------------------------------- adjudication


def _double_graded(sector, study):
    task = TaskFactory(sector=sector)
    make_rubric(task)
    episode = make_episode(task=task, study=study)
    a, b = make_expert(sectors=[sector]), make_expert(sectors=[sector])
    first = ExpertAssignment.objects.create(episode=episode, expert=a, role=ExpertAssignment.Role.PRIMARY)
    second = ExpertAssignment.objects.create(episode=episode, expert=b, role=ExpertAssignment.Role.SECOND)
    return episode, first, second


def test_adjudication_needs_two_submitted_grades(sector, study):
    episode, first, second = _double_graded(sector, study)
    staff = UserFactory(roles=["staff"])
    _grade(first)
    with pytest.raises(RoutingError, match="two submitted"):
        adjudication_request(episode=episode, actor=staff)
    _grade(second, verdict="fail", overall="reject")
    assignment = adjudication_request(episode=episode, actor=staff)
    assert assignment.role == ExpertAssignment.Role.ADJUDICATION
    assert assignment.expert.user == staff and assignment.expert.sectors.count() == 0
    with pytest.raises(RoutingError, match="already"):
        adjudication_request(episode=episode, actor=staff)


def test_an_adjudicator_must_be_a_third_person(sector, study):
    episode, first, second = _double_graded(sector, study)
    _grade(first)
    _grade(second)
    with pytest.raises(RoutingError, match="third"):
        adjudication_request(episode=episode, actor=UserFactory(roles=["staff"]), adjudicator=first.expert)


def test_a_reattempt_is_graded_as_the_next_attempt_against_the_same_rubric(sector, study):
    task = TaskFactory(sector=sector)
    old = make_rubric(task)
    episode = make_episode(task=task, study=study)
    make_expert(sectors=[sector])
    [first] = episode_route(episode=episode)
    _grade(first, verdict="fail", overall="revise")
    make_rubric(task)  # a newer approved rubric must not change what attempt 2 is graded against
    make_expert(sectors=[sector])
    assignment = episode_route_reattempt(episode=episode, actor=UserFactory(roles=["staff"]))
    assert assignment.expert != first.expert
    assert (assignment.grade.attempt, assignment.grade.rubric) == (2, old)


def test_a_reattempt_needs_an_earlier_grade(sector, study):
    episode = make_episode(sector=sector, study=study)
    with pytest.raises(RoutingError):
        episode_route_reattempt(episode=episode, actor=UserFactory(roles=["staff"]))


def test_rubric_statuses_other_than_approved_do_not_block_routing(sector, study):
    task = TaskFactory(sector=sector)
    make_rubric(task, status=Rubric.Status.DRAFT)
    make_expert(sectors=[sector])
    assert len(episode_route(episode=make_episode(task=task, study=study))) == 1


def test_the_periodic_routing_task_assigns_waiting_episodes(sector, study):
    from experts.tasks import route_expert_reviews

    expert = make_expert(sectors=[sector])
    episode = make_episode(sector=sector, study=study)
    result = route_expert_reviews()
    assert result["episodes_routed"] >= 1
    assert episode.expert_assignments.get().expert == expert


def test_simulated_episodes_are_never_routed_to_experts(sector, study):
    make_expert(sectors=[sector])
    episode = make_episode(sector=sector, study=study)
    Episode.objects.filter(pk=episode.pk).update(is_simulated=True)
    assert episode not in routable_episodes(study)
    assert episodes_route_pending(study=study).episodes_routed == 0
