"""Shared data and helpers for the task-bundle service tests."""

from __future__ import annotations

import io

import pytest
from django.core.files.storage import default_storage

from studies.models import TaskFile, TaskInstance
from studies.task_bundle_format import TaskBundleInvalid

LEDGER = b"region,total\nnorth,10\nsouth,20\n"
GOLD = b"north total is 10\n"


def fields_of(exc: pytest.ExceptionInfo[TaskBundleInvalid]) -> dict[str, list[str]]:
    return exc.value.fields


def files_of(task: TaskInstance) -> dict[str, str]:
    return {f"{f.kind}/{f.name}": f.sha256 for f in task.files.all()}


def stored_bytes(task_file: TaskFile) -> bytes:
    with default_storage.open(task_file.file.name, "rb") as handle:
        return handle.read()


def upload_named(content: bytes, name: str) -> io.BytesIO:
    upload = io.BytesIO(content)
    upload.name = name
    return upload
