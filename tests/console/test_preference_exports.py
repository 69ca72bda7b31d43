"""The fitted win-rate table in the staff API and the export: only the fit of the current comparisons and
scores, only for a study with comparison sets, and the data dictionary names its columns."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from rest_framework.test import APIClient

from console.dashboard import services
from console.exports import build_export
from experts.comparison_selectors import preferences_fingerprint
from experts.judge_comparison_selectors import study_judge_preferences
from studies.models import Episode
from tests.console.dashboard.test_comparisons_tab import fitted_world
from tests.factories.users import UserFactory

pytestmark = pytest.mark.django_db


def _export(study):
    handle = io.BytesIO()
    build_export(study, handle)
    archive = zipfile.ZipFile(io.BytesIO(handle.getvalue()))
    return archive, list(csv.DictReader(io.TextIOWrapper(archive.open("comparison_win_rates.csv"), encoding="utf-8")))


def _fit(study):
    job = services.analysis_request(study=study, kind="preferences", actor=None)
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    return job.result


def test_the_export_and_api_carry_the_fit_of_the_current_data_only(monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = fitted_world()["study"]
    client = APIClient()
    client.force_authenticate(UserFactory(is_staff=True))
    url = f"/api/studies/{study.slug}/preferences/"
    assert client.get(url).json()["error"]["code"] == "no_preference_fit"
    archive, rows = _export(study)
    assert rows == []  # the file is there, empty until the fit has run
    dictionary = archive.read("data_dictionary.csv").decode()
    for column in ("win_lower", "tie", "raw_losses", "not_identifiable"):
        assert f"comparison_win_rates.csv,{column}," in dictionary

    result = _fit(study)
    response = client.get(url)
    assert response.status_code == 200 and response.json() == result | {"judges": study_judge_preferences(study)}
    assert response.json()["judges"]["rows"] == [] and response.json()["judges"]["n_expert_rankings"] == 8
    _, rows = _export(study)
    fitted = result["fit"]["win_rates"]
    assert [(r["arm"], r["versus"]) for r in rows] == [(r["cell"], r["versus"]) for r in fitted]
    for row, model in zip(rows, fitted, strict=True):
        assert float(row["win"]) == pytest.approx(model["win"]["estimate"], rel=1e-9)
        assert float(row["win_lower"]) == pytest.approx(model["win"]["lower"], rel=1e-9)
        assert int(row["raw_wins"]) == model["observed"]["wins"] and row["not_identifiable"] == ""

    # New scores make the stored fit stale: neither the API nor the export shows it beside data it does not describe.
    stamp = preferences_fingerprint(study)
    Episode.objects.filter(study=study, score__isnull=False).update(score=12.0)
    assert preferences_fingerprint(study) != stamp
    assert client.get(url).status_code == 404
    assert _export(study)[1] == []


def test_experts_and_workers_cannot_read_the_fit(monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = fitted_world()["study"]
    _fit(study)
    for user in (UserFactory(roles=["expert"]), UserFactory(roles=["worker"])):
        client = APIClient()
        client.force_authenticate(user)
        assert client.get(f"/api/studies/{study.slug}/preferences/").status_code == 403
