"""The ToM analysis in plain words, claiming only what the intervals support.

A link is stated only when its interval excludes 0; an interval that crosses 0 reads "no detectable link" (not
"no link": absence of evidence), and an analysis that could not be estimated says why instead of a number.
The headline answers the paper's question — do workers whose prompts show more perspective-taking gain more
from the agent, and not because they are simply better alone? Pure Python: no Django.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rating.tom_moderation import ModerationResult
from rating.tom_quality import QualityResult
from rating.tom_reliability import IccResult

__all__ = ["TomVerdict", "tom_verdict"]


@dataclass(frozen=True)
class TomVerdict:
    """``headline`` first, then one sentence per finding; ``claims`` maps each finding to "positive",
    "negative", "no_detectable_link" or "cannot_say" for the panel's badges."""

    headline: str
    sentences: list[str] = field(default_factory=list)
    claims: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _claim(row: dict[str, float] | None) -> str:
    if row is None:
        return "cannot_say"
    if row["lower"] > 0:
        return "positive"
    if row["upper"] < 0:
        return "negative"
    return "no_detectable_link"


def _ci(row: dict[str, float], unit: str) -> str:
    return f"{row['estimate']:+.1f} {unit} [{row['lower']:+.1f}, {row['upper']:+.1f}]"


def _moderation_sentences(mod: ModerationResult) -> tuple[str, list[str], dict[str, str]]:
    pct = f"{round(mod.level * 100)} %"
    if mod.kappa is None or mod.theta is None or mod.converged is False:
        why = "; ".join(v for k, v in mod.reasons.items() if k != "position_effects") or "the fit failed"
        return f"Cannot say whether ToM relates to ability: {why}.", [], {"kappa": "cannot_say", "theta": "cannot_say"}
    claims = {"kappa": _claim(mod.kappa), "theta": _claim(mod.theta), "boost": _claim(mod.boost)}
    unit = "points per ToM point"
    kappa, theta = mod.kappa, mod.theta
    solo = (f"no detectable link with solo ability ({_ci(theta, unit)})" if claims["theta"] == "no_detectable_link"
            else f"and a link with solo ability too ({_ci(theta, unit)})")
    if claims["kappa"] == "positive":
        headline = (f"Workers whose prompts show more perspective-taking score higher with the agent: "
                    f"{_ci(kappa, unit)} ({pct} interval), {solo}.")
    elif claims["kappa"] == "negative":
        headline = f"Workers whose prompts show more ToM score lower with the agent: {_ci(kappa, unit)}; {solo}."
    else:
        headline = (f"No detectable link between the ToM of workers' prompts and their score with the agent "
                    f"({_ci(kappa, unit)}, the {pct} interval includes 0); {solo.removeprefix('and ')}.")
    which = "on their other episodes" if mod.decomposition == "loo" else "over their episodes"
    sentences = [f"Based on {mod.n_workers} workers and {mod.n_episodes} episodes; ToM is the worker's "
                 f"{'calibrated ' if mod.trait_kind == 'calibrated' else ''}mean code {which}."]
    if mod.boost is not None and claims["boost"] != "no_detectable_link":
        word = "more" if claims["boost"] == "positive" else "less"
        sentences.append(f"Their gain from the agent (with-agent minus solo) is {word} with ToM: "
                         f"{_ci(mod.boost, unit)}.")
    if mod.deviation is not None:
        claims["deviation"] = _claim(mod.deviation)
        said = {"positive": "higher", "negative": "lower"}.get(claims["deviation"])
        sentences.append(f"On tasks where a worker's prompts show more ToM than usual they score {said} with the agent "
                         f"({_ci(mod.deviation, unit)})." if said else
                         f"No detectable within-worker link ({_ci(mod.deviation, unit)}).")
    return headline, sentences, claims


def _quality_sentences(quality: QualityResult) -> tuple[list[str], dict[str, str]]:
    if quality.reason is not None:
        return [f"Response quality: cannot say ({quality.reason})."], {"quality_trait": "cannot_say",
                                                                       "quality_deviation": "cannot_say"}
    trait, dev = quality.coefficients["tom_trait"], quality.coefficients["tom_deviation"]
    claims = {"quality_trait": _claim(trait), "quality_deviation": _claim(dev)}
    words = {"positive": "better", "negative": "worse"}
    out = []
    for key, row, who in (("quality_trait", trait, "Workers with more ToM"),
                          ("quality_deviation", dev, "Prompts with more ToM than the worker's usual")):
        unit = "quality points per ToM point"
        out.append(f"{who} get {words[claims[key]]} answers from the agent over and above effort: {_ci(row, unit)}."
                   if claims[key] in words else f"{who}: no detectable link with answer quality ({_ci(row, unit)}).")
    return out, claims


def tom_verdict(moderation: ModerationResult, quality: QualityResult | None = None,
                agreement: IccResult | None = None) -> TomVerdict:
    """The headline and sentences of the staff panel (module docstring)."""
    headline, sentences, claims = _moderation_sentences(moderation)
    if quality is not None:
        more, quality_claims = _quality_sentences(quality)
        sentences += more
        claims |= quality_claims
    if agreement is not None:
        if agreement.icc_average is None:
            sentences.append(f"Agreement of the judges: cannot say ({agreement.reason}).")
        else:
            low, high = agreement.icc_average_interval or (float("nan"), float("nan"))
            sentences.append(f"The judges agree with ICC(2,k) = {agreement.icc_average:.2f} [{low:.2f}, {high:.2f}] "
                             f"on {agreement.n_items} episodes; the codes' noise is corrected for by the calibrated "
                             "trait, not removed.")
    return TomVerdict(headline=headline, sentences=sentences, claims=claims)
