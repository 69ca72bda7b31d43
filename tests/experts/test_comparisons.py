"""Comparison sets and answers: bad sets refused with nothing saved, random orders recorded, drafts that keep
what was typed, the grader-first rule, and the plain data the preference model reads."""

from __future__ import annotations

import math

import pytest
from django.utils import timezone

from experts import comparison_selectors as csel
from experts.exceptions import ComparisonError, ComparisonIncomplete, ComparisonNotEditable
from experts.models import ComparisonAssignment, ComparisonItem, ComparisonSet, ExpertAssignment
from experts.services.comparisons import (
    PlacementInput,
    comparison_assign,
    comparison_cancel,
    comparison_open,
    comparison_save_draft,
    comparison_set_create,
    comparison_submit,
)
from studies.models import AuditEvent, Episode
from tests.factories import StudyFactory, TaskFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_comparison_world, make_expert
from tests.factories.scenarios import make_episode
from tests.factories.users import UserFactory

pytestmark = pytest.mark.django_db

JUSTIFY = "The first memo answers the client's question; the others miss the deadline table."


@pytest.fixture
def world():
    return make_comparison_world()


@pytest.fixture
def staff():
    return UserFactory(is_staff=True)


def create(world, staff, *, experts=(), episodes=None, runs=None):
    return comparison_set_create(
        study=world["study"], task=world["task"], actor=staff, experts=experts,
        episode_ids=episodes if episodes is not None else [world["with_agent"].pk, world["alone"].pk],
        solo_run_ids=runs if runs is not None else [world["run"].pk])


def test_a_set_holds_one_deliverable_per_arm_and_each_expert_gets_a_recorded_random_order(world, staff):
    experts = [make_expert() for _ in range(6)]
    comparison_set = create(world, staff, experts=experts)
    items = list(comparison_set.items.all())
    assert {(i.episode_id, i.solo_run_id) for i in items} == {
        (world["with_agent"].pk, None), (world["alone"].pk, None), (None, world["run"].pk)}
    orders = []
    for assignment in comparison_set.assignments.all():
        placements = list(assignment.placements.order_by("position"))
        assert [p.position for p in placements] == [1, 2, 3]
        assert sorted(p.item_id for p in placements) == sorted(i.pk for i in items)
        assert assignment.order_probability == pytest.approx(1 / math.factorial(3))
        # The order is the seeded draw, so it can be reproduced from what is stored.
        assert [p.item_id for p in placements] == csel_order(items, assignment.order_seed)
        orders.append(tuple(p.item_id for p in placements))
    assert len(set(orders)) > 1  # six experts, six possible orders: not all the same (probability 1/6**5)


def csel_order(items, seed):
    from experts.services.comparisons import _draw_order
    return _draw_order([i.pk for i in items], seed)


@pytest.mark.parametrize("case, message", [
    ("one", "at least 2"), ("same_episode", "chosen twice"), ("other_task", "same task"),
    ("five", "at most 4"), ("unsubmitted", "has not been submitted"), ("no_files", "no deliverable files")])
def test_bad_sets_are_refused_with_a_clear_error_and_nothing_saved(world, staff, case, message):
    episodes, runs = [world["with_agent"].pk], []
    if case == "same_episode":
        episodes = [world["with_agent"].pk, world["with_agent"].pk]
    elif case == "other_task":
        other = make_episode(task=TaskFactory(), study=world["study"])
        EpisodeFileFactory(episode=other)
        episodes.append(other.pk)
    elif case == "five":
        for _ in range(4):
            extra = make_episode(task=world["task"], study=world["study"])
            EpisodeFileFactory(episode=extra)
            episodes.append(extra.pk)
    elif case == "unsubmitted":
        episodes.append(make_episode(task=world["task"], study=world["study"], status=Episode.Status.IN_PROGRESS).pk)
    elif case == "no_files":
        episodes.append(make_episode(task=world["task"], study=world["study"]).pk)
    with pytest.raises(ComparisonError, match=message):
        create(world, staff, episodes=episodes, runs=runs, experts=[make_expert()])
    assert not ComparisonSet.objects.exists() and not ComparisonItem.objects.exists()
    assert not ComparisonAssignment.objects.exists()


def test_a_deliverable_of_another_study_is_refused(world, staff):
    other = make_episode(task=world["task"], study=StudyFactory())
    EpisodeFileFactory(episode=other)
    with pytest.raises(ComparisonError, match="set's study"):
        create(world, staff, episodes=[world["with_agent"].pk, other.pk], runs=[])


def test_an_expert_who_grades_a_deliverable_is_never_given_the_set(world, staff):
    grader = make_expert()
    ExpertAssignment.objects.create(episode=world["alone"], expert=grader)
    with pytest.raises(ComparisonError, match="never shown to its grader"):
        create(world, staff, experts=[grader])
    assert not ComparisonSet.objects.exists()  # the whole creation rolled back


def test_a_grading_assignment_made_later_hides_an_open_comparison_but_not_a_submitted_one(world, staff):
    expert = make_expert()
    comparison_set = create(world, staff, experts=[expert])
    assignment = comparison_set.assignments.get()
    assert list(csel.expert_comparisons(expert)) == [assignment]
    grading = ExpertAssignment.objects.create(episode=world["with_agent"], expert=expert)
    assert list(csel.expert_comparisons(expert)) == []
    grading.status = ExpertAssignment.Status.CANCELLED
    grading.save()
    comparison_open(assignment=assignment, user=expert.user)
    submit_all(assignment, expert.user)
    ExpertAssignment.objects.create(episode=world["alone"], expert=expert)  # grading after comparing is allowed
    assert list(csel.expert_comparisons(expert)) == [assignment]


def test_an_expert_is_never_given_their_own_work(world, staff):
    expert = make_expert()
    world["with_agent"].participant.user = expert.user
    world["with_agent"].participant.save()
    with pytest.raises(ComparisonError, match="their own work"):
        create(world, staff, experts=[expert])


def test_the_same_expert_twice_is_refused_and_the_first_assignment_kept(world, staff):
    expert = make_expert()
    comparison_set = create(world, staff, experts=[expert])
    with pytest.raises(ComparisonError, match="already has"):
        comparison_assign(comparison_set=comparison_set, expert=expert, actor=staff)
    assert comparison_set.assignments.count() == 1


def answers(ranks, accept="minor"):
    return {pos: PlacementInput(rank=rank, acceptability=accept) for pos, rank in ranks.items()}


def submit_all(assignment, user, ranks=None):
    return comparison_submit(assignment=assignment, user=user, placements=answers(ranks or {1: 1, 2: 2, 3: 2}),
                             justification=JUSTIFY, visible_seconds=0)


def test_an_incomplete_ranking_is_saved_as_a_draft_and_says_what_is_missing(world, staff):
    expert = make_expert()
    assignment = create(world, staff, experts=[expert]).assignments.get()
    comparison_open(assignment=assignment, user=expert.user)
    with pytest.raises(ComparisonIncomplete) as caught:
        comparison_submit(assignment=assignment, user=expert.user,
                          placements={1: PlacementInput(rank=2, acceptability="ready"), 2: PlacementInput(rank=1)},
                          justification="short")
    assert set(caught.value.problems) == {"2", "3", "justification"}
    assert "client" in caught.value.problems["2"] and "a rank" in caught.value.problems["3"]
    assignment.refresh_from_db()
    assert assignment.status == ComparisonAssignment.Status.IN_PROGRESS
    assert assignment.justification == "short"
    saved = {p.position: (p.rank, p.acceptability) for p in assignment.placements.all()}
    assert saved == {1: (2, "ready"), 2: (1, ""), 3: (None, "")}


@pytest.mark.parametrize("given, message", [(PlacementInput(rank=4), r"from 1 \(best\) to 3"),
                                            (PlacementInput(rank=0), r"from 1 \(best\) to 3"),
                                            (PlacementInput(acceptability="fine"), "acceptability scale")])
def test_an_impossible_answer_is_refused_and_the_saved_draft_is_untouched(world, staff, given, message):
    expert = make_expert()
    assignment = create(world, staff, experts=[expert]).assignments.get()
    comparison_open(assignment=assignment, user=expert.user)
    comparison_save_draft(assignment=assignment, user=expert.user, placements=answers({1: 1}),
                          justification="first thoughts")
    with pytest.raises(ComparisonError, match=message):
        comparison_save_draft(assignment=assignment, user=expert.user, placements={2: given}, justification="new")
    assignment.refresh_from_db()
    assert assignment.justification == "first thoughts"
    assert assignment.placements.get(position=1).rank == 1


def test_ties_are_kept_and_submission_is_final_and_audited(world, staff):
    expert = make_expert()
    assignment = create(world, staff, experts=[expert]).assignments.get()
    comparison_open(assignment=assignment, user=expert.user)
    submit_all(assignment, expert.user, ranks={1: 1, 2: 1, 3: 1})
    assignment.refresh_from_db()
    assert assignment.status == ComparisonAssignment.Status.SUBMITTED and assignment.submitted_at
    assert [p.rank for p in assignment.placements.order_by("position")] == [1, 1, 1]
    assert AuditEvent.objects.filter(action="comparison.submit", object_id=str(assignment.pk)).exists()
    with pytest.raises(ComparisonNotEditable, match="already submitted"):
        comparison_save_draft(assignment=assignment, user=expert.user, placements={}, justification="x")


def test_someone_else_cannot_open_or_save_the_comparison(world, staff):
    expert, other = make_expert(), make_expert()
    assignment = create(world, staff, experts=[expert]).assignments.get()
    with pytest.raises(ComparisonNotEditable):
        comparison_open(assignment=assignment, user=other.user)
    comparison_open(assignment=assignment, user=expert.user)
    with pytest.raises(ComparisonNotEditable):
        comparison_save_draft(assignment=assignment, user=other.user, placements={}, justification="x")


def test_a_withdrawn_comparison_refuses_saves_and_a_submitted_one_cannot_be_withdrawn(world, staff):
    first, second = make_expert(), make_expert()
    comparison_set = create(world, staff, experts=[first, second])
    a, b = comparison_set.assignments.order_by("pk")
    comparison_open(assignment=a, user=first.user)
    comparison_cancel(assignment=a, actor=staff)
    with pytest.raises(ComparisonNotEditable, match="withdrawn"):
        comparison_save_draft(assignment=a, user=first.user, placements={}, justification="x")
    comparison_open(assignment=b, user=second.user)
    submit_all(b, second.user)
    with pytest.raises(ComparisonError, match="already submitted"):
        comparison_cancel(assignment=b, actor=staff)


def test_time_spent_adds_visible_seconds_but_never_exceeds_the_wall_time(world, staff):
    expert = make_expert()
    assignment = create(world, staff, experts=[expert]).assignments.get()
    comparison_open(assignment=assignment, user=expert.user)
    ComparisonAssignment.objects.filter(pk=assignment.pk).update(
        opened_at=timezone.now() - timezone.timedelta(seconds=100))
    saved = comparison_save_draft(assignment=assignment, user=expert.user, placements={}, visible_seconds=40)
    assert saved.time_spent_seconds == 40
    saved = comparison_save_draft(assignment=assignment, user=expert.user, placements={}, visible_seconds=500)
    assert 100 <= saved.time_spent_seconds <= 102  # capped by the wall time since opening


def test_the_study_selector_returns_plain_data_in_shown_order_with_arms(world, staff):
    expert = make_expert()
    assignment = create(world, staff, experts=[expert]).assignments.get()
    comparison_open(assignment=assignment, user=expert.user)
    submit_all(assignment, expert.user, ranks={1: 2, 2: 1, 3: 2})
    [row] = csel.study_submitted_comparisons(world["study"])
    assert (row.assignment_id, row.set_id, row.expert_id, row.task_id) == (
        assignment.pk, assignment.comparison_set_id, expert.pk, world["task"].pk)
    placements = list(assignment.placements.select_related("item").order_by("position"))
    assert [d.item_id for d in row.shown] == [p.item_id for p in placements]
    assert [d.rank for d in row.shown] == [2, 1, 2]
    by_arm = {d.arm: d for d in row.shown}
    assert set(by_arm) == {"human_agent", "human_alone", "agent_alone"}
    assert by_arm["human_agent"].episode_id == world["with_agent"].pk
    assert by_arm["human_agent"].agent_id == world["agent"].pk
    assert by_arm["human_agent"].participant_id == world["with_agent"].participant_id
    assert by_arm["human_alone"].agent_id is None and by_arm["human_alone"].episode_id == world["alone"].pk
    assert by_arm["agent_alone"].solo_run_id == world["run"].pk and by_arm["agent_alone"].participant_id is None
    assert by_arm["agent_alone"].size_bytes == len(b"Memo the agent wrote by itself.\n")
    assert by_arm["human_alone"].length_chars is None  # nothing extracted yet: unknown, not zero
    assert all(d.acceptability == "minor" and d.acceptability_code == 3 for d in row.shown)
    assert row.order_probability == pytest.approx(1 / 6) and row.justification == JUSTIFY


def test_raw_pair_counts_count_wins_and_ties_per_arm_pair(world, staff):
    experts = [make_expert(), make_expert()]
    comparison_set = create(world, staff, experts=experts)
    for assignment, expert in zip(comparison_set.assignments.order_by("pk"), experts, strict=True):
        comparison_open(assignment=assignment, user=expert.user)
        # Rank by arm, whatever the shown order: with agent first, then the agent alone and the worker alone tied.
        ranks = {}
        for p in assignment.placements.select_related("item__episode"):
            arm = csel.item_arm(p.item).kind
            ranks[p.position] = 1 if arm == "human_agent" else 2
        submit_all(assignment, expert.user, ranks=ranks)
    counts = {(c.arm_a, c.arm_b): (c.a_wins, c.b_wins, c.ties)
              for c in csel.raw_arm_pair_counts(csel.study_submitted_comparisons(world["study"]))}
    assert counts == {("Claude Code alone", "Worker + Claude Code"): (0, 2, 0),
                      ("Claude Code alone", "Worker alone"): (0, 0, 2),
                      ("Worker + Claude Code", "Worker alone"): (2, 0, 0)}


def test_the_proposal_ticks_one_deliverable_per_arm(world):
    extra = make_episode(task=world["task"], study=world["study"], agent=world["agent"])
    EpisodeFileFactory(episode=extra)
    candidates = csel.comparison_candidates(world["study"], world["task"])
    assert len(candidates) == 4
    assert csel.proposed_candidates(candidates) == {
        ("episode", world["with_agent"].pk), ("episode", world["alone"].pk), ("solo_run", world["run"].pk)}


def _session_only(run) -> None:
    """The run's one file marked a session file: the run then has no deliverable at all."""
    from studies.models import SoloRunFile

    SoloRunFile.objects.filter(run=run).update(kind=SoloRunFile.Kind.LOG)


def test_a_solo_run_whose_only_file_is_a_session_file_has_nothing_to_compare(world, staff):
    _session_only(world["run"])
    assert ("solo_run", world["run"].pk) not in {(c.kind, c.pk) for c in
                                                 csel.comparison_candidates(world["study"], world["task"])}
    with pytest.raises(ComparisonError, match="has no deliverable files"):
        create(world, staff)
    assert not ComparisonSet.objects.exists()
    episodes_only = create(world, staff, runs=[])
    assert episodes_only.items.count() == 2


def test_a_task_whose_solo_run_holds_only_a_session_file_is_not_offered_for_it(staff):
    world = make_comparison_world()
    alone = world["alone"]
    Episode.objects.filter(pk__in=[world["with_agent"].pk, alone.pk]).update(is_simulated=True)
    assert list(csel.tasks_with_deliverables(world["study"])) == [world["task"]]
    _session_only(world["run"])
    assert list(csel.tasks_with_deliverables(world["study"])) == []


def test_session_files_count_in_no_deliverable_size_or_shown_file(world, staff):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from grading.services.solo_runs import SESSION, solo_run_add_files

    comparison_set = create(world, staff, experts=[make_expert()])
    solo_run_add_files(solo_run=world["run"], files=[SimpleUploadedFile("session.txt", b"$ ls\nreport.txt\n" * 50)],
                       actor=None, kind=SESSION)
    sizes = csel.deliverable_sizes(world["study"])
    assert sizes[("solo_run", world["run"].pk)] == len(b"Memo the agent wrote by itself.\n")
    placement = comparison_set.assignments.get().placements.get(item__solo_run=world["run"])
    assert [f.name for f in csel.placement_files(placement)] == ["report.txt"]
