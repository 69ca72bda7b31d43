"""The per-study LLM budget: record every call's cost, and refuse new calls once the cap is reached.

Judge calls run in parallel, so checking the spend before calling is not enough: every parallel grading
would pass the check. A judge call therefore first *reserves* an upper bound of its cost on its judge run
(`budget_reserve`). Reservations of one study are taken one at a time (a PostgreSQL advisory lock; on SQLite
the reservation's own write serialises them), and a new one is admitted only while settled spend plus live
reservations is still under the cap. The reply's usage rows and the cleared reservation commit together
(`judge_run_record`), a released or failed run clears it, and a reservation counts only while its run's lease
is live, so a dead worker's hold lapses with its lease. A grading round (the judges of one submission) is
admitted as a whole. Guarantee: spend never exceeds the cap by more than one round's estimate (the last round
admitted under it), because an estimate bounds its call's cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

from django.db import connection, transaction
from django.db.models import F, Func, OuterRef, Q, Subquery
from django.utils import timezone

from grading.exceptions import BudgetBusy, BudgetExhausted
from grading.llm import JSON_INSTRUCTION, LLMResponse, ProviderConfig
from grading.models import JudgeRun, LLMUsage
from grading.selectors import study_llm_spend
from studies.models import Study

_MICRO = Decimal("0.000001")
# Bounds behind a call's cost estimate: a token is at least one byte of text, an image costs at most this many
# input tokens, and a JSON repair request (the listed problems) adds at most this many bytes.
IMAGE_TOKEN_BOUND = 2000
REPAIR_REQUEST_BYTES = 4000
_BUDGET_LOCK = 0x6275  # advisory lock class of budget reservations (the study id is the second key)


def usd(value: float) -> Decimal:
    """Round a float dollar amount to the ledger's six decimals."""
    return Decimal(str(value)).quantize(_MICRO, rounding=ROUND_HALF_UP)


def budget_note(study: Study) -> str:
    spend = study_llm_spend(study)
    return (f"LLM budget reached: this study has spent ${spend:.2f} of its ${study.llm_budget_usd:.2f} cap. "
            "Raise the study's LLM budget, then run `manage.py grade --pending`.")


def budget_ensure_available(*, study: Study | None) -> None:
    """Raise BudgetExhausted when the study's spend has reached its cap (no cap: always available)."""
    if study is None or study.llm_budget_usd is None:
        return
    if study_llm_spend(study) >= study.llm_budget_usd:
        raise BudgetExhausted(budget_note(study))


def call_cost_estimate(*, config: ProviderConfig, system: str, user_text: str, images: int, max_tokens: int,
                       repair_attempts: int, schema: dict | None = None) -> Decimal:
    """An upper bound of what `llm.complete_json` may spend: every repair round at full output length.

    Input of round r is the prompt plus r earlier replies and repair requests; output is `max_tokens` each.
    """
    instructions = f"{system}\n\n{JSON_INSTRUCTION}" + (
        f"\nThe object must match this JSON Schema:\n{json.dumps(schema)}" if schema else "")
    prompt = len(instructions.encode()) + len(user_text.encode()) + images * IMAGE_TOKEN_BOUND
    total = 0.0
    for round_ in range(repair_attempts + 1):
        tokens_in = prompt + round_ * (max_tokens + REPAIR_REQUEST_BYTES)
        total += tokens_in * config.price_in_per_mtok + max_tokens * config.price_out_per_mtok
    return Decimal(str(total / 1e6)).quantize(_MICRO, rounding=ROUND_CEILING)


def _spent_and_held(study_id: int, *, excluding_runs: list[int]) -> tuple[Decimal, Decimal, Decimal | None]:
    """The cap, settled spend and live reservations of a study, read in one statement (one snapshot)."""
    def total(column: str):
        return Func(F(column), function="SUM")

    spent = LLMUsage.objects.filter(study_id=OuterRef("pk")).order_by().annotate(
        spent_sum=total("cost_usd")).values("spent_sum")[:1]
    held = JudgeRun.objects.filter(
        Q(episode__study_id=OuterRef("pk")) | Q(solo_run__study_id=OuterRef("pk")),
        status=JudgeRun.Status.RUNNING, reserved_usd__isnull=False, lease_expires_at__gt=timezone.now(),
    ).exclude(pk__in=excluding_runs).order_by().annotate(held_sum=total("reserved_usd")).values("held_sum")[:1]
    cap, spent_usd, held_usd = (Study.objects.filter(pk=study_id).annotate(spent=Subquery(spent), held=Subquery(held))
                                .values_list("llm_budget_usd", "spent", "held").get())
    return Decimal(spent_usd or 0), Decimal(held_usd or 0), cap


def budget_reserve(*, study: Study | None, amounts: dict[int, Decimal]) -> list[int]:
    """Hold each claimed (RUNNING) judge run's estimate on the study budget before calling the judges.

    One grading round (every judge of one submission) is admitted or refused as a whole, so the budget never
    leaves a panel half-called. Raise BudgetExhausted when settled spend reached the cap (the runs wait with the
    budget note) and BudgetBusy when the rest of the cap is held by calls in flight (try again once they
    settle). Return the runs whose reservation was written (none for uncapped studies or unpriced models).
    """
    amounts = {run_id: amount for run_id, amount in amounts.items() if amount > 0}
    if study is None or not amounts:
        return []
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_BUDGET_LOCK, study.pk])
        # Write first: on SQLite this takes the database write lock, so reservations serialise there too.
        held_here = [run_id for run_id, amount in amounts.items()
                     if JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.RUNNING).update(reserved_usd=amount)]
        if not held_here:
            return []
        spent, held, cap = _spent_and_held(study.pk, excluding_runs=held_here)
        if cap is None:
            JudgeRun.objects.filter(pk__in=held_here).update(reserved_usd=None)
            return []
        study.llm_budget_usd = cap  # the cap may have been raised since the study was read
        if spent >= cap:
            raise BudgetExhausted(budget_note(study))  # rolls the reservations back
        if spent + held >= cap:
            raise BudgetBusy(f"The rest of this study's LLM budget (${cap - spent:.2f} of ${cap:.2f}) is reserved "
                             "by judge calls in flight; grading continues when they finish.")
    return held_here


def llm_usage_record(*, study: Study | None, purpose: str, prompt_version: str,
                     responses: Sequence[LLMResponse], accepted_last: bool) -> Decimal:
    """Write one usage row per paid reply; only the accepted final reply counts as succeeded. Return the cost."""
    total = Decimal("0")
    rows = []
    for index, response in enumerate(responses):
        cost = usd(response.cost_usd)
        total += cost
        rows.append(LLMUsage(
            study=study, purpose=purpose, provider=response.provider, model=response.model,
            prompt_version=prompt_version, input_tokens=response.input_tokens,
            output_tokens=response.output_tokens, cost_usd=cost, latency_ms=response.latency_ms,
            succeeded=accepted_last and index == len(responses) - 1,
        ))
    LLMUsage.objects.bulk_create(rows)
    return total
