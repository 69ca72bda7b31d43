"""One plain sentence at the top of each staff panel: what its numbers say, before the numbers.

Pure functions of what the selectors and stored analyses already hold (no queries), so a verdict can never
disagree with the table under it. The technical detail stays in the panel and in the glossary.
"""

from __future__ import annotations

import math
from typing import Any


def _pct(value: float) -> str:
    if 0.99 < value < 1.0:
        return "more than 99 %"  # never round a near-certainty up to "100 %"
    if 0.0 < value < 0.01:
        return "less than 1 %"
    return f"{100 * value:.0f} %"


def agents_verdict(agents: list[dict[str, Any]], stability: dict[str, Any] | None, k: float) -> str:
    """Return who leads the agent ranking and how settled that is."""
    if not agents:
        return "No agent is rated yet."
    top = agents[0]
    text = f"{top['label']} leads on the cautious score μ − {k:g}σ ({top['conservative']:.1f})"
    if len(agents) > 1:
        second = agents[1]
        text += f", ahead of {second['label']} ({second['conservative']:.1f})"
    text += "."
    top_stability = top.get("stability")
    if stability and top_stability:
        boot = stability.get("bootstrap") or {}
        text += f" It stays first in {_pct(top_stability['bootstrap_p_rank1'])} of the resampled rankings"
        tau = boot.get("mean_kendall_tau")
        if tau is not None:
            text += (f", and resampled rankings agree with this one at τ = {tau:.2f} (1 = always the same order)")
        text += "."
    else:
        text += " Run the stability analysis to see how settled this order is."
    return text


def pairwise_verdict(pairwise: dict[str, Any] | None) -> str:
    """Return the least certain step between neighbours in the ranking."""
    if not pairwise or len(pairwise["labels"]) < 2:
        return ""
    labels, matrix = pairwise["labels"], pairwise["matrix"]
    steps = [(matrix[i][i + 1], labels[i], labels[i + 1]) for i in range(len(labels) - 1)]
    weakest = min(steps)
    settled = [step for step in steps if step[0] >= 0.95]
    if len(settled) == len(steps):
        return "Every agent is ahead of the next one down with probability 0.95 or more: the order is settled."
    p, upper, lower = weakest
    word = "a coin toss" if p < 0.6 else "likely but not settled" if p < 0.95 else "settled"
    return (f"The closest call is {upper} against {lower}: P({upper} ahead) = {p:.2f}, {word}. "
            f"{len(settled)} of {len(steps)} neighbouring pairs are settled (P ≥ 0.95).")


def model_verdict(model: dict[str, Any], checks: dict[str, Any] | None) -> str:
    """Return whether the model's stated uncertainty can be trusted, from held-out coverage or the residuals."""
    coverage = (checks or {}).get("coverage")
    if coverage and coverage.get("coverage") is not None and coverage.get("n_predicted"):
        observed, nominal, n = coverage["coverage"], float(coverage["nominal"]), coverage["n_predicted"]
        # Two binomial standard errors: a smaller gap is what chance alone gives with this many scores.
        tolerance = max(0.01, 2 * math.sqrt(nominal * (1 - nominal) / n))
        gap = observed - nominal
        share = f"{_pct(observed)} of held-out scores fell inside their {_pct(nominal)} intervals"
        if abs(gap) <= tolerance:
            return f"The stated uncertainty is honest: {share}, as close as chance allows with {n} scores."
        if gap < 0 and gap >= -2 * tolerance:
            return (f"The intervals are slightly too narrow: {share}. Read close rankings with a little extra "
                    "caution.")
        if gap < 0:
            return (f"The intervals are too narrow: {share}. The ranking is less certain than the σ columns say; "
                    "consider another rating model.")
        return f"The intervals are on the cautious side: {share}."
    ratio = model.get("ratio")
    if ratio is None:
        return "The model checks appear after the stability analysis has run."
    if 0.8 <= ratio <= 1.25:
        return (f"Scores scatter around the model's predictions about as much as it assumes (ratio {ratio:.2f}); "
                "run the stability analysis for the held-out check.")
    return (f"Scores scatter {ratio:.1f} times as much as the model assumes: its intervals are too narrow. "
            "Switch the study to the calibrated model.")


def humans_verdict(rated: int | None, k: float) -> str:
    """Return how to read the participant scores (relative to the typical participant)."""
    if not rated:
        return "No participant is rated yet."
    return (f"{rated} participants are rated. Their skills are measured from the typical participant (0), and the "
            f"cautious score subtracts {k:g} uncertainties, so most are negative: compare participants with each "
            "other, not with zero.")


def design_verdict(power: dict[str, Any]) -> str:
    """Return what the stopping-rule estimate says, and why the designs agree when they do."""
    repeat_limit, n_agents, tasks_per_session = power["repeat_limit"], power["n_agents"], power["tasks_per_session"]
    all_meet = repeat_limit <= 1 and n_agents and tasks_per_session >= n_agents
    why = (f" At a repeat limit of 1 with {tasks_per_session} tasks and {n_agents} agents, every worker meets every "
           "agent, so the three designs assign the same pairs and their rows are equal (details below)."
           ) if all_meet else ""
    estimate = power.get("estimate")
    if not estimate or not estimate["rows"]:
        if not power.get("has_data"):
            return "No data yet: plan the study's size below." + why
        return "Estimate how many more episodes the ranking needs with the button below." + why
    top = [row for row in estimate["rows"] if row["goal_key"] == "top"] or estimate["rows"]
    current = next((row for row in top if row["current"]), top[0])
    if current["median"] is None:
        need = f"more than {current['max_sessions']} more episodes"
    else:
        need = f"about {current['median']} more episodes ({current['low']}–{current['high']})"
    text = (f"To identify the top agent with P ≥ {estimate['target']}, the current design needs {need}.")
    if estimate.get("equal_goals"):
        text += why or " The designs give equal numbers here."
    return text


def change_direction(row: dict[str, Any]) -> str:
    """Say which way an item moved in the words of its scale: a Human Agency Scale item is coded H1 = 1 (the
    agent fully autonomous) ... H5 = 5 (continuous human involvement), so "down" would read backwards there."""
    if row.get("kind") == "has":
        return ("toward human involvement (H5)" if row["delta"] > 0
                else "toward agent autonomy (H1)")
    return "up" if row["delta"] > 0 else "down"


def survey_verdict(paired: list[dict[str, Any]]) -> str:
    """Return how many attitudes changed after the tasks, after the Holm adjustment."""
    if not paired:
        return "Nobody has answered both surveys yet."
    changed = [row for row in paired if row.get("p_holm") is not None and row["p_holm"] < 0.05]
    if not changed:
        return (f"No attitude changed clearly between the surveys: none of the {len(paired)} items passes the "
                "Holm-adjusted test (p < 0.05).")
    names = ", ".join(f"{row['label']} ({change_direction(row)})" for row in changed[:4])
    return (f"{len(changed)} of {len(paired)} attitudes changed clearly after the tasks (Holm-adjusted p < 0.05): "
            f"{names}.")


def correlation_verdict(rows: list[dict[str, Any]], what: str) -> str:
    """Return which items go with skill, judged by the 95 % interval excluding zero."""
    if not rows:
        return ""
    clear = [row for row in rows if row.get("ci_low") is not None and (row["ci_low"] > 0 or row["ci_high"] < 0)]
    if not clear:
        return f"No {what} is clearly related to skill: every 95 % interval includes zero."
    names = ", ".join(f"{row['label']} ({'higher' if row['rho'] > 0 else 'lower'} skill)" for row in clear[:4])
    return f"{len(clear)} of {len(rows)} {what}s go with skill (95 % interval excludes zero): {names}."


def queue_verdict(waiting: int, failed: int, held: int, oldest: Any) -> str:
    """Return whether grading keeps up."""
    if failed or held:
        return (f"Needs attention: {failed} grading{'s' if failed != 1 else ''} failed and {held} held out of the "
                "rating; the reasons and a retry button are below.")
    if not waiting:
        return "Grading is up to date: nothing is waiting."
    age = f"; the oldest has waited {oldest.days} d {oldest.seconds // 3600} h" if oldest else ""
    return f"{waiting} submission{'s' if waiting != 1 else ''} waiting to be graded{age}."


def funnel_verdict(steps: list[dict[str, Any]], total: int, answered_post: int) -> str:
    """Return how far people get through the study."""
    if not total:
        return "Nobody has joined yet."
    complete = next((step["reached"] for step in steps if step["status"] == "complete"), 0)
    return (f"{total} joined and {complete} completed the study ({_pct(complete / total)}); {answered_post} answered "
            "the post-survey.")


def monitor_verdict(steps: list[dict[str, Any]]) -> str:
    """Return whether anyone in the study has gone quiet."""
    active = sum(step["n"] for step in steps)
    idle = sum(step["stale"] for step in steps)
    if not active:
        return "Nobody is in the middle of the study."
    if not idle:
        return f"{active} participant{'s are' if active != 1 else ' is'} in the study and all were active recently."
    return f"{idle} of {active} participants in the study have been idle: a reminder may help (Actions)."
