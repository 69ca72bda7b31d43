"""Payout files: what each participant is owed, in the shape a recruitment platform's bulk upload expects.

Per participant with unpaid payment lines or a rank bonus:

- base pay: unpaid ``task`` ledger lines (one per submitted task, at the study's rate when it was earned);
- adjustments: unpaid ``adjustment`` lines: staff-added ones (e.g. compensation for a failed agent setup) and
  the task rate of an "outside my expertise" skip when the study pays such skips;
- rank bonus: the study's ``rank_bonuses`` by rank among real (not simulated) participants who completed the
  study, ordered by their CollabSkill score in the latest posterior snapshot. Once a ``bonus`` line has been
  recorded for a participant, that line (if unpaid) replaces the computed bonus, so a bonus is never paid
  twice. Simulated participants (the demo's cohort) are ranked nowhere and paid no bonus: nobody could receive
  it, and counting them would push real people down the ranking.

Lines already marked paid are left out. The participant column holds the recruitment-platform worker id
only when identities may be exported; otherwise it holds the study pseudonym, which staff can look up.

Formats (documented in the dashboard):

- ``prolific``: Prolific's bulk bonus box — no header, one line per participant, ``<participant id>,<amount>``
  with two decimals; rows without a platform id (or with nothing owed) are left out.
- ``detailed``: a header row and columns ``participant_id, is_simulated, status, completed_tasks, base_pay,
  adjustments, rank, rank_bonus, amount, currency`` for bookkeeping.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import IO, Any

from django.db.models import Count, DecimalField, Q, Sum, Value
from django.db.models.functions import Coalesce

from rating.models import EntityRating
from rating.selectors import latest_snapshot, snapshot_ratings
from studies.csv_safety import csv_writer
from studies.models import Participant, ParticipantIdentity, Payment, Study

PAYOUT_FORMATS = {
    "detailed": "Detailed CSV with a header (base pay, adjustments, rank bonus, total)",
    "prolific": "Prolific bulk bonus (participant_id,amount; no header)",
}
# Formats that need recruitment-platform ids, so only users allowed to export identities can produce them.
PAYOUT_FORMATS_NEEDING_IDS = frozenset({"prolific"})
DETAILED_COLUMNS = (
    "participant_id", "is_simulated", "status", "completed_tasks", "base_pay", "adjustments", "rank", "rank_bonus",
    "amount", "currency",
)


def payout_formats_for(*, may_export_ids: bool) -> dict[str, str]:
    """Return the payout formats a user can produce, the default first."""
    return {key: label for key, label in PAYOUT_FORMATS.items()
            if may_export_ids or key not in PAYOUT_FORMATS_NEEDING_IDS}
CENT = Decimal("0.01")


@dataclass(frozen=True)
class PayoutRow:
    participant_id: str
    has_platform_id: bool
    is_simulated: bool
    status: str
    completed_tasks: int
    base_pay: Decimal
    adjustments: Decimal
    rank: int | None
    rank_bonus: Decimal
    currency: str

    @property
    def amount(self) -> Decimal:
        return (self.base_pay + self.adjustments + self.rank_bonus).quantize(CENT)


def rank_bonus_amounts(study: Study) -> list[Decimal]:
    """Return the study's bonus amounts for rank 1, 2, …; unreadable entries count as zero."""
    amounts = []
    for raw in study.rank_bonuses or []:
        try:
            amounts.append(max(Decimal(str(raw)), Decimal("0")).quantize(CENT))
        except (InvalidOperation, ValueError):
            amounts.append(Decimal("0.00"))
    return amounts


def bonus_ranks(study: Study) -> dict[int, int]:
    """Return ``{participant id: rank}`` among real completed participants by their latest CollabSkill score."""
    snapshot = latest_snapshot(study)
    if snapshot is None:
        return {}
    completed = Participant.objects.filter(
        study=study, status=Participant.Status.COMPLETE, is_simulated=False
    ).values("pk")
    ordered = (
        snapshot_ratings(snapshot, EntityRating.Kind.HUMAN)
        .filter(entity_id__in=completed)
        .values_list("entity_id", flat=True)
    )
    return {int(entity_id): position for position, entity_id in enumerate(ordered, start=1)}


def payout_rows(study: Study, *, include_pii: bool = False) -> list[PayoutRow]:
    """Return what each participant is owed now (three queries)."""
    zero = Value(Decimal("0"), output_field=DecimalField(max_digits=12, decimal_places=2))
    unpaid = Q(payments__paid_at__isnull=True)
    participants = (
        Participant.objects.filter(study=study)
        .annotate(
            base=Coalesce(Sum("payments__amount", filter=unpaid & Q(payments__kind=Payment.Kind.TASK)), zero),
            adjustments=Coalesce(
                Sum("payments__amount", filter=unpaid & Q(payments__kind=Payment.Kind.ADJUSTMENT)), zero
            ),
            recorded_bonus=Coalesce(
                Sum("payments__amount", filter=unpaid & Q(payments__kind=Payment.Kind.BONUS)), zero
            ),
            bonus_lines=Count("payments", filter=Q(payments__kind=Payment.Kind.BONUS)),
            completed_tasks=Count("payments", filter=Q(payments__kind=Payment.Kind.TASK)),
        )
        .order_by("pk")
        .values("pk", "pseudonym", "status", "is_simulated", "base", "adjustments", "recorded_bonus", "bonus_lines",
                "completed_tasks")
    )
    ranks = bonus_ranks(study)
    bonuses = rank_bonus_amounts(study)
    platform_ids: dict[int, str] = {}
    if include_pii:
        platform_ids = {
            pk: worker_id
            for pk, worker_id in ParticipantIdentity.objects.filter(study=study).values_list(
                "participant_id", "platform_worker_id"
            )
            if worker_id
        }
    rows = []
    for row in participants:
        rank = ranks.get(row["pk"])
        if row["is_simulated"]:
            bonus = Decimal("0.00")
        elif row["bonus_lines"]:
            bonus = Decimal(row["recorded_bonus"])
        elif rank is not None and rank <= len(bonuses):
            bonus = bonuses[rank - 1]
        else:
            bonus = Decimal("0.00")
        base, adjustments = Decimal(row["base"]), Decimal(row["adjustments"])
        if not (base or adjustments or bonus):
            continue
        platform_id = platform_ids.get(row["pk"])
        rows.append(
            PayoutRow(
                participant_id=platform_id or row["pseudonym"],
                has_platform_id=platform_id is not None,
                is_simulated=row["is_simulated"],
                status=row["status"],
                completed_tasks=row["completed_tasks"],
                base_pay=base.quantize(CENT),
                adjustments=adjustments.quantize(CENT),
                rank=rank,
                rank_bonus=bonus.quantize(CENT),
                currency=study.currency,
            )
        )
    return rows


def write_payout_csv(rows: list[PayoutRow], file_format: str, handle: IO[bytes]) -> dict[str, Any]:
    """Write the payout file into ``handle`` and return a JSON-ready summary."""
    if file_format not in PAYOUT_FORMATS:
        raise ValueError(f"file_format must be one of {sorted(PAYOUT_FORMATS)}, got {file_format!r}")
    text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
    writer = csv_writer(text)
    written, left_out = 0, 0
    total = Decimal("0.00")
    if file_format == "detailed":
        writer.writerow(DETAILED_COLUMNS)
    for row in rows:
        if file_format == "prolific":
            if not row.has_platform_id or row.amount <= 0:
                left_out += 1
                continue
            writer.writerow([row.participant_id, f"{row.amount:.2f}"])
        else:
            writer.writerow([
                row.participant_id, row.is_simulated, row.status, row.completed_tasks, f"{row.base_pay:.2f}",
                f"{row.adjustments:.2f}", "" if row.rank is None else row.rank, f"{row.rank_bonus:.2f}",
                f"{row.amount:.2f}", row.currency,
            ])
        written += 1
        total += row.amount
    text.flush()
    text.detach()
    return {
        "rows": written,
        "left_out": left_out,
        "total_amount": f"{total:.2f}",
        "currency": rows[0].currency if rows else "",
    }
