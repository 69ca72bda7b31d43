"""manage.py invite_links writes personal links that resume the right recruit, and refuses bad ids whole."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import CommandError, call_command

from studies.invitations import claim_from_personal_token
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


def _run(tmp_path, ids: str, **kwargs) -> list[dict[str, str]]:
    path = tmp_path / "ids.txt"
    path.write_text(ids)
    out = io.StringIO()
    call_command("invite_links", str(path), stdout=out, **kwargs)
    return list(csv.DictReader(io.StringIO(out.getvalue())))


def test_each_id_gets_a_signed_link_that_carries_exactly_that_id(tmp_path):
    study = StudyFactory(slug="upwork-study")
    rows = _run(tmp_path, "W-100\nW-200\nW-100\n\n", study="upwork-study", platform="upwork",
                base_url="https://study.example.org/")
    assert [row["worker_id"] for row in rows] == ["W-100", "W-200"]
    for row in rows:
        assert row["link"].startswith(f"https://study.example.org/join/{study.invite_code}/i/")
        token = row["link"].rstrip("/").rsplit("/", 1)[-1]
        claim = claim_from_personal_token(study=study, token=token)
        assert (claim.platform, claim.worker_id, claim.signed) == ("upwork", row["worker_id"], True)


def test_a_link_for_one_study_is_refused_by_another(tmp_path):
    StudyFactory(slug="first")
    other = StudyFactory(slug="second")
    [row] = _run(tmp_path, "W-1\n", study="first", platform="upwork", base_url="https://x.org")
    token = row["link"].rstrip("/").rsplit("/", 1)[-1]
    with pytest.raises(Exception, match="another study"):
        claim_from_personal_token(study=other, token=token)


def test_an_invalid_id_stops_the_whole_list_with_its_line(tmp_path):
    StudyFactory(slug="s")
    with pytest.raises(CommandError, match="id 2"):
        _run(tmp_path, "good-id\nbad id with spaces and / slashes\n", study="s", platform="upwork",
             base_url="https://x.org")


def test_an_unknown_study_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="no study with slug"):
        _run(tmp_path, "W-1\n", study="missing", platform="upwork", base_url="https://x.org")
