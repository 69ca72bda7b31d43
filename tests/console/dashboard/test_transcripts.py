"""Process metrics from transcripts against the score: checked against scipy and hand-computed bin means."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.stats
from django.urls import reverse

from console.dashboard import charts, services
from console.dashboard.transcripts import effort_bin, transcript_analysis
from grading.models import EpisodeTranscript
from studies.models import BackgroundJob, Participant
from tests.factories.scenarios import populated_study


def _add_transcripts(populated, seed: int = 3) -> list[EpisodeTranscript]:
    rng = np.random.default_rng(seed)
    rows = []
    for index, episode in enumerate(populated.episodes):
        if index == 0:
            rows.append(EpisodeTranscript.objects.create(
                episode=episode, status="screenshots_only", parser_version="1", files_fingerprint="x", screenshots=2))
            continue
        prompts = int(rng.integers(1, 25))
        rows.append(EpisodeTranscript.objects.create(
            episode=episode, status="parsed", parser_version="1", files_fingerprint="x", user_prompts=prompts,
            agent_turns=prompts + int(rng.integers(0, 5)), tool_calls=int(rng.integers(0, 40)),
            interventions=int(rng.integers(0, 3)), duration_seconds=float(rng.uniform(300, 4000)),
            active_seconds=None if index % 5 == 0 else float(rng.uniform(100, 3000)),
            initiative_entropy=float(rng.uniform(0, 1)), human_initiative_share=float(rng.uniform(0.5, 1)),
            user_chars=int(rng.integers(50, 5000)), agent_chars=int(rng.integers(500, 50000)),
            effort_ratio=float(rng.uniform(1, 50)), heuristic=index % 7 == 0))
    return rows


@pytest.fixture
def with_transcripts(db):
    populated = populated_study(extras=False, refresh=False, surveys=False)
    _add_transcripts(populated)
    return populated


def _pairs(study, field, scale=1.0):
    rows = EpisodeTranscript.objects.filter(episode__study=study, status="parsed").values_list(
        field, "episode__score")
    return [(value * scale, score) for value, score in rows if value is not None]


@pytest.mark.django_db
def test_each_metric_correlation_matches_scipy_spearman_with_its_n(with_transcripts):
    result = transcript_analysis(with_transcripts.study)
    assert result["n_with_transcript"] == len(with_transcripts.episodes) - 1
    assert result["coverage"]["screenshots_only"] == 1
    for row in result["correlations"]:
        scale = 1 / 60 if row["metric"].endswith("_seconds") else 1.0
        pairs = _pairs(with_transcripts.study, row["metric"], scale)
        expected = scipy.stats.spearmanr([x for x, _ in pairs], [y for _, y in pairs])
        assert row["n"] == len(pairs)
        assert row["rho"] == pytest.approx(expected.statistic)
        assert row["p_value"] == pytest.approx(expected.pvalue)
        assert row["ci_low"] < row["rho"] < row["ci_high"]
        assert row["mean"] == pytest.approx(np.mean([x for x, _ in pairs]))
    active = next(r for r in result["correlations"] if r["metric"] == "active_seconds")
    assert active["n"] < result["n_with_transcript"]  # missing active time is left out, not zero


@pytest.mark.django_db
def test_effort_curves_are_mean_scores_per_prompt_bin_by_agent(with_transcripts):
    result = transcript_analysis(with_transcripts.study)
    for curve in result["effort_curves"]:
        rows = EpisodeTranscript.objects.filter(episode__study=with_transcripts.study, status="parsed",
                                                episode__agent__name=curve["agent"]).values_list(
            "user_prompts", "episode__score")
        for point in curve["points"]:
            scores = [score for prompts, score in rows if effort_bin(prompts) == point["bin"]]
            assert point["n"] == len(scores)
            if scores:
                assert point["mean_score"] == pytest.approx(np.mean(scores))
            if len(scores) > 1:
                assert point["se"] == pytest.approx(scipy.stats.sem(scores))
        expected = scipy.stats.spearmanr([p for p, _ in rows], [s for _, s in rows])
        assert curve["correlation"]["rho"] == pytest.approx(expected.statistic)


def test_effort_bins_double_in_width():
    assert [effort_bin(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 400)] == [
        None, "1", "2", "3–4", "3–4", "5–8", "5–8", "9–16", "9–16", "17+", "17+"]


@pytest.mark.django_db
def test_withdrawn_participants_transcripts_are_left_out(with_transcripts):
    before = transcript_analysis(with_transcripts.study)["n_with_transcript"]
    participant = with_transcripts.participants[-1]
    Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.WITHDRAWN)
    after = transcript_analysis(with_transcripts.study)["n_with_transcript"]
    assert after == before - participant.episodes.count()


def test_curve_chart_escapes_agent_names_and_skips_missing_points():
    svg = charts.curve_chart("c", "t", ["1", "2", "3"], [charts.CurveSeries("<b>Agent</b>", [50.0, None, 70.0])])
    assert "<b>" not in svg and "&lt;b&gt;Agent&lt;/b&gt;" in svg
    assert svg.count("<circle") == 2 and "1 50, 3 70" in svg


@pytest.mark.django_db
def test_the_collaboration_page_shows_the_process_metrics_and_effort_curves(
    staff_client, with_transcripts, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args: None)
    url = reverse("dashboard:collaboration", args=[with_transcripts.study.slug])
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.get(url)
    services.analysis_job_run(job_id=BackgroundJob.objects.get(study=with_transcripts.study, kind="collaboration").pk)
    page = staff_client.get(url).content.decode()
    assert "Collaboration process from the transcripts" in page
    assert "Worker prompts" in page and "Initiative entropy" in page
    assert 'aria-labelledby="effort-scaling-title effort-scaling-desc"' in page
    assert len(re.findall(r"<polyline", page)) >= 1
    # A re-parsed transcript makes the stored result stale, so the page computes again.
    EpisodeTranscript.objects.filter(episode=with_transcripts.episodes[1]).update(user_prompts=3)
    row = EpisodeTranscript.objects.get(episode=with_transcripts.episodes[1])
    row.save()
    assert "data-status-url" in staff_client.get(url).content.decode()


@pytest.mark.django_db
def test_without_scores_or_an_llm_key_the_page_shows_what_the_logs_gave(staff_client, settings):
    from grading.services.transcripts import episode_transcript_build
    from tests.factories.scenarios import submitted_episode
    from tests.grading.transcripts.conftest import SAMPLES

    settings.GRADING = {**settings.GRADING, "OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None}
    episode = submitted_episode(logs={"rollout.jsonl": (SAMPLES / "codex_reduced_rollout.jsonl").read_bytes()})
    submitted_episode(study=episode.study)  # a submission without a log
    url = reverse("dashboard:collaboration", args=[episode.study.slug])
    page = staff_client.get(url).content.decode()
    assert "1 uploaded log is waiting to be read" in page and "parse_transcripts" not in page
    episode_transcript_build(episode_id=episode.pk)
    page = staff_client.get(url).content.decode()
    assert "Of 2 submitted episodes, 1 came with log files: 1 was read" in page
    assert "Formats: Codex CLI session (JSONL) 1." in page
    assert "their correlation with the score shows once episodes are scored" in page
    prompts = page[page.index("Worker prompts"):].split("</tr>")[0]
    assert '<td class="num">1</td><td class="num">3.00</td><td class="num">3.00</td><td class="num">0</td>' in prompts
    assert not BackgroundJob.objects.filter(study=episode.study).exists()  # read at page time, no job needed
