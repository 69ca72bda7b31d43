"""The staff metrics report and page, on small data sets whose numbers are computed by hand."""

from __future__ import annotations

import pytest
from celery import current_app
from django.urls import reverse

from experts.models import ExpertAssignment
from experts.selectors import expert_metrics_report
from experts.services.grading import VerdictInput, grade_open, grade_submit
from experts.services.routing import episode_route_reattempt
from grading.models import Rubric
from studies.models import Episode
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.agents import AgentFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db

P, F = "pass", "fail"


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr(current_app, "send_task", lambda *a, **k: None)


def grade(assignment, verdicts, overall="accept"):
    draft = grade_open(assignment=assignment, user=assignment.expert.user)
    answers = {c.pk: VerdictInput(v, "not met" if v == F else "")
               for c, v in zip(draft.rubric.criteria.order_by("order"), verdicts, strict=True)}
    return grade_submit(grade=draft, user=assignment.expert.user, verdicts=answers, overall=overall)


def test_cohen_kappa_per_criterion_and_pooled_on_double_graded_episodes():
    sector, study = SectorFactory(), StudyFactory()
    task = TaskFactory(sector=sector)
    rubric = make_rubric(task)
    first_expert, second_expert = make_expert(sectors=[sector]), make_expert(sectors=[sector])
    # C1 verdicts: first [p, p, f, f], second [p, f, f, f]; C2..C5 pass for both.
    for c1_first, c1_second in ((P, P), (P, F), (F, F), (F, F)):
        episode = make_episode(task=task, study=study)
        grade(ExpertAssignment.objects.create(episode=episode, expert=first_expert), [c1_first, P, P, P, P])
        grade(ExpertAssignment.objects.create(episode=episode, expert=second_expert,
                                              role=ExpertAssignment.Role.SECOND), [c1_second, P, P, P, P])
    kappa = expert_metrics_report(study)["kappa"]
    rows = {row["criterion"].key: row for row in kappa["rows"]}
    # p_o = 3/4, p_e = .5*.25 + .5*.75 = .5  ->  kappa = .25 / .5
    assert rows["C1"]["kappa"] == pytest.approx(0.5) and rows["C1"]["n"] == 4
    assert rows["C2"]["kappa"] is None  # both always "pass": undefined
    # Pooled over 20 pairs: p_o = 19/20, p_e = .9*.85 + .1*.15 = .78
    assert kappa["pooled"] == pytest.approx((0.95 - 0.78) / 0.22)
    assert all(c.rubric_id == rubric.pk for c in (row["criterion"] for row in kappa["rows"]))


def test_coverage_from_the_experts_match_marks():
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    auto = make_rubric(task, status=Rubric.Status.DRAFT)
    author = make_expert(sectors=[sector])
    expert_rubric = make_rubric(task, origin=Rubric.Origin.EXPERT, author=author.user)
    a = {c.key: c for c in auto.criteria.all()}
    marks = {"C1": ["C1"], "C2": ["C1", "C2"], "C3": [], "C4": ["C3"], "C5": []}
    for criterion in expert_rubric.criteria.all():
        criterion.matches_auto.set([a[k] for k in marks[criterion.key]])
    coverage = expert_metrics_report()["coverage"]
    # 3 of 5 expert criteria are matched; 3 of 5 generated criteria (C1, C2, C3) are used.
    assert coverage["pooled"].recall == pytest.approx(0.6)
    assert coverage["pooled"].precision == pytest.approx(0.6)
    assert coverage["rows"][0]["auto"] == auto


def test_gold_agreement_and_drift_per_expert():
    sector, study = SectorFactory(), StudyFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)
    expert = make_expert(sectors=[sector])
    keys = {"C1": P, "C2": F}
    for verdicts in ([P, F, P, P, P], [P, F, P, P, P], [P, P, P, P, P]):  # agreement 1, 1, 1/2
        episode = make_episode(task=task, study=study, is_gold=True, gold_verdicts=keys)
        grade(ExpertAssignment.objects.create(episode=episode, expert=expert, role=ExpertAssignment.Role.GOLD),
              verdicts)
    [row] = expert_metrics_report(study)["gold"]
    assert row["n"] == 3
    assert row["agreement"] == pytest.approx(5 / 6)
    assert row["drift"] == pytest.approx(0.5 - 1.0)
    assert [h["share"] for h in row["history"]] == [1.0, 1.0, 0.5]
    assert Episode.objects.get(pk=row["history"][0]["episode"]).expert_score is None


def test_reattempt_metrics_and_pass_at_k_per_agent(client):
    sector, study = SectorFactory(), StudyFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)  # C1 critical, C2-C3 important, C4 optional, C5 pitfall
    bot = AgentFactory(name="Agent Y", model_version="sx-9000")
    graders = [make_expert(sectors=[sector]) for _ in range(2)]
    staff = UserFactory(roles=["staff"])
    episodes = [make_episode(task=task, study=study, agent=bot) for _ in range(3)]
    grade(ExpertAssignment.objects.create(episode=episodes[0], expert=graders[0]), [P] * 5)
    grade(ExpertAssignment.objects.create(episode=episodes[1], expert=graders[0]), [F, P, P, P, P], "revise")
    grade(ExpertAssignment.objects.create(episode=episodes[2], expert=graders[0]), [F, P, P, P, P], "revise")
    grade(episode_route_reattempt(episode=episodes[1], actor=staff, expert=graders[1]), [P] * 5)

    attempts = expert_metrics_report(study)["attempts"]
    assert attempts["has_reattempts"]
    [row] = attempts["rows"]
    s = row["summary"]
    assert (s.n, s.a, s.m, s.b) == (3, 1, 1, 1)
    assert (s.p1, s.p_overall, s.abs_lift, s.rel_lift, s.rescue_rate) == pytest.approx((1 / 3, 2 / 3, 1 / 3, 1, 1))
    assert s.r1_mean == pytest.approx((1 + 0.8 + 0.8) / 3)
    assert s.r_overall_mean == pytest.approx((1 + 1 + 0.8) / 3)
    # One task, n = 3 first attempts, c = 1 completed.
    assert row["pass_at_k"][1] == pytest.approx(1 / 3)
    assert row["pass_at_k"][2] == pytest.approx(1 - 1 / 3)  # 1 - C(2,2)/C(3,2)
    assert row["pass_at_k"][3] == 1.0
    episodes[1].refresh_from_db()
    assert episodes[1].expert_score == 100.0  # the re-attempt's grade replaces the first one

    client.force_login(staff)
    page = client.get(reverse("expert:staff_metrics") + f"?study={study.pk}").content.decode()
    assert "Agent Y" in page and "Rescue rate" in page and "0.333" in page and "0.667" in page
    assert "pairs@2" in page and "not UpBench’s pass@k over k retries" in page


def test_first_attempt_rubric_score_counts_a_skip_as_not_passed_while_the_stored_score_leaves_it_out():
    sector, study = SectorFactory(), StudyFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)  # C1 critical, C2-C3 important, C4 optional, C5 pitfall
    bot = AgentFactory(name="Agent Z")
    expert = make_expert(sectors=[sector])
    episode = make_episode(task=task, study=study, agent=bot)
    grade(ExpertAssignment.objects.create(episode=episode, expert=expert), [P, P, P, "skip", P])
    episode.refresh_from_db()
    assert episode.expert_score == 100.0  # 4 passed of 4 evaluated: stored data keep their meaning
    [row] = expert_metrics_report(study)["attempts"]["rows"]
    assert row["summary"].r1_mean == pytest.approx(4 / 5)  # UpBench R: 4 passed of 5 criteria
    assert row["summary"].a == 1  # the skipped criterion is optional, so the attempt still completes
