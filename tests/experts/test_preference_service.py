"""The preference analysis built from the database: deliverable ids that keep episodes and solo runs apart, arms
named as the model names them, per-grader scores from the grade ledger, and the refusals (one set only, a
disconnected comparison graph) said in words with no number."""

from __future__ import annotations

import pytest
from django.db.models import F

from experts import comparison_selectors as csel
from experts.comparison_selectors import preferences_fingerprint
from experts.models import ComparisonPlacement
from experts.services.comparisons import PlacementInput, comparison_open, comparison_set_create, comparison_submit
from experts.services.preferences import (
    EPISODE_SCORE_GRADER,
    SOLO_RUN_SCORE_GRADER,
    preference_rows,
    study_preferences,
)
from rating.models import GradeObservation
from studies.models import Episode, SoloRun
from tests.factories import AgentFactory, TaskFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_comparison_world, make_expert, make_solo_run
from tests.factories.scenarios import make_episode
from tests.factories.users import UserFactory

pytestmark = pytest.mark.django_db

JUSTIFY = "The first memo answers the client's question; the others miss the deadline table."


def fix_order(assignment, k):
    """Replace the random shown order by the items rotated ``k`` places, so a test's design does not hang on the
    draw (a random order can confound position with the ranking in a handful of rankings)."""
    placements = list(assignment.placements.order_by("item_id"))
    n = len(placements)
    ComparisonPlacement.objects.filter(assignment=assignment).update(position=F("position") + 10)
    for i, placement in enumerate(placements):
        ComparisonPlacement.objects.filter(pk=placement.pk).update(position=(i + k) % n + 1)


def rank_set(world, staff, ranks_by_arm, *, experts=1, episodes=None, runs=None, fixed_orders=True):
    """Create a set of the world's deliverables and have ``experts`` experts rank it by arm (one ranking for
    all, or a list of one per expert)."""
    profiles = [make_expert() for _ in range(experts)]
    comparison_set = comparison_set_create(
        study=world["study"], task=world["task"], actor=staff, experts=profiles,
        episode_ids=episodes if episodes is not None else [world["with_agent"].pk, world["alone"].pk],
        solo_run_ids=runs if runs is not None else [world["run"].pk])
    each = ranks_by_arm if isinstance(ranks_by_arm, list) else [ranks_by_arm] * experts
    for k, (assignment, expert, ranks) in enumerate(zip(comparison_set.assignments.order_by("pk"), profiles, each,
                                                        strict=True)):
        if fixed_orders:
            fix_order(assignment, k)
        comparison_open(assignment=assignment, user=expert.user)
        placements = {p.position: PlacementInput(rank=ranks[csel.item_arm(p.item).kind], acceptability="minor")
                      for p in assignment.placements.select_related("item__episode", "item__solo_run")}
        comparison_submit(assignment=assignment, user=expert.user, placements=placements, justification=JUSTIFY,
                          visible_seconds=0)
    return comparison_set, profiles


@pytest.fixture
def world():
    return make_comparison_world()


@pytest.fixture
def staff():
    return UserFactory(is_staff=True)


def test_rows_keep_episodes_and_solo_runs_apart_and_name_arms_as_the_model_does(world, staff):
    run = world["run"]
    # A solo run whose pk equals an episode's pk must still be a different deliverable.
    assert SoloRun.objects.filter(pk=run.pk).exists()
    _, [expert] = rank_set(world, staff, {"human_agent": 1, "agent_alone": 2, "human_alone": 3})
    rows = preference_rows(world["study"])
    by_id = {r.episode_id: r for r in rows.episodes}
    wa, alone = by_id[f"e{world['with_agent'].pk}"], by_id[f"e{world['alone'].pk}"]
    solo = by_id[f"s{run.pk}"]
    assert (wa.arm, wa.agent_id, wa.worker_id, wa.task_id) == (
        "with_agent", "Claude Code", world["with_agent"].participant_id, world["task"].pk)
    assert (alone.arm, alone.agent_id, alone.worker_id) == ("worker_alone", None, world["alone"].participant_id)
    assert (solo.arm, solo.agent_id, solo.worker_id, solo.task_id) == ("agent_alone", "Claude Code", None,
                                                                        world["task"].pk)
    assert rows.sources[f"s{run.pk}"] == {"kind": "solo_run", "id": run.pk, "arm": "agent_alone"}
    [comparison] = rows.comparisons
    shown = csel.study_submitted_comparisons(world["study"])[0].shown
    assert comparison.episode_ids == tuple(f"e{d.episode_id}" if d.episode_id else f"s{d.solo_run_id}" for d in shown)
    assert comparison.positions == (1, 2, 3)
    rank_of = {f"e{world['with_agent'].pk}": 1, f"s{run.pk}": 2, f"e{world['alone'].pk}": 3}
    assert comparison.ranks == tuple(rank_of[e] for e in comparison.episode_ids)
    assert comparison.expert_id == f"expert:{expert.pk}" and comparison.lengths is None  # nothing extracted


def test_scores_come_per_grader_from_the_ledger_and_otherwise_from_the_deliverable(world, staff):
    rank_set(world, staff, {"human_agent": 1, "agent_alone": 2, "human_alone": 3})
    episode = world["with_agent"]
    for grader, y in (("openai/gpt-test", 64.0), ("expert:77", 80.0)):
        GradeObservation.objects.create(
            study=world["study"], episode=episode, agent=world["agent"], participant=episode.participant,
            task=world["task"], grader=grader, grader_kind="judge" if "/" in grader else "expert", y=y, source_id=1)
    Episode.objects.filter(pk=world["alone"].pk).update(score=55.0)
    SoloRun.objects.filter(pk=world["run"].pk).update(score=40.0)
    scores = {(s.episode_id, s.grader_id): s.score for s in preference_rows(world["study"]).scores}
    assert scores == {
        (f"e{episode.pk}", "openai/gpt-test"): 64.0, (f"e{episode.pk}", "expert:77"): 80.0,  # not its 71
        (f"e{world['alone'].pk}", EPISODE_SCORE_GRADER): 55.0, (f"s{world['run'].pk}", SOLO_RUN_SCORE_GRADER): 40.0}


def test_no_comparison_means_no_fingerprint_and_no_number(world):
    assert preferences_fingerprint(world["study"]) is None
    result = study_preferences(world["study"])
    assert result["fit"] is None and result["not_identifiable"]["win_rates"]


def test_one_set_ranked_once_gives_the_models_reason_and_no_number(world, staff):
    rank_set(world, staff, {"human_agent": 1, "agent_alone": 2, "human_alone": 3})
    result = study_preferences(world["study"])
    assert result["n_comparisons"] == 1 and result["n_solo_runs"] == 1
    assert result["fit"] is None and "too few" in result["not_identifiable"]["model"]
    # The agreement needs no fit: one scored deliverable gives no strict scored pair, said in words.
    [expert] = result["agreement"]["experts"]
    assert "agreement" not in expert and expert["not_identifiable"]


# Eight rankings of the three arms in which every pair goes both ways (and some tie).
VARIED = [{"human_agent": a, "agent_alone": b, "human_alone": c} for a, b, c in (
    (1, 2, 3), (2, 3, 1), (1, 3, 1), (2, 1, 2), (1, 2, 3), (3, 2, 1), (1, 1, 2), (1, 3, 2))]


def grade(episode, grader, y):
    GradeObservation.objects.create(
        study=episode.study, episode=episode, agent=episode.agent or AgentFactory(), participant=episode.participant,
        task=episode.task, grader=grader, grader_kind="judge", y=y, source_id=1)


def test_one_set_ranked_by_several_experts_fits_with_intervals(world, staff):
    for i, episode in enumerate((world["with_agent"], world["alone"])):
        grade(episode, "openai/judge-a", 60.0 + 10 * i)
        grade(episode, "anthropic/judge-b", 64.0 + 8 * i)
    SoloRun.objects.filter(pk=world["run"].pk).update(score=40.0)
    SoloRun.objects.filter(pk=make_solo_run(study=world["study"], task=world["task"], agent=world["agent"]).pk
                           ).update(score=46.0)
    rank_set(world, staff, VARIED, experts=len(VARIED))
    result = study_preferences(world["study"])
    assert result["error"] is None, result["error"]
    fit = result["fit"]
    assert fit["n_rankings"] == 8 and fit["n_pairs"] == 24 and fit["n_episodes"] == 4
    assert {r["cell"] for r in fit["versus_worker_alone"]} == {"with agent: Claude Code", "agent alone: Claude Code"}
    for row in fit["win_rates"]:
        assert ("not_identifiable" in row) != ("win" in row)
    assert {g["grader"] for g in result["agreement"]["graders"]} == {
        "openai/judge-a", "anthropic/judge-b", SOLO_RUN_SCORE_GRADER}


def test_a_disconnected_comparison_graph_gives_reasons_and_no_numbers_across_it(world, staff):
    codex = AgentFactory(name="Codex")
    task = TaskFactory(sector=world["task"].sector)
    episode = make_episode(task=task, study=world["study"], agent=codex, status=Episode.Status.GRADED)
    EpisodeFileFactory(episode=episode, name="memo.txt", content=b"Memo written with Codex.\n")
    other = {"study": world["study"], "task": task,
             "run": make_solo_run(study=world["study"], task=task, agent=codex)}
    # Two tasks, each with its own agent, each set ranked by two experts; no score links them.
    win, lose, tie = ({"human_agent": 1, "agent_alone": 2}, {"human_agent": 2, "agent_alone": 1},
                      {"human_agent": 1, "agent_alone": 1})
    split = [win, lose, tie, win, lose, win, tie, win]
    rank_set(world, staff, split, experts=8, episodes=[world["with_agent"].pk], runs=[world["run"].pk])
    rank_set(other, staff, split[::-1], experts=8, episodes=[episode.pk],
             runs=[other["run"].pk])
    Episode.objects.filter(study=world["study"]).update(score=None)
    result = study_preferences(world["study"])
    assert result["error"] is None, result["error"]
    rows = {(r["cell"], r["versus"]): r for r in result["fit"]["win_rates"]}
    across = [r for (a, b), r in rows.items() if ("Codex" in a) != ("Codex" in b)]
    within = [r for (a, b), r in rows.items() if ("Codex" in a) == ("Codex" in b) and "worker alone" not in (a, b)]
    assert across and all("not_identifiable" in r and "win" not in r for r in across)
    assert within and all("win" in r for r in within)
