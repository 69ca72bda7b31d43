"""The workflow comparison: how each workflow's attempts are priced, the review share of a solo run, and the page."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from console.economics import EpisodeEconomics, episode_economics
from console.workflows import (
    AGENT_THEN_BY_HAND,
    AGENT_THEN_EXPERT,
    HUMAN_ALONE,
    HUMAN_WITH_AGENT,
    NO_EXPERT_WAGE,
    NO_REVIEW,
    NO_WAGE,
    Attempt,
    episode_attempts,
    solo_run_attempts,
    solo_run_review_seconds,
    workflow_comparison,
)
from experts.models import ComparisonAssignment, ComparisonItem, ComparisonSet
from grading.costs import ENTERED, ESTIMATED, NO_RUN_COST, UsageCost
from grading.models import ModelPrice
from grading.services.solo_runs import SESSION, solo_run_add_files
from studies.models import Episode, Participant, SoloRun
from tests.factories import AgentFactory, SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.episodes import EpisodeFactory
from tests.factories.experts import make_expert, make_solo_run
from tests.factories.participants import ParticipantFactory
from tests.factories.taxonomy import OccupationFactory
from tests.grading.transcripts.conftest import SAMPLES


def _row(**fields) -> EpisodeEconomics:
    base = {"episode_id": 1, "agent": "A", "sector": "S", "task_uuid": "t1", "score": 80.0, "worker_seconds": 1800.0,
            "log_active_seconds": None, "pay": None, "currency": "", "expert_seconds": None, "expert_grades": 0,
            "cost": UsageCost(amount=Decimal("0.40")), "tokens": None, "hourly_wage": Decimal("60")}
    return EpisodeEconomics(**{**base, **fields})


def test_an_episode_with_an_agent_costs_the_worker_s_time_at_the_wage_plus_the_model_cost():
    (attempt,) = episode_attempts([_row()])
    assert attempt.workflow == HUMAN_WITH_AGENT and attempt.cost == Decimal("30.40")


def test_a_solo_episode_costs_the_worker_s_time_only_and_a_missing_part_makes_the_cost_unknown():
    solo, no_wage, no_usage = episode_attempts([
        _row(agent="", condition=Episode.Condition.SOLO, cost=UsageCost(amount=None, reason="no log")),
        _row(hourly_wage=None), _row(cost=UsageCost(amount=None, reason="no uploaded session file"))])
    assert solo.workflow == HUMAN_ALONE and solo.cost == Decimal("30")
    assert no_wage.cost is None and no_wage.reason == NO_WAGE
    assert no_usage.cost is None and no_usage.reason == "no uploaded session file"


def test_the_comparison_puts_human_alone_beside_each_agent_and_estimates_per_sector():
    rows = [_row(task_uuid=f"t{i}", score=s) for i, s in enumerate((80.0, 60.0, 90.0))]
    rows += [_row(agent="", condition=Episode.Condition.SOLO, task_uuid=f"t{i}", score=s)
             for i, s in enumerate((75.0, 65.0, 55.0))]
    found = workflow_comparison(episode_attempts(rows), target=70)
    (agent,) = found["agents"]
    by_workflow = {r["workflow"]: r for r in agent["rows"]}
    # human with agent: 3 attempts at 30.40, 2 reach 70 -> 3 * 30.40 / 2; human alone: 3 * 30 / 1
    assert by_workflow[HUMAN_WITH_AGENT]["estimate"].expected_cost.estimate == pytest.approx(45.6)
    assert by_workflow[HUMAN_ALONE]["estimate"].expected_cost.estimate == pytest.approx(90.0)
    assert by_workflow[AGENT_THEN_EXPERT]["attempts"] == 0
    assert by_workflow[AGENT_THEN_EXPERT]["estimate"].reason == "no attempt has both a score and a known cost"
    assert by_workflow[AGENT_THEN_BY_HAND]["estimate"].reason == "no agent-alone run has both a score and a known cost"
    assert [r["workflow"] for r in agent["rows"]] == [HUMAN_ALONE, AGENT_THEN_EXPERT, AGENT_THEN_BY_HAND,
                                                       HUMAN_WITH_AGENT]
    assert [b["group"] for b in found["sectors"]] == ["S"]


def _attempt(workflow: str, agent: str, sector: str, task: str, score: float, cost: str | None) -> Attempt:
    return Attempt(workflow, agent, sector, task, score, Decimal(cost) if cost is not None else None,
                   "" if cost is not None else "no bill")


def test_a_miss_done_by_hand_costs_the_human_alone_expected_cost_per_agent_and_per_sector():
    attempts = [_attempt(HUMAN_ALONE, "", "S", "t1", 75.0, "30"), _attempt(HUMAN_ALONE, "", "S", "t2", 60.0, "30"),
                _attempt(HUMAN_ALONE, "", "R", "t3", 90.0, "20"),
                _attempt(AGENT_THEN_EXPERT, "A", "S", "t1", 80.0, "4"), _attempt(AGENT_THEN_EXPERT, "A", "S", "t2",
                                                                               50.0, "2"),
                _attempt(AGENT_THEN_EXPERT, "A", "S", "t2", 65.0, None), _attempt(AGENT_THEN_EXPERT, "B", "R", "t3",
                                                                                40.0, "1")]
    found = workflow_comparison(attempts, target=70)

    def row(block):
        return next(r for r in block["rows"] if r["workflow"] == AGENT_THEN_BY_HAND)

    a, b = (row(block) for block in found["agents"])
    # agent A: runs 4 and 2 (the third has no known cost), half miss; every human-alone attempt: 80 / 2 reach
    assert a["attempts"] == 3 and a["unknown"] == [("no bill", 1)] and a["cost_sources"] == {}
    assert a["estimate"].expected_cost.estimate == pytest.approx(3 + 0.5 * 40)
    assert a["estimate"].tasks == 3  # the human-alone attempts bring task t3
    assert row(found["agents"][1])["estimate"].expected_cost.estimate == pytest.approx(1 + 40)
    sector_r, sector_s = (row(block) for block in found["sectors"])
    # sector R: agent B's run misses, the sector's one human-alone attempt reaches at 20
    assert sector_r["estimate"].expected_cost.estimate == pytest.approx(1 + 20)
    assert sector_s["estimate"].expected_cost.estimate == pytest.approx(3 + 0.5 * 60)
    # the existing rows are untouched by the new one
    expert = next(r for r in found["sectors"][1]["rows"] if r["workflow"] == AGENT_THEN_EXPERT)
    assert expert["estimate"].expected_cost.estimate == pytest.approx(6.0)


@pytest.fixture
def reviewed(db):
    """Two tasks, each with a graded solo run shown in a three-deliverable comparison that two experts submitted."""
    study, agent, sector = StudyFactory(), AgentFactory(name="Claude Code"), SectorFactory(name="Finance")
    runs = []
    for index, score in enumerate((82.0, 58.0)):
        task = TaskFactory(sector=sector)
        run = make_solo_run(study=study, task=task, agent=agent)
        SoloRun.objects.filter(pk=run.pk).update(score=score, model_cost_usd=Decimal("0.5"))
        episodes = [EpisodeFactory(participant=ParticipantFactory(study=study), task=task, agent=agent,
                                   status=Episode.Status.GRADED) for _ in range(2)]
        the_set = ComparisonSet.objects.create(study=study, task=task)
        ComparisonItem.objects.create(comparison_set=the_set, solo_run=run)
        for episode in episodes:
            ComparisonItem.objects.create(comparison_set=the_set, episode=episode)
        for seconds, status in ((600, "submitted"), (900, "submitted"), (3000, "in_progress")):
            ComparisonAssignment.objects.create(comparison_set=the_set, expert=make_expert(), order_seed=index,
                                                order_probability=1 / 6, status=status,
                                                time_spent_seconds=seconds)
        runs.append(run)
    return study, runs


def test_a_solo_run_s_review_time_is_its_share_of_the_submitted_comparisons(reviewed):
    study, runs = reviewed
    assert solo_run_review_seconds(study) == {runs[0].pk: 500.0, runs[1].pk: 500.0}  # (600 + 900) / 3


def test_a_solo_run_costs_its_model_cost_plus_its_review_time_at_the_expert_wage(reviewed):
    study, runs = reviewed
    first, second = solo_run_attempts(study, Decimal("90"))
    assert first.workflow == AGENT_THEN_EXPERT and first.cost == Decimal("0.5") + Decimal(500) / 3600 * 90
    found = workflow_comparison([first, second], target=70)
    row = found["agents"][0]["rows"][1]
    assert row["estimate"].expected_cost.estimate == pytest.approx(2 * 13.0)  # two attempts, one reaches 70


def test_a_solo_run_without_cost_review_or_expert_wage_is_unknown_with_its_reason(reviewed):
    study, runs = reviewed
    assert {a.reason for a in solo_run_attempts(study, None)} == {NO_EXPERT_WAGE}
    SoloRun.objects.filter(pk=runs[0].pk).update(model_cost_usd=None)
    ComparisonAssignment.objects.filter(comparison_set__items__solo_run=runs[1]).update(status="cancelled")
    assert [a.reason for a in solo_run_attempts(study, Decimal("90"))] == [NO_RUN_COST, NO_REVIEW]


@pytest.fixture
def staff(client, db):
    client.force_login(UserFactory(username="staff-workflows", roles=["staff"], is_staff=True))
    return client


def _page(client, study, **query):
    response = client.get(reverse("dashboard:costs", args=[study.slug]), query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_compares_the_workflows_at_the_staff_target(staff, reviewed):
    study, runs = reviewed
    occupation = OccupationFactory(hourly_wage_usd=Decimal("60"))
    Participant.objects.filter(study=study).update(occupation=occupation)
    now = timezone.now()
    Episode.objects.filter(study=study).update(started_at=now - timedelta(minutes=30), submitted_at=now, score=75)
    page = _page(staff, study, target="70", expert_wage="90")
    assert 'id="workflow-target"' in page and "Target score 70, expert wage 90 USD per hour" in page
    assert 'data-workflow="agent_then_expert"' in page and "26.00" in page  # 2 × 13.00 per deliverable at 70
    # the episodes have no session file: their model cost is unknown, so that workflow's expected cost too
    assert "Cannot be estimated: no attempt has both a score and a known cost." in page
    assert "no uploaded session file recorded model usage" in page
    # no solo-condition episode: a miss cannot be priced by hand
    assert 'data-workflow="agent_then_by_hand"' in page
    assert ("Cannot be estimated: the human-alone expected cost, which prices a miss done by hand, cannot be "
            "estimated: no attempt has both a score and a known cost.") in page
    assert "Cannot be estimated: no attempt reaches the target score 90" in _page(staff, study, target="90",
                                                                                  expert_wage="90")


def test_the_page_prices_a_run_that_misses_as_done_by_hand(staff, reviewed):
    study, runs = reviewed
    Participant.objects.filter(study=study).update(occupation=OccupationFactory(hourly_wage_usd=Decimal("60")))
    now = timezone.now()
    Episode.objects.filter(study=study).update(started_at=now - timedelta(minutes=30), submitted_at=now, score=75)
    solo = [Episode.objects.filter(study=study, task=run.task).order_by("pk").first().pk for run in runs]
    Episode.objects.filter(pk__in=solo).update(condition=Episode.Condition.SOLO, agent=None)
    page = _page(staff, study, target="70", expert_wage="90")
    # runs at 13.00 each (0.50 + 500 s at 90 USD/h), one of two misses; human alone: 2 × 30.00 / 2 reach = 30.00
    row = page[page.index('<tr data-workflow="agent_then_by_hand">'):]
    row = row[:row.index("</tr>")]
    assert "Agent alone, then expert review; done by hand when it misses" in row
    assert "<td class=\"num\">2 (2, 2)</td>" in row and "78.5" in row  # delivered: (82 + 75) / 2
    assert "28.00 (one task only" not in row and "28.00 [" in row  # 13.00 + 0.5 × 30.00
    assert "a miss done by hand" in page


@pytest.mark.parametrize(("query", "said"), [
    ({"target": "seventy"}, "Enter the target score as a number from 0 to 100"),
    ({"target": "170"}, "Enter a target score from 0 to 100."),
    ({"target": "70", "expert_wage": "-5"}, "Enter an expert wage of 0 or more"),
])
def test_a_bad_target_or_wage_is_refused_next_to_its_field_and_keeps_what_was_typed(staff, reviewed, query, said):
    study, _ = reviewed
    page = _page(staff, study, **query)
    assert said in page and "Nothing was compared: correct the value above." in page
    assert all(f'value="{value}"' in page for value in query.values())


def test_without_a_target_the_page_asks_for_one(staff, reviewed):
    study, _ = reviewed
    assert "Enter a target score to compare the workflows." in _page(staff, study)


def test_the_episode_rows_carry_the_condition_the_self_report_and_the_occupation_wage(reviewed):
    study, _ = reviewed
    occupation = OccupationFactory(hourly_wage_usd=Decimal("42.50"))
    Participant.objects.filter(study=study).update(occupation=occupation)
    Episode.objects.filter(study=study).update(self_reported_minutes=40)
    rows = episode_economics(study)
    assert rows and all(r.hourly_wage == Decimal("42.50") and r.self_reported_minutes == 40 and
                        r.condition == Episode.Condition.WITH_AGENT for r in rows)


def _codex_session(run) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    content = (SAMPLES / "codex_reduced_rollout.jsonl").read_bytes()
    solo_run_add_files(solo_run=run, files=[SimpleUploadedFile("rollout.jsonl", content)], actor=None, kind=SESSION)


@pytest.fixture
def codex_price(db):
    return ModelPrice.objects.create(model="gpt-5", effective_from=date(2020, 1, 1), input_per_million=Decimal("1.25"),
                                     cache_read_per_million=Decimal("0.125"), cache_write_per_million=0,
                                     output_per_million=10, source="provider price page")


def test_a_solo_run_without_an_entered_cost_is_priced_from_its_session_files(reviewed, codex_price):
    study, runs = reviewed
    SoloRun.objects.filter(pk__in=[r.pk for r in runs]).update(model_cost_usd=None)
    _codex_session(runs[0])
    first, second = solo_run_attempts(study, Decimal("90"))
    # 2096 input at $1.25, 1024 cached at $0.125, 212 output at $10 per million (counted in test_usage.py)
    assert first.cost_source == ESTIMATED
    assert first.cost == Decimal("0.004868") + Decimal(500) / 3600 * 90
    assert second.cost is None and second.reason == NO_RUN_COST and second.cost_source == ""


def test_a_staff_entered_cost_wins_over_the_session_files(reviewed, codex_price):
    study, runs = reviewed
    _codex_session(runs[0])
    first, _second = solo_run_attempts(study, Decimal("90"))
    assert first.cost_source == ENTERED and first.cost == Decimal("0.5") + Decimal(500) / 3600 * 90


def test_an_unpriced_model_in_the_session_files_is_unknown_with_its_reason(reviewed):
    study, runs = reviewed
    SoloRun.objects.filter(pk=runs[0].pk).update(model_cost_usd=None)
    _codex_session(runs[0])
    first, _second = solo_run_attempts(study, Decimal("90"))
    assert first.cost is None and "no price in the table" in first.reason and "gpt-5-codex" in first.reason


def test_the_page_says_where_the_solo_runs_model_costs_came_from(staff, reviewed, codex_price):
    study, runs = reviewed
    SoloRun.objects.filter(pk=runs[1].pk).update(model_cost_usd=None)
    _codex_session(runs[1])
    page = _page(staff, study, target="70", expert_wage="90")
    assert ("Model cost of the solo runs: 1 entered by staff (a bill); 1 priced from its session files."
            in page)
