"""Study exports: pseudonymous tidy CSVs, a data dictionary, sessions.json that imports back to the same ratings."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.urls import reverse

from console.dashboard import services
from console.dashboard.exceptions import JobRefused
from console.exports import TABLES, Pseudonymizer, build_export, session_id
from rating.models import EntityRating, Observation, RatingSnapshot
from rating.services import ledger as rating_ledger
from rating.services import refresh as rating_refresh
from studies.models import AuditEvent, BackgroundJob, Episode, Participant, Study
from tests.factories.scenarios import populated_study


def _export(study, **kwargs) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle, **kwargs)
    handle.seek(0)
    return zipfile.ZipFile(handle)


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


@pytest.mark.django_db
def test_the_zip_holds_every_table_the_dictionary_and_sessions(populated):
    archive = _export(populated.study)
    names = set(archive.namelist())
    expected = {table.file for table in TABLES if not table.pii_only}
    assert expected | {"sessions.json", "study.json", "data_dictionary.csv", "README.txt"} == names
    assert len(_rows(archive, "participants.csv")) == len(populated.participants)
    assert len(_rows(archive, "episodes.csv")) == len(populated.episodes)
    assert len(_rows(archive, "judge_runs.csv")) == len(populated.episodes)
    assert len(_rows(archive, "criterion_scores.csv")) == 2 * len(populated.episodes)
    assert len(_rows(archive, "survey_answers_long.csv")) == len(populated.participants) * (10 + 7)
    wide = _rows(archive, "survey_answers_wide.csv")
    assert len(wide) == len(populated.participants) and "A2_post" in wide[0] and wide[0]["D1_post"] == ""
    assert len(_rows(archive, "ratings.csv")) == len(populated.agents) + len(populated.participants)


@pytest.mark.django_db
def test_every_column_is_described_in_the_data_dictionary(populated):
    archive = _export(populated.study)
    dictionary = _rows(archive, "data_dictionary.csv")
    described = {(row["file"], row["column"]) for row in dictionary if row["column"]}
    for name in archive.namelist():
        if name.endswith(".csv") and name != "data_dictionary.csv":
            header = next(csv.reader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))
            assert {(name, column) for column in header} <= described, name


@pytest.mark.django_db
def test_ids_are_hashed_consistently_and_no_raw_id_or_identity_leaks(populated):
    archive = _export(populated.study)
    hasher = Pseudonymizer(populated.study)
    participants = {row["participant_id"] for row in _rows(archive, "participants.csv")}
    assert participants == {hasher("participant", p.pk) for p in populated.participants}
    assert {row["participant_id"] for row in _rows(archive, "episodes.csv")} <= participants
    assert {row["participant_id"] for row in _rows(archive, "survey_answers_long.csv")} <= participants
    _header, *sessions = json.loads(archive.read("sessions.json"))
    assert {s["user_id"] for s in sessions} <= participants
    assert {s["session_id"] for s in sessions} == {row["episode_id"] for row in _rows(archive, "episodes.csv")}
    everything = "\n".join(archive.read(name).decode() for name in archive.namelist())
    for participant in populated.participants:
        assert participant.pseudonym not in everything
    assert "example.org" not in everything and "PROLIFIC0" not in everything
    assert "identities.csv" not in archive.namelist()
    header = next(csv.reader(io.TextIOWrapper(archive.open("episodes.csv"), encoding="utf-8")))
    assert "notes" not in header and "share_url" not in header and "participant_pk" not in header


@pytest.mark.django_db
def test_another_study_gets_different_hashes_for_the_same_raw_id(populated, empty_study):
    raw = populated.participants[0].pk
    assert Pseudonymizer(populated.study)("participant", raw) != Pseudonymizer(empty_study)("participant", raw)
    assert Pseudonymizer(populated.study)("participant", raw) != Pseudonymizer(populated.study)("episode", raw)


@pytest.mark.django_db
def test_identities_are_exported_only_when_asked(populated):
    archive = _export(populated.study, include_pii=True)
    identities = _rows(archive, "identities.csv")
    assert len(identities) == len(populated.participants)
    assert {row["platform_worker_id"] for row in identities} == {
        f"PROLIFIC{i:04d}" for i in range(len(populated.participants))
    }
    header = next(csv.reader(io.TextIOWrapper(archive.open("episodes.csv"), encoding="utf-8")))
    assert {"notes", "share_url", "skip_description"} <= set(header)
    assert "IDENTIFYING INFORMATION" in archive.read("README.txt").decode()


@pytest.mark.django_db
def test_withdrawn_participants_are_left_out_of_every_file(populated):
    gone = populated.participants[0]
    Participant.objects.filter(pk=gone.pk).update(status=Participant.Status.WITHDRAWN)
    archive = _export(populated.study, include_pii=True)
    hashed = Pseudonymizer(populated.study)("participant", gone.pk)
    everything = "\n".join(archive.read(name).decode() for name in archive.namelist())
    assert hashed not in everything
    assert "person0@example.org" not in everything


ROUND_TRIP_MODELS = [
    {"rating_model": "paper", "rating_mu0": 50.0, "rating_sigma0": 20.0, "rating_beta": 12.0, "rating_k": 2.0},
    {"rating_model": "paper"},
    {"rating_model": "calibrated", "rating_k": 1.5},
    {"rating_model": "calibrated", "rating_integrate_hyper": False},
    {"rating_model": "calibrated_task"},
]


@pytest.mark.django_db
@pytest.mark.parametrize("model", ROUND_TRIP_MODELS, ids=lambda m: "-".join(f"{v}" for v in m.values()))
def test_sessions_json_imports_back_to_the_same_ratings_under_every_model(model, tmp_path):
    populated = populated_study(surveys=False, extras=False, **model)
    archive = _export(populated.study)
    header, *sessions = json.loads(archive.read("sessions.json"))
    assert header["record_type"] == "study_config" and header["skipped"] is True
    assert header["rating_model"] == json.loads(archive.read("study.json"))["rating_model"]
    assert header["rating_model"]["kind"] == model["rating_model"]
    assert len(sessions) == len(populated.episodes)
    assert set(sessions[0]) == {"session_id", "agent_id", "user_id", "task_id", "autograde_overall_score",
                                "autograde_status", "skipped", "score_source"}
    assert all(s["autograde_status"] == "done" and s["skipped"] is False for s in sessions)
    path = tmp_path / "sessions.json"
    path.write_bytes(archive.read("sessions.json"))

    call_command("import_sessions", str(path), study="reimported", create=True, stdout=io.StringIO())

    copy = Study.objects.get(slug="reimported")
    for field in ("rating_model", "rating_mu0", "rating_sigma0", "rating_beta", "rating_k", "rating_integrate_hyper"):
        assert getattr(copy, field) == getattr(populated.study, field)
    snapshot = RatingSnapshot.objects.filter(study=copy).latest("version")
    assert snapshot.config == populated.snapshot.config
    assert snapshot.fit["hyper"].keys() == populated.snapshot.fit["hyper"].keys()
    for name, value in populated.snapshot.fit["hyper"].items():
        assert snapshot.fit["hyper"][name]["estimate"] == pytest.approx(value["estimate"], abs=1e-9)
    original = {r.label: r for r in EntityRating.objects.filter(snapshot=populated.snapshot, entity_kind="agent")}
    reimported = {r.label: r for r in EntityRating.objects.filter(snapshot=snapshot, entity_kind="agent")}
    assert original.keys() == reimported.keys() == {agent.name for agent in populated.agents}
    for name, rating in original.items():
        assert reimported[name].mu == pytest.approx(rating.mu, abs=1e-9)
        assert reimported[name].sigma == pytest.approx(rating.sigma, abs=1e-9)
        assert reimported[name].conservative == pytest.approx(rating.conservative, abs=1e-9)
        assert reimported[name].rank == rating.rank
    humans = sorted(r.mu for r in EntityRating.objects.filter(snapshot=snapshot, entity_kind="human"))
    expected = sorted(r.mu for r in EntityRating.objects.filter(snapshot=populated.snapshot, entity_kind="human"))
    assert humans == pytest.approx(expected, abs=1e-9)


@pytest.mark.django_db
def test_sessions_json_names_each_score_by_what_it_is_and_shows_both_parts_of_a_blend(tmp_path):
    populated = populated_study(surveys=False, extras=False, score_source=Study.ScoreSource.BLENDED,
                                blend_expert_weight=0.25)
    blended, expert_only = populated.episodes[0], populated.episodes[1]
    Episode.objects.filter(pk=blended.pk).update(expert_score=20.0)
    Episode.objects.filter(pk=expert_only.pk).update(auto_score=None, expert_score=33.0)
    for episode in (blended, expert_only):
        rating_ledger.observation_record(episode_id=episode.pk)
    rating_refresh.posterior_refresh(study_id=populated.study.pk)
    hasher = Pseudonymizer(populated.study)
    header, *sessions = json.loads(_export(populated.study).read("sessions.json"))
    by_id = {s["session_id"]: s for s in sessions}

    mixed = by_id[session_id(hasher, episode_id=blended.pk, external_id="")]
    auto = Episode.objects.get(pk=blended.pk).auto_score
    assert mixed["score_source"] == "blended"
    assert mixed["blended_overall_score"] == pytest.approx(0.25 * 20.0 + 0.75 * auto)
    assert (mixed["autograde_overall_score"], mixed["expert_overall_score"]) == (auto, 20.0)
    assert mixed["blend_expert_weight"] == 0.25 == header["blend_expert_weight"]
    expert = by_id[session_id(hasher, episode_id=expert_only.pk, external_id="")]
    assert expert["score_source"] == "expert" and expert["expert_overall_score"] == 33.0
    assert "autograde_overall_score" not in expert  # an expert score is never passed off as the judges'

    path = tmp_path / "sessions.json"
    path.write_text(json.dumps([header, *sessions]))
    call_command("import_sessions", str(path), study="again", create=True, stdout=io.StringIO())
    imported = {o.y: o.source for o in Observation.objects.filter(study__slug="again")}
    assert imported[33.0] == "expert" and imported[mixed["blended_overall_score"]] == "blended"


@pytest.mark.django_db
def test_an_empty_study_exports_headers_only(empty_study):
    archive = _export(empty_study)
    assert _rows(archive, "episodes.csv") == []
    [header] = json.loads(archive.read("sessions.json"))  # the study_config record and no session
    assert header["record_type"] == "study_config"


@pytest.mark.django_db
def test_an_export_job_stores_the_zip_audits_it_and_serves_it_to_staff(populated, staff_user, staff_client):
    job = services.export_request(study=populated.study, actor=staff_user)
    services.export_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "done" and job.file and job.progress_done == job.progress_total > 0
    assert job.result["tables"]["episodes.csv"] == len(populated.episodes)
    assert AuditEvent.objects.filter(action="export.requested", object_id=str(job.pk), actor=staff_user).exists()
    assert AuditEvent.objects.filter(action="export.completed", object_id=str(job.pk)).exists()
    response = staff_client.get(reverse("dashboard:job_download", args=[populated.study.slug, job.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    body = b"".join(response.streaming_content)
    assert zipfile.ZipFile(io.BytesIO(body)).read("sessions.json")
    assert AuditEvent.objects.filter(action="export.downloaded", actor=staff_user).exists()
    status = staff_client.get(reverse("dashboard:job_status", args=[populated.study.slug, job.pk])).json()
    assert status["download_url"] == reverse("dashboard:job_download", args=[populated.study.slug, job.pk])


@pytest.mark.django_db
def test_identities_need_the_permission_to_request_and_to_download(populated, staff_user, pii_user, client):
    with pytest.raises(JobRefused):
        services.export_request(study=populated.study, actor=staff_user, include_pii=True)
    job = services.export_request(study=populated.study, actor=pii_user, include_pii=True)
    services.export_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.result["include_pii"] is True
    url = reverse("dashboard:job_download", args=[populated.study.slug, job.pk])
    client.force_login(staff_user)
    assert client.get(url).status_code == 404
    client.force_login(pii_user)
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_a_pii_job_whose_requester_lost_the_permission_fails(populated, pii_user):
    job = services.export_request(study=populated.study, actor=pii_user, include_pii=True)
    pii_user.user_permissions.clear()
    pii_user = type(pii_user).objects.get(pk=pii_user.pk)
    BackgroundJob.objects.filter(pk=job.pk).update(requested_by=pii_user)
    services.export_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "no longer" in job.error and not job.file


@pytest.mark.django_db
def test_the_exports_page_creates_jobs_and_hides_the_pii_option_without_permission(
    staff_client, populated, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    url = reverse("dashboard:exports", args=[populated.study.slug])
    assert 'name="include_pii"' not in staff_client.get(url).content.decode()
    response = staff_client.post(url, {"what": "export", "include_pii": "on"}, follow=True)
    assert "do not have permission" in response.content.decode()
    assert not BackgroundJob.objects.filter(kind="export").exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(url, {"what": "export"}, follow=True)
    job = BackgroundJob.objects.get(kind="export", study=populated.study)
    assert job.params == {"include_pii": False}
    assert sent == [("console.dashboard.tasks.run_export", [job.pk])]
    assert "data-status-url" in response.content.decode()


@pytest.mark.django_db
def test_free_text_that_looks_like_a_formula_is_neutralised_and_numbers_stay_numbers(populated):
    participant = populated.participants[0]
    occupation = participant.occupation
    occupation.title = '=HYPERLINK("http://evil.example","open")'
    occupation.save()
    participant.years_experience = 7
    participant.save()
    archive = _export(populated.study, include_pii=True)
    rows = _rows(archive, "participants.csv")
    titles = {row["occupation_title"] for row in rows}
    assert "'" + occupation.title in titles and occupation.title not in titles
    assert all(not row[column].startswith(("=", "+", "@", "\t", "\r"))
               for name in archive.namelist() if name.endswith(".csv")
               for row in _rows(archive, name) for column in row)
    assert "7" in {row["years_experience"] for row in rows}
