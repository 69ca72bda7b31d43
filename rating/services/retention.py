"""Retention of the participants' rating rows of superseded refits.

Every refit writes a row per participant: at platform scale 10^6 rows, about 150 MB with their indexes, and with
the variance components re-estimated every 15 minutes that is some 14 GB a day. Every page, export, payout and
API read uses the latest snapshot, whose participants' rows are those of the latest refit (a live update carries
its refit's); older refits' participants' rows are history only the admin shows. A study team may keep them all
(the default) or keep those of each study's latest refits only. What goes is recorded on the snapshot
(``participants_removed_at``); its agents' rows, fit and diagnostics stay, and the ledger can always be refitted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby

from django.db import transaction
from django.utils import timezone

from rating.models import EntityRating, RatingSnapshot

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemovedRows:
    """One refit whose participants' rows were (or, in a dry run, would be) deleted."""

    study_id: int
    snapshot_id: int
    version: int
    superseded_at: datetime
    rows: int


def _candidates(study_id: int | None, keep: int, before: datetime) -> list[tuple[int, int, int, datetime]]:
    """Return ``(study, snapshot, version, superseded_at)`` of the refits whose participants' rows may go: each
    study's refits after its ``keep`` newest, superseded by a newer refit no later than ``before``, not yet
    removed. ``keep`` is at least 1, and the refit a study's live updates rest on is always its newest (every
    refit replaces the live state in its own transaction), so that one is never among them."""
    refits = RatingSnapshot.objects.filter(produced_by=RatingSnapshot.ProducedBy.REFIT)
    if study_id is not None:
        refits = refits.filter(study_id=study_id)
    rows = refits.order_by("study_id", "-version").values_list(
        "study_id", "pk", "version", "computed_at", "participants_removed_at"
    )
    found = []
    for study, group in groupby(rows, key=lambda row: row[0]):
        newer_at: datetime | None = None
        for index, (_, pk, version, computed_at, removed_at) in enumerate(group):
            superseded_at = newer_at
            newer_at = computed_at
            if index < keep or removed_at is not None:
                continue
            if superseded_at is not None and superseded_at <= before:
                found.append((study, pk, version, superseded_at))
    return found


def participant_rows_remove(
    *, keep: int, grace_seconds: float, study_id: int | None = None, limit: int | None = None, dry_run: bool = False
) -> list[RemovedRows]:
    """Delete the participants' rating rows of refits older than each study's ``keep`` latest, once a newer refit
    has been the current one for ``grace_seconds`` (a long export or page reading the older one finishes first);
    return them, oldest first, at most ``limit``. With ``dry_run`` nothing is deleted.

    Each refit's rows go in a transaction of their own that also stamps ``participants_removed_at``, under a
    lock on the snapshot row, so two sweeps never delete the same rows twice.
    """
    if keep < 1:
        raise ValueError("keep: at least the latest refit's participants' rows stay (keep must be 1 or more)")
    if grace_seconds < 0:
        raise ValueError("grace_seconds: must be 0 or more")
    before = timezone.now() - timedelta(seconds=grace_seconds)
    found = sorted(_candidates(study_id, keep, before), key=lambda row: (row[3], row[1]))
    removed: list[RemovedRows] = []
    for study, pk, version, superseded_at in found[:limit]:
        rows = EntityRating.objects.filter(snapshot_id=pk, entity_kind=EntityRating.Kind.HUMAN)
        if dry_run:
            removed.append(RemovedRows(study, pk, version, superseded_at, rows.count()))
            continue
        with transaction.atomic():
            snapshot = RatingSnapshot.objects.select_for_update().filter(pk=pk).first()
            if snapshot is None or snapshot.participants_removed_at is not None:
                continue
            deleted, _ = rows.delete()
            snapshot.participants_removed_at = timezone.now()
            snapshot.save(update_fields=["participants_removed_at"])
        logger.info("study %s: deleted the %s participants' rating rows of refit v%s", study, deleted, version)
        removed.append(RemovedRows(study, pk, version, superseded_at, deleted))
    return removed
