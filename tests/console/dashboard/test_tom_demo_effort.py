"""The demo's response-quality regression is fitted on simulated effort controls, flagged simulated on the panel and
in the exports; simulated effort is refused for real episodes, ignored if one carries it anyway, and never reaches
a coder that would send text to an LLM."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.urls import reverse

from console.dashboard import services
from console.demo_tom import planted_quality
from console.exports import build_export
from grading.models import ProcessCoding, SimulatedEffort
from grading.selectors import study_process_codes
from grading.services.process_coding import episode_code_process
from grading.services.simulated_effort import EffortDraw, simulated_effort_record
from grading.services.theory_of_mind import study_tom
from studies.models import BackgroundJob, Episode, EpisodeFile, Study
from tests.factories.tom import tom_study

pytestmark = pytest.mark.django_db


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


def test_the_demo_panel_and_export_show_a_fitted_response_quality_regression_flagged_simulated(staff_client,
                                                                                              monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    agent = Episode.objects.filter(study=study, condition=Episode.Condition.WITH_AGENT, is_simulated=True)
    assert SimulatedEffort.objects.filter(episode__study=study).count() == agent.count()
    assert not SimulatedEffort.objects.exclude(episode__is_simulated=True).exists()
    job = services.analysis_request(study=study, kind="tom", actor=None)
    services.analysis_job_run(job_id=job.pk)
    result = BackgroundJob.objects.get(pk=job.pk).result
    assert result["simulated"] is True and result["simulated_effort"] == agent.count()
    assert result["quality_note"] is None
    quality = result["analysis"]["quality"]
    assert quality["reason"] is None and quality["n_workers"] == 90 and quality["n_episodes"] == agent.count()
    trait = quality["coefficients"]["tom_trait"]
    truth = planted_quality()
    assert trait["lower"] < truth["tom_trait"] < trait["upper"] and trait["lower"] > 0
    for term in ("turns", "characters_k", "edit_ratio"):  # effort goes with ToM but moves no quality code
        row = quality["coefficients"][term]
        assert row["lower"] < truth[term] < row["upper"], (term, row)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-quality"' in html and 'id="tom-quality-reason"' not in html
    banner = html[html.index('id="tom-simulated"'):].split("</div>")[0]
    assert "effort measures" in banner and f"{agent.count()} with-agent episodes" in banner
    section = html[html.index('id="tom-quality-h"'):html.index('id="tom-icc-h"')]
    assert 'id="tom-quality-simulated"' in section and "Simulated effort" in section
    assert f"{trait['estimate']:.3f}" in section
    handle = io.BytesIO()
    build_export(study, handle)
    archive = zipfile.ZipFile(io.BytesIO(handle.getvalue()))
    rows = [r for r in _rows(archive, "tom_estimates.csv") if r["analysis"] == "response_quality"]
    assert len(rows) == 6 and all(r["estimate"] and r["is_simulated"] == "true" and not r["note"] for r in rows)
    # A staff re-run of the coder on a demo episode finds no log and codes nothing: no text, simulated or not, is
    # sent to a judge.
    episode = agent.order_by("pk").first()
    codings = episode_code_process(episode_id=episode.pk)
    assert {c.status for c in codings} == {ProcessCoding.Status.NOT_CODED}
    assert all("No collaboration log" in c.error and c.cost_usd == 0 for c in codings)


def _real_tom_study(slug: str) -> Study:
    """The ToM factory's study with its episodes marked real (the synergy factory draws them as simulated)."""
    study = tom_study(slug=slug)
    Episode.objects.filter(study=study).update(is_simulated=False)
    return study


def test_simulated_effort_is_refused_for_real_or_logged_episodes_and_nothing_is_written():
    study = _real_tom_study("realeffort")
    real = Episode.objects.filter(study=study, condition="with_agent").order_by("pk").first()
    with pytest.raises(ValueError, match="is not simulated"):
        simulated_effort_record([EffortDraw(real.pk, 3, 400, 0.5)])
    Episode.objects.filter(pk=real.pk).update(is_simulated=True)
    EpisodeFile.objects.create(episode=real, kind=EpisodeFile.Kind.LOG, name="session.jsonl", size=2,
                               sha256="0" * 64, file=ContentFile(b"{}", name="session.jsonl"))
    with pytest.raises(ValueError, match="has a collaboration log"):
        simulated_effort_record([EffortDraw(real.pk, 3, 400, 0.5)])
    assert not SimulatedEffort.objects.exists()


def test_a_real_episode_carrying_simulated_effort_is_read_as_having_none():
    study = _real_tom_study("strayeffort")
    before = study_tom(study)
    episodes = list(Episode.objects.filter(study=study, condition="with_agent"))
    SimulatedEffort.objects.bulk_create([SimulatedEffort(episode=e, worker_turns=4, worker_chars=500,
                                                         edit_ratio=0.4) for e in episodes])
    rows = study_process_codes(study.pk)
    assert all(r.worker_turns is None and not r.effort_simulated for r in rows)
    after = study_tom(study)
    assert after["simulated"] is False and after["simulated_effort"] == 0
    assert after == before
    # The same rows on simulated episodes are read, and the whole result says it is simulated.
    Episode.objects.filter(study=study).update(is_simulated=True)
    flagged = study_tom(study)
    assert flagged["simulated"] is True and flagged["simulated_effort"] == len(episodes)
