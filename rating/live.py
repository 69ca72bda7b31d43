"""Live updates of the calibrated model: the agents' exact posterior at fixed variance components, kept in
information form so one changed participant costs a few small matrix operations instead of a refit.

In the calibrated model :math:`y = a_A + h_H + \\epsilon` (agents fixed, participants random with variance
ratio :math:`\\gamma = \\sigma_H^2/\\beta^2`, noise :math:`\\beta^2/\\omega`) the participants are independent
given the agents, so eliminating them leaves the agents' information (in units of :math:`\\beta = 1`)

.. math::

    S = \\sum_H \\big(D_H - c_H c_H^\\top / d_H\\big), \\qquad r = \\sum_H \\big(b_H - c_H s_H / d_H\\big),

with :math:`c_H` the participant's weight per agent, :math:`D_H = \\mathrm{diag}(c_H)`,
:math:`b_H` its weighted score sum per agent, :math:`s_H` its weighted score sum and
:math:`d_H = n_H + 1/\\gamma`. Every term is one participant's: a new, changed or retracted observation
replaces that participant's term (subtract the old, add the new -- the information-form Kalman update), and
:math:`S^{-1} r` and :math:`S^{-1}` are the agents' exact posterior mean and unit-noise covariance. The state keeps
:math:`(S, r)` at each quadrature node of the variance components (`rating.fit._mixture`), so the hyper-
uncertainty carried into intervals and :math:`P(A > B)` is the refit's.

The variance components stay at the last REML fit. Whether they still fit is checked by the REML score at
the fitted values, which the same additive sums give exactly (:meth:`InformationState.score_test`): a
significant score means the components have drifted and the next refresh re-estimates them.

Pure numpy/scipy: no Django, no settings, no I/O.
"""

from __future__ import annotations

import dataclasses
import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.stats import chi2

from rating.engine import prob_greater_matrix
from rating.fit import FitResult
from rating.linalg import chol_inverse
from rating.reml import Mixture

__all__ = [
    "InformationState", "Posterior", "ScoreTest", "SingularUpdate", "Terms", "information_state", "participant_terms",
]

# Largest grouped-Gram workspace (groups x agents x agents floats) before per-node sparse products.
_GROUPED_LIMIT = 1 << 25


class SingularUpdate(ValueError):
    """The updated agents' information is not positive definite (an agent lost its last observation)."""


@dataclass(frozen=True, eq=False)
class Terms:
    """Sums over participants of their terms of the calibrated model (``beta = 1`` units).

    Node ``j`` of ``schur``/``rhs`` is at variance ratio ``gammas[j]``; the score-test sums are at node 0 (the
    REML estimate). Participants add: ``terms(A ∪ B) = terms(A) + terms(B)`` for disjoint sets.
    """

    schur: np.ndarray  # (J, p, p): sum D_H - c c^T / d
    rhs: np.ndarray  # (J, p): sum b_H - c s / d
    agent_n: np.ndarray  # (p,): observations per agent
    n: int  # observations
    n_humans: int  # participants with at least one observation
    ywy: float  # sum w y^2
    sum_log_omega: float
    s2d: float  # sum s^2 / d (node 0)
    q0: float  # sum s^2 / d^2
    q1: np.ndarray  # (p,): sum c s / d^2
    q2: np.ndarray  # (p, p): sum c c^T / d^2
    sum_inv_d: float  # sum 1 / d

    def _combine(self, other: Terms, sign: float) -> Terms:
        values: dict[str, Any] = {}
        for spec in dataclasses.fields(self):
            mine, theirs = getattr(self, spec.name), getattr(other, spec.name)
            values[spec.name] = mine + sign * theirs
            if spec.name in ("n", "n_humans"):
                values[spec.name] = int(values[spec.name])
            elif spec.name == "agent_n":
                values[spec.name] = np.asarray(values[spec.name]).astype(np.int64)
        return Terms(**values)

    def __add__(self, other: Terms) -> Terms:
        return self._combine(other, 1.0)

    def __sub__(self, other: Terms) -> Terms:
        return self._combine(other, -1.0)


def _grams(
    couplings: scipy.sparse.csr_matrix, n_human: np.ndarray, weights: list[np.ndarray]
) -> list[np.ndarray]:
    """Return :math:`\\sum_H w_H c_H c_H^\\top` for each weight vector, each a function of :math:`n_H` alone.

    With unit weights :math:`n_H` takes few values, so the participants are pooled by it once
    (:math:`\\sum_{H \\in g} c_H c_H^\\top`, one sparse product) and each weighting is a sum over the groups.
    """
    n_h, p = couplings.shape
    if n_h == 0:
        return [np.zeros((p, p)) for _ in weights]
    values, group = np.unique(n_human, return_inverse=True)
    group = group.reshape(-1)
    n_groups = values.shape[0]
    if n_groups * p * p <= _GROUPED_LIMIT and 4 * n_groups <= n_h:
        coo = couplings.tocoo()
        expand = scipy.sparse.csr_matrix(
            (coo.data, (coo.row, group[coo.row] * p + coo.col)), shape=(n_h, n_groups * p)
        )
        pooled = (expand.T @ couplings).toarray().reshape(n_groups, p, p)
        first = np.zeros(n_groups, dtype=np.intp)
        first[group[::-1]] = np.arange(n_h)[::-1]  # any member of each group carries its weight
        out = [np.einsum("g,gij->ij", w[first], pooled) for w in weights]
    else:
        out = [(couplings.T @ scipy.sparse.diags(w) @ couplings).toarray() for w in weights]
    return [0.5 * (g + g.T) for g in out]


def participant_terms(
    agent: np.ndarray,
    human: np.ndarray,
    y: np.ndarray,
    omega: np.ndarray,
    n_agents: int,
    gammas: np.ndarray,
    *,
    compact: bool = False,
) -> Terms:
    """Return the summed terms of the participants in these observations (all of each one's observations).

    ``agent`` codes index the state's agents (``0 .. n_agents-1``); ``human`` codes are any integers, one per
    participant (``compact``: already small non-negative integers, which saves a sort of the whole ledger).
    A participant must appear with every active observation of theirs: the terms add over participants, not
    over one participant's observations.
    """
    agent = np.asarray(agent, dtype=np.intp)
    y = np.asarray(y, dtype=np.float64)
    omega = np.asarray(omega, dtype=np.float64)
    gammas = np.asarray(gammas, dtype=np.float64)
    n_nodes, p = gammas.shape[0], int(n_agents)
    if agent.shape[0] == 0:
        return Terms(
            schur=np.zeros((n_nodes, p, p)), rhs=np.zeros((n_nodes, p)), agent_n=np.zeros(p, dtype=np.int64),
            n=0, n_humans=0, ywy=0.0, sum_log_omega=0.0, s2d=0.0, q0=0.0, q1=np.zeros(p), q2=np.zeros((p, p)),
            sum_inv_d=0.0,
        )
    human = np.asarray(human, dtype=np.int64)
    if not compact:
        human = np.unique(human, return_inverse=True)[1].reshape(-1)
    present = np.bincount(human) > 0
    if not present.all():  # compact codes may skip participants: number the present ones 0..m-1
        human = (np.cumsum(present) - 1)[human]
    n_h = int(human.max()) + 1
    wy = omega * y
    couplings = scipy.sparse.coo_matrix((omega, (human, agent)), shape=(n_h, p)).tocsr()
    couplings.sum_duplicates()
    n_human = np.bincount(human, weights=omega, minlength=n_h)
    s = np.bincount(human, weights=wy, minlength=n_h)
    diag = np.bincount(agent, weights=omega, minlength=p)
    b = np.bincount(agent, weights=wy, minlength=p)
    inv_d = [1.0 / (n_human + 1.0 / g) for g in gammas]
    grams = _grams(couplings, n_human, [*inv_d, inv_d[0] ** 2])
    schur = np.stack([np.diag(diag) - grams[j] for j in range(n_nodes)])
    rhs = np.stack([b - couplings.T @ (s * inv_d[j]) for j in range(n_nodes)])
    return Terms(
        schur=schur,
        rhs=rhs,
        agent_n=np.bincount(agent, minlength=p).astype(np.int64),
        n=int(agent.shape[0]),
        n_humans=n_h,
        ywy=float(np.dot(wy, y)),
        sum_log_omega=float(np.log(omega).sum()),
        s2d=float(np.dot(s * s, inv_d[0])),
        q0=float(np.dot(s * s, inv_d[0] ** 2)),
        q1=np.asarray(couplings.T @ (s * inv_d[0] ** 2)),
        q2=grams[-1],
        sum_inv_d=float(inv_d[0].sum()),
    )


@dataclass(frozen=True, eq=False)
class Posterior:
    """The agents' posterior from the state (the same quantities as `rating.fit.FitResult`)."""

    agent_mu: np.ndarray
    agent_cov: np.ndarray
    prob_greater: np.ndarray
    centre_mu: np.ndarray  # the agents' mean at the REML estimate (what participants' effects condition on)

    def agent_sigma(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.agent_cov), 0.0, None))


@dataclass(frozen=True)
class ScoreTest:
    """The REML score at the fitted variance components, on the current ledger."""

    statistic: float
    df: int
    p_value: float

    def to_dict(self) -> dict[str, float | int]:
        return {"statistic": self.statistic, "df": self.df, "p_value": self.p_value}


@dataclass(frozen=True, eq=False)
class InformationState:
    """The calibrated model's agents in information form at the variance components of the last REML fit.

    ``gammas[0]``/``tau`` are the REML estimates of the participant variance ratio and the log noise variance;
    the other nodes, ``node_weights`` and ``beta2``/``beta2_weights`` are the refit's quadrature over the
    variance components (one node when it plugs in the estimate). ``cov`` is the inverse information of
    ``(tau, theta)`` (``theta`` only when ``free``: a participant variance estimated at zero is held there).
    """

    agent_ids: np.ndarray
    gammas: np.ndarray
    node_weights: np.ndarray
    beta2: np.ndarray
    beta2_weights: np.ndarray
    tau: float
    cov: np.ndarray
    free: bool
    integrated: bool
    terms: Terms
    root_n: int  # observations and participants of the REML fit (the scale of ``cov``)
    root_humans: int

    @property
    def n_agents(self) -> int:
        return int(self.agent_ids.shape[0])

    def updated(self, before: Terms, after: Terms) -> InformationState:
        """Return the state with some participants' terms replaced (``before`` out, ``after`` in)."""
        return dataclasses.replace(self, terms=self.terms - before + after)

    def _factor(self, j: int) -> np.ndarray:
        try:
            return scipy.linalg.cholesky(self.terms.schur[j], lower=True, check_finite=False)
        except np.linalg.LinAlgError as exc:
            raise SingularUpdate(f"the agents' information is singular after the update: {exc}") from exc

    def posterior(self) -> Posterior:
        """Return the agents' posterior mean, covariance and :math:`P(A > B)`, as the refit reports them."""
        if np.any(self.terms.agent_n <= 0):
            raise SingularUpdate("an agent has no observation left")
        means, covs = [], []
        for j in range(self.gammas.shape[0]):
            chol = self._factor(j)
            means.append(scipy.linalg.cho_solve((chol, True), self.terms.rhs[j], check_finite=False))
            try:
                covs.append(chol_inverse(chol))
            except ValueError as exc:
                raise SingularUpdate(str(exc)) from exc
        mixture = Mixture(self.node_weights, np.asarray(means), np.asarray(covs), self.beta2, self.beta2_weights)
        mu, cov = mixture.moments()
        prob = mixture.prob_greater() if self.integrated else prob_greater_matrix(mu, cov)
        return Posterior(agent_mu=mu, agent_cov=cov, prob_greater=prob, centre_mu=means[0])

    def score_test(self) -> ScoreTest:
        """Return the REML score test of the fitted variance components against the current ledger.

        The restricted log-likelihood in :math:`(\\tau, \\theta = \\log\\gamma)` (`rating.fit._evaluate`) has
        score :math:`-\\tfrac12[(n-p) - q e^{-\\tau}]` in :math:`\\tau` and
        :math:`-\\tfrac12[n_H - \\mathrm{tr}/\\gamma - \\lVert\\hat u\\rVert^2 e^{-\\tau}/\\gamma]` in
        :math:`\\theta`, with :math:`\\mathrm{tr} = \\sum 1/d_H + \\mathrm{tr}(S^{-1}Q_2)` and
        :math:`\\lVert\\hat u\\rVert^2 = q_0 - 2\\hat a^\\top q_1 + \\hat a^\\top Q_2 \\hat a`; both are zero at the
        REML fit. :math:`U^\\top \\mathcal{I}^{-1} U` is referred to :math:`\\chi^2` on as many degrees of freedom
        as estimated components, with the information of the fit scaled to the current ledger (it grows with
        the residual degrees of freedom in :math:`\\tau` and with the participants in :math:`\\theta`).
        """
        t = self.terms
        chol = self._factor(0)
        mu = scipy.linalg.cho_solve((chol, True), t.rhs[0], check_finite=False)
        gamma = float(self.gammas[0])
        dfe = t.n - self.n_agents
        q = max(t.ywy - t.s2d - float(mu @ t.rhs[0]), np.finfo(float).eps * t.ywy, np.finfo(float).tiny)
        inv_beta2 = math.exp(-self.tau)
        score = [-0.5 * (dfe - q * inv_beta2)]
        if self.free:
            s_inv = chol_inverse(chol)
            trace = t.sum_inv_d + float(np.sum(s_inv * t.q2))
            u2 = t.q0 - 2.0 * float(mu @ t.q1) + float(mu @ t.q2 @ mu)
            score.append(-0.5 * (t.n_humans - trace / gamma - u2 * inv_beta2 / gamma))
        u = np.asarray(score)
        grow = np.sqrt([(self.root_n - self.n_agents) / max(dfe, 1), self.root_humans / max(t.n_humans, 1)])
        cov = self.cov[: u.shape[0], : u.shape[0]] * np.outer(grow[: u.shape[0]], grow[: u.shape[0]])
        if not np.all(np.isfinite(cov)):
            return ScoreTest(statistic=math.inf, df=int(u.shape[0]), p_value=0.0)
        statistic = float(u @ cov @ u)
        return ScoreTest(statistic=statistic, df=int(u.shape[0]), p_value=float(chi2.sf(statistic, u.shape[0])))

    # ---- storage -------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Return the state as an ``.npz`` archive (no pickles): what the ledger's state row stores."""
        arrays: dict[str, np.ndarray] = {
            name: np.asarray(getattr(self, name))
            for name in ("agent_ids", "gammas", "node_weights", "beta2", "beta2_weights", "tau", "cov", "free",
                         "integrated", "root_n", "root_humans")
        }
        for spec in dataclasses.fields(Terms):
            arrays[f"terms_{spec.name}"] = np.asarray(getattr(self.terms, spec.name))
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> InformationState:
        """Restore a state written by :meth:`to_bytes`."""
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            values = {name: archive[name] for name in archive.files}
        term_values: dict[str, Any] = {}
        for spec in dataclasses.fields(Terms):
            value = values.pop(f"terms_{spec.name}")
            if spec.name in ("n", "n_humans"):
                term_values[spec.name] = int(value)
            elif value.ndim == 0:
                term_values[spec.name] = float(value)
            else:
                term_values[spec.name] = value
        return cls(
            agent_ids=values["agent_ids"],
            gammas=values["gammas"],
            node_weights=values["node_weights"],
            beta2=values["beta2"],
            beta2_weights=values["beta2_weights"],
            tau=float(values["tau"]),
            cov=values["cov"],
            free=bool(values["free"]),
            integrated=bool(values["integrated"]),
            terms=Terms(**term_values),
            root_n=int(values["root_n"]),
            root_humans=int(values["root_humans"]),
        )


def information_state(
    fit: FitResult,
    agent: np.ndarray,
    human: np.ndarray,
    y: np.ndarray,
    omega: np.ndarray | None = None,
    *,
    compact: bool = False,
) -> InformationState | None:
    """Return the state of a calibrated two-factor fit, else ``None``.

    The observations must be the ones the fit was fitted to (``agent``: positions in ``fit.agent_ids``; ``human``
    any integer id per participant); they are read only when the fit did not pool its participants already.
    """
    nodes = fit.variance_nodes
    if nodes is None:
        return None
    if nodes.pooled_terms is not None:  # the fit pooled the participants already: no second pass
        terms = Terms(**nodes.pooled_terms)
    else:
        y = np.asarray(y, dtype=np.float64)
        weights = np.ones(y.shape[0]) if omega is None else np.asarray(omega, dtype=np.float64)
        terms = participant_terms(agent, human, y, weights, int(fit.agent_ids.shape[0]), nodes.gammas,
                                  compact=compact)
    return InformationState(
        agent_ids=np.asarray(fit.agent_ids),
        gammas=nodes.gammas,
        node_weights=nodes.node_weights,
        beta2=nodes.beta2,
        beta2_weights=nodes.beta2_weights,
        tau=nodes.tau,
        cov=nodes.cov,
        free=nodes.free,
        integrated=nodes.integrated,
        terms=terms,
        root_n=terms.n,
        root_humans=terms.n_humans,
    )
