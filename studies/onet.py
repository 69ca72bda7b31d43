"""O*NET taxonomy loading: sectors are the SOC major groups, occupations come from O*NET's Occupation Data.

The official file (db_x_x_text/Occupation Data.txt) is tab-separated with the header
``O*NET-SOC Code	Title	Description``. The two digits before the dash name the SOC major group, which
we use as the worker's sector for matching.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from studies.models import Occupation, Sector

SOC_MAJOR_GROUPS: dict[str, str] = {
    "11": "Management",
    "13": "Business and Financial Operations",
    "15": "Computer and Mathematical",
    "17": "Architecture and Engineering",
    "19": "Life, Physical, and Social Science",
    "21": "Community and Social Service",
    "23": "Legal",
    "25": "Educational Instruction and Library",
    "27": "Arts, Design, Entertainment, Sports, and Media",
    "29": "Healthcare Practitioners and Technical",
    "31": "Healthcare Support",
    "33": "Protective Service",
    "35": "Food Preparation and Serving Related",
    "37": "Building and Grounds Cleaning and Maintenance",
    "39": "Personal Care and Service",
    "41": "Sales and Related",
    "43": "Office and Administrative Support",
    "45": "Farming, Fishing, and Forestry",
    "47": "Construction and Extraction",
    "49": "Installation, Maintenance, and Repair",
    "51": "Production",
    "53": "Transportation and Material Moving",
    "55": "Military Specific",
}
SOC_CODE = re.compile(r"^(\d{2})-\d{4}\.\d{2}$")
REQUIRED_COLUMNS = ("O*NET-SOC Code", "Title")


class OnetFileError(ValueError):
    """The file is not O*NET Occupation Data; the message says what is wrong and where."""


@dataclass(frozen=True)
class ImportSummary:
    created: int
    updated: int
    unchanged: int
    sectors_created: int


def sector_for_code(soc_code: str) -> Sector:
    major = soc_code[:2]
    name = SOC_MAJOR_GROUPS.get(major, f"SOC major group {major}")
    sector, _ = Sector.objects.get_or_create(code=f"soc-{major}", defaults={"name": name})
    return sector


def ensure_sectors() -> int:
    """Create every SOC major-group sector; return how many were new."""
    created = 0
    for major, name in SOC_MAJOR_GROUPS.items():
        _, was_created = Sector.objects.get_or_create(code=f"soc-{major}", defaults={"name": name})
        created += was_created
    return created


def parse_occupation_file(path: Path) -> list[tuple[str, str, str]]:
    """Read and validate the whole file before anything is written."""
    rows: list[tuple[str, str, str]] = []
    errors: list[str] = []
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise OnetFileError(
                f"{path}: missing column(s) {', '.join(missing)}; expected a tab-separated file with header "
                "'O*NET-SOC Code<TAB>Title<TAB>Description'."
            )
        for line_no, row in enumerate(reader, start=2):
            code = (row.get("O*NET-SOC Code") or "").strip()
            title = (row.get("Title") or "").strip()
            if not SOC_CODE.match(code):
                errors.append(f"line {line_no}: '{code}' is not an O*NET-SOC code like 13-2011.00")
                continue
            if not title:
                errors.append(f"line {line_no}: empty title for {code}")
                continue
            rows.append((code, title, (row.get("Description") or "").strip()))
    if errors:
        shown = "; ".join(errors[:10]) + (f"; and {len(errors) - 10} more" if len(errors) > 10 else "")
        raise OnetFileError(f"{path}: {shown}")
    if not rows:
        raise OnetFileError(f"{path}: no occupations found")
    return rows


def import_occupations(path: Path) -> ImportSummary:
    """Upsert every occupation of the file (idempotent), assigning sectors by SOC major group."""
    rows = parse_occupation_file(path)
    created = updated = unchanged = 0
    with transaction.atomic():
        sectors_created = ensure_sectors()
        sectors = {s.code: s for s in Sector.objects.all()}
        existing = {o.soc_code: o for o in Occupation.objects.filter(soc_code__in=[r[0] for r in rows])}
        to_create, to_update = [], []
        for code, title, description in rows:
            sector = sectors.get(f"soc-{code[:2]}") or sector_for_code(code)
            occupation = existing.get(code)
            if occupation is None:
                to_create.append(Occupation(soc_code=code, title=title, description=description, sector=sector))
            elif (occupation.title, occupation.description, occupation.sector_id) != (title, description, sector.pk):
                occupation.title, occupation.description, occupation.sector = title, description, sector
                to_update.append(occupation)
            else:
                unchanged += 1
        Occupation.objects.bulk_create(to_create, batch_size=1000)
        Occupation.objects.bulk_update(to_update, ["title", "description", "sector"], batch_size=1000)
        created, updated = len(to_create), len(to_update)
    return ImportSummary(created=created, updated=updated, unchanged=unchanged, sectors_created=sectors_created)
