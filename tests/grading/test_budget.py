"""The per-study LLM budget: spend is summed from every call, and a reached cap stops new calls visibly."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from grading.exceptions import BudgetBusy, BudgetExhausted
from grading.models import JudgeRun, LLMUsage, Rubric
from grading.selectors import studies_over_budget, study_llm_spend
from grading.services.budget import budget_ensure_available, budget_reserve
from grading.services.pipeline import episode_grade
from studies.models import Episode
from tests.factories import StudyFactory, TaskFactory, UserFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode

pytestmark = pytest.mark.django_db


def spend(study, amount: str, purpose: str = "judge") -> None:
    LLMUsage.objects.create(study=study, purpose=purpose, provider="openai", model="gpt-4.1",
                            cost_usd=Decimal(amount))


def test_spend_adds_up_every_purpose_for_that_study_only():
    study, other = StudyFactory(), StudyFactory()
    spend(study, "0.50", "rubric")
    spend(study, "1.25", "judge")
    spend(study, "0.25", "fluency")
    spend(other, "9.00")
    assert study_llm_spend(study) == Decimal("2.00")
    assert study_llm_spend(StudyFactory()) == Decimal("0")


def test_a_study_without_a_cap_is_never_over_budget():
    study = StudyFactory(llm_budget_usd=None)
    spend(study, "1000")
    budget_ensure_available(study=study)
    assert studies_over_budget() == []


def test_reaching_the_cap_exactly_counts_as_exhausted():
    study = StudyFactory(llm_budget_usd=Decimal("2.00"))
    spend(study, "1.99")
    budget_ensure_available(study=study)
    assert studies_over_budget() == []
    spend(study, "0.01")
    with pytest.raises(BudgetExhausted, match=r"spent \$2.00 of its \$2.00 cap"):
        budget_ensure_available(study=study)
    assert studies_over_budget() == [(study, Decimal("2.000000"))]


def test_the_budget_cap_stops_new_grading_with_a_visible_note(llm_server, sent_tasks, settings,
                                                              django_capture_on_commit_callbacks):
    settings.GRADING = {**settings.GRADING, "PRICES": {"gpt-4.1": [20, 80], "claude-sonnet-4-6": [30, 150]}}
    study = StudyFactory(llm_budget_usd=Decimal("0.05"))
    task = TaskFactory()
    make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    first = submitted_episode(study=study, task=task)
    with django_capture_on_commit_callbacks(execute=True):
        assert episode_grade(episode_id=first.pk).status == "graded"
    assert study_llm_spend(study) >= Decimal("0.05")  # two judges on a ~1,200-token prompt
    calls = len(llm_server.requests)
    second = submitted_episode(study=study, task=task)
    outcome = episode_grade(episode_id=second.pk)
    second.refresh_from_db()
    assert outcome.status == "waiting"
    assert second.status == Episode.Status.SUBMITTED
    assert second.grading_note.startswith("LLM budget reached: this study has spent $")
    assert set(JudgeRun.objects.filter(episode=second).values_list("status", flat=True)) == {"waiting"}
    assert len(llm_server.requests) == calls


def test_raising_the_cap_lets_waiting_episodes_be_graded(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    study = StudyFactory(llm_budget_usd=Decimal("0.00"))
    episode = submitted_episode(study=study)
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    assert episode_grade(episode_id=episode.pk).status == "waiting"
    study.llm_budget_usd = Decimal("5.00")
    study.save()
    with django_capture_on_commit_callbacks(execute=True):
        assert episode_grade(episode_id=episode.pk).status == "graded"


def test_the_budget_also_stops_rubric_generation(llm_server):
    study = StudyFactory(llm_budget_usd=Decimal("0.00"))
    episode = submitted_episode(study=study)
    assert episode_grade(episode_id=episode.pk).status == "waiting"
    assert llm_server.requests == [] and not episode.task.rubrics.exists()


def test_the_grading_admin_warns_about_studies_over_budget(client):
    study = StudyFactory(name="Pilot study", llm_budget_usd=Decimal("1.00"))
    spend(study, "1.50")
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    response = client.get("/admin/grading/judgerun/")
    text = response.content.decode()
    assert response.status_code == 200
    assert "LLM budget reached for “Pilot study”: $1.50 of $1.00" in text


def test_a_reservation_holds_the_budget_until_settled_and_lapses_with_its_workers_lease():
    study = StudyFactory(llm_budget_usd=Decimal("1.00"))
    episode = submitted_episode(study=study)
    rubric = make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    live = timezone.now() + timedelta(seconds=60)
    first, second = (JudgeRun.objects.create(episode=episode, rubric=rubric, provider="openai", model=model,
                                             prompt_version="v1", status=JudgeRun.Status.RUNNING,
                                             lease_expires_at=live) for model in ("m1", "m2"))
    assert budget_reserve(study=study, amounts={first.pk: Decimal("2.00")}) == [first.pk]
    with pytest.raises(BudgetBusy, match=r"reserved by judge calls in flight"):
        budget_reserve(study=study, amounts={second.pk: Decimal("0.01")})
    second.refresh_from_db()
    assert second.reserved_usd is None  # a refused reservation leaves nothing behind
    JudgeRun.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))  # died
    assert budget_reserve(study=study, amounts={second.pk: Decimal("0.01")}) == [second.pk]
    spend(study, "1.00")
    with pytest.raises(BudgetExhausted):
        budget_reserve(study=study, amounts={first.pk: Decimal("0.01")})
