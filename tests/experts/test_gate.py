"""The expert gate from stored grades: verdicts per judge and category, the calibration sample, bad inputs."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from experts import selectors as sel
from experts.exceptions import ExpertError
from experts.models import ExpertCriterionGrade
from experts.services.gate import study_gate_evaluate
from experts.services.routing import routable_episodes
from experts.services.score_source import study_set_score_source
from experts.task_names import EVALUATE_EXPERT_GATE
from grading.models import CriterionScore, JudgeGate, JudgeRun
from grading.services.calibration import calibration_draw_value, episode_calibration_draw
from grading.services.gated_score import gated_score
from rating.expert_gate import NOT_ENOUGH, quadratic_weighted_kappa
from studies.models import Study
from tests.factories import AgentFactory, StudyFactory, TaskFactory
from tests.factories.experts import ExpertGradeFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db

FAIR, LENIENT = ("openai", "gpt-4.1"), ("anthropic", "claude-sonnet-4-6")


def _judges(*specs: tuple[str, str]) -> list[dict]:
    return [{"provider": p, "model": m} for p, m in specs]


def co_graded(study, task, rubric, agent, *, verdicts: list[str], judges: dict[tuple[str, str], list[float]],
              sampled: bool = True, probability: float = 1.0, expert_grade: bool = True):
    """An episode of `agent` that judges scored (earned share per criterion) and, optionally, an expert graded."""
    episode = make_episode(study=study, task=task, agent=agent, in_calibration_sample=sampled,
                           calibration_probability=probability)
    criteria = list(rubric.criteria.order_by("order"))
    for (provider, model), shares in judges.items():
        totals: dict[str, float] = {}
        run = JudgeRun.objects.create(episode=episode, rubric=rubric, provider=provider, model=model,
                                      prompt_version="v1", status=JudgeRun.Status.SUCCEEDED, is_current=True)
        for criterion, share in zip(criteria, shares, strict=True):
            CriterionScore.objects.create(judge_run=run, criterion=criterion, earned=share * criterion.points)
            totals[criterion.category] = totals.get(criterion.category, 0.0) + share * criterion.points
        run.category_totals, run.total = totals, sum(totals.values())
        run.save(update_fields=["category_totals", "total"])
    if expert_grade:
        grade = ExpertGradeFactory(assignment__episode=episode, rubric=rubric, submitted_at=timezone.now())
        for criterion, verdict in zip(criteria, verdicts, strict=True):
            ExpertCriterionGrade.objects.create(grade=grade, criterion=criterion, verdict=verdict)
    return episode


@pytest.fixture
def design():
    study = StudyFactory(judges=_judges(FAIR, LENIENT), gate_min_episodes=8, gate_min_agreement=0.3,
                         gate_max_bias=10.0)
    task = TaskFactory(studies=[study])
    rubric = make_rubric(task)  # five criteria: correctness ×2, completeness, requirements, technical
    agents = [AgentFactory(name="Claude Code", family="anthropic"), AgentFactory(name="Codex", family="openai")]
    return study, task, rubric, agents


def _populate(study, task, rubric, agents, n=24, seed=1, judges=(FAIR, LENIENT)):
    rng = np.random.default_rng(seed)
    for i in range(n):
        verdicts = list(rng.choice(["pass", "fail"], 5))
        truth = np.array([1.0 if v == "pass" else 0.0 for v in verdicts])
        fair = np.clip(truth + rng.normal(0, 0.1, 5), 0, 1)
        lenient = fair.copy()
        lenient[4] = 1.0  # always gives full technical-quality points
        shares = {FAIR: list(fair), LENIENT: list(lenient)}
        co_graded(study, task, rubric, agents[i % 2], verdicts=verdicts,
                  judges={j: shares[j] for j in judges}, probability=0.5 if i % 3 else 1.0)


def test_the_stored_agreement_is_the_weighted_statistic_of_the_co_graded_items(design):
    study, task, rubric, agents = design
    _populate(study, task, rubric, agents)
    study_gate_evaluate(study_id=study.pk)
    items = [i for i in sel.calibration_co_graded_items(study) if i.judge == "openai/gpt-4.1"
             and i.category == "correctness"]
    row = JudgeGate.objects.get(study=study, judge="openai/gpt-4.1", category="correctness")
    expected = quadratic_weighted_kappa([i.judge_share for i in items], [i.expert_share for i in items],
                                        [i.weight for i in items])
    assert row.agreement == pytest.approx(expected)
    assert {i.weight for i in items} == {1.0, 2.0}
    assert row.n_episodes == 24 and row.n_items == 48
    assert row.passes and row.agreement_low <= row.agreement <= row.agreement_high


def test_a_judge_that_is_lenient_on_one_category_fails_only_there_and_says_why(design):
    study, task, rubric, agents = design
    _populate(study, task, rubric, agents)
    study_gate_evaluate(study_id=study.pk)
    lenient = {g.category: g for g in JudgeGate.objects.filter(study=study, judge="anthropic/claude-sonnet-4-6")}
    assert not lenient["technical"].passes
    assert any(r.startswith("biased: +") for r in lenient["technical"].reasons)
    assert lenient["technical"].bias > 10
    assert all(lenient[c].passes for c in ("correctness", "completeness", "requirements"))


def test_a_judge_without_overlap_is_not_enough_and_nothing_is_invented(design):
    study, task, rubric, agents = design
    study.judges = _judges(FAIR, LENIENT, ("openai", "gpt-5"))
    study.save()
    _populate(study, task, rubric, agents)
    study_gate_evaluate(study_id=study.pk)
    rows = JudgeGate.objects.filter(study=study, judge="openai/gpt-5")
    assert rows.count() == 4
    for row in rows:
        assert not row.passes and row.reasons[0].startswith(NOT_ENOUGH)
        assert (row.n_episodes, row.agreement, row.agreement_low, row.bias, row.bias_low) == (0, None, None, None, None)
        assert row.more_for_bias_width is None


def test_expert_grades_outside_the_calibration_sample_are_not_used(design):
    study, task, rubric, agents = design
    _populate(study, task, rubric, agents, n=4)
    for _ in range(10):  # flagged episodes experts graded: picked by a rule, not at random
        co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5, judges={FAIR: [1.0] * 5},
                  sampled=False, probability=0.1)
    study_gate_evaluate(study_id=study.pk)
    row = JudgeGate.objects.get(study=study, judge="openai/gpt-4.1", category="technical")
    assert row.n_episodes == 4 and not row.passes
    assert row.reasons[0] == f"{NOT_ENOUGH}: 4 of the 8 required"


def test_experts_who_graded_only_one_agent_leave_the_other_family_unmeasured(design):
    study, task, rubric, agents = design
    rng = np.random.default_rng(2)
    for i in range(20):
        verdicts = list(rng.choice(["pass", "fail"], 5))
        shares = [1.0 if v == "pass" else 0.0 for v in verdicts]
        # Codex episodes were graded automatically and sampled, but no expert graded them.
        co_graded(study, task, rubric, agents[i % 2], verdicts=verdicts, judges={FAIR: shares},
                  expert_grade=i % 2 == 0)
    study_gate_evaluate(study_id=study.pk)
    row = JudgeGate.objects.get(study=study, judge="openai/gpt-4.1", category="correctness")
    assert row.agreement == pytest.approx(1.0)
    assert not row.passes
    assert row.reasons == ["experts graded no sampled episode of agent family openai"]


def test_a_study_with_one_judge_is_gated_per_category(design):
    study, task, rubric, agents = design
    study.judges = _judges(FAIR)
    study.save()
    _populate(study, task, rubric, agents, judges=(FAIR,))
    rows = study_gate_evaluate(study_id=study.pk)
    assert sorted((r.judge, r.category) for r in rows) == sorted(
        ("openai/gpt-4.1", c) for c in ("correctness", "completeness", "requirements", "technical"))


def test_a_changed_verdict_under_enforcement_sends_the_touched_episodes_back_to_grading(
        design, sent_tasks, django_capture_on_commit_callbacks):
    study, task, rubric, agents = design
    study.gate_mode, study.score_source = Study.GateMode.ENFORCE, Study.ScoreSource.BLENDED
    study.save()
    _populate(study, task, rubric, agents, n=10)
    with django_capture_on_commit_callbacks(execute=True):
        study_gate_evaluate(study_id=study.pk)
    assert len([a for name, a in sent_tasks if name == "grading.tasks.grade_episode"]) == 10
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        study_gate_evaluate(study_id=study.pk)  # nothing changed: nothing re-graded
    assert sent_tasks == []


def test_an_expert_grade_of_a_sampled_episode_queues_the_gate(design, sent_tasks,
                                                             django_capture_on_commit_callbacks):
    from experts.services.gate import episode_gate_follow_up

    study, task, rubric, agents = design
    sampled = co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5, judges={FAIR: [1.0] * 5})
    other = co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5, judges={FAIR: [1.0] * 5},
                      sampled=False)
    with django_capture_on_commit_callbacks(execute=True):
        episode_gate_follow_up(episode=other)
    assert sent_tasks == []
    with django_capture_on_commit_callbacks(execute=True):
        episode_gate_follow_up(episode=sampled)
    assert sent_tasks == [(EVALUATE_EXPERT_GATE, [study.pk])]
    sent_tasks.clear()
    Study.objects.filter(pk=study.pk).update(gate_mode=Study.GateMode.OFF)
    sampled.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        episode_gate_follow_up(episode=sampled)
    assert sent_tasks == []


# ---------------------------------------------------------------------------------------- gated scores


def _gate(study, judge, category, passes):
    JudgeGate.objects.create(study=study, judge=judge, category=category, passes=passes, computed_at=timezone.now())


def test_the_gated_score_averages_only_passing_judges_per_category(design):
    study, task, rubric, agents = design
    study.gate_mode = Study.GateMode.ENFORCE
    episode = co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5,
                        judges={FAIR: [0.5] * 5, LENIENT: [1.0] * 5})
    runs = list(JudgeRun.objects.filter(episode=episode).order_by("provider"))
    for category in ("correctness", "completeness", "requirements", "technical"):
        _gate(study, "openai/gpt-4.1", category, True)
        _gate(study, "anthropic/claude-sonnet-4-6", category, category != "technical")
    result = gated_score(study=study, runs=runs)
    # correctness 40, completeness 20, requirements 25: mean of 50 % and 100 %; technical 15: the fair judge's 50 %
    assert result.score == pytest.approx(0.75 * 85 + 0.5 * 15)
    assert result.left_out == ["anthropic/claude-sonnet-4-6 on technical"]
    assert not result.blocked
    study.gate_mode = Study.GateMode.REPORT
    assert gated_score(study=study, runs=runs) is None


def test_a_category_no_judge_passes_blocks_the_automated_score(design):
    study, task, rubric, agents = design
    study.gate_mode = Study.GateMode.ENFORCE
    episode = co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5, judges={FAIR: [0.5] * 5})
    _gate(study, "openai/gpt-4.1", "correctness", True)  # the other categories were never evaluated
    result = gated_score(study=study, runs=list(JudgeRun.objects.filter(episode=episode)))
    assert result.score is None
    assert set(result.blocked) == {"completeness", "requirements", "technical"}
    assert "not evaluated yet" in result.blocked["technical"]


# ---------------------------------------------------------------------------------- calibration draw


def test_each_family_floor_is_sampled_for_sure_then_the_rate(design):
    study, task, _, agents = design
    study.calibration_rate, study.calibration_min_per_family = 0.25, 2
    study.save()
    episodes = [make_episode(study=study, task=task, agent=agents[0]) for _ in range(12)]
    results = [episode_calibration_draw(episode=e) for e in episodes]
    for e in episodes:
        e.refresh_from_db()
    assert [e.calibration_probability for e in episodes[:2]] == [1.0, 1.0] and results[:2] == [True, True]
    assert all(e.calibration_probability == 0.25 for e in episodes[2:])
    assert results[2:] == [calibration_draw_value(e.pk) < 0.25 for e in episodes[2:]]
    other = make_episode(study=study, task=task, agent=agents[1])
    assert episode_calibration_draw(episode=other) is True  # a new family starts at its own floor
    # Drawn once: a second call changes nothing.
    before = [(e.in_calibration_sample, e.calibration_probability) for e in episodes]
    assert [episode_calibration_draw(episode=e) for e in episodes] == [b[0] for b in before]


def test_gold_and_simulated_episodes_and_a_zero_rate_are_never_drawn(design):
    study, task, _, agents = design
    gold = make_episode(study=study, task=task, agent=agents[0], is_gold=True)
    simulated = make_episode(study=study, task=task, agent=agents[0], is_simulated=True)
    assert not episode_calibration_draw(episode=gold) and not episode_calibration_draw(episode=simulated)
    study.calibration_rate = 0.0
    study.save()
    plain = make_episode(study=study, task=task, agent=agents[0])
    assert not episode_calibration_draw(episode=plain)
    plain.refresh_from_db()
    assert plain.calibration_probability is None


# ------------------------------------------------------------------------------------------ settings


def test_gate_settings_are_validated():
    study = StudyFactory()
    study.calibration_rate, study.gate_min_episodes, study.gate_min_agreement = 1.5, 1, -2.0
    with pytest.raises(ValidationError) as error:
        study.full_clean()
    assert {"calibration_rate", "gate_min_episodes", "gate_min_agreement"} <= set(error.value.message_dict)


def test_enforcing_the_gate_needs_a_score_source_that_counts_expert_grades():
    study = StudyFactory(score_source=Study.ScoreSource.AUTO, gate_mode=Study.GateMode.ENFORCE)
    with pytest.raises(ValidationError, match="blended or expert"):
        study.full_clean()
    study.score_source = Study.ScoreSource.BLENDED
    study.full_clean()
    study.save()
    with pytest.raises(ExpertError, match="enforces the expert gate"):
        study_set_score_source(study=study, source=Study.ScoreSource.AUTO, actor=None)
    study.refresh_from_db()
    assert study.score_source == Study.ScoreSource.BLENDED


# -------------------------------------------------------------------------------------- the sweep


def test_the_sweep_evaluates_a_gate_whose_message_was_lost_and_only_once(design):
    from experts.services.gate import gates_reconcile

    study, task, rubric, agents = design
    _populate(study, task, rubric, agents, n=10)  # expert grades submitted, no evaluation ran
    assert gates_reconcile()["evaluated"] == 1
    assert JudgeGate.objects.filter(study=study).count() == 8
    assert gates_reconcile()["evaluated"] == 0
    study.gate_mode = Study.GateMode.OFF
    study.save()
    JudgeGate.objects.filter(study=study).delete()
    assert gates_reconcile()["evaluated"] == 0


def test_the_sweep_regrades_enforced_scores_that_disagree_with_the_stored_verdicts(
        design, sent_tasks, django_capture_on_commit_callbacks):
    from experts.services.gate import gates_reconcile

    study, task, rubric, agents = design
    study.gate_mode, study.score_source = Study.GateMode.ENFORCE, Study.ScoreSource.BLENDED
    study.save()
    episode = co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5,
                        judges={FAIR: [0.5] * 5, LENIENT: [1.0] * 5}, expert_grade=False)
    consistent = co_graded(study, task, rubric, agents[0], verdicts=["pass"] * 5,
                           judges={FAIR: [0.5] * 5, LENIENT: [0.5] * 5}, expert_grade=False)
    for category in ("correctness", "completeness", "requirements", "technical"):
        _gate(study, "openai/gpt-4.1", category, True)
        _gate(study, "anthropic/claude-sonnet-4-6", category, category != "technical")
    # The first episode's stored score is the plain panel mean (75), the lost re-grade's input.
    type(episode).objects.filter(pk=episode.pk).update(auto_score=75.0)
    type(consistent).objects.filter(pk=consistent.pk).update(auto_score=50.0)
    with django_capture_on_commit_callbacks(execute=True):
        assert gates_reconcile()["regraded"] == 1
    assert sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]


def test_routing_takes_flagged_episodes_then_the_calibration_sample_then_the_rest(design):
    study, task, _, agents = design
    early = timezone.now() - timedelta(days=2)
    rest = make_episode(study=study, task=task, agent=agents[0], submitted_at=early)
    sampled = make_episode(study=study, task=task, agent=agents[0], in_calibration_sample=True,
                           calibration_probability=0.1, submitted_at=timezone.now())
    flagged = make_episode(study=study, task=task, agent=agents[0], needs_expert_review=True,
                           submitted_at=timezone.now())
    assert list(routable_episodes(study)) == [flagged, sampled, rest]
