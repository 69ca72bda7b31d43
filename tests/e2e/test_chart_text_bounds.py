"""No chart's text runs outside its drawing area, measured by the browser that draws it.

The charts are server-side SVG whose label room is estimated in Python; only a browser knows how wide a
label really is in the font it picked. Each <text> element's bounding box (SVG user units) must lie inside
the chart's viewBox, on every staff page of a study with every analysis computed, and on every chart kind
drawn from labels and values at their extremes. Screenshots are kept under var/e2e-charts-*.png. The staff
pages' charts are measured at 1280 and 390 px by ``test_phone_every_page`` on its seeded study (one seeding
for both), with OUTSIDE and SCALE from here.
"""

from __future__ import annotations

import pytest

from console.dashboard import charts

CHART_PAGES = ("overview", "leaderboard", "surveys", "collaboration", "synergy")
# Screen rectangles, so a rotated axis title is measured as drawn; the SVG's own box is its drawing area.
OUTSIDE = """() => Array.from(document.querySelectorAll('svg.dash-chart')).flatMap((svg) => {
  for (let node = svg.parentElement; node; node = node.parentElement) {
    if (node.tagName === 'DETAILS') node.open = true;  // a chart one click away is measured as drawn
  }
  const area = svg.getBoundingClientRect();
  return Array.from(svg.querySelectorAll('text')).map((text) => {
    const b = text.getBoundingClientRect();
    return {chart: svg.getAttribute('aria-labelledby'), text: text.textContent,
            left: b.left - area.left, top: b.top - area.top, right: area.right - b.right,
            bottom: area.bottom - b.bottom};
  }).filter((r) => Math.min(r.left, r.top, r.right, r.bottom) < -0.5);
})"""
# How much a chart is shrunk from the size it was drawn for (its text with it); a phone scrolls it instead.
SCALE = """() => Array.from(document.querySelectorAll('svg.dash-chart')).map((svg) =>
  ({chart: svg.getAttribute('aria-labelledby'),
    scale: svg.getBoundingClientRect().width / svg.viewBox.baseVal.width}))"""
LONG = "Comfort with delegating high-stakes work to an autonomous agent (A3)"


def _extreme_charts() -> str:
    """Every chart kind, with long labels and values at the ends of their scales."""
    labels = [LONG, "Claude Cowork (desktop agent)", "W", "Gemini CLI 2.5 Pro with a very long model name"]
    forest = [charts.ForestRow(label, rho, lo, hi, p) for label, rho, lo, hi, p in
              zip(labels, (-0.99, 0.0, 0.98, -0.5), (-1.0, -0.6, 0.9, -0.9), (-0.9, 0.6, 1.0, 0.1),
                  (0.0001, 0.5, 0.001, None), strict=True)]
    parts = [
        charts.hbar_chart("funnel", "Participants who reached each step",
                          [("Consented", 100000), ("Working on tasks", 99999), ("Post-survey", 1), ("Withdrawn", 0)]),
        charts.rate_bars("wins", "Collaboration beats the solo agent: win rate by human skill quartile",
                         [charts.RateBar(f"Q{i} (highest skill)" if i == 4 else f"Q{i}", rate, f"{n} pairs")
                          for i, rate, n in ((1, 0.0, 12345), (2, 1.0, 3), (3, 0.5, 100), (4, 0.999, 99999))]),
        charts.heatmap("pairwise", "P(row agent > column agent)", labels,
                       [[0.5 if i == j else (0.999 if i < j else 0.001) for j in range(4)] for i in range(4)]),
        charts.forest_plot("forest", "Spearman ρ of pre-survey answers with skill (95 % CI)", forest),
        charts.prepost_plot("prepost", "Pre and post means with standard errors",
                            [charts.PrePostRow(label, pre, 0.4, post, 0.5, p) for label, pre, post, p in
                             zip(labels, (1.0, 7.0, 3.2, 5.0), (7.0, 1.0, 3.3, 5.0), (0.0001, 0.01, 0.9, None),
                                 strict=True)]),
        charts.curve_chart("effort", "Collaborative effort scaling: mean score by worker prompts, per agent",
                           ["1", "2-3", "4-7", "8-15", "16 or more"],
                           [charts.CurveSeries(label, [0.0, 100.0, None, 55.5, 99.9]) for label in labels],
                           x_label="worker prompts in the episode", y_label="mean score"),
        charts.qq_plot("qq", "Standardized residuals against normal quantiles",
                       [-3.5, -1.0, 0.0, 1.0, 3.5], [-6.2, -1.1, 0.0, 1.2, 7.9]),
    ]
    return "<!doctype html><html><body>" + "".join(str(part) for part in parts) + "</body></html>"


@pytest.mark.e2e
def test_every_chart_kind_keeps_long_labels_and_extreme_values_inside(page):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.set_content(_extreme_charts())
    assert page.locator("svg.dash-chart").count() == 7
    page.screenshot(path="var/e2e-charts-extremes.png", full_page=True)
    outside = page.evaluate(OUTSIDE)
    assert outside == [], "\n".join(str(row) for row in outside)
