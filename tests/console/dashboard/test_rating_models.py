"""Every consumer of the rating uses the study's own model: leaderboard, heatmap, stability, surveys,
collaboration, API and exports -- and the leaderboard shows the model checks staff need to believe it."""

from __future__ import annotations

import csv
import io
import zipfile

import numpy as np
import pytest
from django.urls import reverse

from console.dashboard import selectors, services
from console.dashboard.collaboration import collaboration_analysis
from console.exports import build_export
from rating import selectors as rating_selectors
from rating.fit import fit_model
from rating.models import EntityRating
from rating.selectors import human_skill
from rating.services import refresh as rating_refresh
from surveys.study_statistics import survey_statistics
from tests.factories.scenarios import populated_study
from tests.rating.ledger import fit_rows

pytestmark = pytest.mark.django_db
MODELS = ["paper", "calibrated", "calibrated_task"]


def _fit(study):
    arrays = rating_selectors.observations_arrays(study)
    spec = rating_selectors.study_model_spec(study)
    return fit_model(arrays.agent_ids, arrays.participant_ids, arrays.y, arrays.task_groups(), spec=spec)


@pytest.fixture(params=MODELS)
def rated(request):
    return populated_study(rating_model=request.param, n_participants=20)


def test_the_snapshot_and_leaderboard_hold_the_study_models_fit(rated):
    expected = fit_rows(rated.study)
    snapshot = rated.snapshot
    assert snapshot.config == rating_selectors.study_model_spec(rated.study).to_dict()
    assert snapshot.fit["model"]["kind"] == rated.study.rating_model
    for row in selectors.leaderboard(rated.study)["agents"]:
        assert row["mu"] == pytest.approx(expected[("agent", row["entity_id"])]["mu"], abs=1e-8)
        assert row["sigma"] == pytest.approx(expected[("agent", row["entity_id"])]["sigma"], abs=1e-8)


def test_the_models_really_differ_so_the_checks_above_can_fail():
    snapshots = {
        kind: populated_study(rating_model=kind, n_participants=20, surveys=False, extras=False, seed=3).snapshot
        for kind in MODELS
    }
    mus = {kind: sorted(r.mu for r in s.ratings.filter(entity_kind="agent")) for kind, s in snapshots.items()}
    assert not np.allclose(mus["paper"], mus["calibrated"], atol=1e-3)  # the paper prior pulls levels to 0
    assert snapshots["calibrated"].fit["tasks"] is None
    assert len(snapshots["calibrated_task"].fit["tasks"]) > 1 and "task" in " ".join(
        snapshots["calibrated_task"].fit["hyper"]
    )


@pytest.mark.parametrize("kind", ["paper", "calibrated", "calibrated_task"])
def test_heatmap_and_stability_use_the_study_model(kind, settings):
    rated = populated_study(rating_model=kind, n_participants=20, surveys=False, extras=False)
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 40}
    job = services.analysis_request(study=rated.study, kind="stability", actor=None)
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert job.result["model"]["kind"] == rated.study.rating_model
    fit = _fit(rated.study)
    position = {agent: i for i, agent in enumerate(fit.agent_ids.tolist())}
    pairwise = job.result["pairwise"]
    order = [position[agent] for agent in pairwise["agent_ids"]]
    np.testing.assert_allclose(pairwise["prob_greater"], fit.prob_greater()[np.ix_(order, order)], atol=1e-9)
    heat = selectors.leaderboard(rated.study)["pairwise"]
    assert len(heat["matrix"]) == len(rated.agents)


def test_survey_correlations_use_skill_from_the_study_model(rated):
    expected = fit_rows(rated.study)
    skill, snapshot = human_skill(rated.study, "conservative")
    for pk, value in skill.items():
        assert value == pytest.approx(expected[("human", pk)]["conservative"], abs=1e-8)
    result = survey_statistics(rated.study)
    assert result["rating_model"] == rated.study.rating_model
    assert result["snapshot_version"] == snapshot.version


def test_collaboration_tables_use_the_study_model(rated):
    result = collaboration_analysis(rated.study)
    fit = _fit(rated.study)
    conservative = dict(zip(fit.agent_ids.tolist(), fit.conservative().tolist(), strict=True))
    names = {a.name: str(a.pk) for a in rated.agents}
    assert result["rating_model"] == rated.study.rating_model
    for row in result["by_agent"]:
        assert row["collabskill"] == pytest.approx(conservative[names[row["agent"]]], abs=1e-8)


def test_api_leaderboard_and_study_carry_the_model(rated, staff_client):
    client = staff_client
    data = client.get(f"/api/studies/{rated.study.slug}/leaderboard/").json()
    assert data["config"]["kind"] == rated.study.rating_model
    assert data["fit"]["model"]["kind"] == rated.study.rating_model
    expected = fit_rows(rated.study)
    for row in data["agents"]:
        assert row["mu"] == pytest.approx(expected[("agent", row["entity_id"])]["mu"], abs=1e-8)
    study = client.get(f"/api/studies/{rated.study.slug}/").json()
    assert study["rating_model"] == rated.study.rating_model


def test_export_ratings_are_the_study_models(rated):
    handle = io.BytesIO()
    build_export(rated.study, handle)
    archive = zipfile.ZipFile(handle)
    rows = list(csv.DictReader(io.TextIOWrapper(archive.open("ratings.csv"), encoding="utf-8")))
    stored = {r.label: r.mu for r in EntityRating.objects.filter(snapshot=rated.snapshot, entity_kind="agent")}
    agent_rows = [row for row in rows if row["entity_kind"] == "agent"]
    assert {row["entity"]: float(row["mu"]) for row in agent_rows} == pytest.approx(stored)


def test_switching_the_model_makes_the_study_stale_and_the_refresh_follows_it():
    populated = populated_study(rating_model="paper", surveys=False, extras=False)
    assert populated.study.pk not in rating_selectors.studies_needing_refresh()
    populated.study.rating_model = "calibrated"
    populated.study.save()
    assert populated.study.pk in rating_selectors.studies_needing_refresh()
    assert populated.study.pk in rating_refresh.posteriors_refresh_stale()
    assert rating_selectors.latest_snapshot(populated.study).config["kind"] == "calibrated"


# ---- model checks on the leaderboard page -------------------------------------------------------------------


def test_a_paper_model_on_raw_scores_gets_a_plain_warning_and_the_checks_show(staff_client, settings):
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 40}
    populated = populated_study(rating_model="paper", n_participants=20, surveys=False, extras=False)
    summary = rating_selectors.model_fit_summary(populated.snapshot)
    assert summary["ratio"] > 2 and "too narrow" in summary["warning"]
    url = reverse("dashboard:leaderboard", args=[populated.study.slug])
    page = staff_client.get(url).content.decode()
    assert "Model warning." in page and f"×{summary['ratio']:.0f} too narrow" in page
    assert "Residual SD / β" in page and "appear after the stability analysis has run" in page

    staff_client.post(reverse("dashboard:analysis_run", args=[populated.study.slug, "stability"]))
    from studies.models import BackgroundJob

    job = BackgroundJob.objects.get(study=populated.study, kind="stability")
    services.analysis_job_run(job_id=job.pk)
    page = staff_client.get(url).content.decode()
    checks = BackgroundJob.objects.get(pk=job.pk).result["model_checks"]
    assert checks["coverage"]["coverage"] < 0.9  # the overconfident paper model misses its 95 %
    assert "Held-out predictive coverage" in page
    assert f"{checks['coverage']['coverage']:.3f}" in page
    assert 'id="residual-qq-title"' in page
    assert "Model comparison: calibrated vs calibrated + task difficulty" in page
    assert "preferred by AIC" in page


def test_a_calibrated_study_shows_its_fitted_hyperparameters_and_no_warning(staff_client):
    populated = populated_study(rating_model="calibrated", n_participants=20, surveys=False, extras=False)
    summary = rating_selectors.model_fit_summary(populated.snapshot)
    assert summary["warning"] == "" and summary["hyper"]
    page = staff_client.get(reverse("dashboard:leaderboard", args=[populated.study.slug])).content.decode()
    assert "Model warning." not in page
    assert "Fitted hyperparameters" in page
    for name in summary["hyper"]:  # a readable label first, the technical name beside it
        assert f'<code class="dash-muted">{name}</code>' in page
    assert "Spread of participant skill" in page
