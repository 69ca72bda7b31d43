"""The "Why some gain more" page: the stored ToM analysis (grading/services/theory_of_mind.py) shaped for the
template, the plain-language verdict first.

Pure functions of the stored result (no queries). Every quantity the analysis could not estimate is shown with its
reason and no number, so an empty cell never reads as a zero.
"""

from __future__ import annotations

from typing import Any

from console.jobs import converged_part

QUALITY_TERMS = (
    ("tom_trait", "ToM trait (worker's mean code)"),
    ("tom_deviation", "ToM deviation (episode minus worker's mean)"),
    ("turns", "Turns (worker's prompts)"),
    ("characters_k", "Characters written (thousands)"),
    ("edit_ratio", "Edit ratio (prompts vs. task text)"),
    ("intercept", "Intercept"),
)


def _reasons(part: dict[str, Any] | None, default: str) -> str:
    """The analysis's reasons for a missing estimate, in one sentence (the position note is not one)."""
    reasons = {k: v for k, v in ((part or {}).get("reasons") or {}).items() if k != "position_effects"}
    return "; ".join(reasons.values()) or default


def _effect(label: str, row: dict[str, Any] | None, reason: str) -> dict[str, Any]:
    return {"label": label, "row": row, "reason": None if row else reason}


def effect_rows(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """ToM's association with κ, θ, the gain, and the within-worker deviation, each with an interval or a reason."""
    mod = converged_part(analysis.get("moderation"))
    dev = converged_part(analysis.get("deviation"))
    why = _reasons(mod, "the fit gave no estimate")
    why_dev = _reasons(dev, "the fit gave no estimate")
    return [
        _effect("ToM trait → ability with the agent (κ)", mod.get("kappa"), why),
        _effect("ToM trait → ability alone (θ)", mod.get("theta"), why),
        _effect("ToM trait → gain from the agent (κ − θ)", mod.get("boost"), why),
        _effect("Within-worker ToM deviation → score with the agent", dev.get("deviation"), why_dev),
    ]


def quality_rows(quality: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The response-quality regression's coefficients in a fixed order, ToM terms first."""
    coefficients = (quality or {}).get("coefficients") or {}
    return [{"term": term, "label": label, "row": coefficients[term]}
            for term, label in QUALITY_TERMS if term in coefficients]


def icc_rows(judges: dict[str, Any] | None) -> list[dict[str, Any]]:
    """ICC(2,1) (one judge) and ICC(2,k) (the judges' mean) with their intervals; empty when not estimable."""
    if not judges or judges.get("icc_single") is None:
        return []
    return [
        {"label": "ICC(2,1): one judge", "value": judges["icc_single"], "interval": judges.get("icc_single_interval")},
        {"label": f"ICC(2,{len(judges.get('raters') or [])}): the judges' mean", "value": judges["icc_average"],
         "interval": judges.get("icc_average_interval")},
    ]


def gold_rows(gold: dict[str, Any] | None, weighted: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The judges' mean against the experts' gold mean on the sampled episodes: ICC(2,1) and ICC(2,2), as sampled
    (unweighted) and weighted by the stratified sample's design (an estimate for every ToM-coded episode)."""
    if not gold or gold.get("icc_single") is None:
        return []
    rows = [
        {"label": "ICC(2,1): the judges' mean against the gold mean", "weighting": "unweighted",
         "value": gold["icc_single"], "interval": gold.get("icc_single_interval")},
        {"label": "ICC(2,2): the mean of the two", "weighting": "unweighted", "value": gold["icc_average"],
         "interval": gold.get("icc_average_interval")},
    ]
    if weighted and weighted.get("icc_single") is not None:
        rows += [
            {"label": "ICC(2,1): the judges' mean against the gold mean", "weighting": "design-weighted",
             "value": weighted["icc_single"], "interval": weighted.get("icc_single_interval")},
            {"label": "ICC(2,2): the mean of the two", "weighting": "design-weighted",
             "value": weighted["icc_average"], "interval": weighted.get("icc_average_interval")},
        ]
    return rows


def _weighted_note(weighted: dict[str, Any] | None) -> str:
    """Why the design-weighted ICC has no number or no interval (empty when it has both)."""
    if not weighted:
        return "the analysis was fitted before the weighted ICC was added: fit it again"
    return str(weighted.get("reason") or weighted.get("interval_note") or "")


PAIRWISE_MEASURES = (
    ("order_consistency", "Same winner in both orders"),
    ("position_a", "Answered “A” (the prompt shown first), of non-ties; 0.5 = no position bias"),
    ("absolute_agreement", "Winner has the higher absolute ToM code, of decided comparisons"),
)


def pairwise_rows(pairwise: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The pairwise run per judge and pooled: each measure's share, interval and counts, or its reason."""
    return [{"judge": row["judge"], "n_pairs": row["n_pairs"], "n_comparisons": row["n_comparisons"],
             "measures": [{"key": key, "label": label, **row[key]} for key, label in PAIRWISE_MEASURES]}
            for row in (pairwise or {}).get("rows") or []]


def _gold_reason(result: dict[str, Any], gold: dict[str, Any] | None) -> str:
    if gold:
        return str(gold.get("reason") or "")
    if not result.get("n_gold_codes"):
        return ("no expert has submitted a gold code yet: draw a gold sample on the experts' staff page "
                "(ToM gold sample) and let the assigned experts code it")
    return "no gold-coded episode also has a ToM code from the judges"


def tom_page(result: dict[str, Any] | None) -> dict[str, Any]:
    """Everything the template shows, from the stored result (or an empty page without one)."""
    if not result:
        return {"ready": False}
    analysis = result.get("analysis")
    if not analysis:
        return {"ready": False, "reason": result.get("reason") or "the analysis gave no result"}
    verdict = analysis.get("verdict") or {}
    quality = analysis.get("quality")
    judges = analysis.get("judges")
    mod = analysis.get("moderation") or {}
    return {
        "ready": True, "simulated": bool(result.get("simulated")),
        "simulated_effort": int(result.get("simulated_effort") or 0),
        "headline": verdict.get("headline", ""), "sentences": verdict.get("sentences") or [],
        "level_pct": round(100 * float(result.get("level", 0.95))),
        "effects": effect_rows(analysis),
        "n_workers": mod.get("n_workers", 0), "n_model_episodes": mod.get("n_episodes", 0),
        "excluded": [{"key": k, "count": v} for k, v in sorted((mod.get("excluded") or {}).items()) if v],
        "quality": quality or {}, "quality_rows": quality_rows(quality),
        "quality_reason": result.get("quality_note") or (quality or {}).get("reason")
        or (None if quality else "no with-agent episode"),
        "judges": judges or {}, "icc_rows": icc_rows(judges),
        "icc_reason": (judges or {}).get("reason") if judges else "no episode has a ToM code from the judges",
        "judge_labels": result.get("judges") or [],
        "gold": analysis.get("gold") or {},
        "gold_rows": gold_rows(analysis.get("gold"), analysis.get("gold_weighted")),
        "gold_weighted": analysis.get("gold_weighted") or {},
        "gold_weighted_note": _weighted_note(analysis.get("gold_weighted")),
        "gold_reason": _gold_reason(result, analysis.get("gold")), "n_gold_codes": result.get("n_gold_codes", 0),
        "pairwise_rows": pairwise_rows(result.get("pairwise")),
        "pairwise_min": (result.get("pairwise") or {}).get("min_count", 5),
        "pairwise_reason": (result.get("pairwise") or {}).get("reason")
        or "the analysis was fitted before the pairwise run was summarised: fit it again",
        "counts": [{"status": k, "count": v} for k, v in (result.get("coding_counts") or {}).items()],
        "n_episodes": result.get("n_episodes", 0), "n_agent_episodes": result.get("n_agent_episodes", 0),
    }
