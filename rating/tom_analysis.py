"""The whole ToM analysis of a study in one call: what the staff panel shows, verdict first.

A service reads the codes from the database into the input dataclasses and calls `tom_analysis`; the demo calls
`simulated_inputs` on a `rating.tom_sim` study instead, and the result then says ``simulated=True``. Pure
numpy/scipy: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rating.tom_moderation import ModerationResult, TomModerationData, tom_moderation
from rating.tom_quality import QualityData, QualityResult, tom_quality
from rating.tom_reliability import IccResult, RatingTable, icc_agreement
from rating.tom_sim import JUDGES, TomStudy
from rating.tom_verdict import TomVerdict, tom_verdict
from rating.tom_weighted_icc import GoldDesign, WeightedIccResult, weighted_icc_agreement

__all__ = ["TomAnalysis", "TomInputs", "simulated_inputs", "tom_analysis"]


@dataclass(frozen=True)
class TomInputs:
    """Everything the analysis reads: the episodes with their ToM codes, the with-agent episodes' quality and
    effort, the judges' table and (optionally) the judges-vs-gold table with the gold sample's design."""

    moderation: TomModerationData
    quality: QualityData | None = None
    judges: RatingTable | None = None
    gold: RatingTable | None = None
    gold_design: GoldDesign | None = None
    simulated: bool = False


@dataclass(frozen=True)
class TomAnalysis:
    verdict: TomVerdict
    moderation: ModerationResult
    deviation: ModerationResult
    quality: QualityResult | None
    judges: IccResult | None
    gold: IccResult | None
    simulated: bool
    gold_weighted: WeightedIccResult | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values, verdict first."""
        return {
            "simulated": self.simulated, "verdict": self.verdict.to_dict(), "moderation": self.moderation.to_dict(),
            "deviation": self.deviation.to_dict(), "quality": self.quality.to_dict() if self.quality else None,
            "judges": self.judges.to_dict() if self.judges else None,
            "gold": self.gold.to_dict() if self.gold else None,
            "gold_weighted": self.gold_weighted.to_dict() if self.gold_weighted else None,
        }


def tom_analysis(inputs: TomInputs, *, level: float = 0.95) -> TomAnalysis:
    """Reliability (the judge-vs-gold ICC plain and weighted by the gold sample's design), the Eq. 3 moderation
    (trait only, and with the within-worker deviation), response quality and the verdict; each part that cannot be
    estimated carries its reason."""
    moderation = tom_moderation(inputs.moderation, level=level)
    deviation = tom_moderation(inputs.moderation, within=True, level=level)
    quality = tom_quality(inputs.quality, level=level) if inputs.quality is not None else None
    judges = icc_agreement(inputs.judges, level=level) if inputs.judges is not None else None
    gold = icc_agreement(inputs.gold, level=level) if inputs.gold is not None else None
    gold_weighted = (weighted_icc_agreement(inputs.gold, inputs.gold_design, level=level)
                     if inputs.gold is not None and inputs.gold_design is not None else None)
    verdict = tom_verdict(moderation, quality, judges)
    if deviation.deviation is not None:
        within = tom_verdict(deviation)
        # A within fit that did not converge says "cannot say" in its headline and has no deviation sentence.
        if "deviation" in within.claims:
            verdict.sentences.append(within.sentences[-1])
            verdict.claims["deviation"] = within.claims["deviation"]
        else:
            verdict.sentences.append(within.headline.replace("whether ToM relates to ability",
                                                             "whether ToM's within-worker deviation matters"))
            verdict.claims["deviation"] = "cannot_say"
    return TomAnalysis(verdict=verdict, moderation=moderation, deviation=deviation, quality=quality, judges=judges,
                       gold=gold, simulated=inputs.simulated, gold_weighted=gold_weighted)


def simulated_inputs(study: TomStudy) -> TomInputs:
    """The analysis inputs of a simulated study (flagged simulated), for the demo and the bench."""
    team = study.data.team
    quality = QualityData(quality=study.quality[team], human=study.data.human[team], tom=study.tom[team],
                          turns=study.turns[team], characters=study.characters[team],
                          edit_ratio=study.edit_ratio[team])
    coded = np.flatnonzero(team)
    judges = RatingTable(items=tuple(str(e) for e in coded), raters=JUDGES, scores=study.codes[coded])
    return TomInputs(moderation=TomModerationData(study.data, study.tom), quality=quality, judges=judges,
                     simulated=True)
