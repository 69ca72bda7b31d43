"""Rubric generation against the fake provider server, versioning, approval and the grading selector."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone

from grading.exceptions import GradingWaiting, RetryLater, RubricBusy, RubricGenerationFailed, RubricInvalid
from grading.models import Criterion, LLMUsage, Rubric
from grading.prompts import RUBRIC_PROMPT_VERSION
from grading.selectors import rubric_for_grading
from grading.services.rubric_generation import (
    rubric_approve,
    rubric_copy,
    rubric_ensure,
    rubric_generate,
    rubric_validate,
)
from studies.models import AuditEvent, TaskFile
from tests.factories import TaskFactory, UserFactory
from tests.factories.grading import make_rubric
from tests.grading.responders import rubric_dict
from tests.llm_server import ErrorReply, prompt_of

pytestmark = pytest.mark.django_db


def test_generation_stores_a_draft_version_with_keyed_criteria_and_details(llm_server):
    task = TaskFactory()
    rubric = rubric_generate(task=task)
    assert (rubric.version, rubric.status, rubric.origin) == (1, Rubric.Status.DRAFT, Rubric.Origin.AUTO)
    assert rubric.generator_model == "gpt-4.1" and rubric.prompt_version == RUBRIC_PROMPT_VERSION
    criteria = list(rubric.criteria.order_by("order"))
    assert [c.key for c in criteria] == [f"C{i}" for i in range(1, 9)]
    assert [c.category for c in criteria[::2]] == ["correctness", "completeness", "requirements", "technical"]
    assert sum(c.points for c in criteria) == 100
    assert criteria[0].label == "critical" and criteria[0].expected_value == "value 1"
    assert rubric.details["expected_specific_values"] == [{"item": "Grand total", "value": "1,234,567"}]
    assert rubric.details["critical_requirements"] == ["The deliverable is an Excel workbook."]
    assert rubric_validate(rubric) == []
    usage = LLMUsage.objects.get()
    assert (usage.purpose, usage.provider, usage.model, usage.succeeded) == ("rubric", "openai", "gpt-4.1", True)
    assert usage.cost_usd > 0 and usage.prompt_version == RUBRIC_PROMPT_VERSION
    assert AuditEvent.objects.filter(action="rubric.generated", object_id=str(rubric.pk)).exists()


def test_the_generator_reads_the_prompt_reference_files_and_evaluator_info(llm_server):
    task = TaskFactory(prompt="Build the Q3 budget.", hidden_info="GOLD: total 1,234,567")
    ref = TaskFile(task=task, kind=TaskFile.Kind.REFERENCE, name="inputs.csv")
    ref.file.save("inputs.csv", ContentFile(b"region,amount\nNorth,1000\n"), save=False)
    ref.save()
    rubric_generate(task=task)
    system, user = prompt_of(llm_server.requests_for("openai")[0].body)
    assert "Build the Q3 budget." in user and "| North | 1000 |" in user and "GOLD: total 1,234,567" in user
    assert '"Technical Quality": 15 points' in system


def test_an_invalid_rubric_is_repaired_by_feeding_the_errors_back(llm_server):
    bad = rubric_dict()
    bad["categories"] = bad["categories"][:3]
    llm_server.enqueue("openai", json.dumps(bad))
    rubric = rubric_generate(task=TaskFactory())
    assert rubric.status == Rubric.Status.DRAFT
    requests = llm_server.requests_for("openai")
    assert len(requests) == 2
    assert "exactly four" in prompt_of(requests[1].body)[1]
    assert list(LLMUsage.objects.order_by("pk").values_list("succeeded", flat=True)) == [False, True]


def test_malformed_json_is_repaired(llm_server):
    llm_server.enqueue("openai", "Here is the rubric: {not json")
    assert rubric_generate(task=TaskFactory()).status == Rubric.Status.DRAFT
    assert len(llm_server.requests_for("openai")) == 2


def test_a_rubric_that_stays_invalid_fails_with_the_reason_after_bounded_repairs(llm_server):
    bad = rubric_dict()
    bad["categories"][0]["criteria"][0]["points"] = 1
    llm_server.enqueue("openai", *[json.dumps(bad)] * 3)
    task = TaskFactory()
    with pytest.raises(RubricGenerationFailed) as caught:
        rubric_generate(task=task)
    rubric = task.rubrics.get()
    assert rubric.status == Rubric.Status.FAILED
    assert "Correctness & Accuracy" in rubric.failure_reason and "must add up" in rubric.failure_reason
    assert caught.value.reason == rubric.failure_reason
    assert len(llm_server.requests_for("openai")) == 3  # one ask + RUBRIC_REPAIR_ATTEMPTS (2)
    assert rubric_for_grading(task) is None


def test_provider_errors_after_the_client_retries_fail_the_version_and_ask_for_a_later_retry(llm_server):
    llm_server.default_responder = lambda body: ErrorReply(503, "overloaded")
    task = TaskFactory()
    with pytest.raises(RetryLater):
        rubric_generate(task=task)
    assert "HTTP 503" in task.rubrics.get().failure_reason


def test_without_a_generator_key_generation_waits_and_creates_nothing(no_llm_keys):
    task = TaskFactory()
    with pytest.raises(GradingWaiting) as caught:
        rubric_generate(task=task)
    assert "OPENAI_API_KEY" in caught.value.reason
    assert not task.rubrics.exists()


def test_a_second_worker_is_told_to_retry_while_a_rubric_is_being_generated(llm_server):
    task = TaskFactory()
    Rubric.objects.create(task=task, version=1, status=Rubric.Status.GENERATING,
                          lease_expires_at=timezone.now() + timedelta(seconds=60))
    with pytest.raises(RubricBusy):
        rubric_ensure(task=task)
    assert llm_server.requests == []


def test_a_generation_left_behind_by_a_dead_worker_is_retired(llm_server):
    task = TaskFactory()
    stuck = Rubric.objects.create(task=task, version=1, status=Rubric.Status.GENERATING,
                                  lease_expires_at=timezone.now() - timedelta(seconds=1))
    rubric = rubric_ensure(task=task)
    stuck.refresh_from_db()
    assert stuck.status == Rubric.Status.FAILED and "interrupted" in stuck.failure_reason
    assert rubric.version == 2 and rubric.status == Rubric.Status.DRAFT


def test_grading_uses_the_latest_approved_rubric_else_the_latest_auto_draft():
    task = TaskFactory()
    assert rubric_for_grading(task) is None
    auto = make_rubric(task, per_category=2, status=Rubric.Status.DRAFT, origin=Rubric.Origin.AUTO)
    make_rubric(task, per_category=2, status=Rubric.Status.DRAFT, origin=Rubric.Origin.EXPERT)  # unapproved human edit
    assert rubric_for_grading(task) == auto
    approved = make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    make_rubric(task, per_category=2, status=Rubric.Status.FAILED, origin=Rubric.Origin.AUTO)
    assert rubric_for_grading(task) == approved


def test_rubric_ensure_reuses_an_existing_rubric_without_calling_out(llm_server):
    task = TaskFactory()
    rubric = make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    assert rubric_ensure(task=task) == rubric
    assert llm_server.requests == []


def test_approval_refuses_criteria_that_do_not_add_up():
    rubric = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT, status=Rubric.Status.DRAFT)
    Criterion.objects.filter(rubric=rubric, key="C1").update(points=5)
    with pytest.raises(RubricInvalid) as caught:
        rubric_approve(rubric=rubric, actor=None)
    assert "Correctness & Accuracy" in caught.value.reason
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.DRAFT


def test_approval_records_who_approved_and_audits_it():
    staff = UserFactory(roles=["staff"])
    rubric = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT, status=Rubric.Status.DRAFT)
    rubric_approve(rubric=rubric, actor=staff, note="checked against the gold file")
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.APPROVED and rubric.approved_by == staff and rubric.approved_at
    event = AuditEvent.objects.get(action="rubric.approved")
    assert event.actor == staff and event.before == {"status": "draft"}


def test_an_editable_copy_is_a_new_version_not_used_until_approved():
    staff = UserFactory(roles=["staff"])
    task = TaskFactory()
    original = make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    copy = rubric_copy(rubric=original, actor=staff)
    assert (copy.version, copy.status, copy.origin, copy.based_on) == (2, "draft", "expert", original)
    assert copy.criteria.count() == original.criteria.count()
    assert rubric_for_grading(task) == original
    rubric_approve(rubric=copy, actor=staff)
    assert rubric_for_grading(task) == copy
