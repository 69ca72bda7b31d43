"""The work a grade owes (`GradingFollowUp` rows): closed by the path that does it, leased while a coding runs.

The grade writes the rows in its own transaction and sends the messages after commit. Whatever does the work
closes the row at once (the observation task, a stored log coding), so the reconciliation sweep only sees rows
whose work is really undone. A log coding is a paid call: the coder takes a lease on its row before calling,
so a duplicate message or a re-send finds it in flight and does not pay for a second coding.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from grading.models import GradingFollowUp
from grading.services.judging import lease_seconds
from rating.services.ledger import observation_record


def _open(episode_id: int, kind: str) -> QuerySet[GradingFollowUp]:
    return GradingFollowUp.objects.filter(episode_id=episode_id, kind=kind, done_at__isnull=True)


def follow_ups_close(*, episode_id: int, kind: str, note: str = "") -> int:
    """Close the episode's open rows of `kind` (its work is done); return how many were open."""
    return _open(episode_id, kind).update(done_at=timezone.now(), lease_expires_at=None, note=note[:2000])


def observation_record_and_close(*, episode_id: int) -> None:
    """Record the episode's rating observation (idempotent) and close what the grade owed for it."""
    observation_record(episode_id=episode_id)
    follow_ups_close(episode_id=episode_id, kind=GradingFollowUp.Kind.OBSERVATION)


def coding_claim(*, episode_id: int) -> bool:
    """Take the lease on the episode's open coding row; False when another coding holds a live one.

    An episode with no open row (a coding asked for by hand) needs no lease.
    """
    rows = _open(episode_id, GradingFollowUp.Kind.FLUENCY)
    if not rows.exists():
        return True
    now = timezone.now()
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    return rows.filter(free).update(lease_expires_at=now + timedelta(seconds=lease_seconds())) > 0


def coding_renew(*, episode_id: int) -> int:
    return _open(episode_id, GradingFollowUp.Kind.FLUENCY).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()))


def coding_release(*, episode_id: int) -> int:
    """Give the lease back (the coding was stored, or will be retried)."""
    return _open(episode_id, GradingFollowUp.Kind.FLUENCY).update(lease_expires_at=None)
