"""HTTP flow around the tasks: invitation → account → consent → profile, resume links, withdrawal,
completion, and the guards that keep each step in order."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies import models as m
from studies.invitations import personal_invite_path, resume_path
from surveys.services import instrument_install_default
from tests.factories import ConsentVersionFactory, OccupationFactory, StudyFactory, UserFactory
from tests.factories.scenarios import make_participant, make_world
from tests.tampering import tampered_link

pytestmark = pytest.mark.django_db
PASSWORD = "a-Long-enough-pass-9"


@pytest.fixture(autouse=True)
def _instrument():
    instrument_install_default()


def _signup(client, url, username="newworker"):
    return client.post(url, {"username": username, "email": "", "password1": PASSWORD, "password2": PASSWORD})


def test_a_new_worker_signs_up_from_the_invitation_and_lands_on_consent(client):
    world = make_world()
    prolific_id = "5f0c3a1b2c3d4e5f60718293"
    url = reverse("worker:join", args=[world.study.invite_code]) + f"?platform=prolific&worker_id={prolific_id}"
    page = client.get(url)
    assert page.status_code == 200 and b"Start the study" in page.content
    response = _signup(client, url)
    assert response.status_code == 302 and response["Location"] == reverse("worker:consent", args=["pilot"])
    participant = m.Participant.objects.get()
    assert participant.identity.platform == "prolific" and participant.identity.platform_worker_id == prolific_id
    assert participant.user.username == "newworker"


def test_the_consent_page_shows_the_current_version_and_names_the_llm_providers(client):
    world = make_world()
    ConsentVersionFactory(study=world.study, version=2, text="Version **two** <script>alert(1)</script>",
                          llm_providers=["openai", "anthropic", "google"])
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None, occupation=None)
    client.force_login(participant.user)
    page = client.get(reverse("worker:consent", args=["pilot"]))
    html = page.content.decode()
    assert "Version <strong>two</strong>" in html and "<script>alert" not in html
    for provider in ("OpenAI", "Anthropic", "Google"):
        assert f"<li>{provider}</li>" in html
    response = client.post(reverse("worker:consent", args=["pilot"]), {"decision": "accept", "version": 2})
    assert response["Location"] == reverse("worker:profile", args=["pilot"])
    participant.refresh_from_db()
    assert participant.consent_version.version == 2


def test_the_consent_page_states_pay_time_bonuses_ethics_approval_and_contact(client):
    world = make_world(minutes_per_task_estimate=75, ethics_approval="Uni X IRB, protocol 2026-117",
                       contact_name="Dr Ada Lovelace", contact_email="ada@uni.example.org",
                       rank_bonuses=["100.00", "50.00", "25.00"])
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None, occupation=None)
    client.force_login(participant.user)
    html = client.get(reverse("worker:consent", args=["pilot"])).content.decode()
    for fact in ("20.00 USD for each task you submit", "About 75 minutes per task", "Uni X IRB, protocol 2026-117",
                 "1st place 100.00 USD; 2nd place 50.00 USD; 3rd place 25.00 USD", "ada@uni.example.org"):
        assert fact in html, fact


def test_consent_without_a_provider_list_names_the_configured_judges(client):
    world = make_world()
    world.consent.llm_providers = []
    world.consent.save()
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None)
    client.force_login(participant.user)
    html = client.get(reverse("worker:consent", args=["pilot"])).content.decode()
    assert "<li>OpenAI</li>" in html and "<li>Anthropic</li>" in html


def test_declining_consent_leads_to_a_polite_goodbye_and_nothing_else(client):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None, occupation=None)
    client.force_login(participant.user)
    response = client.post(reverse("worker:consent", args=["pilot"]), {"decision": "decline", "version": 1})
    assert response["Location"] == reverse("worker:declined", args=["pilot"])
    assert b"Thank you for considering" in client.get(response["Location"]).content
    # Other steps stay closed.
    assert client.get(reverse("worker:profile", args=["pilot"]))["Location"] == reverse("worker:consent",
                                                                                          args=["pilot"])


def test_a_stale_consent_form_is_not_recorded(client):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.INVITED, consent_version=None,
                                   consented_at=None)
    ConsentVersionFactory(study=world.study, version=2)
    client.force_login(participant.user)
    client.post(reverse("worker:consent", args=["pilot"]), {"decision": "accept", "version": 1})
    participant.refresh_from_db()
    assert participant.consent_version is None
    assert not m.ConsentRecord.objects.exists()


def test_profile_search_and_save_moves_on_to_the_pre_survey(client):
    world = make_world()
    OccupationFactory(soc_code="29-1141.00", title="Registered Nurses")
    participant = make_participant(world, status=m.Participant.Status.CONSENTED, occupation=None)
    client.force_login(participant.user)
    page = client.get(reverse("worker:profile", args=["pilot"]), {"q": "account"})
    assert b"Accountants and Auditors" in page.content and b"Registered Nurses" not in page.content
    lookup = client.get(reverse("worker:occupation-search"), {"q": "nurse"}).json()
    assert [r["title"] for r in lookup["results"]] == ["Registered Nurses"]
    bad = client.post(reverse("worker:profile", args=["pilot"]), {"occupation": "", "years_experience": "-3"})
    assert bad.status_code == 200 and b"Please search for your occupation" in bad.content
    ok = client.post(reverse("worker:profile", args=["pilot"]),
                     {"occupation": world.occupation.pk, "years_experience": 7})
    assert ok["Location"] == reverse("worker:survey", args=["pilot", "pre"])
    participant.refresh_from_db()
    assert (participant.occupation, participant.years_experience, participant.status) == (
        world.occupation, 7, m.Participant.Status.PRE_SURVEY)


def test_steps_cannot_be_skipped(client):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.CONSENTED, occupation=None)
    client.force_login(participant.user)
    for url in (reverse("worker:survey", args=["pilot", "pre"]), reverse("worker:task", args=["pilot", 1]),
                reverse("worker:survey", args=["pilot", "post"]), reverse("worker:complete", args=["pilot"])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"] == reverse("worker:profile", args=["pilot"])


def test_reopening_the_invitation_resumes_instead_of_duplicating(client):
    world = make_world()
    url = reverse("worker:join", args=[world.study.invite_code]) + "?PROLIFIC_PID=5f0c3a1b2c3d4e5f607180bc"
    _signup(client, url)
    again = client.get(url)
    assert again.status_code == 302
    assert m.Participant.objects.count() == 1


def test_another_account_presenting_a_registered_platform_id_is_sent_to_sign_in(client):
    world = make_world()
    url = reverse("worker:join", args=[world.study.invite_code]) + "?PROLIFIC_PID=5f0c3a1b2c3d4e5f607180bc"
    _signup(client, url)
    client.logout()
    page = client.get(url)
    fresh = client.get(url.replace("607180bc", "607180bd"))
    assert page.status_code == fresh.status_code == 200 and len(page.content) == len(fresh.content), \
        "the page must not tell whether the id is registered"
    posted = client.post(url, {"username": "", "email": "", "password1": "", "password2": ""})
    assert posted.status_code == 409 and b"already registered" in posted.content
    assert "_auth_user_id" not in client.session, "a known id alone never signs anyone in"
    intruder = UserFactory()
    client.force_login(intruder)
    refused = client.get(url)
    assert refused.status_code == 409 and b"another account" in refused.content
    assert m.Participant.objects.count() == 1


def test_personal_invitations_carry_a_signed_id_and_reject_tampering(client):
    world = make_world()
    path = personal_invite_path(study=world.study, platform="upwork", worker_id="up-77")
    _signup(client, path)
    assert m.ParticipantIdentity.objects.get().platform_worker_id == "up-77"
    client.logout()
    assert client.get(tampered_link(path)).status_code == 400


def test_the_picker_offers_only_occupations_with_tasks_and_the_profile_refuses_the_others(client):
    world = make_world(tasks=2)
    nurses = OccupationFactory(soc_code="29-1141.00", title="Registered Nurses")
    participant = make_participant(world, status=m.Participant.Status.CONSENTED, occupation=None)
    client.force_login(participant.user)
    lookup = client.get(reverse("worker:occupation-search"), {"q": "a", "study": "pilot"}).json()
    titles = [r["title"] for r in lookup["results"]]
    assert "Accountants and Auditors" in titles and "Registered Nurses" not in titles
    accountants = next(r for r in lookup["results"] if r["title"] == "Accountants and Auditors")
    assert accountants["reach"] == 2 and lookup["tasks_total"] == 5
    page = client.get(reverse("worker:profile", args=["pilot"]), {"q": "account"})
    assert b"Only 2 tasks available for this occupation" in page.content
    refused = client.post(reverse("worker:profile", args=["pilot"]), {"occupation": nurses.pk, "years_experience": 3})
    assert refused.status_code == 200 and b"This study has no task left for that occupation" in refused.content
    assert b'value="3"' in refused.content, "the typed years are kept"
    participant.refresh_from_db()
    assert participant.occupation is None and participant.status == m.Participant.Status.CONSENTED


def test_malformed_or_unknown_invitations_answer_clearly(client):
    world = make_world()
    assert client.get(reverse("worker:join", args=["nope"])).status_code == 404
    bad = client.get(reverse("worker:join", args=[world.study.invite_code]) + "?worker_id=%3Cscript%3E")
    assert bad.status_code == 400 and b"not valid" in bad.content
    draft = StudyFactory(slug="draft", status=m.Study.Status.DRAFT)
    assert client.get(reverse("worker:join", args=[draft.invite_code])).status_code == 404


def test_resume_links_work_only_for_the_owner(client):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    path = resume_path(participant)
    client.force_login(participant.user)
    assert client.get(path)["Location"] == reverse("worker:survey", args=["pilot", "pre"])
    client.force_login(UserFactory())
    assert client.get(path).status_code == 404
    client.logout()
    assert client.get(path)["Location"].startswith(reverse("login"))


def test_pages_of_a_study_the_worker_is_not_in_answer_404(client):
    world = make_world()
    make_participant(world)
    client.force_login(UserFactory(roles=["worker"]))
    for name in ("worker:study", "worker:consent", "worker:profile", "worker:complete", "worker:withdraw"):
        assert client.get(reverse(name, args=["pilot"])).status_code == 404


def test_withdrawal_needs_confirmation_and_then_closes_every_step(client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    world = make_world()
    participant = make_participant(world)
    client.force_login(participant.user)
    url = reverse("worker:withdraw", args=["pilot"])
    unconfirmed = client.post(url, {"reason": "busy"})
    assert unconfirmed.status_code == 200 and b"tick the box" in unconfirmed.content
    client.post(url, {"reason": "busy", "confirm": "1"})
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.WITHDRAWN
    assert b"You withdrew" in client.get(reverse("worker:study", args=["pilot"])).content
    assert client.get(reverse("worker:task", args=["pilot", 1]))["Location"] == reverse("worker:study",
                                                                                         args=["pilot"])


def test_completion_shows_the_code_and_the_return_url_with_the_code(client):
    world = make_world(return_url="https://app.prolific.com/submissions/complete?cc={code}")
    participant = make_participant(world, status=m.Participant.Status.COMPLETE)
    client.force_login(participant.user)
    html = client.get(reverse("worker:complete", args=["pilot"])).content.decode()
    assert participant.completion_code in html
    assert f"https://app.prolific.com/submissions/complete?cc={participant.completion_code}" in html


def test_the_completion_code_is_not_shown_before_completion(client):
    world = make_world()
    participant = make_participant(world)
    client.force_login(participant.user)
    response = client.get(reverse("worker:complete", args=["pilot"]))
    assert response.status_code == 302
    assert participant.completion_code not in client.get(reverse("worker:study", args=["pilot"])).content.decode()


def test_worker_home_goes_straight_to_the_only_study(client):
    world = make_world()
    participant = make_participant(world)
    client.force_login(participant.user)
    assert client.get(reverse("worker:home"))["Location"] == reverse("worker:study", args=["pilot"])
    client.force_login(UserFactory())
    assert b"not taking part in a study yet" in client.get(reverse("worker:home")).content


def test_the_heartbeat_records_time_on_the_current_step_only_for_own_episodes(client):
    world = make_world()
    participant = make_participant(world)
    other = make_participant(world)
    from pairing.services import episode_assign

    mine = episode_assign(participant=participant, position=1)
    theirs = episode_assign(participant=other, position=1)
    client.force_login(participant.user)
    url = reverse("worker:heartbeat", args=["pilot"])
    assert client.post(url, {"step": "task", "episode": mine.pk}).status_code == 204
    assert m.StepVisit.objects.filter(participant=participant, episode=mine, step="task").exists()
    assert client.post(url, {"step": "task", "episode": theirs.pk}).status_code == 404
    assert client.post(url, {"step": "nonsense"}).status_code == 400
