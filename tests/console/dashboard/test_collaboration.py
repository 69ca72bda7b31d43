"""Collaboration analyses against direct scipy calls and hand-counted win rates."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats

from console.dashboard.collaboration import (
    collaboration_analysis,
    point_biserial,
    skill_quartiles,
    solo_win_rates,
)
from grading.models import FluencyCoding
from rating.models import EntityRating
from studies.models import Episode, Participant, SoloRun


@pytest.mark.django_db
def test_behaviour_correlations_match_scipy_point_biserial(populated):
    result = collaboration_analysis(populated.study)
    rows = list(
        FluencyCoding.objects.filter(episode__study=populated.study).values_list("episode__score", "behaviours")
    )
    for row in result["fluency"]["correlations"]:
        present = np.array([1 if b[row["behaviour"]]["present"] else 0 for _, b in rows])
        scores = np.array([s for s, _ in rows])
        expected = scipy.stats.pointbiserialr(present, scores)
        assert row["n"] == len(rows)
        assert row["r"] == pytest.approx(expected.statistic)
        assert row["p_value"] == pytest.approx(expected.pvalue)
        assert row["mean_score_present"] == pytest.approx(scores[present == 1].mean())
    totals = np.array([sum(v["present"] for v in b.values()) for _, b in rows])
    expected = scipy.stats.pearsonr(totals, [s for s, _ in rows])
    assert result["fluency"]["count_correlation"]["r"] == pytest.approx(expected.statistic)


@pytest.mark.django_db
def test_behaviour_rates_by_agent_are_shares_of_coded_sessions(populated):
    result = collaboration_analysis(populated.study)
    agent = populated.agents[0]
    codings = FluencyCoding.objects.filter(episode__agent=agent).values_list("behaviours", flat=True)
    row = next(r for r in result["fluency"]["by_agent"] if r["agent"] == agent.name)
    assert row["n"] == len(codings)
    for code, rate in row["rates"].items():
        assert rate == pytest.approx(np.mean([c[code]["present"] for c in codings]))


def test_point_biserial_refuses_a_behaviour_seen_everywhere():
    result = point_biserial(np.ones(5, dtype=int), np.arange(5, dtype=float))
    assert result["r"] is None and "all or none" in result["note"]


def test_quartiles_split_participants_by_ascending_skill():
    skill = {pid: float(value) for pid, value in enumerate([5, 1, 3, 8, 2, 7, 4, 6])}
    quartile = skill_quartiles(skill)
    assert [quartile[pid] for pid in sorted(skill, key=skill.get)] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_win_rates_count_ties_as_half_and_group_by_quartile():
    # participant, task, agent, name, score
    episodes = [(1, 10, 100, "A", 50.0), (2, 10, 100, "A", 70.0), (3, 11, 100, "A", 60.0), (4, 11, 100, "A", 90.0)]
    solo = {(10, 100): [60.0], (11, 100): [60.0, 95.0]}
    skill = {1: -2.0, 2: 0.0, 3: 1.0, 4: 5.0}
    result = solo_win_rates(episodes, solo, skill)
    by_q = {row["quartile"]: row for row in result["quartiles"]}
    assert by_q["Q1"]["win_rate"] == 0.0  # 50 < 60
    assert by_q["Q2"]["win_rate"] == 1.0  # 70 > 60
    assert by_q["Q3"]["win_rate"] == pytest.approx(0.25)  # tie with 60, loss to 95
    assert by_q["Q4"]["win_rate"] == pytest.approx(0.5)  # win over 60, loss to 95
    assert result["n_comparisons"] == 6
    assert result["win_rate"] == pytest.approx((0 + 1 + 0.5 + 0 + 1 + 0) / 6)


@pytest.mark.django_db
def test_win_rates_use_the_snapshot_skill_and_matching_solo_runs(populated):
    result = collaboration_analysis(populated.study)
    skill = dict(EntityRating.objects.filter(snapshot=populated.snapshot, entity_kind="human")
                 .values_list("entity_id", "conservative"))
    solo = {}
    for run in SoloRun.objects.filter(study=populated.study):
        solo.setdefault((run.task_id, run.agent_id), []).append(run.score)
    outcomes = []
    for episode in Episode.objects.filter(study=populated.study):
        for solo_score in solo.get((episode.task_id, episode.agent_id), []):
            outcomes.append(1.0 if episode.score > solo_score else 0.5 if episode.score == solo_score else 0.0)
    assert result["win_rates"]["n_comparisons"] == len(outcomes)
    assert result["win_rates"]["win_rate"] == pytest.approx(np.mean(outcomes))
    assert result["win_rates"]["n_participants"] == len(skill)


@pytest.mark.django_db
def test_collab_vs_solo_by_agent_has_the_table_5_shape(populated):
    result = collaboration_analysis(populated.study)
    rows = {row["agent"]: row for row in result["by_agent"]}
    for agent in populated.agents:
        row = rows[agent.name]
        rating = EntityRating.objects.get(snapshot=populated.snapshot, entity_kind="agent", entity_id=agent.pk)
        assert row["collabskill"] == pytest.approx(rating.conservative)
        scores = list(Episode.objects.filter(study=populated.study, agent=agent).values_list("score", flat=True))
        assert row["mean_collab_score"] == pytest.approx(np.mean(scores))
        solo = list(SoloRun.objects.filter(study=populated.study, agent=agent).values_list("score", flat=True))
        assert row["mean_solo_score"] == pytest.approx(np.mean(solo))
    ranks = [row["collabskill"] for row in result["by_agent"]]
    assert ranks == sorted(ranks, reverse=True)


@pytest.mark.django_db
def test_withdrawn_participants_episodes_are_left_out(populated):
    gone = populated.participants[0]
    Participant.objects.filter(pk=gone.pk).update(status=Participant.Status.WITHDRAWN)
    result = collaboration_analysis(populated.study)
    assert result["n_scored_episodes"] == len(populated.episodes) - gone.episodes.count()
    assert result["fluency"]["n_codings"] == len(populated.episodes) - gone.episodes.count()


@pytest.mark.django_db
def test_an_empty_study_gives_empty_tables(empty_study):
    result = collaboration_analysis(empty_study)
    assert result["fluency"]["n_codings"] == 0
    assert result["win_rates"]["n_comparisons"] == 0
    assert result["by_agent"] == []
    assert json.loads(json.dumps(result, allow_nan=False)) == result


@pytest.mark.django_db
def test_gold_copies_stay_out_of_collaboration_analyses_after_a_re_record(populated):
    from rating.services.ledger import study_rerecord

    before = collaboration_analysis(populated.study)
    source = populated.episodes[0]
    holder = Participant.objects.create(study=populated.study, status=Participant.Status.INVITED, pseudonym="GOLD-X")
    gold = Episode.objects.create(
        participant=holder, study=populated.study, agent=source.agent, task=source.task, position=1,
        status=Episode.Status.GRADED, auto_score=3.0, is_gold=True,
    )
    FluencyCoding.objects.create(
        episode=gold, status=FluencyCoding.Status.SUCCEEDED, behaviours={"iterates_and_refines": {"present": True}},
        behaviour_count=1, model="coder-1",
    )
    study_rerecord(study_id=populated.study.pk)  # gives the gold copy an episode score, as a score-source switch does
    gold.refresh_from_db()
    assert gold.score == 3.0

    after = collaboration_analysis(populated.study)
    assert after["n_scored_episodes"] == before["n_scored_episodes"]
    assert after["fluency"]["n_codings"] == before["fluency"]["n_codings"]
    assert after["win_rates"] == before["win_rates"]
    assert after["by_agent"] == before["by_agent"]
