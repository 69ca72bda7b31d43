"""Write tasks as bundle folders, into a folder or a ZIP archive, that import back identically."""

from __future__ import annotations

import json
import shutil
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.files.storage import default_storage

from studies.models import TaskFile, TaskInstance
from studies.services.task_bundles.sources import CHUNK_BYTES
from studies.task_bundle_format import FORMAT_VERSION, HIDDEN_DIR, REFERENCE_DIR, TASK_FILE


@dataclass
class ExportReport:
    destination: Path
    tasks: int
    files: int



def _spec_payload(task: TaskInstance, include_hidden: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "uuid": str(task.uuid),
        "title": task.title,
        "prompt": task.prompt,
        "source": task.source,
        "sector": task.sector.code,
        "occupations": sorted(o.soc_code for o in task.occupations.all()),
        "required_software": list(task.required_software or []),
        "expected_deliverables": list(task.expected_deliverables or []),
        "time_limit_minutes": task.time_limit_minutes,
    }
    if include_hidden:
        payload["hidden_info"] = task.hidden_info
    return payload


def task_bundles_export(
    *, tasks: Iterable[TaskInstance], destination: Path, include_hidden: bool = True
) -> ExportReport:
    """Write each task as a bundle folder named by its UUID, into a folder or (``*.zip``) an archive.

    Bundles written with ``include_hidden`` import back identically; without it they carry no hidden
    information, and importing them leaves a task's hidden information and files as they are.
    """
    destination = Path(destination)
    as_zip = destination.suffix.lower() == ".zip"
    if as_zip and destination.exists():
        raise FileExistsError(f"{destination} already exists")
    if not as_zip and destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise FileExistsError(f"{destination} exists and is not an empty folder")
    tasks = list(tasks)
    n_files = 0
    if as_zip:
        destination.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.localtime()[:6]
        with zipfile.ZipFile(destination, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for task in tasks:
                root = str(task.uuid)
                archive.writestr(f"{root}/{TASK_FILE}", _dump(_spec_payload(task, include_hidden)))
                for task_file in _export_files(task, include_hidden):
                    member = zipfile.ZipInfo(f"{root}/{_dir_of(task_file)}/{task_file.name}", stamp)
                    member.compress_type = zipfile.ZIP_DEFLATED
                    with default_storage.open(task_file.file.name, "rb") as src, \
                            archive.open(member, "w", force_zip64=task_file.size > 2**31 - 1) as dst:
                        shutil.copyfileobj(src, dst, CHUNK_BYTES)
                    n_files += 1
        return ExportReport(destination, len(tasks), n_files)
    destination.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        root = destination / str(task.uuid)
        root.mkdir()
        (root / TASK_FILE).write_text(_dump(_spec_payload(task, include_hidden)), encoding="utf-8")
        for task_file in _export_files(task, include_hidden):
            folder = root / _dir_of(task_file)
            folder.mkdir(exist_ok=True)
            with default_storage.open(task_file.file.name, "rb") as src, (folder / task_file.name).open("wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK_BYTES)
            n_files += 1
    return ExportReport(destination, len(tasks), n_files)


def _export_files(task: TaskInstance, include_hidden: bool) -> list[TaskFile]:
    files = list(task.files.all())
    return [f for f in files if include_hidden or f.kind != TaskFile.Kind.HIDDEN]


def _dir_of(task_file: TaskFile) -> str:
    return HIDDEN_DIR if task_file.kind == TaskFile.Kind.HIDDEN else REFERENCE_DIR


def _dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
