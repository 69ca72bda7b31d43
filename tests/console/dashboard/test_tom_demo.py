"""The demo's ToM codings: simulated and flagged as such on every row, with a planted ToM → κ effect (none on θ)
that the ToM analysis recovers within its interval, and the panel showing it under a "simulated" banner."""

from __future__ import annotations

import csv
import io
import re
import zipfile

import pytest
from django.core.management import call_command
from django.urls import reverse

from console.dashboard import services
from console.demo_tom import planted_tom
from console.exports import build_export
from grading.models import ProcessCoding
from grading.services.theory_of_mind import study_tom
from studies.models import Episode, Study

pytestmark = pytest.mark.django_db


def test_the_demo_plants_a_tom_effect_on_kappa_that_the_analysis_recovers():
    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    assert study.tom_coding
    codings = ProcessCoding.objects.filter(episode__study=study)
    assert codings.exists() and set(codings.values_list("is_simulated", flat=True)) == {True}
    assert set(codings.values_list("prompt_version", flat=True)) == {"simulated-demo"}
    assert all(r.startswith("SIMULATED") for r in codings.values_list("reason", flat=True))
    assert not codings.filter(episode__condition=Episode.Condition.SOLO).exists(), "solo episodes are never coded"
    result = study_tom(study)
    assert result["simulated"] is True and list(result["analysis"])[0] == "simulated"
    truth = planted_tom()
    mod = result["analysis"]["moderation"]
    assert mod["kappa"]["lower"] < truth["kappa"] < mod["kappa"]["upper"], (mod["kappa"], truth)
    assert mod["kappa"]["lower"] > 0, "the planted effect is large enough to be seen"
    assert mod["theta"]["lower"] < truth["theta"] < mod["theta"]["upper"], mod["theta"]
    dev = result["analysis"]["deviation"]["deviation"]
    assert dev["lower"] < truth["deviation"] < dev["upper"]
    judges = result["analysis"]["judges"]
    assert judges["icc_single"] is not None and judges["n_items"] == study.episodes.filter(
        condition=Episode.Condition.WITH_AGENT, is_simulated=True).count()
    assert result["coding_counts"]["coded by both judges"] == judges["n_items"]


def test_the_panel_shows_the_demo_analysis_under_a_simulated_banner(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    job = services.analysis_request(study=study, kind="tom", actor=None)
    services.analysis_job_run(job_id=job.pk)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-simulated"' in html
    assert html.index('id="tom-simulated"') < html.index('id="tom-verdict"') < html.index('id="tom-effects"')
    verdict = re.search(r'id="tom-verdict">(.*?)</p>', html, re.S).group(1)
    assert "score higher with the agent" in verdict
    assert 'id="tom-icc"' in html and 'id="tom-counts"' in html
    # The demo's export carries the codings and the estimates, every row flagged simulated.
    handle = io.BytesIO()
    build_export(study, handle)
    archive = zipfile.ZipFile(io.BytesIO(handle.getvalue()))
    codings = _rows(archive, "process_codings.csv")
    assert codings and {r["is_simulated"] for r in codings} == {"true"}
    estimates = {(r["analysis"], r["term"]): r for r in _rows(archive, "tom_estimates.csv")}
    assert {r["is_simulated"] for r in estimates.values()} == {"true"}
    assert float(estimates[("moderation", "kappa")]["lower"]) > 0
    workers = _rows(archive, "tom_workers.csv")
    assert len(workers) == 90 and all(w["tom_trait"] for w in workers)


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))
