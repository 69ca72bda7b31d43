"""Audit events: who changed what, with before/after values."""

from __future__ import annotations

from typing import Any

from django.db import models

from studies.models import AuditEvent, Study


def audit_record(
    *,
    actor: Any | None,
    action: str,
    obj: models.Model | None = None,
    object_type: str = "",
    object_id: str | int = "",
    study: Study | None = None,
    before: Any = None,
    after: Any = None,
    note: str = "",
) -> AuditEvent:
    """Append one audit event; callers pass JSON-serialisable before/after values."""
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id or obj.pk
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        study=study,
        before=before,
        after=after,
        note=note,
    )
