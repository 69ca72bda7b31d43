"""Server-side SVG charts: escaped labels, accessible titles, one mark per value."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from console.dashboard import charts

SVG = "{http://www.w3.org/2000/svg}"
EVIL = '<script>alert("x")</script> & co'


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(str(svg))


def test_labels_are_escaped_and_the_chart_is_well_formed_xml():
    svg = charts.hbar_chart("funnel", f"Title {EVIL}", [(EVIL, 3), ("Plain", 1)])
    assert "<script>" not in svg
    root = _parse(svg)
    assert root.find(f"{SVG}title").text == f"Title {EVIL}"
    assert root.get("role") == "img"
    assert root.get("aria-labelledby") == "funnel-title funnel-desc"


def test_bars_are_scaled_to_the_largest_value():
    root = _parse(charts.hbar_chart("f", "t", [("a", 10), ("b", 5)]))
    widths = [float(rect.get("width")) for rect in root.iter(f"{SVG}rect")]
    assert widths[0] == 2 * widths[1]


def test_the_heatmap_has_one_cell_per_pair_with_the_probability_in_its_title():
    labels = ["Alpha", "Beta", "Gamma"]
    matrix = [[0.5, 0.9, 0.99], [0.1, 0.5, 0.7], [0.01, 0.3, 0.5]]
    root = _parse(charts.heatmap("pairwise", "P", labels, matrix))
    cells = list(root.iter(f"{SVG}rect"))
    assert len(cells) == 9
    assert cells[1].find(f"{SVG}title").text == "P(Alpha > Beta) = 0.900"
    assert cells[1].get("fill") != cells[3].get("fill")  # 0.9 and 0.1 fall on opposite sides of white


def test_the_forest_plot_draws_intervals_and_marks_significance():
    rows = [
        charts.ForestRow("D1 LLM familiarity", 0.3, 0.07, 0.5, 0.01),
        charts.ForestRow("A2 Trust", -0.1, -0.4, 0.2, 0.5),
        charts.ForestRow("A3", None, None, None),
    ]
    svg = str(charts.forest_plot("rho", "ρ", rows))
    root = _parse(svg)
    assert len(list(root.iter(f"{SVG}circle"))) == 2
    assert "0.30*" in svg and "not computed" in svg


def test_significance_stars_follow_the_paper():
    assert [charts.stars(p) for p in (0.001, 0.02, 0.2, None)] == ["**", "*", "", ""]


def test_pre_post_plot_shows_both_means_and_the_change():
    svg = str(charts.prepost_plot("pp", "t", [charts.PrePostRow("A2", 3.0, 0.2, 3.58, 0.25, 0.004)]))
    assert "Δ +0.58**" in svg
    assert len(re.findall(r"<circle", svg)) == 4  # two legend marks, pre and post


def test_rate_bars_handle_missing_rates():
    svg = str(charts.rate_bars("w", "t", [charts.RateBar("Q1", 0.27, "30 pairs"), charts.RateBar("Q2", None)]))
    assert "27%" in svg and "n/a" in svg
    _parse(svg)


def test_heatmap_leaves_room_for_the_last_rotated_column_label():
    import re as _re

    from console.dashboard.charts import heatmap

    labels = ["Claude Cowork", "Gemini CLI long name"]
    svg = str(heatmap("hm", "P(row > column)", labels, [[0.5, 0.6], [0.4, 0.5]]))
    width = float(_re.search(r'viewBox="0 0 ([0-9.]+) ', svg).group(1))
    last_x = 150.0 + 58.0 * 1 + 29.0
    assert width >= last_x + 0.77 * 7.0 * len("Gemini CLI long na…") - 1, "the rotated label is not clipped"
