"""Turn selector output and stored analysis results into what the templates print: rows and charts."""

from __future__ import annotations

from typing import Any

from console.dashboard import charts


def funnel_chart(funnel: dict[str, Any]) -> Any:
    rows = [(step["label"], step["reached"]) for step in funnel["steps"]]
    if funnel["withdrawn"]:
        rows.append(("Withdrawn", funnel["withdrawn"]))
    return charts.hbar_chart("funnel", "Participants who reached each step", rows)


def heatmap_chart(pairwise: dict[str, Any] | None) -> Any:
    if not pairwise:
        return None
    return charts.heatmap("pairwise", "P(row agent > column agent)", pairwise["labels"], pairwise["matrix"])


def _item_label(row: dict[str, Any], items: dict[str, dict[str, Any]], key: str = "item") -> str:
    code = str(row.get(key, ""))
    base = code.removesuffix(" change")
    construct = items.get(base, {}).get("construct", "")
    return f"{code} {construct}".strip()


def survey_page(result: dict[str, Any] | None) -> dict[str, Any]:
    """Return the survey tables with labels and the Figure 4 charts."""
    if not result:
        return {}
    items = {item["code"]: item for item in result.get("items", [])}
    paired = [{**row, "label": _item_label(row, items)} for row in result["paired"]]
    pre = [{**row, "label": _item_label(row, items, "x_label")} for row in result["pre_correlations"]]
    change = [{**row, "label": _item_label(row, items, "x_label")} for row in result["change_correlations"]]
    # The section heading says "change"; the chart labels need only the item.
    change_chart_rows = [
        charts.ForestRow(
            row["label"].replace(" change", "", 1), row["rho"], row["ci_low"], row["ci_high"], row["p_value"]
        )
        for row in change
    ]
    split = [{**row, "label": _item_label(row, items)} for row in result["skill_split"]]
    return {
        "paired": paired,
        "pre": pre,
        "change": change,
        "split": split,
        "categorical": result.get("categorical", []),
        "prepost_chart": charts.prepost_plot(
            "prepost", "Pre and post means with standard errors",
            [
                charts.PrePostRow(row["label"], row["mean_pre"], row["se_pre"], row["mean_post"], row["se_post"],
                                  row["p_value"])
                for row in paired
            ],
        ) if paired else None,
        "pre_chart": charts.forest_plot(
            "rho-pre", "Spearman ρ of pre-survey answers with skill (95 % CI)",
            [charts.ForestRow(row["label"], row["rho"], row["ci_low"], row["ci_high"], row["p_value"]) for row in pre],
        ) if pre else None,
        "change_chart": charts.forest_plot(
            "rho-change", "Spearman ρ of pre-to-post change with skill (95 % CI)",
            change_chart_rows,
        ) if change else None,
    }


def collaboration_page(result: dict[str, Any] | None) -> dict[str, Any]:
    """Return the fluency tables, the Figure 2 win-rate chart and the Table 5 rows."""
    if not result:
        return {}
    fluency = result["fluency"]
    behaviours = fluency["behaviours"]
    rate_rows = [
        {"label": behaviour["label"], "rates": [agent["rates"].get(behaviour["code"]) for agent in fluency["by_agent"]]}
        for behaviour in behaviours
    ]
    quartiles = result["win_rates"]["quartiles"]
    return {
        "fluency": fluency,
        "rate_rows": rate_rows,
        "correlation_chart": charts.forest_plot(
            "fluency-r", "Point-biserial r of each behaviour with the episode score",
            [charts.ForestRow(row["label"], row["r"], None, None, row["p_value"]) for row in fluency["correlations"]],
        ) if fluency["correlations"] else None,
        "win_rates": result["win_rates"],
        "win_chart": charts.rate_bars(
            "win-rates", "Collaboration beats the solo agent: win rate by human skill quartile",
            [
                charts.RateBar(row["quartile"], row["win_rate"], f"{row['n_comparisons']} pairs")
                for row in quartiles
            ],
        ) if result["win_rates"]["n_comparisons"] else None,
        "by_agent": result["by_agent"],
    }


def residual_chart(qq: dict[str, Any] | None) -> Any:
    """Return the standardized-residual QQ plot of the model checks, or None before they ran."""
    if not qq or not qq.get("observed"):
        return None
    return charts.qq_plot(
        "residual-qq", "Standardized residuals against normal quantiles", qq["theoretical"], qq["observed"]
    )
