"""HTTP flow of the task page: start, setup, skip, uploads, log link, submission, time limit, permissions,
and that no hidden evaluator information ever reaches a worker."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from pairing.services import episode_assign
from studies import models as m
from tests.factories.files import PDF, PNG, XLSX, upload
from tests.factories.scenarios import HIDDEN_MARKER, make_participant, make_world

pytestmark = pytest.mark.django_db
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr("studyapp.celery.app.send_task",
                        lambda name, args, **options: calls.append((name, args)))
    return calls


@pytest.fixture
def world():
    return make_world(with_files=True)


@pytest.fixture
def worker(client, world):
    participant = make_participant(world)
    client.force_login(participant.user)
    return participant


def _start(client, position=1):
    response = client.post(reverse("worker:task-start", args=["pilot", position]))
    assert response.status_code == 302, response.content[:500]
    return m.Episode.objects.get(participant__user__username=response.wsgi_request.user.username, position=position)


def _ready(client, episode):
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "few", "ready": "1"})


def _upload(client, episode, name, content, kind="deliverable", replace=False, **extra):
    data = {"kind": kind, "file": upload(name, content)}
    if replace:
        data["replace"] = "1"
    return client.post(reverse("worker:episode-upload", args=[episode.pk]), data, **extra)


def test_the_task_page_shows_position_agent_setup_prompt_files_and_expected_names(client, worker, world):
    assert b"Show me task 1" in client.get(reverse("worker:task", args=["pilot", 1])).content
    episode = _start(client)
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert f"Task 1 of {world.study.tasks_per_session}" in html
    assert episode.agent.name in html
    assert "Have you used" in html and "Never used" in html and "Used a few times" in html and "Use regularly" in html
    assert "<code>agent --version</code>" in html, "the setup guide markdown is rendered"
    assert episode.task.prompt in html
    assert "data.xlsx" in html and "brief.txt" in html and "Download all (ZIP)" in html
    assert "<code>summary.xlsx</code>" in html
    assert "gold.txt" not in html and HIDDEN_MARKER not in html


def test_hidden_information_never_appears_on_any_worker_response(client, worker, world, sent):
    episode = _start(client)
    _ready(client, episode)
    _upload(client, episode, "summary.xlsx", XLSX)
    _upload(client, episode, "log.txt", b"chat log", kind="log")
    m.Episode.objects.filter(pk=episode.pk).update(auto_score=88.5, score=88.5, grading_note="judge says HIDDEN")
    urls = [reverse("worker:task", args=["pilot", 1]), reverse("worker:episode-submit", args=[episode.pk]),
            reverse("worker:study", args=["pilot"]), reverse("worker:reference-zip", args=[episode.pk])]
    client.post(reverse("worker:episode-submit", args=[episode.pk]))
    urls += [reverse("worker:task", args=["pilot", 1]), reverse("worker:study", args=["pilot"])]
    for url in urls:
        body = b"".join(client.get(url, follow=True).streaming_content) if url.endswith(".zip") else \
            client.get(url, follow=True).content
        assert HIDDEN_MARKER.encode() not in body and b"88.5" not in body and b"judge says" not in body, url
    hidden = m.TaskFile.objects.get(task=episode.task, kind=m.TaskFile.Kind.HIDDEN)
    assert client.get(reverse("worker:reference-file", args=[episode.pk, hidden.pk])).status_code == 404


def test_reference_files_download_as_attachments_and_as_a_streamed_zip(client, worker):
    episode = _start(client)
    ref = m.TaskFile.objects.get(task=episode.task, name="data.xlsx")
    single = client.get(reverse("worker:reference-file", args=[episode.pk, ref.pk]))
    assert single["Content-Disposition"].startswith("attachment")
    assert single["X-Content-Type-Options"] == "nosniff"
    assert b"".join(single.streaming_content) == XLSX
    archive = client.get(reverse("worker:reference-zip", args=[episode.pk]))
    assert archive.streaming and archive["Content-Disposition"].startswith("attachment")
    names = zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))).namelist()
    assert sorted(names) == ["brief.txt", "data.xlsx"]


def test_other_workers_episodes_and_files_answer_404(client, worker, world):
    mine = _start(client)
    _upload(client, mine, "summary.xlsx", XLSX)
    my_file = m.EpisodeFile.objects.get(episode=mine)
    other = make_participant(world)
    theirs = episode_assign(participant=other, position=1)
    their_file = m.EpisodeFile(episode=theirs, kind="deliverable", name="x.pdf", size=len(PDF), sha256="0")
    from django.core.files.base import ContentFile

    their_file.file.save("x.pdf", ContentFile(PDF))
    ref = m.TaskFile.objects.filter(task=theirs.task, kind="reference").first()
    get_urls = [
        reverse("worker:episode-file", args=[theirs.pk, their_file.pk]),
        reverse("worker:episode-file", args=[mine.pk, their_file.pk]),
        reverse("worker:reference-zip", args=[theirs.pk]),
        reverse("worker:reference-file", args=[theirs.pk, ref.pk]),
        reverse("worker:episode-submit", args=[theirs.pk]),
    ]
    for url in get_urls:
        assert client.get(url).status_code == 404, url
    post_urls = [
        (reverse("worker:episode-upload", args=[theirs.pk]), {"kind": "deliverable", "file": upload("a.pdf", PDF)}),
        (reverse("worker:episode-file-delete", args=[theirs.pk, their_file.pk]), {}),
        (reverse("worker:episode-file-delete", args=[mine.pk, their_file.pk]), {}),
        (reverse("worker:episode-setup", args=[theirs.pk]), {"prior_experience": "never", "ready": "1"}),
        (reverse("worker:episode-setup-failed", args=[theirs.pk]), {"description": "x" * 20}),
        (reverse("worker:episode-log", args=[theirs.pk]), {"share_url": "", "notes": ""}),
        (reverse("worker:episode-submit", args=[theirs.pk]), {}),
    ]
    for url, data in post_urls:
        assert client.post(url, data).status_code == 404, url
    assert m.EpisodeFile.objects.filter(pk=their_file.pk).exists()
    theirs.refresh_from_db()
    assert theirs.status == m.Episode.Status.ASSIGNED and theirs.ready_at is None
    own = client.get(reverse("worker:episode-file", args=[mine.pk, my_file.pk]))
    assert own.status_code == 200 and own["Content-Disposition"].startswith("attachment")


def test_anonymous_visitors_are_sent_to_sign_in(client, world):
    participant = make_participant(world)
    episode = episode_assign(participant=participant, position=1)
    for url in (reverse("worker:task", args=["pilot", 1]), reverse("worker:reference-zip", args=[episode.pk])):
        assert client.get(url)["Location"].startswith(reverse("login"))
    assert client.post(reverse("worker:episode-upload", args=[episode.pk]),
                       {"kind": "deliverable", "file": upload("a.pdf", PDF)}).status_code == 302
    assert not m.EpisodeFile.objects.exists()


def test_uploads_answer_json_for_scripts_with_clear_errors(client, worker):
    episode = _start(client)
    ok = _upload(client, episode, "summary.xlsx", XLSX, **JSON)
    assert ok.status_code == 200 and ok.json()["files"][0]["name"] == "summary.xlsx"
    dup = _upload(client, episode, "summary.xlsx", XLSX, **JSON)
    assert dup.status_code == 409 and dup.json()["duplicate"] is True and "Replace" in dup.json()["error"]
    assert _upload(client, episode, "summary.xlsx", XLSX, replace=True, **JSON).status_code == 200
    empty = _upload(client, episode, "empty.txt", b"", **JSON)
    assert empty.status_code == 400 and "empty" in empty.json()["error"]
    exe = _upload(client, episode, "tool.exe", b"MZ", **JSON)
    assert exe.status_code == 400 and "not accepted" in exe.json()["error"]
    assert list(m.EpisodeFile.objects.filter(episode=episode).values_list("name", flat=True)) == ["summary.xlsx"]


def test_several_files_upload_in_one_request_without_script(client, worker):
    episode = _start(client)
    response = client.post(reverse("worker:episode-upload", args=[episode.pk]), {
        "kind": "deliverable", "file": [upload("a.pdf", PDF), upload("b.txt", b"text"), upload("c.exe", b"MZ")],
    }, follow=True)
    names = sorted(m.EpisodeFile.objects.filter(episode=episode).values_list("name", flat=True))
    assert names == ["a.pdf", "b.txt"]
    assert "“c.exe”: files of type “.exe” are not accepted" in response.content.decode()


def test_an_oversized_file_is_stopped_while_streaming(client, worker, settings):
    settings.UPLOADS = {**settings.UPLOADS, "MAX_FILE_BYTES": 1000}
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 100  # force the temporary-file path
    episode = _start(client)
    response = _upload(client, episode, "big.txt", b"x" * 5000, **JSON)
    assert response.status_code == 400 and "larger than the" in response.json()["error"]
    assert not m.EpisodeFile.objects.filter(episode=episode).exists()


def test_a_request_larger_than_the_episode_limit_is_refused_before_reading(client, worker, settings):
    settings.UPLOADS = {**settings.UPLOADS, "MAX_EPISODE_BYTES": 10}
    episode = _start(client)
    response = _upload(client, episode, "big.txt", b"x" * (2 << 20), **JSON)
    assert response.status_code == 413 and "limit per task" in response.json()["error"]


def test_removing_a_file_before_submission(client, worker):
    episode = _start(client)
    _upload(client, episode, "a.pdf", PDF)
    record = m.EpisodeFile.objects.get(episode=episode)
    assert client.post(reverse("worker:episode-file-delete", args=[episode.pk, record.pk]), {"confirm": "1"},
                       **JSON).json() == {"ok": True, "message": "“a.pdf” removed."}
    assert not m.EpisodeFile.objects.filter(pk=record.pk).exists()


def test_submitting_without_ready_confirmation_is_refused_and_loses_nothing(client, worker, sent):
    episode = _start(client)
    _upload(client, episode, "summary.xlsx", XLSX)
    _upload(client, episode, "log.txt", b"log", kind="log")
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "never"})
    review = client.get(reverse("worker:episode-submit", args=[episode.pk]))
    assert b"Confirm that the agent is set up and ready" in review.content and b"final-submit" not in review.content
    response = client.post(reverse("worker:episode-submit", args=[episode.pk]), follow=True)
    assert b"Not submitted yet" in response.content
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.ASSIGNED and episode.prior_experience == "never"
    assert m.EpisodeFile.objects.filter(episode=episode).count() == 2 and sent == []


def test_submission_needs_a_deliverable_and_the_log_the_agent_asks_for(client, worker, sent):
    episode = _start(client)
    _ready(client, episode)
    response = client.post(reverse("worker:episode-submit", args=[episode.pk]), follow=True)
    html = response.content.decode()
    assert "Upload at least one deliverable" in html and "collaboration log" in html
    m.Agent.objects.filter(pk=episode.agent_id).update(log_mode=m.Agent.LogMode.SHARE_URL)
    _upload(client, episode, "summary.xlsx", XLSX)
    html = client.post(reverse("worker:episode-submit", args=[episode.pk]), follow=True).content.decode()
    assert "Paste the shared-session link" in html and sent == []


def test_invalid_share_urls_are_refused_and_the_typed_text_is_kept(client, worker):
    episode = _start(client)
    m.Agent.objects.filter(pk=episode.agent_id).update(log_mode=m.Agent.LogMode.SHARE_URL)
    url = reverse("worker:episode-log", args=[episode.pk])
    for bad, message in (("not a link", "not a valid web address"), ("http://share.example.org/s/1", "https"),
                         ("https://evil.example.com/s/1", "not to"),
                         ("https://user:pw@share.example.org/s/1", "user name")):
        response = client.post(url, {"share_url": bad, "notes": "my notes"})
        assert response.status_code == 400 and message in response.content.decode(), bad
        assert f'value="{bad}"' in response.content.decode() and "my notes" in response.content.decode()
    client.post(url, {"share_url": "https://app.share.example.org/s/abc", "notes": "n"})
    episode.refresh_from_db()
    assert episode.share_url == "https://app.share.example.org/s/abc"
    client.post(url, {"share_url": "javascript:alert(1)", "notes": "n"})
    episode.refresh_from_db()
    assert episode.share_url == "https://app.share.example.org/s/abc", "a bad link never replaces a saved one"


@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "169.254.169.254", "[::1]",
                                  "[fd00::1]", "0.0.0.0", "localhost", "240.0.0.1"])
def test_share_links_to_private_or_reserved_addresses_are_refused(client, worker, host):
    episode = _start(client)
    m.Agent.objects.filter(pk=episode.agent_id).update(log_mode=m.Agent.LogMode.SHARE_URL, share_url_hosts=[])
    url = reverse("worker:episode-log", args=[episode.pk])
    response = client.post(url, {"share_url": f"https://{host}/s/1", "notes": "my notes"})
    assert response.status_code == 400 and "private or reserved" in response.content.decode()
    episode.refresh_from_db()
    assert episode.share_url == ""


def test_share_links_to_public_addresses_are_kept(client, worker):
    episode = _start(client)
    m.Agent.objects.filter(pk=episode.agent_id).update(log_mode=m.Agent.LogMode.SHARE_URL, share_url_hosts=[])
    client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": "https://8.8.8.8/s/1", "notes": ""})
    episode.refresh_from_db()
    assert episode.share_url == "https://8.8.8.8/s/1"


def test_final_submission_pays_once_enqueues_grading_once_and_locks_the_files(
        client, worker, sent, django_capture_on_commit_callbacks):
    episode = _start(client)
    _ready(client, episode)
    _upload(client, episode, "summary.xlsx", XLSX)
    _upload(client, episode, "log.txt", b"log", kind="log")
    assert b"final-submit" in client.get(reverse("worker:episode-submit", args=[episode.pk])).content
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(reverse("worker:episode-submit", args=[episode.pk]))
    assert first["Location"] == reverse("worker:task", args=["pilot", 2])
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(reverse("worker:episode-submit", args=[episode.pk]), follow=True)
    assert b"already submitted" in again.content
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SUBMITTED and not episode.timed_out
    assert sent == [("grading.tasks.grade_episode", [episode.pk])]
    payment = m.Payment.objects.get(episode=episode)
    assert payment.kind == "task" and payment.amount == worker.study.compensation_per_task
    late_upload = _upload(client, episode, "more.pdf", PDF, **JSON)
    assert late_upload.status_code == 409


def test_a_late_submission_is_kept_and_flagged(client, world, sent):
    world.study.task_time_limit_minutes = 30
    world.study.save()
    participant = make_participant(world)
    client.force_login(participant.user)
    episode = _start(client)
    assert episode.deadline_at is not None
    assert abs((episode.deadline_at - episode.started_at) - timedelta(minutes=30)) < timedelta(seconds=1)
    m.Episode.objects.filter(pk=episode.pk).update(deadline_at=timezone.now() - timedelta(minutes=1))
    assert b"time limit passed" in client.get(reverse("worker:task", args=["pilot", 1])).content
    _ready(client, episode)
    _upload(client, episode, "summary.xlsx", XLSX)
    _upload(client, episode, "log.txt", b"log", kind="log")
    client.post(reverse("worker:episode-submit", args=[episode.pk]))
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SUBMITTED and episode.timed_out is True


def test_a_task_time_limit_overrides_the_study_default(client, world):
    world.study.task_time_limit_minutes = 30
    world.study.save()
    m.TaskInstance.objects.update(time_limit_minutes=90)
    participant = make_participant(world)
    episode = episode_assign(participant=participant, position=1)
    assert abs((episode.deadline_at - episode.started_at) - timedelta(minutes=90)) < timedelta(seconds=1)


def test_setup_failure_needs_description_screenshot_and_confirmation_then_skips_to_the_next_task(client, worker):
    episode = _start(client)
    url = reverse("worker:episode-setup-failed", args=[episode.pk])
    sure = {"confirm": "1"}
    no_shot = client.post(url, {"description": "The installer crashed with error 42.", **sure})
    assert no_shot.status_code == 400 and b"at least one screenshot" in no_shot.content
    assert b"The installer crashed with error 42." in no_shot.content, "the typed description is kept"
    wrong = client.post(url, {"description": "The installer crashed with error 42.", **sure,
                              "screenshots": [upload("shot.txt", b"text")]})
    assert wrong.status_code == 400 and b"not accepted" in wrong.content
    short = client.post(url, {"description": "bad", "screenshots": [upload("s.png", PNG)], **sure})
    assert short.status_code == 400
    unconfirmed = client.post(url, {"description": "The installer crashed with error 42.",
                                    "screenshots": [upload("s1.png", PNG)]})
    assert unconfirmed.status_code == 400 and b"confirm that this task should be skipped" in unconfirmed.content
    assert b"The installer crashed with error 42." in unconfirmed.content
    episode.refresh_from_db()
    assert episode.status != m.Episode.Status.SKIPPED
    done = client.post(url, {"description": "The installer crashed with error 42.", **sure,
                             "screenshots": [upload("s1.png", PNG), upload("s2.png", PNG)]})
    assert done["Location"] == reverse("worker:task", args=["pilot", 2])
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SKIPPED and episode.skip_reason == "setup_failed"
    assert m.EpisodeFile.objects.filter(episode=episode, kind="skip_screenshot").count() == 2
    assert not m.Payment.objects.filter(episode=episode).exists()


def test_the_last_task_unlocks_the_post_survey(client, world, sent):
    world.study.tasks_per_session = 2
    world.study.save()
    participant = make_participant(world)
    client.force_login(participant.user)
    for position in (1, 2):
        episode = _start(client, position)
        _ready(client, episode)
        _upload(client, episode, "summary.xlsx", XLSX)
        _upload(client, episode, "log.txt", b"log", kind="log")
        response = client.post(reverse("worker:episode-submit", args=[episode.pk]))
    assert response["Location"] == reverse("worker:survey", args=["pilot", "post"])
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.POST_SURVEY


def test_when_no_task_fits_the_worker_sees_why_and_may_finish_early(client, world, sent):
    world.study.max_episodes_per_task = 1
    world.study.save()
    participant = make_participant(world)
    others = [make_participant(world) for _ in range(len(world.tasks) - 1)]
    for other in others:
        episode_assign(participant=other, position=1)
    client.force_login(participant.user)
    episode = _start(client)
    _ready(client, episode)
    _upload(client, episode, "summary.xlsx", XLSX)
    _upload(client, episode, "log.txt", b"log", kind="log")
    client.post(reverse("worker:episode-submit", args=[episode.pk]))
    page = client.post(reverse("worker:task-start", args=["pilot", 2]))
    assert page.status_code == 409 and b"no task left" in page.content and b"Finish the tasks" in page.content
    finish = client.post(reverse("worker:finish-early", args=["pilot"]))
    assert finish["Location"] == reverse("worker:survey", args=["pilot", "pre"]).replace("pre", "post")


def test_task_page_query_count_stays_small(client, worker, django_assert_max_num_queries):
    episode = _start(client)
    _upload(client, episode, "summary.xlsx", XLSX)
    client.get(reverse("worker:task", args=["pilot", 1]))
    with django_assert_max_num_queries(10):
        response = client.get(reverse("worker:task", args=["pilot", 1]))
    assert response.status_code == 200


def test_uploads_still_require_the_csrf_token(world):
    from django.test import Client

    participant = make_participant(world)
    episode = episode_assign(participant=participant, position=1)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(participant.user)
    strict.get(reverse("worker:task", args=["pilot", 1]))
    refused = strict.post(reverse("worker:episode-upload", args=[episode.pk]),
                          {"kind": "deliverable", "file": upload("a.pdf", PDF)})
    assert refused.status_code == 403
    assert not m.EpisodeFile.objects.exists()
    token = strict.cookies["csrftoken"].value
    accepted = strict.post(reverse("worker:episode-upload", args=[episode.pk]),
                           {"kind": "deliverable", "file": upload("a.pdf", PDF)}, HTTP_X_CSRFTOKEN=token, **JSON)
    assert accepted.status_code == 200


def test_notes_over_the_limit_are_refused_next_to_the_field_and_kept(client, worker):
    episode = _start(client)
    long_notes = "n" * 5001
    page = client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": "", "notes": long_notes})
    html = page.content.decode()
    assert page.status_code == 400
    assert "Notes can be at most 5000 characters; yours have 5001" in html
    assert 'id="notes-errors"' in html and long_notes in html, "the error sits by the field and the text stays"
    reply = client.post(reverse("worker:episode-log", args=[episode.pk]), {"notes": long_notes}, **JSON)
    assert reply.status_code == 400 and "at most 5000" in reply.json()["errors"]["notes"][0]


def test_review_and_submit_saves_the_notes_typed_but_not_yet_saved(client, worker):
    episode = _start(client)
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert 'form="log-form" name="next" value="review"' in page
    response = client.post(reverse("worker:episode-log", args=[episode.pk]),
                           {"share_url": "", "notes": "Typed, never saved.", "next": "review"})
    assert response["Location"] == reverse("worker:episode-submit", args=[episode.pk])
    episode.refresh_from_db()
    assert episode.notes == "Typed, never saved."


def test_autosave_keeps_the_notes_while_the_link_is_still_wrong(client, worker):
    episode = _start(client)
    reply = client.post(reverse("worker:episode-log", args=[episode.pk]),
                        {"share_url": "https://elsewhere.example.com/x", "notes": "half-way notes"}, **JSON)
    body = reply.json()
    assert reply.status_code == 400 and body["saved"] == ["notes"] and "share_url" in body["errors"]
    episode.refresh_from_db()
    assert (episode.notes, episode.share_url) == ("half-way notes", "")
    ok = client.post(reverse("worker:episode-log", args=[episode.pk]),
                     {"share_url": "https://share.example.org/s/1", "notes": "done"}, **JSON)
    assert ok.json() == {"ok": True, "share_url_saved": True}


def test_a_missing_setup_answer_is_shown_next_to_the_question(client, worker):
    episode = _start(client)
    page = client.post(reverse("worker:episode-setup", args=[episode.pk]), {"ready": "1"})
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="prior-errors"' in html and "Please say whether you have used this agent" in html


def _submit(client, episode):
    _ready(client, episode)
    _upload(client, episode, "summary.xlsx", XLSX)
    _upload(client, episode, "log.txt", b"log", kind="log")
    return client.post(reverse("worker:episode-submit", args=[episode.pk]))


def _skip(client, episode):
    return client.post(reverse("worker:episode-setup-failed", args=[episode.pk]),
                       {"description": "The installer crashed with error 42.", "screenshots": [upload("s.png", PNG)],
                        "confirm": "1"})


def test_with_the_all_submitted_gate_a_skipped_task_is_replaced_before_the_final_survey(client, world, sent):
    world.study.tasks_per_session = 2
    world.study.post_survey_gate = m.Study.PostSurveyGate.ALL_SUBMITTED
    world.study.save()
    participant = make_participant(world)
    client.force_login(participant.user)
    _submit(client, _start(client, 1))
    skipped = _skip(client, _start(client, 2))
    assert skipped["Location"] == reverse("worker:task", args=["pilot", 3]), "a replacement task comes next"
    page = client.get(reverse("worker:task", args=["pilot", 3]))
    assert b"Task 3 (in place of a skipped task)" in page.content
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.WORKING
    response = _submit(client, _start(client, 3))
    assert response["Location"] == reverse("worker:survey", args=["pilot", "post"])
    overview = client.get(reverse("worker:study", args=["pilot"])).content.decode()
    assert "2 submitted, 1 skipped of 2" in overview and "pay recorded for 2 tasks, not paid out yet" in overview


def test_with_the_default_gate_a_skip_uses_up_its_position(client, world, sent):
    world.study.tasks_per_session = 2
    world.study.save()
    participant = make_participant(world)
    client.force_login(participant.user)
    _submit(client, _start(client, 1))
    assert _skip(client, _start(client, 2))["Location"] == reverse("worker:survey", args=["pilot", "post"])


def test_with_the_all_submitted_gate_finishing_early_completes_without_the_final_survey(client, world, sent):
    world.study.max_episodes_per_task = 1
    world.study.post_survey_gate = m.Study.PostSurveyGate.ALL_SUBMITTED
    world.study.save()
    participant = make_participant(world)
    for other in [make_participant(world) for _ in range(len(world.tasks) - 1)]:
        episode_assign(participant=other, position=1)
    client.force_login(participant.user)
    _submit(client, _start(client))
    page = client.post(reverse("worker:task-start", args=["pilot", 2]))
    assert b"get my completion code" in page.content
    finish = client.post(reverse("worker:finish-early", args=["pilot"]))
    assert finish["Location"] == reverse("worker:complete", args=["pilot"])
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.COMPLETE and participant.completed_at is not None


def test_workers_see_the_research_contact_and_new_users_the_agent_tutorial(client, world, worker):
    world.study.contact_name, world.study.contact_email = "Dr Ada Lovelace", "ada@uni.example.org"
    world.study.save()
    episode = _start(client)
    m.Agent.objects.filter(pk=episode.agent_id).update(tutorial_url="https://tutorials.example.org/agent")
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert 'id="research-contact"' in page and "ada@uni.example.org" in page
    assert "before skipping; they may be able to help" in page, "named in the setup-failure panel"
    assert "https://tutorials.example.org/agent" in page
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "never"})
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "https://tutorials.example.org/agent" in page, "shown to someone who never used it"
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "regular"})
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "https://tutorials.example.org/agent" not in page, "not shown to regular users"
    assert "ada@uni.example.org" in client.get(reverse("worker:study", args=["pilot"])).content.decode()
