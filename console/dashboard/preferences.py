"""The "Comparisons" page: the stored preference fit (experts/services/preferences.py) shaped for the template,
with the plain-language verdict first.

Pure functions of the stored result (no queries). Win and tie rates come from the model (qualities tied to the
episodes' skill terms, position and length effects taken out), not from raw counts, which the page shows apart
and labelled raw. Where the model says a quantity is not identifiable the page gives the reason and no number.
"""

from __future__ import annotations

from typing import Any

WORKER_ALONE = "worker alone"


def _pct(p: float) -> str:
    return f"{100 * p:.0f} %"


def preference_verdict(result: dict[str, Any]) -> str:
    """Return one plain sentence on which deliverables experts prefer over the worker's own, and how surely."""
    fit = result.get("fit")
    if not fit:
        reason = (result.get("not_identifiable") or {}).get("model") or (
            result.get("not_identifiable") or {}).get("win_rates") or "the data do not identify it"
        return f"No win rate can be estimated yet: {reason}."
    level = round(100 * float(fit.get("level", 0.95)))
    rows = [r for r in fit.get("versus_worker_alone") or [] if "win" in r]
    if not rows:
        rows = [r for r in fit.get("win_rates") or [] if "win" in r]
        if not rows:
            return "No win rate can be estimated: no two arms are linked by comparisons or rubric scores."
        best = max(rows, key=lambda r: r["win"]["estimate"])
        return (f"There is no worker-alone deliverable to compare with. Of the arms compared, {best['cell']} is "
                f"preferred to {best['versus']} {_pct(best['win']['estimate'])} of the time "
                f"({_pct(best['win']['lower'])} to {_pct(best['win']['upper'])}, {level} % interval).")
    parts = []
    for r in sorted(rows, key=lambda r: -_win_or_tie(r)):
        win, beat = r["win"], _win_or_tie(r)
        if win["lower"] > 0.5:
            sure = "experts clearly prefer it"
        elif win["upper"] < 0.5 and r.get("loss", {}).get("lower", 0) > 0.5:
            sure = "experts clearly prefer the worker's own"
        else:
            sure = "the data cannot yet tell"
        parts.append(f"{_cap(r['cell'])} wins or ties against the worker alone {_pct(beat)} of the time "
                     f"(wins {_pct(win['estimate'])}, {_pct(win['lower'])} to {_pct(win['upper'])}): {sure}")
    return "; ".join(parts) + f". Rates are the model's, at equal position and length, with {level} % intervals."


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _win_or_tie(row: dict[str, Any]) -> float:
    return float(row["win"]["estimate"]) + float((row.get("tie") or {}).get("estimate", 0.0))


def _effect_rows(fit: dict[str, Any]) -> list[dict[str, Any]]:
    """Position bias and length preference of the experts as a whole, in log-odds and in rubric points."""
    effects = fit.get("effects") or {}
    missing = fit.get("not_identifiable") or {}
    out = []
    for key, label, reason_key in (("position_first", "Shown first (position bias)", "position_bias"),
                                   ("length_per_doubling", "Twice as long (length preference)", "length_preference")):
        row = effects.get(key)
        if row:
            out.append({"label": label, "row": row, "points": row.get("points")})
        else:
            out.append({"label": label, "reason": missing.get(reason_key, "the rankings do not identify it")})
    return out


def _agreement_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [{"who": str(r[key]), "row": r} for r in rows]


def preference_page(result: dict[str, Any] | None) -> dict[str, Any]:
    """Everything the template shows, from the stored result (``ready`` False when there is none)."""
    if not result:
        return {"ready": False}
    fit = result.get("fit") or {}
    agreement = result.get("agreement") or {}
    experts = {str(e["expert"]): e for e in fit.get("experts") or []}
    expert_rows = []
    for row in agreement.get("experts") or []:
        own = experts.get(str(row["expert"]), {})
        expert_rows.append({"who": str(row["expert"]), "row": row,
                            "position": own.get("position_first"), "length": own.get("length_per_doubling")})
    return {
        "ready": True, "verdict": preference_verdict(result), "fitted": bool(fit),
        "level_pct": round(100 * float(result.get("level", 0.95))), "units": fit.get("units", "points"),
        "n_comparisons": result.get("n_comparisons", 0), "n_episodes": result.get("n_episodes", 0),
        "n_solo_runs": result.get("n_solo_runs", 0), "n_scores": result.get("n_scores", 0),
        "error": result.get("error"),
        "versus_worker_alone": fit.get("versus_worker_alone") or [], "win_rates": fit.get("win_rates") or [],
        "differences": fit.get("differences") or [], "effects": _effect_rows(fit) if fit else [],
        "scale": (fit.get("effects") or {}).get("scale"), "experts": expert_rows,
        "graders": _agreement_rows(agreement.get("graders") or [], "grader"),
        "excluded_experts": fit.get("excluded_experts") or {},
        "not_identifiable": result.get("not_identifiable") or {},
    }


def _pp(value: float) -> str:
    """A signed difference of shares in percentage points."""
    return f"{100 * value:+.0f} pp"


def _cell(share: dict[str, Any], *, signed: bool = False) -> dict[str, Any]:
    """One summary share as the table shows it: the value and interval, or the reason there is none."""
    fmt = _pp if signed else _pct
    counts = f"{share['successes']} of {share['n']}"
    if share.get("share") is None:
        return {"value": "", "interval": "", "counts": counts, "reason": share.get("reason") or ""}
    low, high = share["interval"]
    return {"value": fmt(share["share"]), "interval": f"{fmt(low)} to {fmt(high)}", "counts": counts, "reason": ""}


def _kappa_cells(agreement: dict[str, Any]) -> dict[str, Any]:
    """Kappa, its jackknife interval over comparison sets and their number, or the reason there is no interval."""
    kappa, interval = agreement.get("kappa"), agreement.get("kappa_interval")
    return {"kappa": "" if kappa is None else f"{kappa:.2f}",
            "kappa_interval": f"{interval['lower']:.2f} to {interval['upper']:.2f}" if interval else "",
            "kappa_sets": interval["n_sets"] if interval else None,
            "kappa_reason": "" if interval else agreement.get("kappa_reason") or ""}


def _expert_yardstick(agreement: dict[str, Any] | None) -> dict[str, Any] | None:
    """The experts' agreement with each other, held beside the judges': the share and its kappa."""
    return None if not agreement else _cell(agreement) | _kappa_cells(agreement)


def judge_page(summary: dict[str, Any]) -> dict[str, Any]:
    """The judges' comparison-mode summary (experts/judge_comparison_selectors.py) shaped for the template."""
    rows = []
    for row in summary.get("rows") or []:
        agreement = row["expert_agreement"]
        rows.append({"judge": row["judge"], "n_sets": row["n_sets"], "n_rankings": row["n_rankings"],
                     "agreement": _cell(agreement), "strict": _cell(agreement["strict"]), **_kappa_cells(agreement),
                     "consistency": _cell(row["order_consistency"]),
                     "position": _cell(row["position_bias"], signed=True), "ties": row["position_bias"]["ties"]})
    return {"rows": rows, "reason": summary.get("reason"), "counts": summary.get("counts") or {},
            "level_pct": round(100 * float(summary.get("level", 0.95))),
            "experts": _expert_yardstick(summary.get("experts_with_each_other")),
            "n_expert_rankings": summary.get("n_expert_rankings", 0)}
