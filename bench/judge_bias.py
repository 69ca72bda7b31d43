"""Simulate judge self-preference and check today's panel mean against the judge-aware model (rating/grader_fit.py).

Usage::

    python bench/judge_bias.py             # every section (1 000 / 500 studies per scale), a few minutes
    python bench/judge_bias.py --quick     # a tenth of the studies (seconds; coverage then only +-3-4 %)
    python bench/judge_bias.py --only calibration   # one section: calibration, kept_off, no_bias,
                                                     # unidentifiable, experts, timing

Design (the paper's): 5 agents -- Claude Code and Claude Cowork (anthropic), Codex (openai), Gemini CLI
(google), Manus (other) -- at level 70 with agent sd 3; 93 participants (sd 8) and 386 episodes, every
participant at least once and the rest at random (4-5 each), agent drawn at random per episode; episode
quality sd 12. Two judges grade every episode: a Gemini judge (google) and a Claude judge (anthropic), their
leniencies 3 points apart (-1.5, +1.5), judge noise sd 6; the Claude judge adds 4 points to the anthropic
agents' episodes. "10x" has 930 participants and 3 860 episodes.

Models: **panel mean** -- today's pipeline, ``fit_model(kind="calibrated")`` on each episode's mean of its
judge scores; **judge-aware** -- ``fit_graded`` on every grade (reference: the panel). Both integrate over
their variance components (the default). The truth for an agent's level is a_A + mean leniency of the panel
(here a_A: the leniencies average 0), and the gaps are all pairwise differences.

Sections:

* ``calibration``: the design above at paper scale and 10x -- coverage of the true gaps by 95 % intervals
  (from ``agent_cov``), the share of pairs shown at P(A > B) > 0.95 that are wrong, each agent's level bias,
  and the coverage of the self-preference intervals (Claude 4, Gemini 0); PASS/MISS against coverage >= 93 %,
  wrong claims <= 2.5 %, |level bias| < 0.5 for the judge-aware model;
* ``kept_off``: the calibration design at paper scale plus a third judge (GPT, openai) that grades every
  episode except those of its own family's agent (Codex) -- a conflict-of-interest exclusion, whose term the
  grades cannot identify. The Claude and Gemini terms stay identifiable and must be kept: PASS/MISS against
  coverage >= 93 %, |level bias| < 0.5 and wrong P>0.95 claims no higher than an **oracle** given the true
  corrections (the calibrated model on each episode's corrected mean judge grade, true precision weights),
  whose rate is printed beside the model's (with two truly tied agents even the oracle makes ~2.5 % wrong
  claims at paper scale);
* ``no_bias``: the same without self-preference -- what the judge-aware model costs in precision (mean
  standard deviation of the gaps against the panel mean; goal <= 10 % more);
* ``unidentifiable``: only the Claude agents and Codex, graded by a Claude judge and a GPT judge, no experts --
  the model must say "not identifiable" and print no number for either preference;
* ``experts``: the calibration design plus 2 experts (leniency sd 3) grading a random 10 % of episodes,
  levels referenced to the experts (truth a_A + mean expert leniency);
* ``timing``: one fit at 10^5 episodes x 3 graders (20 agents, 2 x 10^4 participants), median of 3
  (target <= 2 s).

Coverage and bias figures carry +- 1.96 Monte-Carlo standard errors computed over studies (pairs within a
study are correlated). Prints, never asserts. Set ``OPENBLAS_NUM_THREADS=1`` on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAMILY = {"Claude Code": "anthropic", "Claude Cowork": "anthropic", "Codex": "openai", "Gemini CLI": "google",
          "Manus": "other"}  # fmt: skip
AGENTS = list(FAMILY)
JUDGES = (("gemini-judge", "google", -1.5), ("claude-judge", "anthropic", 1.5))
KEPT_OFF_JUDGES = (("gpt-judge", "openai", 0.0),) + JUDGES  # listed first: the order that hid terms
SCALES = {"paper": (93, 386), "10x": (930, 3860)}
STUDIES = {"paper": 1000, "10x": 500}
Z = 1.959963984540054
GOAL_COVERAGE, GOAL_WRONG, GOAL_BIAS, GOAL_LOSS, GOAL_SECONDS = 0.93, 0.025, 0.5, 0.10, 2.0


def simulate(
    rng: np.random.Generator,
    n_humans: int,
    n_episodes: int,
    *,
    agents: list[str] = AGENTS,
    judges: tuple[tuple[str, str, float], ...] = JUDGES,
    preference: dict[str, float] | None = None,
    n_experts: int = 0,
    expert_share: float = 0.1,
    kept_off: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Return one study, one row per grade, with the true agent effects and expert leniencies.

    A judge named in ``kept_off`` grades no episode of an agent of its own family (a conflict-of-interest
    exclusion).
    """
    preference = {"claude-judge": 4.0} if preference is None else preference
    n_a = len(agents)
    a = rng.normal(0.0, 3.0, n_a)
    h = rng.normal(0.0, 8.0, n_humans)
    ep_agent = rng.integers(0, n_a, n_episodes)
    ep_human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_episodes - n_humans)])
    rng.shuffle(ep_human)
    quality = rng.normal(0.0, 12.0, n_episodes)
    family = np.array([FAMILY[x] for x in agents])
    graders = [(gid, fam, lenient, preference.get(gid, 0.0)) for gid, fam, lenient in judges]
    expert_lenient = rng.normal(0.0, 3.0, n_experts)
    graders += [(f"expert-{x}", "", float(expert_lenient[x]), 0.0) for x in range(n_experts)]
    parts = []
    for gid, fam, lenient, pref in graders:
        eps = np.arange(n_episodes)
        if fam == "":
            eps = np.sort(rng.choice(n_episodes, int(round(expert_share * n_episodes)), replace=False))
        own = (family[ep_agent[eps]] == fam) if fam else np.zeros(eps.size, dtype=bool)
        if gid in kept_off:
            eps, own = eps[~own], own[~own]
        y = 70.0 + a[ep_agent[eps]] + h[ep_human[eps]] + quality[eps] + lenient + pref * own
        parts.append((eps, np.full(eps.size, gid), np.full(eps.size, fam), y + rng.normal(0.0, 6.0, eps.size)))
    episode = np.concatenate([p[0] for p in parts])
    judge_grades = np.array([p[0].size for p, g in zip(parts, graders, strict=True) if g[1]], dtype=float)
    lenient_of = {gid: lenient for gid, _, lenient, _ in graders}
    pref_of = {gid: pref for gid, _, _, pref in graders}
    return {
        "episode": episode,
        "grader": np.concatenate([p[1] for p in parts]),
        "grader_family": {gid: fam for gid, fam, _, _ in graders},
        "agent": np.array(agents)[ep_agent[episode]],
        "human": ep_human[episode],
        "y": np.concatenate([p[3] for p in parts]),
        "judge": np.isin(np.concatenate([p[1] for p in parts]), [j[0] for j in judges]),
        "truth_a": dict(zip(agents, 70.0 + a, strict=True)),
        "panel_leniency": float(np.mean([j[2] for j in judges])),
        # The judge-aware reference weights each judge by its number of grades.
        "panel_leniency_by_use": float(np.average([j[2] for j in judges], weights=judge_grades)),
        "leniency": lenient_of,
        "preference": pref_of,
        "family": family,
        "expert_leniency": float(expert_lenient.mean()) if n_experts else float("nan"),
        "ep_agent": np.array(agents)[ep_agent],
        "ep_human": ep_human,
    }


def panel_mean_fit(study: dict[str, Any]) -> Any:
    """Today's pipeline: each episode's mean of its judge scores, calibrated model."""
    from rating.fit import ModelSpec, fit_model

    judge = study["judge"]
    n_ep = study["ep_agent"].shape[0]
    total = np.bincount(study["episode"][judge], weights=study["y"][judge], minlength=n_ep)
    count = np.bincount(study["episode"][judge], minlength=n_ep)
    return fit_model(study["ep_agent"], study["ep_human"], total / count, spec=ModelSpec(kind="calibrated"))


def judge_aware_fit(study: dict[str, Any], reference: str = "panel") -> Any:
    from rating.grader_fit import fit_graded

    return fit_graded(
        study["agent"], study["human"], study["y"], episode=study["episode"], grader=study["grader"],
        agent_family=FAMILY, grader_family=study["grader_family"], reference=reference,
    )  # fmt: skip


def oracle_fit(study: dict[str, Any]) -> Any:
    """The model given the true corrections: each judge grade minus its judge's true leniency (relative to the
    reference, weighted by use as the judge-aware model's is) and true self-preference, averaged per episode
    and fitted by the calibrated model with each mean's true precision (episode sd 12, noise sd 6)."""
    from rating.fit import ModelSpec, fit_model

    judge = study["judge"]
    grader = study["grader"][judge]
    episode = study["episode"][judge]
    n_ep = study["ep_agent"].shape[0]
    own = study["family"][np.searchsorted(np.array(AGENTS), study["agent"][judge])] == np.array(
        [study["grader_family"][g] for g in grader.tolist()]
    )  # fmt: skip
    correction = np.array([study["leniency"][g] for g in grader.tolist()]) - study["panel_leniency_by_use"]
    correction += own * np.array([study["preference"][g] for g in grader.tolist()])
    count = np.bincount(episode, minlength=n_ep)
    means = np.bincount(episode, weights=study["y"][judge] - correction, minlength=n_ep) / count
    precision = 1.0 / (12.0**2 + 6.0**2 / count)
    return fit_model(study["ep_agent"], study["ep_human"], means, spec=ModelSpec(kind="calibrated"),
                     weights=precision / precision.mean())  # fmt: skip


class Tally:
    """Per-study accumulation of one model's calibration figures."""

    def __init__(self) -> None:
        self.cover: list[float] = []
        self.gap_sd: list[float] = []
        self.claims = 0
        self.wrong = 0
        self.bias: dict[str, list[float]] = {a: [] for a in AGENTS}
        self.pref_cover: dict[str, list[bool]] = {}
        self.unidentified: dict[str, int] = {}
        self.seconds = 0.0

    def add(self, fit: Any, truth: dict[str, float], seconds: float) -> None:
        ids = [str(x) for x in fit.agent_ids]
        true = np.array([truth[x] for x in ids])
        i, j = np.triu_indices(len(ids), 1)
        cov = fit.agent_cov
        sd = np.sqrt(cov[i, i] + cov[j, j] - 2.0 * cov[i, j])
        gap, true_gap = fit.agent_mu[i] - fit.agent_mu[j], true[i] - true[j]
        self.cover.append(float(np.mean(np.abs(gap - true_gap) <= Z * sd)))
        self.gap_sd.append(float(sd.mean()))
        probs = fit.prob_greater()[i, j]
        claim = (probs > 0.95) | (probs < 0.05)
        self.claims += int(claim.sum())
        self.wrong += int(np.sum(claim & ((probs > 0.5) != (true_gap > 0))))
        for k, agent in enumerate(ids):
            self.bias[agent].append(float(fit.agent_mu[k] - true[k]))
        self.seconds += seconds

    def add_preference(self, fit: Any, planted: dict[str, float]) -> None:
        for row in fit.diagnostics["graders"]["self_preference"]:
            if not row["identifiable"]:
                self.unidentified[row["grader"]] = self.unidentified.get(row["grader"], 0) + 1
            if row["identifiable"]:
                covered = row["ci_low"] <= planted.get(row["grader"], 0.0) <= row["ci_high"]
                self.pref_cover.setdefault(row["grader"], []).append(bool(covered))

    def coverage(self) -> tuple[float, float]:
        c = np.asarray(self.cover)
        return float(c.mean()), float(Z * c.std(ddof=1) / np.sqrt(c.size))


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def run_studies(scale: str, studies: int, seed: int, *, preference: dict[str, float] | None, n_experts: int = 0,
                reference: str = "panel", judges: tuple[tuple[str, str, float], ...] = JUDGES,
                kept_off: tuple[str, ...] = (), oracle: bool = False) -> dict[str, Tally]:  # fmt: skip
    rng = np.random.default_rng(seed)
    n_h, n_ep = SCALES[scale]
    tallies = {"panel mean": Tally(), "judge-aware": Tally()}
    if oracle:
        tallies["oracle"] = Tally()
    planted = {"claude-judge": 4.0} if preference is None else preference
    for _ in range(studies):
        study = simulate(rng, n_h, n_ep, preference=planted, n_experts=n_experts, judges=judges, kept_off=kept_off)
        shift = study["expert_leniency"] if reference == "experts" else study["panel_leniency_by_use"]
        truth = {a: v + shift for a, v in study["truth_a"].items()}
        t0 = time.perf_counter()
        panel = panel_mean_fit(study)
        t1 = time.perf_counter()
        aware = judge_aware_fit(study, reference)
        t2 = time.perf_counter()
        if reference == "panel":
            tallies["panel mean"].add(panel, truth, t1 - t0)
        tallies["judge-aware"].add(aware, truth, t2 - t1)
        tallies["judge-aware"].add_preference(aware, planted)
        if oracle:
            t3 = time.perf_counter()
            tallies["oracle"].add(oracle_fit(study), truth, time.perf_counter() - t3)
    if reference != "panel":
        del tallies["panel mean"]
    return tallies


def print_tallies(tallies: dict[str, Tally], *, goals: bool) -> None:
    for name, t in tallies.items():
        cov, err = t.coverage()
        wrong = t.wrong / max(t.claims, 1)
        biases = {a: float(np.mean(v)) for a, v in t.bias.items() if v}
        bias_err = {a: float(Z * np.std(v, ddof=1) / np.sqrt(len(v))) for a, v in t.bias.items() if v}
        worst = max(abs(b) for b in biases.values())
        line = (
            f"  {name:12s} gap coverage {cov:.3f} +- {err:.3f}"
            f"{f' [{_mark(cov >= GOAL_COVERAGE)} >= {GOAL_COVERAGE:.2f}]' if goals and name == 'judge-aware' else ''}"
            f"  wrong among P>0.95 {wrong:.3f} ({t.wrong}/{t.claims})"
            f"{f' [{_mark(wrong <= GOAL_WRONG)} <= {GOAL_WRONG}]' if goals and name == 'judge-aware' else ''}"
            f"  mean gap sd {np.mean(t.gap_sd):.2f}  fit {1000 * t.seconds / len(t.cover):.1f} ms"
        )
        print(line)
        bias_text = "  ".join(f"{a} {b:+.2f}+-{bias_err[a]:.2f}" for a, b in biases.items())
        mark = f" [{_mark(worst < GOAL_BIAS)} |bias| < {GOAL_BIAS}]" if goals and name == "judge-aware" else ""
        print(f"  {'':12s} level bias: {bias_text}{mark}")
        for grader, covered in t.pref_cover.items():
            print(f"  {'':12s} self-preference of {grader}: 95 % interval covers the planted value "
                  f"{np.mean(covered):.3f} ({len(covered)} studies)")  # fmt: skip


def section_calibration(studies: dict[str, int]) -> None:
    print("\ncalibration: Claude judge +4 on anthropic agents, leniencies 3 apart")
    for scale in SCALES:
        print(f" {scale} ({SCALES[scale][0]} participants, {SCALES[scale][1]} episodes), {studies[scale]} studies")
        print_tallies(run_studies(scale, studies[scale], 2026, preference=None), goals=True)


def section_kept_off(studies: dict[str, int]) -> None:
    print("\nkept_off: a third judge (GPT, openai, leniency 0) kept off its own family's agent (Codex); Claude judge")
    print(" +4 on anthropic agents. Truth: a_A + the judges' leniencies weighted by their number of grades")
    scale = "paper"
    tallies = run_studies(scale, studies[scale], 4040, preference=None, judges=KEPT_OFF_JUDGES, kept_off=("gpt-judge",),
                          oracle=True)  # fmt: skip
    print(f" {scale} ({SCALES[scale][0]} participants, {SCALES[scale][1]} episodes), {studies[scale]} studies")
    print_tallies(tallies, goals=True)
    aware, oracle = tallies["judge-aware"], tallies["oracle"]
    wrong, wrong_oracle = aware.wrong / max(aware.claims, 1), oracle.wrong / max(oracle.claims, 1)
    # Two standard errors of the difference of two binomial rates: the model is judged against the oracle.
    err = 2.0 * np.sqrt(wrong * (1 - wrong) / max(aware.claims, 1) + wrong_oracle * (1 - wrong_oracle) / max(
        oracle.claims, 1))  # fmt: skip
    print(f"  wrong among P>0.95: judge-aware {wrong:.3f} beside the oracle's {wrong_oracle:.3f} "
          f"[{_mark(wrong <= wrong_oracle + err)} no higher than the oracle's, +- {err:.3f}]")  # fmt: skip
    dropped = aware.unidentified.get("claude-judge", 0) + aware.unidentified.get("gemini-judge", 0)
    print(f"  identifiable terms reported not identifiable: {dropped} of {2 * len(aware.cover)} "
          f"[{_mark(dropped == 0)} none]; GPT judge's term reported not identifiable in "
          f"{aware.unidentified.get('gpt-judge', 0)} of {len(aware.cover)} studies (it grades no openai agent)")


def section_no_bias(studies: dict[str, int]) -> None:
    print("\nno_bias: no self-preference (leniencies still 3 apart) -- what the extra terms cost")
    for scale in SCALES:
        tallies = run_studies(scale, studies[scale], 7, preference={})
        print(f" {scale}, {studies[scale]} studies")
        print_tallies(tallies, goals=False)
        loss = np.mean(tallies["judge-aware"].gap_sd) / np.mean(tallies["panel mean"].gap_sd) - 1.0
        print(f"  precision loss of the judge-aware model (mean gap sd): {100 * loss:+.1f} % "
              f"[{_mark(loss <= GOAL_LOSS)} <= {100 * GOAL_LOSS:.0f} %]")  # fmt: skip


def section_unidentifiable() -> None:
    print("\nunidentifiable: Claude Code, Claude Cowork and Codex graded by a Claude judge (+4 on anthropic) and a")
    print(" GPT judge (+2 on openai), no experts")
    rng = np.random.default_rng(11)
    judges = (("claude-judge", "anthropic", 1.5), ("gpt-judge", "openai", -1.5))
    study = simulate(rng, 93, 386, agents=["Claude Code", "Claude Cowork", "Codex"], judges=judges,
                     preference={"claude-judge": 4.0, "gpt-judge": 2.0})  # fmt: skip
    fit = judge_aware_fit(study)
    invented = False
    for row in fit.diagnostics["graders"]["self_preference"]:
        invented |= row["estimate"] is not None
        print(f"  {row['grader']} ({row['family']}): identifiable={row['identifiable']} estimate={row['estimate']}"
              f"\n    reason: {row['reason']}")  # fmt: skip
    print(f"  no number invented: [{_mark(not invented)}]")
    for note in fit.diagnostics["notes"]:
        print(f"  note: {note}")


def section_experts(studies: dict[str, int]) -> None:
    print("\nexperts: + 2 experts (leniency sd 3) on a random 10 % of episodes, reference='experts'")
    for scale in SCALES:
        n = studies[scale]
        print(f" {scale}, {n} studies (truth: a_A + mean expert leniency)")
        print_tallies(run_studies(scale, n, 99, preference=None, n_experts=2, reference="experts"), goals=True)


def section_timing() -> None:
    from rating.grader_fit import fit_graded

    rng = np.random.default_rng(0)
    n_a, n_h, n_ep = 20, 20_000, 100_000
    families = ["anthropic", "openai", "google", "other"]
    agent_family = {a: families[a % 4] for a in range(n_a)}
    grader_family = {0: "anthropic", 1: "google", 2: "openai"}
    ep_agent = rng.integers(0, n_a, n_ep)
    ep_human = np.concatenate([np.arange(n_h), rng.integers(0, n_h, n_ep - n_h)])
    episode = np.repeat(np.arange(n_ep), 3)
    grader = np.tile(np.arange(3), n_ep)
    agent = ep_agent[episode]
    own = np.array([agent_family[a] for a in range(n_a)])[agent] == np.array(["anthropic", "google", "openai"])[grader]
    y = (70.0 + rng.normal(0, 3, n_a)[agent] + rng.normal(0, 8, n_h)[ep_human[episode]]
         + rng.normal(0, 12, n_ep)[episode] + np.array([0.0, 3.0, -2.0])[grader] + 4.0 * own
         + rng.normal(0, 6, episode.size))  # fmt: skip
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fit = fit_graded(agent, ep_human[episode], y, episode=episode, grader=grader, agent_family=agent_family,
                         grader_family=grader_family)  # fmt: skip
        times.append(time.perf_counter() - t0)
    median = sorted(times)[1]
    print(f"\ntiming: 10^5 episodes x 3 graders, 20 agents, 2 x 10^4 participants: median {median:.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in times)} [{_mark(median <= GOAL_SECONDS)} <= {GOAL_SECONDS:.0f} s]"
          f"  ({fit.diagnostics['backend']} elimination; load average {os.getloadavg()[0]:.1f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the studies")
    parser.add_argument("--only", choices=["calibration", "kept_off", "no_bias", "unidentifiable", "experts", "timing"])
    args = parser.parse_args()
    studies = {k: max(v // 10, 10) if args.quick else v for k, v in STUDIES.items()}
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")  # fmt: skip
    sections = [args.only] if args.only else ["calibration", "kept_off", "no_bias", "unidentifiable", "experts",
                                              "timing"]
    t0 = time.perf_counter()
    if "calibration" in sections:
        section_calibration(studies)
    if "kept_off" in sections:
        section_kept_off(studies)
    if "no_bias" in sections:
        section_no_bias(studies)
    if "unidentifiable" in sections:
        section_unidentifiable()
    if "experts" in sections:
        section_experts(studies)
    if "timing" in sections:
        section_timing()
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
