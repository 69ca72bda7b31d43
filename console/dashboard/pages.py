"""Turn selector output and stored analysis results into what the templates print: rows and charts."""

from __future__ import annotations

from typing import Any

from console.dashboard import charts, verdicts
from studies.models import Study


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
    paired = [{**row, "label": _item_label(row, items), "kind": items.get(str(row.get("item")), {}).get("kind", "")}
              for row in result["paired"]]
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
    categorical = []
    for shift in result.get("categorical", []):
        table = shift.get("table") or []
        total = sum(sum(row) for row in table)
        kept = sum(row[i] for i, row in enumerate(table) if i < len(row))
        verdict = (f"{kept} of {total} participants gave the same answer after the tasks as before "
                   "(the diagonal); the other cells show who moved where.") if total else ""
        categorical.append({**shift, "verdict": verdict})
    split_clear = [row for row in split if row.get("p_holm") is not None and row["p_holm"] < 0.05]
    verdicts_ = {
        "paired": verdicts.survey_verdict(paired),
        "pre": verdicts.correlation_verdict(pre, "pre-survey answer"),
        "change": verdicts.correlation_verdict(change, "change"),
        "split": (f"For {len(split_clear)} of {len(split)} items the change differs between the lower and upper half "
                  "by skill (Holm-adjusted p < 0.05)." if split_clear else
                  f"The change does not differ clearly between the lower and upper half by skill for any of the "
                  f"{len(split)} items (Holm-adjusted p < 0.05)."),
    }
    return {
        "verdicts": verdicts_,
        "paired": paired,
        "pre": pre,
        "change": change,
        "split": split,
        "categorical": categorical,
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
        "verdicts": collaboration_verdicts(result),
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


def leaderboard_words(study: Study, data: dict[str, Any], design: dict[str, Any]) -> dict[str, Any]:
    """Return the leaderboard's plain words: each panel's verdict, the model's readable name and μ − kσ as shown."""
    snapshot = data.get("snapshot")
    k = float((snapshot.config or {}).get("k", study.rating_k) if snapshot else study.rating_k)
    kind = (data.get("model") or {}).get("kind")
    words: dict[str, Any] = {"design_verdict": verdicts.design_verdict(design), "k": f"{k:g}",
                             "mu_k_sigma": f"μ − {k:g}σ",
                             "model_label": dict(Study.RatingModel.choices).get(kind or "", kind or "")}
    if snapshot is None:
        return words
    labels = dict(Study.RatingModel.choices)
    words["comparison"] = [
        {**row, "label": labels.get(row.get("model", ""), row.get("model", ""))}
        for row in (data.get("model_checks") or {}).get("comparison") or []
    ]
    counts_rated = data["humans"].paginator.count if data.get("humans") is not None else None
    words["verdicts"] = {
        "agents": verdicts.agents_verdict(data["agents"], data.get("stability"), k),
        "pairwise": verdicts.pairwise_verdict(data.get("pairwise")),
        "model": verdicts.model_verdict(data.get("model") or {}, data.get("model_checks")),
        "humans": verdicts.humans_verdict(counts_rated, k),
    }
    return words


def overview_verdicts(data: dict[str, Any], counts: Any) -> dict[str, str]:
    """Return the overview panels' verdicts."""
    queue, spend = data["queue"], data["spend"]
    if spend["rows"]:
        spent = f"${spend['total']:.2f} spent on LLM calls"
        if spend["budget"] is not None:
            spent += (f" of a ${spend['budget']:.2f} budget"
                      + (": the budget is reached and grading starts no new calls." if spend["over_budget"] else "."))
        else:
            spent += " (no budget cap)."
    else:
        spent = "No LLM call has been made yet."
    return {
        "funnel": verdicts.funnel_verdict(data["funnel"]["steps"], counts.participants, counts.answered_post),
        "monitor": verdicts.monitor_verdict(data["monitor"]["steps"]),
        "queue": verdicts.queue_verdict(counts.submissions_waiting, queue["failed"], queue["held"],
                                        queue["oldest_waiting"]),
        "spend": spent,
    }


def collaboration_verdicts(result: dict[str, Any]) -> dict[str, str]:
    """Return the collaboration panels' verdicts."""
    fluency, wins = result["fluency"], result["win_rates"]
    related = [row for row in fluency["correlations"] if row.get("p_value") is not None and row["p_value"] < 0.05]
    fluency_text = (
        f"{len(related)} of {len(fluency['correlations'])} behaviours go with the episode score (p < 0.05): "
        + ", ".join(f"{row['label']} ({'higher' if row['r'] > 0 else 'lower'})" for row in related[:4]) + "."
        if related else
        f"No behaviour goes clearly with the episode score (no p < 0.05 among {len(fluency['correlations'])})."
    )
    if wins["n_comparisons"] and wins.get("win_rate") is not None:
        wins_text = (f"Working with a person beats the agent working alone in {100 * wins['win_rate']:.0f} % of "
                     f"{wins['n_comparisons']} matched comparisons (50 % = no difference).")
    else:
        wins_text = "No episode can be matched with a solo run of the same agent on the same task yet."
    by_agent = [row for row in result["by_agent"] if row.get("collabskill") is not None]
    solo = [row for row in result["by_agent"] if row.get("mean_solo_score") is not None]
    table_text = ""
    if by_agent:
        best = max(by_agent, key=lambda row: row["collabskill"])
        table_text = f"{best['agent']} collaborates best (highest CollabSkill score)"
        if solo:
            best_solo = max(solo, key=lambda row: row["mean_solo_score"])
            same = "and also" if best_solo["agent"] == best["agent"] else "while"
            table_text += f", {same} {best_solo['agent']} scores highest working alone"
        table_text += "."
    return {"fluency": fluency_text, "wins": wins_text, "table5": table_text}
