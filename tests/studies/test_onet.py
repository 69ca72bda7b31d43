"""manage.py import_onet loads O*NET's Occupation Data file and refuses anything else clearly."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from studies.models import Occupation, Sector

pytestmark = pytest.mark.django_db

HEADER = "O*NET-SOC Code\tTitle\tDescription\n"


def test_import_creates_occupations_under_their_soc_major_group_sector(tmp_path):
    path = tmp_path / "Occupation Data.txt"
    path.write_text(HEADER + "13-2011.00\tAccountants and Auditors\tExamine records.\n"
                    "23-1011.00\tLawyers\tRepresent clients.\n")
    call_command("import_onet", str(path))
    accountant = Occupation.objects.get(soc_code="13-2011.00")
    assert accountant.sector.name == "Business and Financial Operations"
    assert Occupation.objects.get(soc_code="23-1011.00").sector.code == "soc-23"
    assert Sector.objects.count() == 23


def test_reimport_updates_titles_without_duplicating(tmp_path):
    path = tmp_path / "occ.txt"
    path.write_text(HEADER + "13-2011.00\tAccountants\t\n")
    call_command("import_onet", str(path))
    path.write_text(HEADER + "13-2011.00\tAccountants and Auditors\t\n")
    call_command("import_onet", str(path))
    assert Occupation.objects.filter(soc_code="13-2011.00").count() == 1
    assert Occupation.objects.get(soc_code="13-2011.00").title == "Accountants and Auditors"


def test_a_file_with_a_bad_code_is_refused_whole_with_the_line_number(tmp_path):
    path = tmp_path / "occ.txt"
    path.write_text(HEADER + "13-2011.00\tAccountants\t\n1320-11\tBroken\t\n")
    with pytest.raises(CommandError, match="line 3"):
        call_command("import_onet", str(path))
    assert not Occupation.objects.exists()


def test_a_file_without_the_onet_header_is_refused(tmp_path):
    path = tmp_path / "occ.csv"
    path.write_text("code,title\n13-2011.00,Accountants\n")
    with pytest.raises(CommandError, match="missing column"):
        call_command("import_onet", str(path))


def test_the_shipped_fixture_covers_the_demo_occupations():
    from console import demo_catalogue
    from console.demo import ONET_FIXTURE
    from studies.onet import parse_occupation_file

    codes = {row[0] for row in parse_occupation_file(ONET_FIXTURE)}
    assert {task[1] for task in demo_catalogue.TASKS} <= codes
