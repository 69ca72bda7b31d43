"""The verdict claims a link only when its interval excludes 0, and says why when it cannot say."""

from __future__ import annotations

from rating.tom_moderation import ModerationResult
from rating.tom_quality import QualityResult
from rating.tom_reliability import IccResult
from rating.tom_verdict import tom_verdict


def _row(est: float, low: float, high: float) -> dict[str, float]:
    return {"estimate": est, "se": 1.0, "lower": low, "upper": high, "p_positive": 0.5, "p_value": 0.5}


def test_a_positive_kappa_link_without_a_theta_link_is_stated_with_its_interval() -> None:
    mod = ModerationResult(trait_kind="calibrated", decomposition="loo", level=0.95, within=False, n_episodes=500,
                           n_workers=100, kappa=_row(3.2, 0.4, 6.0), theta=_row(0.5, -1.9, 2.9),
                           boost=_row(2.7, -0.5, 5.9), converged=True)
    v = tom_verdict(mod)
    assert v.headline.startswith("Workers whose prompts show more perspective-taking score higher with the agent")
    assert "+3.2 points per ToM point [+0.4, +6.0]" in v.headline
    assert "no detectable link with solo ability" in v.headline
    assert v.claims == {"kappa": "positive", "theta": "no_detectable_link", "boost": "no_detectable_link"}


def test_an_interval_crossing_zero_is_not_claimed() -> None:
    mod = ModerationResult(trait_kind="calibrated", decomposition="loo", level=0.95, within=False, n_episodes=500,
                           n_workers=100, kappa=_row(2.0, -0.3, 4.3), theta=_row(0.1, -2.0, 2.2),
                           boost=_row(1.9, -1.0, 4.8), converged=True)
    v = tom_verdict(mod)
    assert v.headline.startswith("No detectable link") and "includes 0" in v.headline
    assert "higher" not in v.headline and v.claims["kappa"] == "no_detectable_link"


def test_thin_data_give_the_reason_and_no_number() -> None:
    mod = ModerationResult(trait_kind="calibrated", decomposition="loo", level=0.95, within=False,
                           reasons={"workers": "only 4 workers have a ToM trait"})
    quality = QualityResult(decomposition="mundlak", level=0.95, reason="only 4 workers have coded episodes")
    agreement = IccResult(raters=("a", "b"), n_items=3, n_incomplete=0, level=0.95, reason="only 3 items")
    v = tom_verdict(mod, quality, agreement)
    assert v.headline.startswith("Cannot say") and "only 4 workers" in v.headline
    assert all(claim == "cannot_say" for claim in v.claims.values())
    assert not any(ch.isdigit() for ch in v.headline.replace("4", ""))


def test_an_unconverged_fit_is_not_claimed() -> None:
    mod = ModerationResult(trait_kind="calibrated", decomposition="loo", level=0.95, within=False, n_episodes=500,
                           n_workers=100, kappa=_row(3.2, 0.4, 6.0), theta=_row(0.5, -1.9, 2.9),
                           boost=_row(2.7, -0.5, 5.9), converged=False,
                           reasons={"convergence": "the REML search did not converge"})
    assert tom_verdict(mod).headline.startswith("Cannot say")


def test_quality_findings_are_claimed_only_outside_zero() -> None:
    mod = ModerationResult(trait_kind="calibrated", decomposition="loo", level=0.95, within=False, n_episodes=500,
                           n_workers=100, kappa=_row(3.2, 0.4, 6.0), theta=_row(0.5, -1.9, 2.9),
                           boost=_row(2.7, -0.5, 5.9), converged=True)
    quality = QualityResult(decomposition="mundlak", level=0.95, n_episodes=300, n_workers=100,
                            coefficients={"tom_trait": _row(0.25, 0.1, 0.4), "tom_deviation": _row(0.05, -0.02, 0.12)})
    v = tom_verdict(mod, quality)
    assert v.claims["quality_trait"] == "positive" and v.claims["quality_deviation"] == "no_detectable_link"
    assert any("get better answers from the agent over and above effort" in s for s in v.sentences)
