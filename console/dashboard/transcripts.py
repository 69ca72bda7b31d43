"""Process metrics from the collaboration transcripts against the session score (paper §6.2).

- Each metric (prompt count, agent turns, tool calls, interventions, time, initiative, effort) against the
  episode score: Spearman rho with its Fisher-z interval and n, by the project's helper
  (surveys.stats.spearman_with_ci), over scored episodes whose log was read.
- Collaborative effort scaling: per agent, the mean score at increasing worker effort (prompts, in doubling
  bins) with its standard error, and rho of effort with score within the agent.
- Coverage: how many scored episodes had a readable transcript, only screenshots, nothing readable, or
  heuristic prompt detection.

Withdrawn or declined participants' episodes are left out, as on the rest of the collaboration page.

The correlations need scores and run in the collaboration job; `transcript_overview` (what was read, and each
metric's distribution) is a cheap read the page makes itself, so the metrics show as soon as logs are parsed
on upload, before any judge or coder has run (no LLM is needed for either).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np
from django.db.models import Exists, OuterRef

from console.dashboard import charts
from grading.models import EpisodeTranscript
from grading.transcripts.model import FORMAT_LABELS, Format
from studies.models import Episode, EpisodeFile, Participant, Study
from surveys.stats import spearman_with_ci

_EXCLUDED = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)
_READ = (EpisodeTranscript.Status.PARSED, EpisodeTranscript.Status.PARTIAL)

#: (field, label, scale): the metrics compared with the score, in display order.
METRICS: tuple[tuple[str, str, float], ...] = (
    ("user_prompts", "Worker prompts", 1.0),
    ("agent_turns", "Agent turns", 1.0),
    ("tool_calls", "Tool calls", 1.0),
    ("interventions", "Worker interventions", 1.0),
    ("duration_seconds", "Session duration (min)", 1 / 60),
    ("active_seconds", "Active time (min)", 1 / 60),
    ("initiative_entropy", "Initiative entropy", 1.0),
    ("human_initiative_share", "Worker share of initiative", 1.0),
    ("user_chars", "Characters the worker wrote", 1.0),
    ("effort_ratio", "Agent-to-worker output ratio", 1.0),
)

#: Effort bins of worker prompts (doubling widths, as effort-scaling curves are read on a log scale).
EFFORT_BINS: tuple[tuple[int, int | None, str], ...] = (
    (1, 1, "1"), (2, 2, "2"), (3, 4, "3–4"), (5, 8, "5–8"), (9, 16, "9–16"), (17, None, "17+"),
)


def effort_bin(prompts: int) -> str | None:
    """Return the label of the effort bin holding `prompts`, or None for sessions without a prompt."""
    for low, high, label in EFFORT_BINS:
        if prompts >= low and (high is None or prompts <= high):
            return label
    return None


def _mean_se(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    mean = float(np.mean(values))
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else None
    return mean, se


def effort_curves(rows: list[tuple[str, int, float]]) -> list[dict[str, Any]]:
    """Return per agent the mean score per effort bin and rho of prompts with score (effort scaling)."""
    by_agent: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for agent, prompts, score in rows:
        by_agent[agent].append((prompts, score))
    curves = []
    for agent in sorted(by_agent):
        pairs = by_agent[agent]
        points = []
        for _low, _high, label in EFFORT_BINS:
            scores = [score for prompts, score in pairs if effort_bin(prompts) == label]
            mean, se = _mean_se(scores)
            points.append({"bin": label, "n": len(scores), "mean_score": mean, "se": se})
        rho = spearman_with_ci([p for p, _ in pairs], [s for _, s in pairs], labels=("worker prompts", "score"))
        curves.append({"agent": agent, "n": len(pairs), "points": points, "correlation": rho.to_dict()})
    return curves


def transcript_analysis(study: Study) -> dict[str, Any]:
    """Return the metric-vs-score correlations, effort curves and transcript coverage of a study."""
    transcripts = EpisodeTranscript.objects.filter(episode__study=study).exclude(
        episode__participant__status__in=_EXCLUDED)
    coverage = Counter(transcripts.filter(episode__score__isnull=False).values_list("status", flat=True))
    fields = [name for name, _label, _scale in METRICS]
    rows = list(
        transcripts.filter(status__in=_READ, episode__score__isnull=False)
        .order_by("episode_id")
        .values_list("episode__agent__name", "episode__score", "heuristic", *fields)
    )
    scores = [float(row[1]) for row in rows]
    correlations = []
    for index, (name, label, scale) in enumerate(METRICS):
        values = [row[3 + index] for row in rows]
        xs = [float(v) * scale if v is not None else math.nan for v in values]
        known = [x for x in xs if not math.isnan(x)]
        result = spearman_with_ci(xs, scores, labels=(label, "score")) if rows else None
        correlations.append({
            "metric": name, "label": label,
            "mean": float(np.mean(known)) if known else None,
            "median": float(np.median(known)) if known else None,
            **(result.to_dict() if result else {"n": 0, "rho": None, "p_value": None, "ci_low": None,
                                                  "ci_high": None, "note": "No scored episode has a transcript."}),
        })
    prompts_at = 3 + fields.index("user_prompts")
    curves = effort_curves([(row[0], int(row[prompts_at]), float(row[1])) for row in rows
                            if row[prompts_at] is not None])
    return {
        "n_with_transcript": len(rows),
        "n_heuristic": sum(1 for row in rows if row[2]),
        "coverage": {status.value: coverage.get(status.value, 0) for status in EpisodeTranscript.Status},
        "correlations": correlations,
        "effort_curves": curves,
        "effort_bins": [label for _low, _high, label in EFFORT_BINS],
    }


def _format_label(fmt: str) -> str:
    known = next((f for f in Format if f == fmt), None)
    return FORMAT_LABELS[known] if known is not None else fmt


_SUBMITTED = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED)


def transcript_overview(study: Study) -> dict[str, Any]:
    """Return what the submitted episodes' logs gave: coverage, formats and each metric's n, mean and median.

    Counts submitted episodes (not gold copies) of participants still in the study, scored or not.
    `waiting` counts episodes with a log file whose parse has not been stored yet (it runs on upload; the
    reconciliation sweep re-sends a lost one).
    """
    episodes = (Episode.objects.filter(study=study, is_gold=False, status__in=_SUBMITTED)
                .exclude(participant__status__in=_EXCLUDED))
    has_log = Exists(EpisodeFile.objects.filter(episode=OuterRef("pk"), kind=EpisodeFile.Kind.LOG))
    transcripts = EpisodeTranscript.objects.filter(episode__in=episodes)
    coverage = Counter(transcripts.values_list("status", flat=True))
    fields = [name for name, _label, _scale in METRICS]
    rows = list(transcripts.filter(status__in=_READ).values_list("heuristic", "formats", *fields))
    formats = Counter(fmt for row in rows for fmt in row[1] or ())
    metrics = []
    for index, (name, label, scale) in enumerate(METRICS):
        known = [float(row[2 + index]) * scale for row in rows if row[2 + index] is not None]
        metrics.append({"metric": name, "label": label, "n": len(known),
                        "mean": float(np.mean(known)) if known else None,
                        "median": float(np.median(known)) if known else None})
    return {
        "n_submitted": episodes.count(),
        "n_with_log": episodes.filter(has_log).count(),
        "n_read": len(rows),
        "n_heuristic": sum(1 for row in rows if row[0]),
        "waiting": episodes.filter(has_log).exclude(transcript__isnull=False).count(),
        "coverage": {status.value: coverage.get(status.value, 0) for status in EpisodeTranscript.Status},
        "formats": [{"format": fmt, "label": _format_label(fmt), "n": n} for fmt, n in sorted(formats.items())],
        "metrics": metrics,
    }


def transcript_page(result: dict[str, Any] | None, overview: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the metric table rows, the forest plot of rho and the effort-scaling curves for the page.

    `overview` (read at page time) gives every read episode's metric distribution; the job's `result`
    adds the correlations with the score once episodes are scored.
    """
    data = (result or {}).get("transcripts")
    if overview is not None:
        by_metric = {row["metric"]: row for row in (data or {}).get("correlations", ())}
        overview = {**overview, "rows": [
            {**row, "scored": by_metric.get(row["metric"])} for row in overview["metrics"]]}
    if not data:
        return {"overview": overview} if overview is not None else {}
    correlations = data["correlations"]
    curves = data["effort_curves"]
    clear = [row for row in correlations if row.get("ci_low") is not None and row.get("ci_high") is not None
             and (row["ci_low"] > 0 or row["ci_high"] < 0)]
    verdict = (
        "Process metrics that go with the episode score (95 % interval excludes zero): "
        + ", ".join(f"{row['label']} ({'higher' if row['rho'] > 0 else 'lower'} scores)" for row in clear[:4]) + "."
        if clear else "No process metric goes clearly with the episode score: every 95 % interval includes zero."
    )
    return {
        **data,
        "overview": overview,
        "verdict": verdict,
        "correlation_chart": charts.forest_plot(
            "transcript-rho", "Spearman ρ of each process metric with the episode score (95 % CI)",
            [charts.ForestRow(row["label"], row["rho"], row["ci_low"], row["ci_high"], row["p_value"])
             for row in correlations],
        ) if data["n_with_transcript"] else None,
        "effort_chart": charts.curve_chart(
            "effort-scaling", "Collaborative effort scaling: mean score by worker prompts, per agent",
            data["effort_bins"],
            [charts.CurveSeries(curve["agent"], [p["mean_score"] for p in curve["points"]]) for curve in curves],
            x_label="worker prompts in the episode", y_label="mean score",
        ) if curves else None,
        "effort_rows": [
            {"agent": curve["agent"], "n": curve["n"], "points": curve["points"], **curve["correlation"]}
            for curve in curves
        ],
    }
