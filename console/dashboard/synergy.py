"""The "Who benefits from the agent" page: the stored synergy fit (rating/services/synergy.py) shaped for the
template, with the plain-language verdict first.

Pure functions of the stored result (no queries). Every figure comes from the model's estimates -- the agents'
boosts m_agent − m_solo, the workers' shrunk abilities θ_h, κ_h and the tasks' β_t, γ_t -- never from raw
differences of scores, which regress to the mean: a worker who did badly alone by chance would otherwise look
helped most. Where the model says a quantity is not identifiable the page gives the reason and no number.
"""

from __future__ import annotations

import math
from typing import Any

GROUPS = 4  # ability quartiles; difficulty thirds use 3


def _fmt(value: float) -> str:
    return f"{value:+.1f}"


def synergy_verdict(fit: dict[str, Any]) -> str:
    """Return one plain sentence on whether working with the agents helps, and how surely."""
    boosts = fit.get("boosts") or {}
    if not boosts:
        reason = (fit.get("not_identifiable") or {}).get("boost", "the data do not identify it")
        return f"No boost can be estimated yet: {reason}."
    level = round(100 * float(fit.get("level", 0.95)))
    helped = [name for name, b in boosts.items() if b["lower"] > 0]
    hurt = [name for name, b in boosts.items() if b["upper"] < 0]
    unclear = [name for name in boosts if name not in helped and name not in hurt]
    best = max(boosts.items(), key=lambda item: item[1]["estimate"])
    parts = []
    if helped:
        parts.append(f"Working with {_join(helped)} makes people score higher than alone ({level} % intervals "
                     "above zero)")
    if hurt:
        parts.append(f"with {_join(hurt)} people score lower than alone")
    if unclear:
        parts.append(f"for {_join(unclear)} the data cannot yet tell a boost from none")
    text = "; ".join(parts) + "."
    text = text[0].upper() + text[1:]
    b = best[1]
    return (f"{text} The largest boost is {best[0]}'s: {_fmt(b['estimate'])} points on the 0–100 score "
            f"({_fmt(b['lower'])} to {_fmt(b['upper'])}).")


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _groups(rows: list[dict[str, Any]], key: str, count: int) -> list[list[dict[str, Any]]]:
    """Split rows sorted by ``key`` into ``count`` groups of (nearly) equal size."""
    ordered = sorted(rows, key=lambda r: r[key])
    size = len(ordered) / count
    return [ordered[round(i * size):round((i + 1) * size)] for i in range(count) if ordered[round(i * size):round(
        (i + 1) * size)]]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def ability_rows(fit: dict[str, Any], mean_boost: float) -> list[dict[str, Any]]:
    """Team score and boost against solo ability, by quartile of the workers' estimated solo ability θ_h.

    Only workers who did tasks both alone and with an agent carry both estimates. The boost of a worker is the
    agents' mean boost plus their own κ_h − θ_h (shrunk), the team score their solo level plus that boost.
    """
    solo_level = ((fit.get("arm_levels") or {}).get("solo") or {}).get("estimate")
    workers = [{"theta": w["theta"]["estimate"], "boost": w["boost"]["estimate"]}
               for w in fit.get("workers") or [] if w.get("theta") and w.get("boost")]
    if len(workers) < GROUPS or solo_level is None:
        return []
    out = []
    for i, group in enumerate(_groups(workers, "theta", GROUPS), start=1):
        theta = _mean([w["theta"] for w in group])
        boost = mean_boost + _mean([w["boost"] for w in group])
        out.append({"group": i, "workers": len(group), "solo": solo_level + theta, "boost": boost,
                    "team": solo_level + theta + boost})
    return out


def difficulty_rows(fit: dict[str, Any], mean_boost: float) -> list[dict[str, Any]]:
    """Boost by task difficulty alone: thirds of the tasks by their solo level β_t (hardest first).

    A task's boost is the agents' mean boost plus its extra with-agent shift γ_t; only tasks seen in both
    conditions carry γ_t.
    """
    tasks = [{"beta": t["beta"]["estimate"], "gamma": t["gamma"]["estimate"]}
             for t in fit.get("tasks") or [] if t.get("beta") and t.get("gamma")]
    if len(tasks) < 3:
        return []
    names = ("hardest third", "middle third", "easiest third")
    return [{"label": names[i], "tasks": len(group), "beta": _mean([t["beta"] for t in group]),
             "boost": mean_boost + _mean([t["gamma"] for t in group])}
            for i, group in enumerate(_groups(tasks, "beta", 3))]


def slope_view(fit: dict[str, Any]) -> dict[str, Any]:
    """The model's boost per point of solo ability, each agent's own, and whether they differ -- or the reason a
    figure is not given ("cannot tell")."""
    reasons = fit.get("not_identifiable") or {}
    common = fit.get("ability_slope")
    agents = (fit.get("agent_slopes") or {}).get("agents") or {}
    test = (fit.get("agent_slopes") or {}).get("common_slope_test")
    rows = [{"agent": name, "workers": row["workers"], "slope": row["slope"], "reason": row["reason"]}
            for name, row in sorted(agents.items())]
    if test is None:
        differ = reasons.get("agent_slopes_test") or reasons.get("agent_slopes") or (
            "the per-agent fits were not run" if fit.get("boosts") else "")
        words = f"Cannot tell whether agents differ in whom they help: {differ}." if differ else ""
    elif test["p_value"] < 0.05:
        words = (f"The agents differ in whom they help (test of one common slope: χ² = {test['statistic']:.1f} on "
                 f"{test['df']} df, p = {test['p_value']:.3g}).")
    else:
        words = (f"No evidence that the agents differ in whom they help (test of one common slope: χ² = "
                 f"{test['statistic']:.1f} on {test['df']} df, p = {test['p_value']:.3g}).")
    return {"common": common, "common_reason": None if common else reasons.get("ability_slope"),
            "agents": rows, "differ_words": words}


def _test_words(test: dict[str, Any] | None) -> str:
    if not test:
        return ""
    p = test["p_value"]
    held = test.get("heldout") or {}
    text = (f"Likelihood ratio {test['statistic']:.1f}, p = {p:.3g}: "
            + ("people's ability with an agent is not simply their ability alone (θ ≠ κ)." if p < 0.05 else
               "no evidence that ability with an agent differs from ability alone (θ = κ not rejected)."))
    if held:
        text += (f" Held-out prediction over {held['folds']} folds: Δ log density {held['delta_lpd']:+.1f} ± "
                 f"{held['delta_lpd_se']:.1f} (positive favours separate abilities).")
    return text


def synergy_page(result: dict[str, Any] | None) -> dict[str, Any]:
    """Return everything the template shows, from the stored result (or an empty page without one)."""
    if not result or not result.get("fit"):
        return {"ready": False}
    fit = result["fit"]
    boosts = fit.get("boosts") or {}
    mean_boost = _mean([b["estimate"] for b in boosts.values()]) if boosts else float("nan")
    reasons = dict(result.get("not_identifiable") or {})
    pseudonyms = [w["pseudonym"] for w in result.get("workers", [])]
    titles = [t["title"] for t in result.get("tasks", [])]
    strong = fit.get("strong_synergy") or {}
    return {
        "ready": True, "verdict": synergy_verdict(fit), "level_pct": round(100 * float(fit.get("level", 0.95))),
        "boosts": [{"agent": name} | b for name, b in sorted(boosts.items(), key=lambda i: -i[1]["estimate"])],
        "pairwise": fit.get("pairwise") or [],
        "by_ability": ability_rows(fit, mean_boost) if boosts else [],
        "by_difficulty": difficulty_rows(fit, mean_boost) if boosts else [],
        "slope": slope_view(fit) if boosts else None,
        "correlation": fit.get("theta_kappa_correlation"),
        "test": fit.get("theta_kappa_test"), "test_words": _test_words(fit.get("theta_kappa_test")),
        "positions": [{"position": k} | v for k, v in sorted((fit.get("positions") or {}).items(),
                                                               key=lambda i: int(i[0]))],
        "reference_position": fit.get("reference_position"),
        "strong_agents": strong.get("agents") or [],
        "strong_cells": [c | {"title": titles[c["task"]] if c["task"] < len(titles) else str(c["task"])}
                         for c in strong.get("cells") or []],
        "workers": [w | {"pseudonym": pseudonyms[w["human"]] if w["human"] < len(pseudonyms) else str(w["human"])}
                    for w in fit.get("workers") or [] if w.get("boost")],
        "reasons": [{"key": k, "text": v} for k, v in sorted(reasons.items())],
        "n_episodes": result.get("n_episodes", 0), "n_solo": result.get("n_solo", 0),
        "n_used_ai_anyway_left_out": result.get("n_used_ai_anyway_left_out", 0),
        "variance": fit.get("variance_components") or {},
        "finite": math.isfinite(mean_boost),
    }
