"""Expert rubric drafts: versions, optimistic locking, submission rules, staff review."""

from __future__ import annotations

import pytest

from experts.exceptions import RubricIncomplete, RubricNotEditable, RubricReviewError, StaleRubricEdit
from experts.services.rubric_authoring import (
    CriterionInput,
    draft_rows,
    fill_blank_points,
    rubric_draft_save,
    rubric_draft_start,
    rubric_review_approve,
    rubric_review_reject,
)
from grading.models import Rubric
from grading.selectors import rubric_for_grading
from studies.models import AuditEvent
from tests.factories import SectorFactory, TaskFactory, UserFactory
from tests.factories.experts import make_expert
from tests.factories.grading import FIVE, make_rubric

pytestmark = pytest.mark.django_db


@pytest.fixture
def sector():
    return SectorFactory()


@pytest.fixture
def task(sector):
    return TaskFactory(sector=sector)


@pytest.fixture
def expert(sector):
    return make_expert(sectors=[sector])


def rows(data=FIVE, **override):
    out = [CriterionInput(description=text, label=label, category=category, points=points)
           for category, points, label, text in data]
    for index, changes in override.items():
        for name, value in changes.items():
            setattr(out[int(index[1:])], name, value)
    return out


def test_starting_a_blank_draft_creates_the_next_expert_version(task, expert):
    make_rubric(task, status=Rubric.Status.DRAFT)  # v1, generated
    draft = rubric_draft_start(task=task, author=expert.user)
    assert (draft.version, draft.origin, draft.status, draft.author) == (2, "expert", "draft", expert.user)
    assert draft.criteria.count() == 0


def test_starting_from_the_generated_rubric_copies_it_and_marks_each_copy_as_matching(task, expert):
    auto = make_rubric(task, status=Rubric.Status.DRAFT)
    draft = rubric_draft_start(task=task, author=expert.user, based_on=auto)
    copies = list(draft.criteria.order_by("order"))
    assert [c.description for c in copies] == [c.description for c in auto.criteria.order_by("order")]
    assert [list(c.matches_auto.values_list("key", flat=True)) for c in copies] == [["C1"], ["C2"], ["C3"], ["C4"],
                                                                                     ["C5"]]
    assert draft.based_on == auto


def test_an_expert_cannot_start_a_rubric_outside_their_domains(task):
    outsider = make_expert(sectors=[SectorFactory()])
    with pytest.raises(RubricNotEditable):
        rubric_draft_start(task=task, author=outsider.user)


def test_saving_a_draft_replaces_its_criteria_and_bumps_the_lock(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    saved = rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(), notes="n")
    assert saved.lock_version == 1
    assert saved.criteria.count() == 5
    again = rubric_draft_save(rubric=saved, author=expert.user, lock_version=1, criteria=rows()[:3])
    assert again.lock_version == 2
    assert list(again.criteria.values_list("key", flat=True)) == ["C1", "C2", "C3"]


def test_a_stale_edit_is_refused_and_changes_nothing(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows())
    with pytest.raises(StaleRubricEdit) as caught:
        rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows()[:1])
    assert caught.value.current_lock_version == 1
    draft.refresh_from_db()
    assert draft.lock_version == 1 and draft.criteria.count() == 5


def test_empty_editor_rows_are_dropped_on_save(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    saved = rubric_draft_save(rubric=draft, author=expert.user, lock_version=0,
                              criteria=[*rows(), CriterionInput(description="  ", label="")])
    assert saved.criteria.count() == 5


@pytest.mark.parametrize(("count", "fragment"), [(4, "Add 1 more"), (21, "Merge or remove 1")])
def test_submitting_outside_5_to_20_criteria_is_refused_but_the_draft_is_kept(task, expert, count, fragment):
    data = [("requirements", None, "important", f"Report lists item number {i} of the inventory")
            for i in range(count)]
    draft = rubric_draft_start(task=task, author=expert.user)
    with pytest.raises(RubricIncomplete) as caught:
        rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(data), submit=True)
    assert any(fragment in message for _, message in caught.value.problems)
    draft.refresh_from_db()
    assert draft.status == Rubric.Status.DRAFT
    assert draft.criteria.count() == count


def test_submitting_with_a_missing_label_names_the_row(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    with pytest.raises(RubricIncomplete) as caught:
        rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(r2={"label": ""}),
                          submit=True)
    assert (2, "Choose a label: critical, important, optional or pitfall.") in caught.value.problems
    assert draft_rows(Rubric.objects.get(pk=draft.pk))[2].label == ""


def test_submitting_with_points_that_do_not_add_up_explains_the_category(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    with pytest.raises(RubricIncomplete) as caught:
        rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(r0={"points": 5.0}),
                          submit=True)
    assert any("Correctness & Accuracy" in m and "25" in m for _, m in caught.value.problems)


def test_blank_points_share_the_category_total_equally():
    data = [CriterionInput("a", "critical", "correctness", None), CriterionInput("b", "important", "correctness", None),
            CriterionInput("c", "important", "correctness", None), CriterionInput("d", "optional", "technical", 5.0),
            CriterionInput("e", "optional", "technical", None)]
    points = fill_blank_points(data)
    assert points[:3] == [13.33, 13.33, 13.34]
    assert points[3:] == [5.0, 10.0]


def test_submission_fills_blank_points_and_records_the_submission(task, expert):
    blank = [(c, None, label, text) for c, _, label, text in FIVE]
    draft = rubric_draft_start(task=task, author=expert.user)
    submitted = rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(blank),
                                  submit=True)
    assert submitted.status == Rubric.Status.SUBMITTED
    assert list(submitted.criteria.order_by("order").values_list("points", flat=True)) == [20, 20, 20, 25, 15]
    assert submitted.total_points == pytest.approx(100)
    assert AuditEvent.objects.filter(action="rubric.submit", object_id=str(draft.pk)).exists()


def test_a_submitted_rubric_can_no_longer_change(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    done = rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(), submit=True)
    with pytest.raises(RubricNotEditable):
        rubric_draft_save(rubric=done, author=expert.user, lock_version=done.lock_version, criteria=rows())


def test_another_expert_cannot_edit_a_draft(task, expert, sector):
    draft = rubric_draft_start(task=task, author=expert.user)
    other = make_expert(sectors=[sector])
    with pytest.raises(RubricNotEditable):
        rubric_draft_save(rubric=draft, author=other.user, lock_version=0, criteria=rows())


def test_approval_makes_the_expert_rubric_drive_grading(task, expert):
    make_rubric(task, status=Rubric.Status.DRAFT)  # the generated rubric grading used so far
    draft = rubric_draft_start(task=task, author=expert.user)
    submitted = rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(), submit=True)
    staff = UserFactory(roles=["staff"])
    rubric_review_approve(rubric=submitted, actor=staff, note="Clear and checkable.")
    approved = Rubric.objects.get(pk=draft.pk)
    assert approved.status == Rubric.Status.APPROVED and approved.approved_by == staff
    assert rubric_for_grading(task) == approved
    assert AuditEvent.objects.filter(action="rubric.approved", object_id=str(draft.pk), actor=staff).exists()


def test_an_author_cannot_approve_their_own_rubric(task, sector):
    author = make_expert(sectors=[sector])
    author.user.is_staff = True
    author.user.save()
    draft = rubric_draft_start(task=task, author=author.user)
    submitted = rubric_draft_save(rubric=draft, author=author.user, lock_version=0, criteria=rows(), submit=True)
    with pytest.raises(RubricReviewError, match="another staff member"):
        rubric_review_approve(rubric=submitted, actor=author.user)


def test_sending_back_needs_a_note_and_records_it(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    submitted = rubric_draft_save(rubric=draft, author=expert.user, lock_version=0, criteria=rows(), submit=True)
    staff = UserFactory(roles=["staff"])
    with pytest.raises(RubricReviewError):
        rubric_review_reject(rubric=submitted, actor=staff, note="  ")
    rejected = rubric_review_reject(rubric=submitted, actor=staff, note="C4 is not checkable.")
    assert (rejected.status, rejected.reviewer_note) == (Rubric.Status.REJECTED, "C4 is not checkable.")
    # The expert continues in a new version based on the rejected one.
    again = rubric_draft_start(task=task, author=expert.user, based_on=rejected)
    assert again.version == rejected.version + 1 and again.criteria.count() == 5


def test_only_submitted_rubrics_can_be_reviewed(task, expert):
    draft = rubric_draft_start(task=task, author=expert.user)
    with pytest.raises(RubricReviewError, match="not waiting"):
        rubric_review_approve(rubric=draft, actor=UserFactory(roles=["staff"]))
