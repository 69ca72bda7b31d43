"""Builders for rating-ledger tests: studies with scored episodes, and the batch model to compare against."""

from __future__ import annotations

import numpy as np
import pytest
from django.db.models.functions import Coalesce

from rating.engine import RatingConfig, SkillModel
from rating.fit import ModelSpec, fit_model
from rating.models import EntityRating, Observation, RatingSnapshot
from studies.models import Agent, Episode, Participant, Study
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, StudyFactory, TaskFactory


def ledger_study(
    *,
    n_agents: int = 3,
    n_participants: int = 6,
    per_participant: int = 3,
    seed: int = 0,
    expert_share: float = 0.0,
    **study_fields,
) -> tuple[Study, list[Agent], list[Participant], list[Episode]]:
    """Create a study whose participants each worked with several agents, every episode auto-scored.

    Episodes are assigned round-robin so the agents share participants (a connected design); a share
    ``expert_share`` of them also gets an expert score.
    """
    rng = np.random.default_rng(seed)
    # The ledger tests check the exact paper path against SkillModel; calibrated studies are asked for by name.
    study_fields.setdefault("rating_model", Study.RatingModel.PAPER)
    study = StudyFactory(**study_fields)
    agents = [AgentFactory() for _ in range(n_agents)]
    participants = [ParticipantFactory(study=study) for _ in range(n_participants)]
    episodes = []
    for p_index, participant in enumerate(participants):
        for position in range(1, per_participant + 1):
            agent = agents[(p_index + position) % n_agents]
            episodes.append(
                EpisodeFactory(
                    participant=participant,
                    study=study,
                    agent=agent,
                    task=TaskFactory(studies=[study]),
                    position=position,
                    status=Episode.Status.GRADED,
                    auto_score=float(np.round(rng.uniform(30, 95), 3)),
                    expert_score=float(np.round(rng.uniform(30, 95), 3)) if rng.random() < expert_share else None,
                )
            )
    return study, agents, participants, episodes


def study_config(study: Study) -> RatingConfig:
    return RatingConfig(mu0=study.rating_mu0, sigma0=study.rating_sigma0, beta=study.rating_beta, k=study.rating_k)


def batch_model(study: Study) -> SkillModel:
    """Build a fresh model from the study's active ledger, observation by observation (the slow, plain path)."""
    model = SkillModel(config=study_config(study))
    for agent_id, participant_id, y, weight in (
        Observation.objects.filter(study=study, active=True)
        .order_by("-pk")
        .values_list("agent_id", "participant_id", "y", "weight")
    ):
        model.add_observation(str(agent_id), str(participant_id), y, weight)
    return model


def fit_rows(study: Study) -> dict[tuple[str, int], dict]:
    """Return rating.fit.fit_model's ratings of the study's active ledger read through the ORM, by (kind, pk)."""
    rows = list(
        Observation.objects.filter(study=study, active=True).order_by("pk")
        .annotate(task_key=Coalesce("task_uuid", "task__uuid"))
        .values_list("agent_id", "participant_id", "task_key", "y", "weight")
    )
    agents, humans, tasks, y, w = (np.array(column, dtype=object) for column in zip(*rows, strict=True))
    spec = ModelSpec(kind=study.rating_model, k=study.rating_k, paper=study_config(study),
                     integrate_hyper=study.rating_integrate_hyper)
    tasks = np.array([None if t is None else str(t) for t in tasks], dtype=object)
    fit = fit_model(agents.astype(np.int64), humans.astype(np.int64), y.astype(float), tasks, spec=spec,
                    weights=w.astype(float))
    expected = {}
    for kind, ids, mu, sigma, n in (
        ("agent", fit.agent_ids, fit.agent_mu, fit.agent_sigma(), fit.agent_n),
        ("human", fit.human_ids, fit.human_mu, fit.human_sigma, fit.human_n),
    ):
        for i, pk in enumerate(ids.tolist()):
            expected[(kind, int(pk))] = {
                "mu": mu[i], "sigma": sigma[i], "conservative": mu[i] - spec.k * sigma[i], "n": int(n[i]),
            }
    return expected


def assert_snapshot_matches_batch(snapshot: RatingSnapshot, study: Study, tol: float = 1e-9) -> None:
    """Every stored rating equals the batch model's, and the snapshot rates exactly the batch's entities.

    Paper studies are checked against SkillModel fed observation by observation; calibrated ones against
    rating.fit.fit_model on the ledger read through the ORM (not the refresh's COPY path).
    """
    if study.rating_model != Study.RatingModel.PAPER:
        expected = fit_rows(study)
        stored = {(r.entity_kind, r.entity_id): r for r in snapshot.ratings.all()}
        assert stored.keys() == expected.keys()
        for key, row in expected.items():
            assert stored[key].mu == pytest.approx(row["mu"], abs=1e-8)
            assert stored[key].sigma == pytest.approx(row["sigma"], abs=1e-8)
            assert stored[key].n == row["n"]
        return
    model = batch_model(study)
    expected = {
        (row["entity_type"], int(row["entity_id"])): row
        for kind in ("agent", "human")
        for row in model.leaderboard(kind)
    }
    stored = {(r.entity_kind, r.entity_id): r for r in snapshot.ratings.all()}
    assert stored.keys() == expected.keys()
    assert snapshot.n_observations == model.n_observations
    for key, row in expected.items():
        rating = stored[key]
        assert rating.mu == pytest.approx(row["mu"], abs=tol, rel=0)
        assert rating.sigma == pytest.approx(row["sigma"], abs=tol, rel=0)
        assert rating.conservative == pytest.approx(row["conservative"], abs=tol, rel=0)
        assert rating.n == row["n"]
    # Ranks agree up to exact ties (equal scores may order differently by a last-bit difference): the
    # k-th ranked entity of each kind has the batch's k-th best score.
    for kind in ("agent", "human"):
        stored_order = [r.conservative for r in sorted(stored.values(), key=lambda r: r.rank) if r.entity_kind == kind]
        batch_order = [row["conservative"] for row in model.leaderboard(kind)]
        assert stored_order == pytest.approx(batch_order, abs=tol, rel=0)
        assert sorted(r.rank for r in stored.values() if r.entity_kind == kind) == list(range(1, len(batch_order) + 1))


def agent_ratings(snapshot: RatingSnapshot) -> dict[int, EntityRating]:
    return {r.entity_id: r for r in snapshot.ratings.filter(entity_kind=EntityRating.Kind.AGENT)}


def latest_matches_batch(study: Study) -> bool:
    """Whether the study's latest snapshot exists and equals the batch fit (for polling a worker's result)."""
    from rating import selectors

    snapshot = selectors.latest_snapshot(study)
    if snapshot is None:
        return False
    try:
        assert_snapshot_matches_batch(snapshot, study)
    except AssertionError:
        return False
    return True
