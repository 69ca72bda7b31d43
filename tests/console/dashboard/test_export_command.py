"""manage.py export_study writes the same export from the command line, audited, PII only for allowed users."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from studies.models import AuditEvent


@pytest.mark.django_db
def test_the_command_writes_a_pseudonymous_zip_and_audits_it(populated, tmp_path):
    output = tmp_path / "out.zip"
    stdout = io.StringIO()
    call_command("export_study", populated.study.slug, output=str(output), stdout=stdout)
    archive = zipfile.ZipFile(output)
    assert len(json.loads(archive.read("sessions.json"))) == len(populated.episodes) + 1  # + the study_config record
    assert "identities.csv" not in archive.namelist()
    assert f"episodes.csv {len(populated.episodes)}" in stdout.getvalue()
    assert AuditEvent.objects.filter(action="export.completed", study=populated.study).exists()
    with pytest.raises(CommandError, match="exists"):
        call_command("export_study", populated.study.slug, output=str(output))


@pytest.mark.django_db
def test_identities_need_an_actor_with_the_permission(populated, tmp_path, staff_user, pii_user):
    with pytest.raises(CommandError, match="view_participantidentity"):
        call_command("export_study", populated.study.slug, output=str(tmp_path / "a.zip"), include_pii=True)
    with pytest.raises(CommandError, match="view_participantidentity"):
        call_command("export_study", populated.study.slug, output=str(tmp_path / "a.zip"), include_pii=True,
                     actor=staff_user.username)
    call_command("export_study", populated.study.slug, output=str(tmp_path / "b.zip"), include_pii=True,
                 actor=pii_user.username, stdout=io.StringIO())
    assert "identities.csv" in zipfile.ZipFile(tmp_path / "b.zip").namelist()
    event = AuditEvent.objects.filter(action="export.completed", actor=pii_user).get()
    assert event.after["include_pii"] is True


@pytest.mark.django_db
def test_an_unknown_study_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="no study"):
        call_command("export_study", "missing", output=str(tmp_path / "x.zip"))


@pytest.mark.django_db
def test_the_same_data_exported_at_the_same_time_is_the_same_bytes(tmp_path):
    from console.exports import build_export
    from tests.factories import StudyFactory

    study = StudyFactory()
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with first.open("wb") as handle:
        build_export(study, handle, exported_at=stamp)
    with second.open("wb") as handle:
        build_export(study, handle, exported_at=stamp)
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        assert {info.date_time for info in archive.infolist()} == {(2026, 1, 2, 3, 4, 4)}  # ZIP keeps even seconds
        assert json.loads(archive.read("study.json"))["exported_at"] == "2026-01-02T03:04:05+00:00"
