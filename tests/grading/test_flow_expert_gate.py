"""Flow: a judge that fails the enforced expert gate has its episodes held out of the rating and sent to experts.

Grading runs the real pipeline (official SDK against the fake server, whose judge gives every criterion 80 % of
its points). Experts grade the calibration sample through the expert workspace's services; their grades queue
the gate evaluation, which finds the judge 20 points below them on every category. A newly submitted episode
is then held and routed to an expert by the ordinary routing; loosening the study's gate settings releases it.
"""

from __future__ import annotations

import pytest

from experts.models import ExpertAssignment
from experts.services.grading import VerdictInput, grade_open, grade_submit
from experts.services.routing import episodes_route_pending, routable_episodes
from experts.task_names import EVALUATE_EXPERT_GATE
from experts.tasks import evaluate_expert_gate
from grading.models import JudgeGate, Rubric
from grading.selectors import HELD_MARK
from grading.services.pipeline import episode_grade
from rating.models import Observation
from studies.models import Episode, Study
from tests.factories import StudyFactory, TaskFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode

pytestmark = pytest.mark.django_db


def _grade(episode, capture):
    with capture(execute=True):
        return episode_grade(episode_id=episode.pk)


def _expert_grades(assignment, capture, verdicts):
    grade = grade_open(assignment=assignment, user=assignment.expert.user)
    criteria = list(grade.rubric.criteria.order_by("order"))
    with capture(execute=True):
        grade_submit(grade=grade, user=assignment.expert.user, overall="accept",
                     verdicts={c.pk: VerdictInput(v, "not met" if v == "fail" else "")
                               for c, v in zip(criteria, verdicts, strict=True)})


def test_a_failing_judge_criterion_routes_its_episodes_to_experts(llm_server, sent_tasks,
                                                                   django_capture_on_commit_callbacks):
    study = StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}], gate_mode=Study.GateMode.ENFORCE,
                         score_source=Study.ScoreSource.BLENDED, calibration_rate=1.0, gate_min_episodes=3,
                         double_grading_share=0.0)
    task = TaskFactory(studies=[study])
    make_rubric(task, per_category=1, origin=Rubric.Origin.EXPERT)
    expert = make_expert(sectors=[task.sector])

    # 1. Before any expert grade the gate has no verdict, so nothing is scored automatically yet: the judges'
    #    scores are kept, every episode waits for experts, and the calibration sample is drawn.
    calibration = [submitted_episode(study=study, task=task) for _ in range(4)]
    for episode in calibration:
        assert _grade(episode, django_capture_on_commit_callbacks).status == "held"
        episode.refresh_from_db()
        assert episode.auto_score is None and episode.needs_expert_review and episode.in_calibration_sample
        assert episode.calibration_probability == 1.0
        assert "not evaluated yet" in episode.grading_note

    # 2. Experts grade them through the ordinary routing; each grade queues the gate evaluation.
    report = episodes_route_pending(study=study)
    assert report.episodes_routed == 4
    patterns = [["pass", "pass", "pass", "fail"], ["pass", "fail", "pass", "pass"], ["pass"] * 4,
                ["fail", "pass", "pass", "pass"]]
    for episode, verdicts in zip(calibration, patterns, strict=True):
        _expert_grades(ExpertAssignment.objects.get(episode=episode), django_capture_on_commit_callbacks, verdicts)
    assert (EVALUATE_EXPERT_GATE, [study.pk]) in sent_tasks
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        counts = evaluate_expert_gate(study.pk)
    assert counts == {"passing": 0, "failing": 4}
    correctness = JudgeGate.objects.get(study=study, judge="openai/gpt-4.1", category="correctness")
    assert correctness.n_episodes == 4 and correctness.bias == pytest.approx(-20 + 100 * 1 / 4)
    # Held episodes count through their expert grade (blended score source).
    for episode in calibration:
        episode.refresh_from_db()
        assert episode.score_source == Episode.ScoreSource.EXPERT

    # 3. A new episode: the judge fails every category, so it is held and routed to an expert.
    fresh = submitted_episode(study=study, task=task)
    assert _grade(fresh, django_capture_on_commit_callbacks).status == "held"
    fresh.refresh_from_db()
    assert fresh.grading_note.startswith(HELD_MARK) and "agreement too low" in fresh.grading_note
    assert fresh.auto_score is None and fresh.needs_expert_review
    assert not Observation.objects.filter(episode=fresh, active=True).exists()
    assert list(routable_episodes(study)) == [fresh]
    assert episodes_route_pending(study=study).episodes_routed == 1
    assert ExpertAssignment.objects.get(episode=fresh).expert == expert

    # 4. Loosened settings let the judge pass; the changed verdicts send the held episode back to grading,
    #    which scores it from the stored judge run without calling the judge again.
    study.gate_min_agreement, study.gate_max_bias = -1.0, 30.0
    study.save()
    calls = len(llm_server.requests)
    with django_capture_on_commit_callbacks(execute=True):
        evaluate_expert_gate(study.pk)
    assert ("grading.tasks.grade_episode", [fresh.pk]) in sent_tasks
    assert _grade(fresh, django_capture_on_commit_callbacks).status == "graded"
    fresh.refresh_from_db()
    assert fresh.status == Episode.Status.GRADED and fresh.auto_score == pytest.approx(80.0)
    assert len(llm_server.requests) == calls
