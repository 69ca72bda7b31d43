"""Live updates: a ledger change reaches the leaderboard in about a second, without a refit.

Between refits (`rating.services.refresh.posterior_refresh`) a study on the calibrated model keeps its posterior in
information form (`rating.live`, stored in ``PosteriorState``). A refresh request applies the queued ledger changes
(``LedgerChange``, written with each change) to it -- every changed participant's term is replaced -- and writes a
snapshot of the agents' exact posterior at the refit's variance components. Participants' own ratings, the
hyperparameters and the residual diagnostics stay the refit's until the next one (the snapshot points at it).

A refit happens instead when the variance components are due for re-estimation (``REML_INTERVAL_SECONDS``), when
the REML score test finds them drifted, when a new agent appears or one loses its last observation, when more
participants changed than ``LIVE_MAX_PARTICIPANTS``, when the ledger is small, or when there is no state (first
refresh, another model, a bulk import). The snapshot records which it was and why.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from django.core.cache import cache
from django.utils import timezone
from threadpoolctl import threadpool_limits

from rating import selectors
from rating.conf import rating_settings
from rating.fit import json_safe
from rating.live import InformationState, SingularUpdate, participant_terms
from rating.models import EntityRating, LedgerChange, Observation, PosteriorState, RatingSnapshot
from rating.services.refresh import entity_ratings_write, posterior_refresh, refresh_key, refresh_transaction
from studies.models import Study

logger = logging.getLogger(__name__)


def posterior_update(*, study_id: int, wait: bool = True) -> RatingSnapshot:
    """Bring the study's posterior up to date: a live update when the state allows one, otherwise a refit.

    Without ``wait``, raises :class:`rating.services.refresh.RefreshBusy` when another refresh of the study runs.
    """
    conf = rating_settings()
    started = time.perf_counter()
    with refresh_transaction(study_id, wait=wait) as serialised:
        study = (Study.objects if serialised else Study.objects.select_for_update(no_key=True)).get(pk=study_id)
        # Delete the debounce key before the read (see posterior_schedule_refresh for why that loses nothing).
        cache.delete(refresh_key(study_id))
        row = PosteriorState.objects.select_related("refit", "snapshot").filter(study=study).first()
        reason = _refit_reason(study, row, conf)
        if not reason:
            assert row is not None
            outcome = _live_update(study, row, conf, started)
            if isinstance(outcome, RatingSnapshot):
                return outcome
            reason = outcome
    return posterior_refresh(study_id=study_id, only_if_changed=True, reason=reason, wait=wait)


def _refit_reason(study: Study, row: PosteriorState | None, conf: dict[str, Any]) -> str:
    """Return why the next refresh must be a refit ("" when a live update may do)."""
    if not conf["LIVE_UPDATES"]:
        return "live updates are switched off"
    if row is None or not row.live or row.refit is None or row.snapshot is None:
        return "no live state (first refresh, a model without live updates, or a bulk change of the ledger)"
    if row.refit.config != selectors.study_model_settings(study):
        return "the rating model settings changed"
    latest = selectors.latest_snapshot(study)
    if latest is None or latest.pk != row.snapshot.pk:
        return "a snapshot was written since the live state"
    if row.refitted_at is None or (timezone.now() - row.refitted_at).total_seconds() > conf["REML_INTERVAL_SECONDS"]:
        return "scheduled re-estimation of the variance components"
    return ""


Change = tuple[int, int, int, bool, int | None, float | None, float | None]
Row = tuple[int, int, Any, Any, Any]  # observation, participant, agent, y, weight


def _participants_before(current: list[Row], changes: list[Change]) -> list[Row]:
    """Return the changed participants' observations as the state counts them: each changed observation as it was
    before its first queued change (absent when it did not count), the others as they are."""
    first: dict[int, Change] = {}
    for change in changes:
        first.setdefault(change[1], change)
    rows: list[Row] = [row for row in current if row[0] not in first]
    rows += [
        (obs, participant, agent, y, weight)
        for obs, (_, _, participant, was_active, agent, y, weight) in first.items()
        if was_active
    ]
    return rows


def _terms(rows: list[Row], position: dict[int, int], state: InformationState) -> Any:
    agents = np.array([position[int(row[2])] for row in rows], dtype=np.intp)
    humans = np.array([int(row[1]) for row in rows], dtype=np.int64)
    y = np.array([float(row[3]) for row in rows])
    weights = np.array([float(row[4]) for row in rows])
    return participant_terms(agents, humans, y, weights, state.n_agents, state.gammas)


def _live_update(study: Study, row: PosteriorState, conf: dict[str, Any], started: float) -> RatingSnapshot | str:
    """Apply the queued changes to the state and write the snapshot; return it, or why a refit must do it."""
    read_at = timezone.now()
    changes: list[Change] = list(
        LedgerChange.objects.filter(study=study).order_by("pk").values_list(
            "pk", "observation_id", "participant_id", "was_active", "old_agent_id", "old_y", "old_weight"
        )
    )
    assert row.snapshot is not None and row.refit is not None
    if not changes:
        return row.snapshot
    state = InformationState.from_bytes(bytes(row.data))
    if state.terms.n < conf["LIVE_MIN_OBSERVATIONS"]:
        return f"a small ledger ({state.terms.n} observations): a refit is as fast"
    participants = sorted({change[2] for change in changes})
    if len(participants) > conf["LIVE_MAX_PARTICIPANTS"]:
        return f"{len(participants)} participants changed at once"
    current = list(
        Observation.objects.filter(study=study, active=True, participant_id__in=participants)
        .order_by("pk").values_list("pk", "participant_id", "agent_id", "y", "weight")
    )
    t_read = time.perf_counter()
    before = _participants_before(current, changes)
    position = {int(agent): i for i, agent in enumerate(state.agent_ids.tolist())}
    if any(int(r[2]) not in position for r in current) or any(int(r[2]) not in position for r in before):
        return "a new agent has observations"
    # One BLAS thread, as the fits use: on a shared machine idle BLAS threads spinning in another worker process
    # cost seconds per update (measured 1.3 s against 0.03 s for these few p x p factorisations).
    with threadpool_limits(limits=1, user_api="blas"):
        updated = state.updated(_terms(before, position, state), _terms(current, position, state))
        try:
            posterior = updated.posterior()
            test = updated.score_test()
        except SingularUpdate as exc:
            return f"an agent lost its last observation ({exc})"
    if test.p_value < conf["LIVE_DRIFT_ALPHA"]:
        return f"the variance components drifted (REML score test p = {test.p_value:.2g})"
    t_update = time.perf_counter()
    snapshot = _snapshot_write(study, row, updated, posterior, test.to_dict(), len(changes), len(participants), read_at)
    row.snapshot = snapshot
    row.data = updated.to_bytes()
    row.updates += 1
    row.save(update_fields=["snapshot", "data", "updates", "updated_at"])
    LedgerChange.objects.filter(pk__in=[change[0] for change in changes]).delete()
    t_write = time.perf_counter()
    timings = {
        "read_ms": round((t_read - started) * 1000, 3),
        "update_ms": round((t_update - t_read) * 1000, 3),
        "write_ms": round((t_write - t_update) * 1000, 3),
        "total_ms": round((t_write - started) * 1000, 3),
    }
    RatingSnapshot.objects.filter(pk=snapshot.pk).update(timings=timings)
    snapshot.timings = timings
    return snapshot


def _snapshot_write(
    study: Study,
    row: PosteriorState,
    state: InformationState,
    posterior: Any,
    score_test: dict[str, Any],
    n_changes: int,
    n_participants: int,
    read_at: Any,
) -> RatingSnapshot:
    """Write the live snapshot: the agents' posterior, everything else carried from the refit it follows."""
    base = row.refit
    assert base is not None
    k = float(base.config.get("k", 3.0))
    mu, cov = posterior.agent_mu, posterior.agent_cov
    sigma = posterior.agent_sigma()
    conservative = mu - k * sigma
    agent_keys = state.agent_ids.astype(np.int64)
    n = state.terms.agent_n
    summary = dict(base.fit)
    summary.update(json_safe({
        "agents": [
            {"agent_id": str(agent), "mu": float(mu[i]), "sigma": float(sigma[i]),
             "conservative": float(conservative[i]), "n": int(n[i])}
            for i, agent in enumerate(agent_keys.tolist())
        ],
        "agent_cov": cov,
        "prob_greater": posterior.prob_greater,
        "level": float(mu.mean()),
        "n_observations": state.terms.n,
        "n_humans": state.terms.n_humans,
        "update": {
            "kind": "live",
            "base_version": base.version,
            "updates_since_refit": row.updates + 1,
            "changes": n_changes,
            "participants": n_participants,
            "score_test": score_test,
            "carried": "variance components, participants' ratings and residual diagnostics are the refit's",
        },
    }))
    assert row.snapshot is not None  # the study's latest snapshot (checked by _refit_reason under the lock)
    version = row.snapshot.version + 1
    snapshot = RatingSnapshot.objects.create(
        study=study, version=version, n_observations=state.terms.n, config=base.config, fit=summary,
        connectivity=base.connectivity, ledger_digest="", produced_by=RatingSnapshot.ProducedBy.UPDATE, base=base,
    )
    RatingSnapshot.objects.filter(pk=snapshot.pk).update(computed_at=read_at)
    snapshot.computed_at = read_at
    names = selectors.agent_names(agent_keys)
    entity_ratings_write(
        snapshot_id=snapshot.pk, kind=EntityRating.Kind.AGENT, keys=agent_keys,
        labels=[names.get(int(pk), f"agent {pk}") for pk in agent_keys.tolist()],
        mu=mu, sigma=sigma, conservative=conservative, n=n,
    )
    return snapshot
