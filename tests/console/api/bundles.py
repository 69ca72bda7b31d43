"""Helpers that build task bundles, archives and tables on disk or in memory for the tests."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

TASK_UUID = "0b7f1f3e-5d3c-4b8e-9d8a-1c2f3e4d5a6b"


def spec(**overrides: Any) -> dict[str, Any]:
    data = {
        "uuid": TASK_UUID,
        "title": "Quarterly summary",
        "prompt": "Summarise the ledger by region.\n",
        "source": "gdpval",
        "sector": "finance",
        "occupations": ["13-2011.00"],
        "required_software": ["Excel"],
        "expected_deliverables": ["summary.xlsx"],
        "hidden_info": "GOLD: the north total is 10.",
        "time_limit_minutes": 90,
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not ...}


def write_bundle(root: Path, data: dict[str, Any] | None = None, *, reference: dict[str, bytes] | None = None,
                 hidden: dict[str, bytes] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.json").write_text(json.dumps(spec() if data is None else data))
    for folder, files in (("reference", reference), ("hidden", hidden)):
        if files:
            (root / folder).mkdir(exist_ok=True)
            for name, content in files.items():
                (root / folder / name).write_bytes(content)
    return root


def zip_bytes(members: dict[str, bytes], *, mutate=None) -> bytes:
    """Build a ZIP in memory; ``mutate(info)`` may change each member's header (symlink bits, flags)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            if mutate:
                mutate(info)
            archive.writestr(info, content)
    return buffer.getvalue()


def mark_encrypted(data: bytes, name: str) -> bytes:
    """Set the "encrypted" flag of one member in both its local and central headers (zipfile cannot)."""
    out = bytearray(data)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(name)
    out[info.header_offset + 6] |= 0x1
    position = out.find(b"PK\x01\x02")
    while position != -1:
        name_length = int.from_bytes(out[position + 28:position + 30], "little")
        if out[position + 46:position + 46 + name_length] == name.encode():
            out[position + 8] |= 0x1
        position = out.find(b"PK\x01\x02", position + 4)
    return bytes(out)


def bundle_members(prefix: str = "", data: dict[str, Any] | None = None,
                   reference: dict[str, bytes] | None = None, hidden: dict[str, bytes] | None = None
                   ) -> dict[str, bytes]:
    base = f"{prefix}/" if prefix else ""
    members = {f"{base}task.json": json.dumps(spec() if data is None else data).encode()}
    for name, content in (reference or {}).items():
        members[f"{base}reference/{name}"] = content
    for name, content in (hidden or {}).items():
        members[f"{base}hidden/{name}"] = content
    return members


def new_uuid() -> str:
    return str(uuid.uuid4())
