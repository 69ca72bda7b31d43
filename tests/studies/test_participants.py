"""Participants: one per platform id per study, signed links, consent records, step timing, withdrawal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pairing.services import episode_assign
from studies import models as m
from studies.exceptions import IdentityConflict, InvalidInvitation, StepNotAvailable, StudyNotOpen
from studies.invitations import (
    PlatformClaim,
    claim_from_personal_token,
    claim_from_query,
    participant_id_from_resume_token,
    personal_invite_token,
    resume_token,
)
from studies.roles import WORKER, has_role
from studies.selectors import Step, consent_version_required, journey_state
from studies.services.consent import consent_decide
from studies.services.participants import participant_join, participant_withdraw, step_visit_record
from tests.factories import ConsentVersionFactory, StudyFactory, UserFactory
from tests.factories.scenarios import make_participant, make_world
from tests.tampering import tampered

pytestmark = pytest.mark.django_db
PROLIFIC = PlatformClaim(platform="prolific", worker_id="5f1a2b3c")


def test_joining_creates_one_participant_with_its_identity_kept_apart_and_the_worker_role():
    study = StudyFactory(slug="s1")
    user = UserFactory()
    participant = participant_join(study=study, user=user, claim=PROLIFIC)
    assert participant.status == m.Participant.Status.INVITED
    assert participant.identity.platform_worker_id == "5f1a2b3c"
    assert participant.pseudonym.startswith("P-") and "5f1a" not in participant.pseudonym
    assert has_role(UserFactory._meta.model.objects.get(pk=user.pk), WORKER)


def test_reopening_the_link_resumes_the_same_participant():
    study = StudyFactory(slug="s1")
    user = UserFactory()
    first = participant_join(study=study, user=user, claim=PROLIFIC)
    again = participant_join(study=study, user=user, claim=PROLIFIC)
    without_id = participant_join(study=study, user=user, claim=PlatformClaim())
    assert first == again == without_id
    assert m.Participant.objects.count() == 1 and m.ParticipantIdentity.objects.count() == 1


def test_a_second_account_with_the_same_platform_id_is_refused_never_duplicated():
    study = StudyFactory(slug="s1")
    participant_join(study=study, user=UserFactory(), claim=PROLIFIC)
    with pytest.raises(IdentityConflict, match="already registered"):
        participant_join(study=study, user=UserFactory(), claim=PROLIFIC)
    assert m.Participant.objects.count() == 1


def test_an_account_cannot_switch_to_another_platform_id():
    study = StudyFactory(slug="s1")
    user = UserFactory()
    participant_join(study=study, user=user, claim=PROLIFIC)
    with pytest.raises(IdentityConflict, match="different"):
        participant_join(study=study, user=user, claim=PlatformClaim(platform="prolific", worker_id="other"))


def test_an_account_that_joined_without_an_id_adopts_the_first_id_it_presents():
    study = StudyFactory(slug="s1")
    user = UserFactory()
    participant = participant_join(study=study, user=user, claim=PlatformClaim())
    participant_join(study=study, user=user, claim=PROLIFIC)
    participant.identity.refresh_from_db()
    assert participant.identity.platform_worker_id == "5f1a2b3c"


def test_the_same_platform_id_may_take_part_in_two_studies():
    user = UserFactory()
    a = participant_join(study=StudyFactory(slug="a"), user=user, claim=PROLIFIC)
    b = participant_join(study=StudyFactory(slug="b"), user=user, claim=PROLIFIC)
    assert a != b


def test_studies_that_are_not_recruiting_refuse_new_participants_but_resume_existing_ones():
    study = StudyFactory(slug="s1")
    user = UserFactory()
    existing = participant_join(study=study, user=user, claim=PlatformClaim())
    study.status = m.Study.Status.CLOSED
    study.save()
    assert participant_join(study=study, user=user, claim=PlatformClaim()) == existing
    with pytest.raises(StudyNotOpen):
        participant_join(study=study, user=UserFactory(), claim=PlatformClaim())


def test_platform_ids_from_links_are_read_and_malformed_ones_refused():
    assert claim_from_query({"PROLIFIC_PID": "5f0c3a1b2c3d4e5f60abc123"}) == PlatformClaim(platform="prolific",
                                                                            worker_id="5f0c3a1b2c3d4e5f60abc123")
    assert claim_from_query({"platform": "Upwork", "worker_id": " u-9 "}).worker_id == "u-9"
    assert claim_from_query({}) == PlatformClaim()
    for bad in ({"worker_id": "<script>"}, {"worker_id": "x" * 300}, {"platform": "no way", "worker_id": "a"}):
        with pytest.raises(InvalidInvitation):
            claim_from_query(bad)


def test_personal_invitations_are_signed_per_study_and_tamper_proof():
    study, other = StudyFactory(slug="s1"), StudyFactory(slug="s2")
    token = personal_invite_token(study=study, platform="upwork", worker_id="worker-42")
    claim = claim_from_personal_token(study=study, token=token)
    assert (claim.platform, claim.worker_id, claim.signed) == ("upwork", "worker-42", True)
    with pytest.raises(InvalidInvitation):
        claim_from_personal_token(study=other, token=token)
    with pytest.raises(InvalidInvitation):
        claim_from_personal_token(study=study, token=tampered(token))


def test_resume_tokens_only_open_for_the_owning_account():
    world = make_world()
    participant = make_participant(world)
    token = resume_token(participant)
    assert participant_id_from_resume_token(token=token, user_id=participant.user_id) == participant.pk
    assert participant_id_from_resume_token(token=token, user_id=participant.user_id + 999) is None
    assert participant_id_from_resume_token(token=token + "x", user_id=participant.user_id) is None


def test_consent_is_recorded_with_version_and_time_and_audited():
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None, occupation=None)
    assert consent_version_required(participant) == world.consent
    consent_decide(participant=participant, consent_version=world.consent, accepted=True, actor=participant.user)
    participant.refresh_from_db()
    record = m.ConsentRecord.objects.get(participant=participant)
    assert record.accepted and record.consent_version == world.consent and record.decided_at
    assert participant.consent_version == world.consent and participant.consented_at is not None
    assert participant.status == m.Participant.Status.CONSENTED
    assert m.AuditEvent.objects.filter(action="consent.accept", object_id=str(participant.pk)).exists()


def test_declining_before_consenting_leaves_politely_and_can_be_reversed():
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None)
    consent_decide(participant=participant, consent_version=world.consent, accepted=False, actor=participant.user)
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.DECLINED and participant.consent_version is None
    consent_decide(participant=participant, consent_version=world.consent, accepted=True, actor=participant.user)
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.CONSENTED
    assert m.ConsentRecord.objects.filter(participant=participant).count() == 2


def test_a_new_version_requires_reconsent_only_when_staff_ask_for_it():
    world = make_world()
    participant = make_participant(world)
    ConsentVersionFactory(study=world.study, version=2, requires_reconsent=False)
    participant.study.refresh_from_db()
    assert consent_version_required(participant) is None
    v3 = ConsentVersionFactory(study=world.study, version=3, requires_reconsent=True)
    assert consent_version_required(participant) == v3
    assert journey_state(participant).step == Step.CONSENT
    with pytest.raises(StepNotAvailable, match="updated"):
        consent_decide(participant=participant, consent_version=world.consent, accepted=True, actor=None)


def test_declining_a_required_new_version_withdraws_the_participant(monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("studyapp.celery.app.send_task",
                        lambda name, args, **kw: sent.append((name, args)))
    world = make_world()
    participant = make_participant(world)
    v2 = ConsentVersionFactory(study=world.study, version=2, requires_reconsent=True)
    with django_capture_on_commit_callbacks(execute=True):
        consent_decide(participant=participant, consent_version=v2, accepted=False, actor=participant.user)
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.WITHDRAWN
    assert sent == [("rating.tasks.retract_participant", [participant.pk, "Declined consent version 2."])]


def test_withdrawal_cancels_open_work_keeps_submitted_work_and_enqueues_the_retraction(
        monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("studyapp.celery.app.send_task",
                        lambda name, args, **kw: sent.append((name, args)))
    world = make_world(with_files=False)
    participant = make_participant(world)
    done = episode_assign(participant=participant, position=1)
    m.Episode.objects.filter(pk=done.pk).update(status=m.Episode.Status.SUBMITTED)
    m.Payment.objects.create(participant=participant, episode=done, kind="task", amount=20)
    open_episode = episode_assign(participant=participant, position=2)
    with django_capture_on_commit_callbacks(execute=True):
        result = participant_withdraw(participant=participant, actor=participant.user, reason="No time")
    assert result.status == m.Participant.Status.WITHDRAWN and result.withdrawn_at is not None
    assert result.withdrawal_reason == "No time"
    open_episode.refresh_from_db()
    done.refresh_from_db()
    assert open_episode.status == m.Episode.Status.SKIPPED
    assert done.status == m.Episode.Status.SUBMITTED
    assert m.Payment.objects.filter(episode=done).exists()
    assert sent == [("rating.tasks.retract_participant", [participant.pk, "No time"])]
    assert m.AuditEvent.objects.filter(action="participant.withdraw").count() == 1
    # A second request changes nothing and enqueues nothing more.
    with django_capture_on_commit_callbacks(execute=True):
        participant_withdraw(participant=participant, actor=participant.user, reason="again")
    assert len(sent) == 1


def test_step_visits_extend_while_active_and_restart_after_a_pause():
    world = make_world()
    participant = make_participant(world)
    start = timezone.now()
    step_visit_record(participant=participant, step="profile", now=start)
    step_visit_record(participant=participant, step="profile", now=start + timedelta(minutes=10))
    step_visit_record(participant=participant, step="profile", now=start + timedelta(hours=5))
    step_visit_record(participant=participant, step="profile", now=start + timedelta(hours=5, minutes=2))
    visits = list(m.StepVisit.objects.filter(participant=participant).order_by("started_at"))
    assert [v.seconds for v in visits] == [600.0, 120.0]
    participant.refresh_from_db()
    assert participant.last_activity_at == start + timedelta(hours=5, minutes=2)
