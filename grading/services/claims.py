"""Claims on a paid coding row: the steps every exactly-once coding shares (process codings, ToM pairs).

A coding is a row created RUNNING with a claim token and a lease (renewed while the paid call is in flight). A
second worker finding a live lease backs off (CodingInFlight); a lapsed or dropped lease is taken over; only the
holder of the claim may finish the row. Callers run `running_claim` under their own lock and transaction.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, TypeVar

from django.db import models
from django.utils import timezone

from grading.exceptions import CodingInFlight
from grading.services.judging import lease_seconds

RUNNING = "running"
Row = TypeVar("Row", bound=models.Model)


def running_claim(model: type[Row], key: dict[str, Any], *, create: dict[str, Any], in_flight: str,
                  take_over: dict[str, Any] | None = None) -> Row:
    """Create the RUNNING row this worker holds, or take a lapsed claim over; CodingInFlight if one is live."""
    now = timezone.now()
    lease = now + timedelta(seconds=lease_seconds())
    token = uuid.uuid4().hex
    running = model._default_manager.filter(**key, status=RUNNING).first()
    if running is None:
        return model._default_manager.create(**key, **create, status=RUNNING, claim=token, lease_expires_at=lease)
    expires = running.lease_expires_at  # type: ignore[attr-defined]  # every claimable model has the lease field
    if expires is not None and expires >= now:
        raise CodingInFlight(in_flight)
    fields = {"claim": token, "lease_expires_at": lease, **(take_over or {})}
    for name, value in fields.items():
        setattr(running, name, value)
    running.save(update_fields=list(fields))
    return running


def lease_renew(model: type[models.Model], pk: int, token: str) -> int:
    return model._default_manager.filter(pk=pk, status=RUNNING, claim=token).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()))


def lease_drop(model: type[models.Model], pk: int, token: str) -> None:
    """Give the claim back: the next message takes the row over at once."""
    model._default_manager.filter(pk=pk, claim=token).update(lease_expires_at=None)


def claim_held(model: type[models.Model], pk: int, token: str) -> bool:
    return model._default_manager.filter(pk=pk, status=RUNNING, claim=token).exists()
