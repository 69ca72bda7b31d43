"""The stability job: rating.stability.stability under the study's model, the same as the CLI, cached per posterior."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from console.dashboard import selectors, services
from console.dashboard.exceptions import JobRefused
from console.dashboard.stability import study_stability
from rating import selectors as rating_selectors
from rating.models import Observation
from rating.services import refresh as rating_refresh
from rating.stability import stability
from studies.models import BackgroundJob
from tests.factories.scenarios import populated_study


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["paper", "calibrated", "calibrated_task"])
def test_the_job_result_is_rating_stability_of_the_ledger_under_the_study_model(kind):
    populated = populated_study(rating_model=kind, surveys=False, extras=False)
    arrays = rating_selectors.observations_arrays(populated.study)
    spec = rating_selectors.study_model_spec(populated.study)
    ours = study_stability(populated.study, populated.snapshot, rounds=300, seed=5)
    pseudonyms = {p.pk: p.pseudonym for p in populated.participants}
    reference = stability(
        arrays.agent_ids, np.array([pseudonyms[int(p)] for p in arrays.participant_ids], dtype=object),
        arrays.y, arrays.task_groups(), None, spec=spec, rounds=300, seed=5,
    )
    assert ours["model"] == spec.to_dict() and spec.kind == kind
    assert len(ours["leaderboard"]) == len(reference["leaderboard"]) == len(populated.agents)
    for mine, theirs in zip(ours["leaderboard"], reference["leaderboard"], strict=True):
        assert mine == theirs
    assert ours["pairwise"] == reference["pairwise"]
    assert ours["agent_names"] == {str(a.pk): a.name for a in populated.agents}
    assert ours["model_checks"]["model"] == spec.to_dict()
    assert json.loads(json.dumps(ours, allow_nan=False)) == ours


@pytest.mark.django_db
def test_posterior_means_match_the_snapshot(populated):
    ours = study_stability(populated.study, populated.snapshot, rounds=50)
    stored = {str(r.entity_id): r for r in populated.snapshot.ratings.filter(entity_kind="agent")}
    for row in ours["leaderboard"]:
        assert row["mu"] == pytest.approx(stored[row["agent_id"]].mu, abs=1e-9)
        assert row["sigma"] == pytest.approx(stored[row["agent_id"]].sigma, abs=1e-9)
        assert row["rank"] == stored[row["agent_id"]].rank


@pytest.mark.django_db
def test_progress_only_moves_forward_and_ends_complete(populated):
    calls = []
    study_stability(populated.study, populated.snapshot, rounds=1000, progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


@pytest.mark.django_db
def test_the_command_the_dashboard_and_the_api_give_the_same_stability_when_some_observations_have_no_task(
    populated, staff_client, settings
):
    """One stability path: ``rating_report`` (text and ``--json``), the dashboard job and the API agree."""
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 200}
    study = populated.study
    ledger = Observation.objects.filter(study=study).order_by("pk")
    Observation.objects.filter(pk__in=list(ledger.values_list("pk", flat=True)[:7])).update(task=None, task_uuid=None)
    arrays = rating_selectors.observations_arrays(study)
    tasks = {t for t in arrays.task_ids.tolist() if t}
    assert 0 < int((arrays.task_ids == "").sum()) < arrays.n and len(tasks) > 1
    rating_refresh.posterior_refresh(study_id=study.pk)

    job = services.analysis_request(study=study, kind="stability", actor=None)
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "done", job.error
    dashboard = job.result
    api = staff_client.get(f"/api/studies/{study.slug}/stability/")
    assert api.status_code == 200
    assert api.json()["job"] == job.pk and api.json()["result"] == dashboard

    # Task-less observations never form a "task" of their own, and do not switch leave-one-task-out off.
    loo_task = dashboard["leave_one_task_out"]
    assert loo_task is not None and loo_task["n_groups"] == len(tasks) == dashboard["n_tasks"]
    assert set(loo_task["changed_groups"]) <= tasks

    # --json: the fit behind the stability leaderboard, number for number.
    printed = json.loads(_command("rating_report", "--study", study.slug, "--json"))
    assert printed["agent_names"] == dashboard["agent_names"]
    fitted = {row["agent_id"]: row for row in printed["fit"]["agents"]}
    for row in dashboard["leaderboard"]:
        assert {key: fitted[row["agent_id"]][key] for key in ("mu", "sigma", "conservative", "n")} == {
            key: row[key] for key in ("mu", "sigma", "conservative", "n")
        }
    assert printed["fit"]["prob_greater"] == dashboard["pairwise"]["prob_greater"]
    assert [a["agent_id"] for a in printed["fit"]["agents"]] == dashboard["pairwise"]["agent_ids"]

    # The report's stability tables, as printed, are the dashboard's numbers.
    text = _command("rating_report", "--study", study.slug, "--rounds", "200", "--seed", "0")
    lines = text.splitlines()
    names = dashboard["agent_names"]
    for row in dashboard["leaderboard"]:
        name = names[row["agent_id"]]
        boot = next(line for line in lines if line.startswith(name) and "-" in line.split()[-1])
        assert boot.split()[-3:] == [
            f"{row['bootstrap_mean_rank']:.2f}", f"{row['bootstrap_p_rank1']:.3f}",
            "{}-{}".format(*row["bootstrap_rank_interval"]),
        ]
        loo = next(line for line in lines if line.startswith(name) and f"#{row['rank']}" in line.split())
        assert loo.split()[-2:] == [f"{row['loo_human_mean_rank']:.2f}", f"{row['loo_task_mean_rank']:.2f}"]
    assert f"{loo_task['n_groups']} tasks left out in turn; {len(loo_task['changed_groups'])} of them" in text
    # Unrounded: --json --stability prints the dashboard's stability number for number.
    printed = json.loads(_command("rating_report", "--study", study.slug, "--json", "--stability", "--rounds", "200",
                                  "--seed", "0"))
    for key in ("leaderboard", "bootstrap", "leave_one_human_out", "leave_one_task_out", "pairwise", "n_tasks"):
        assert printed["stability"][key] == dashboard[key], key


def _command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_cluster_bootstrap_resamples_participants_and_is_stored_apart(populated, settings):
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 60}
    plain = services.analysis_request(study=populated.study, kind="stability", actor=None)
    clustered = services.analysis_request(study=populated.study, kind="stability", actor=None, cluster="human")
    assert plain.pk != clustered.pk and clustered.params["cluster"] == "human"
    services.analysis_job_run(job_id=clustered.pk)
    clustered.refresh_from_db()
    assert clustered.status == "done", clustered.error
    assert clustered.result["cluster"] == "human"
    assert selectors.analysis_state(populated.study, "stability", populated.snapshot).result is None
    shown = selectors.analysis_state(populated.study, "stability", populated.snapshot, cluster="human")
    assert shown.result["bootstrap"] == clustered.result["bootstrap"]


@pytest.mark.django_db
def test_a_stability_job_is_cached_per_posterior_version(populated, settings, django_capture_on_commit_callbacks,
                                                         monkeypatch):
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 100}
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        job = services.analysis_request(study=populated.study, kind="stability", actor=None)
    assert job.cache_key == f"stability:{populated.study.pk}:v{populated.snapshot.version}:r100:calibrated"
    assert sent == [("console.dashboard.tasks.run_analysis", [job.pk])]
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "done" and job.progress_done == job.progress_total == 101
    assert services.analysis_request(study=populated.study, kind="stability", actor=None).pk == job.pk
    state = selectors.analysis_state(populated.study, "stability", populated.snapshot)
    assert state.result["rounds"] == 100 and state.result["snapshot_version"] == populated.snapshot.version

    Observation.objects.filter(study=populated.study).first().delete()
    newer = rating_refresh.posterior_refresh(study_id=populated.study.pk)
    state = selectors.analysis_state(populated.study, "stability", newer)
    assert state.result is None and state.stale.pk == job.pk
    again = services.analysis_request(study=populated.study, kind="stability", actor=None)
    assert again.pk != job.pk and again.cache_key.endswith(f":v{newer.version}:r100:calibrated")


@pytest.mark.django_db
def test_a_failed_job_records_its_reason_and_can_be_requested_again(populated, settings, monkeypatch):
    job = services.analysis_request(study=populated.study, kind="stability", actor=None)

    def boom(*args, **kwargs):
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(services, "study_stability", boom)
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "solver exploded" in job.error
    assert selectors.analysis_state(populated.study, "stability", populated.snapshot).failed.pk == job.pk
    assert services.analysis_request(study=populated.study, kind="stability", actor=None).pk != job.pk


@pytest.mark.django_db
def test_running_a_finished_job_again_changes_nothing(populated, settings):
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 50}
    job = services.analysis_request(study=populated.study, kind="stability", actor=None)
    services.analysis_job_run(job_id=job.pk)
    finished = BackgroundJob.objects.get(pk=job.pk).finished_at
    services.analysis_job_run(job_id=job.pk)
    assert BackgroundJob.objects.get(pk=job.pk).finished_at == finished


@pytest.mark.django_db
def test_no_snapshot_means_no_stability_job(empty_study):
    with pytest.raises(JobRefused):
        services.analysis_request(study=empty_study, kind="stability", actor=None)


@pytest.mark.django_db
def test_the_stability_option_needs_json(populated):
    with pytest.raises(CommandError, match="--stability goes with --json"):
        _command("rating_report", "--study", populated.study.slug, "--stability")
