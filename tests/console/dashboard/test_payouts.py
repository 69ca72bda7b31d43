"""Payout files: base pay, adjustments and rank bonuses in the platform's bulk-bonus shape."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from console.dashboard import services
from console.dashboard.exceptions import JobRefused
from console.payouts import bonus_ranks, payout_rows, write_payout_csv
from rating.models import EntityRating
from studies.models import Participant, ParticipantIdentity, Payment


def _csv(rows, file_format: str) -> str:
    handle = io.BytesIO()
    write_payout_csv(rows, file_format, handle)
    return handle.getvalue().decode()


@pytest.mark.django_db
def test_bonuses_follow_the_human_ranking_of_the_latest_snapshot(populated):
    populated.study.rank_bonuses = ["100.00", "50.00"]
    populated.study.save()
    ranked = list(
        EntityRating.objects.filter(snapshot=populated.snapshot, entity_kind="human").order_by("rank")
        .values_list("entity_id", flat=True)
    )
    rows = {row.participant_id: row for row in payout_rows(populated.study)}
    pseudonym = dict(Participant.objects.values_list("pk", "pseudonym"))
    first, second, third = (rows[pseudonym[pk]] for pk in ranked[:3])
    assert (first.rank, first.rank_bonus) == (1, Decimal("100.00"))
    assert (second.rank, second.rank_bonus) == (2, Decimal("50.00"))
    assert third.rank_bonus == Decimal("0.00")
    assert first.base_pay == 3 * populated.study.compensation_per_task
    assert first.amount == first.base_pay + Decimal("100.00")


@pytest.mark.django_db
def test_only_completed_participants_compete_for_bonuses(populated):
    top = EntityRating.objects.filter(snapshot=populated.snapshot, entity_kind="human").order_by("rank").first()
    Participant.objects.filter(pk=top.entity_id).update(status=Participant.Status.WORKING)
    ranks = bonus_ranks(populated.study)
    assert top.entity_id not in ranks
    assert sorted(ranks.values()) == list(range(1, len(populated.participants)))


@pytest.mark.django_db
def test_paid_lines_are_left_out_and_a_recorded_bonus_replaces_the_computed_one(populated):
    participant = populated.participants[0]
    Payment.objects.filter(participant=participant).update(paid_at=timezone.now())
    Payment.objects.create(participant=participant, kind=Payment.Kind.ADJUSTMENT, amount=Decimal("7.50"))
    Payment.objects.create(participant=participant, kind=Payment.Kind.BONUS, amount=Decimal("5.00"))
    row = next(r for r in payout_rows(populated.study) if r.participant_id == participant.pseudonym)
    assert row.base_pay == Decimal("0.00")
    assert row.adjustments == Decimal("7.50") and row.rank_bonus == Decimal("5.00")
    assert row.amount == Decimal("12.50")


@pytest.mark.django_db
def test_the_prolific_file_has_no_header_and_uses_platform_ids(populated):
    rows = payout_rows(populated.study, include_pii=True)
    text = _csv(rows, "prolific")
    lines = list(csv.reader(io.StringIO(text)))
    assert len(lines) == len(populated.participants)
    assert all(len(line) == 2 and line[0].startswith("PROLIFIC") for line in lines)
    assert all(Decimal(line[1]) == Decimal(line[1]).quantize(Decimal("0.01")) for line in lines)
    assert sum(Decimal(line[1]) for line in lines) == sum(row.amount for row in rows)


@pytest.mark.django_db
def test_without_identities_the_detailed_file_uses_pseudonyms(populated):
    rows = payout_rows(populated.study)
    text = _csv(rows, "detailed")
    records = list(csv.DictReader(io.StringIO(text)))
    assert list(records[0]) == ["participant_id", "is_simulated", "status", "completed_tasks", "base_pay",
                                "adjustments", "rank", "rank_bonus", "amount", "currency"]
    assert {r["participant_id"] for r in records} == {p.pseudonym for p in populated.participants}
    assert "PROLIFIC" not in text
    assert _csv(rows, "prolific") == ""  # no platform ids: nothing Prolific could match


@pytest.mark.django_db
def test_payout_requests_check_the_format_and_the_permission(populated, staff_user, pii_user):
    with pytest.raises(JobRefused, match="Prolific ids"):
        services.payouts_request(study=populated.study, actor=pii_user, file_format="prolific")
    with pytest.raises(JobRefused, match="permission"):
        services.payouts_request(study=populated.study, actor=staff_user, file_format="prolific", include_pii=True)
    with pytest.raises(JobRefused):
        services.payouts_request(study=populated.study, actor=staff_user, file_format="xml")
    job = services.payouts_request(study=populated.study, actor=pii_user, file_format="prolific", include_pii=True)
    services.payouts_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "done" and job.result["rows"] == len(populated.participants)
    assert job.file.read().decode().startswith("PROLIFIC")


@pytest.mark.django_db
def test_a_platform_id_that_looks_like_a_formula_is_neutralised_but_negative_amounts_stay_numbers(populated):
    identity = ParticipantIdentity.objects.get(participant=populated.participants[0])
    identity.platform_worker_id = "=cmd|' /C calc'!A0"
    identity.save()
    Payment.objects.create(participant=populated.participants[1], amount=Decimal("-40.00"), kind="adjustment",
                           note="clawback")
    records = list(csv.DictReader(io.StringIO(_csv(payout_rows(populated.study, include_pii=True), "detailed"))))
    ids = {r["participant_id"] for r in records}
    assert "'=cmd|' /C calc'!A0" in ids and "=cmd|' /C calc'!A0" not in ids
    assert any(r["adjustments"].startswith("-") and Decimal(r["adjustments"]) < 0 for r in records)


@pytest.mark.django_db
def test_simulated_participants_get_no_rank_bonus_and_are_marked_in_the_detailed_file(populated):
    populated.study.rank_bonuses = ["100.00", "50.00"]
    populated.study.save()
    ranked = list(
        EntityRating.objects.filter(snapshot=populated.snapshot, entity_kind="human").order_by("rank")
        .values_list("entity_id", flat=True)
    )
    Participant.objects.filter(pk=ranked[0]).update(is_simulated=True)
    ranks = bonus_ranks(populated.study)
    assert ranked[0] not in ranks
    assert ranks[ranked[1]] == 1  # the best real participant moves up to the first bonus
    records = {r["participant_id"]: r for r in csv.DictReader(io.StringIO(_csv(payout_rows(populated.study),
                                                                               "detailed")))}
    pseudonym = dict(Participant.objects.values_list("pk", "pseudonym"))
    simulated, first_real = records[pseudonym[ranked[0]]], records[pseudonym[ranked[1]]]
    assert (simulated["is_simulated"], simulated["rank"], simulated["rank_bonus"]) == ("True", "", "0.00")
    assert (first_real["is_simulated"], first_real["rank"], first_real["rank_bonus"]) == ("False", "1", "100.00")


@pytest.mark.django_db
def test_the_payout_form_offers_and_defaults_to_what_the_user_can_produce(populated, staff_user, pii_user, client):
    url = reverse("dashboard:exports", args=[populated.study.slug])
    client.force_login(staff_user)
    page = client.get(url).content.decode()
    options = re.findall(r'<option value="(\w+)"( selected)?>', page)
    assert options == [("detailed", " selected")]
    assert "Use recruitment-platform worker ids" not in page  # no option named that is not on the page
    with pytest.raises(JobRefused, match="detailed file"):
        services.payouts_request(study=populated.study, actor=staff_user, file_format="prolific")
    client.force_login(pii_user)
    page = client.get(url).content.decode()
    assert re.findall(r'<option value="(\w+)"( selected)?>', page) == [("detailed", " selected"), ("prolific", "")]
    assert 'name="include_pii"' in page and "Use recruitment-platform worker ids" in page
