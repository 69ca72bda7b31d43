"""Time and cost per episode: both time measures, pay, expert review time, priced usage, and unknown costs."""

from __future__ import annotations

import csv
import io
import zipfile
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from statsmodels.stats.weightstats import DescrStatsW

from console.economics import economics_summary, episode_economics, mean_interval
from console.exports import Pseudonymizer, build_export
from experts.models import ExpertGrade
from grading.models import ModelPrice
from grading.services.transcripts import episode_transcript_build
from studies.models import Episode, Payment
from tests.factories import UserFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import ExpertAssignmentFactory, ExpertGradeFactory, make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import populated_study
from tests.grading.transcripts.conftest import SAMPLES


@pytest.fixture
def priced(db):
    """A study whose first episode has a Claude Code log, pay and an expert grade; the second a Codex log."""
    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=4)
    first, second = populated.episodes[:2]
    for episode, started in ((first, 1800), (second, 600)):
        Episode.objects.filter(pk=episode.pk).update(submitted_at=episode.submitted_at or date(2025, 10, 2),
                                                     status=Episode.Status.GRADED)
        episode.refresh_from_db()
        Episode.objects.filter(pk=episode.pk).update(started_at=episode.submitted_at - timedelta(seconds=started))
    EpisodeFileFactory(episode=first, name="session.jsonl", kind="log",
                       content=(SAMPLES / "claude_code_session_v2.jsonl").read_bytes())
    EpisodeFileFactory(episode=second, name="rollout.jsonl", kind="log",
                       content=(SAMPLES / "codex_reduced_rollout.jsonl").read_bytes())
    for episode in (first, second):
        episode_transcript_build(episode_id=episode.pk)
    Payment.objects.update_or_create(participant=first.participant, episode=first, kind=Payment.Kind.TASK,
                                     defaults={"amount": Decimal("12.50")})
    grade = ExpertGradeFactory(assignment=ExpertAssignmentFactory(episode=first, expert=make_expert(username="ex1")),
                               rubric=make_rubric(first.task, rows=[("correctness", 40.0, "", "Right.")]))
    ExpertGrade.objects.filter(pk=grade.pk).update(status=ExpertGrade.Status.SUBMITTED, time_spent_seconds=420)
    ModelPrice.objects.create(model="claude-sonnet-4-5", effective_from=date(2020, 1, 1), input_per_million=3,
                              cache_read_per_million=Decimal("0.3"), cache_write_per_million=Decimal("3.75"),
                              output_per_million=15, source="provider price page")
    return populated, first, second


def _row(rows, episode):
    return next(r for r in rows if r.episode_id == episode.pk)


@pytest.mark.django_db
def test_each_episode_carries_both_time_measures_its_pay_review_time_and_priced_usage(priced):
    populated, first, second = priced
    rows = episode_economics(populated.study)
    one = _row(rows, first)
    assert one.worker_seconds == 1800 and one.log_active_seconds is not None
    assert one.pay == Decimal("12.50") and one.expert_seconds == 420 and one.expert_grades == 1
    # 320 input tokens at $3 and 190 output tokens at $15 per million (counts made by hand in test_usage.py).
    assert one.cost.amount == (320 * Decimal(3) + 190 * Decimal(15)) / 1_000_000
    assert one.tokens["calls"] == 4


@pytest.mark.django_db
def test_a_model_without_a_price_is_an_unknown_cost_with_its_reason_and_no_log_is_unknown_too(priced):
    populated, first, second = priced
    rows = episode_economics(populated.study)
    codex = _row(rows, second)
    assert codex.cost.amount is None and "gpt-5-codex" in codex.cost.reason
    others = [r for r in rows if r.episode_id not in (first.pk, second.pk)]
    assert others and all(r.cost.amount is None and r.tokens is None for r in others)


def test_the_mean_interval_equals_statsmodels():
    values = [3.0, 7.5, 1.25, 9.0, 4.0]
    low, high = DescrStatsW(values).tconfint_mean(alpha=0.05)
    found = mean_interval([*values, None])
    assert found["n"] == 5 and found["low"] == pytest.approx(low, abs=1e-12) and \
        found["high"] == pytest.approx(high, abs=1e-12)
    assert mean_interval([2.0]) == {"n": 1, "mean": 2.0, "low": None, "high": None}
    assert mean_interval([None]) == {"n": 0, "mean": None, "low": None, "high": None}


@pytest.mark.django_db
def test_the_summary_leaves_unknown_costs_out_of_the_mean_and_counts_them(priced):
    populated, first, _ = priced
    summary = economics_summary(episode_economics(populated.study))
    agent = next(g for g in summary["agents"] if g["group"] == first.agent.name)
    assert agent["model_cost"]["n"] == 1 and agent["cost_unknown"] == agent["episodes"] - 1


@pytest.mark.django_db
def test_the_staff_page_shows_costs_prices_and_why_costs_are_unknown(priced, client):
    populated, first, _ = priced
    client.force_login(UserFactory(username="staff-costs", roles=["staff"], is_staff=True))
    response = client.get(reverse("dashboard:costs", args=[populated.study.slug]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Time &amp; cost" in page and "claude-sonnet-4-5" in page
    assert "No price in the table on" in page and "No uploaded session file recorded model usage" in page


@pytest.mark.django_db
def test_the_export_carries_each_episode_s_time_and_cost_and_the_price_table_used(priced):
    populated, first, second = priced
    handle = io.BytesIO()
    build_export(populated.study, handle)
    archive = zipfile.ZipFile(io.BytesIO(handle.getvalue()))
    hasher = Pseudonymizer(populated.study)
    costs = {r["episode_id"]: r for r in csv.DictReader(io.TextIOWrapper(archive.open("episode_costs.csv")))}
    one, two = costs[hasher("episode", first.pk)], costs[hasher("episode", second.pk)]
    price = ModelPrice.objects.get()
    assert one["model_cost_usd"] == "0.003810" and one["price_ids"] == str(price.pk) and one["pay"] == "12.50"
    assert one["worker_seconds"] == "1800.0" and one["expert_review_seconds"] == "420.0"
    assert two["model_cost_usd"] == "" and "gpt-5-codex" in two["model_cost_note"]
    assert two["input_tokens"] == str(3120 - 1024) and two["reasoning_tokens"] == "64"
    prices = list(csv.DictReader(io.TextIOWrapper(archive.open("model_prices.csv"))))
    assert prices == [{"price_id": str(price.pk), "model": "claude-sonnet-4-5", "effective_from": "2020-01-01",
                       "input_per_million": "3.0000", "cache_read_per_million": "0.3000",
                       "cache_write_per_million": "3.7500", "output_per_million": "15.0000",
                       "source": "provider price page"}]
    dictionary = archive.read("data_dictionary.csv").decode()
    assert "episode_costs.csv,model_cost_usd" in dictionary and "model_prices.csv,effective_from" in dictionary


@pytest.mark.django_db
def test_the_api_gives_staff_each_episode_s_time_and_cost_and_refuses_others(priced):
    from rest_framework.test import APIClient

    populated, first, second = priced
    client = APIClient()
    client.force_authenticate(UserFactory(username="staff-api", roles=["staff"]))
    answer = client.get(f"/api/studies/{populated.study.slug}/costs/")
    assert answer.status_code == 200
    body = answer.json()
    one = next(e for e in body["episodes"] if e["episode"] == first.pk)
    assert one["model_cost_usd"] == "0.003810" and one["pay"] == "12.50" and one["tokens"]["output"] == 190
    assert next(e for e in body["episodes"] if e["episode"] == second.pk)["model_cost_usd"] is None
    assert body["prices"][0]["model"] == "claude-sonnet-4-5" and body["agents"]
    worker = APIClient()
    worker.force_authenticate(UserFactory(username="worker-api", roles=["worker"]))
    assert worker.get(f"/api/studies/{populated.study.slug}/costs/").status_code == 403


@pytest.mark.django_db
def test_the_export_and_the_api_carry_the_worker_s_own_minutes_as_the_last_column_empty_when_not_given(priced):
    from rest_framework.test import APIClient

    populated, first, second = priced
    Episode.objects.filter(pk=first.pk).update(self_reported_minutes=35)
    handle = io.BytesIO()
    build_export(populated.study, handle)
    archive = zipfile.ZipFile(io.BytesIO(handle.getvalue()))
    header = archive.read("episode_costs.csv").decode().splitlines()[0].split(",")
    assert header[-2:] == ["price_ids", "self_reported_minutes"]
    hasher = Pseudonymizer(populated.study)
    costs = {r["episode_id"]: r for r in csv.DictReader(io.TextIOWrapper(archive.open("episode_costs.csv")))}
    assert costs[hasher("episode", first.pk)]["self_reported_minutes"] == "35"
    assert costs[hasher("episode", second.pk)]["self_reported_minutes"] == ""
    assert costs[hasher("episode", first.pk)]["worker_seconds"] == "1800.0"  # the two measures stay apart
    assert "episode_costs.csv,self_reported_minutes,integer" in archive.read("data_dictionary.csv").decode()
    client = APIClient()
    client.force_authenticate(UserFactory(username="staff-minutes", roles=["staff"]))
    episodes = {e["episode"]: e for e in client.get(f"/api/studies/{populated.study.slug}/costs/").json()["episodes"]}
    assert episodes[first.pk]["self_reported_minutes"] == 35 and episodes[second.pk]["self_reported_minutes"] is None
