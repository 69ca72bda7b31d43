"""The comparison pages over HTTP: blind pages, autosave, refused submissions that keep answers, downloads by
shown position, who may open what, and the staff page that builds sets and shows answers."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from experts.models import ComparisonAssignment, ComparisonSet, ExpertAssignment
from experts.services.comparisons import comparison_set_create
from tests.factories.experts import make_comparison_world, make_expert
from tests.factories.users import UserFactory

pytestmark = pytest.mark.django_db

JUSTIFY = "Deliverable one answers the whole brief; the others leave out the totals."


@pytest.fixture
def ctx(client):
    world = make_comparison_world()
    world["participant_name"] = world["with_agent"].participant.pseudonym
    staff = UserFactory(is_staff=True)
    expert = make_expert()
    comparison_set = comparison_set_create(
        study=world["study"], task=world["task"], actor=staff, experts=[expert],
        episode_ids=[world["with_agent"].pk, world["alone"].pk], solo_run_ids=[world["run"].pk])
    assignment = comparison_set.assignments.get()
    client.force_login(expert.user)
    return {**world, "staff": staff, "expert": expert, "set": comparison_set, "assignment": assignment,
            "url": reverse("expert:compare", args=[assignment.pk]),
            "autosave": reverse("expert:compare_autosave", args=[assignment.pk])}


def full_post(ranks=(1, 2, 2), accept=("ready", "minor", "major"), justification=JUSTIFY, action="submit"):
    data = {"justification": justification, "action": action, "visible_seconds": "15"}
    for position, (rank, value) in enumerate(zip(ranks, accept, strict=True), start=1):
        data[f"rank_{position}"] = str(rank)
        data[f"accept_{position}"] = value
    return data


def test_the_page_is_blind_no_agent_worker_condition_score_or_source(client, ctx):
    page = client.get(ctx["url"]).content.decode()
    assert "Deliverable 1" in page and "Deliverable 3" in page
    assert "Memo written by hand." in page and "Memo the agent wrote by itself." in page  # the previews
    for hidden in ("Claude Code", ctx["participant_name"], "solo", "Solo", "alone", "71.0", "score",
                   f"episode {ctx['with_agent'].pk}", "run #"):
        assert hidden not in page, hidden
    links = re.findall(r'href="(/expert/compare/[^"]+/files/[^"]+)"', page)
    assert sorted(links) == sorted(reverse("expert:compare_file", args=[ctx["assignment"].pk, pos, 1])
                                   for pos in (1, 2, 3))


def test_files_download_by_shown_position_as_attachments(client, ctx):
    by_position = {p.position: p for p in ctx["assignment"].placements.select_related("item")}
    for position, placement in by_position.items():
        response = client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, position, 1]))
        assert response.status_code == 200
        assert response["Content-Disposition"].startswith("attachment")
        body = b"".join(response.streaming_content)
        expected = (b"Memo the agent wrote by itself.\n" if placement.item.solo_run_id else
                    b"Memo written with the agent.\n" if placement.item.episode_id == ctx["with_agent"].pk
                    else b"Memo written by hand.\n")
        assert body == expected
    assert client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, 4, 1])).status_code == 404
    assert client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, 1, 2])).status_code == 404


def test_autosave_keeps_a_draft_and_refuses_bad_payloads_and_late_saves(client, ctx):
    assert client.post(ctx["autosave"], "{}", content_type="application/json").status_code == 409  # not opened
    client.get(ctx["url"])
    body = {"placements": {"1": {"rank": "2", "acceptability": "minor"}}, "justification": "so far",
            "visible_seconds": 0}
    response = client.post(ctx["autosave"], json.dumps(body), content_type="application/json")
    assert response.status_code == 200 and response.json()["ok"]
    placement = ctx["assignment"].placements.get(position=1)
    assert (placement.rank, placement.acceptability) == (2, "minor")
    for bad in ("not json", json.dumps({"placements": []}), json.dumps({"placements": {"x": {}}}),
                json.dumps({"placements": {"1": {"rank": "9"}}}), json.dumps({"placements": {"7": {"rank": "1"}}})):
        assert client.post(ctx["autosave"], bad, content_type="application/json").status_code == 400, bad
    assert ctx["assignment"].placements.get(position=1).rank == 2
    client.post(ctx["url"], full_post())
    response = client.post(ctx["autosave"], "{}", content_type="application/json")
    assert response.status_code == 409 and "already submitted" in response.json()["error"]


def test_an_incomplete_ranking_is_refused_keeps_what_was_typed_and_names_each_gap(client, ctx):
    client.get(ctx["url"])
    data = full_post(ranks=(1, "", 2), accept=("ready", "minor", ""), justification="")
    response = client.post(ctx["url"], data)
    assert response.status_code == 400
    page = response.content.decode()
    assert "cannot be submitted yet: 3 answers" in page
    assert "Deliverable 2: give a rank." in page and "how acceptable it would be to a client" in page
    assert 'value="ready" checked' in page
    assignment = ComparisonAssignment.objects.get(pk=ctx["assignment"].pk)
    assert assignment.status == ComparisonAssignment.Status.IN_PROGRESS
    assert [(p.rank, p.acceptability) for p in assignment.placements.order_by("position")] == [
        (1, "ready"), (None, "minor"), (2, "")]


def test_a_complete_ranking_submits_records_time_and_reveals_nothing(client, ctx):
    client.get(ctx["url"])
    response = client.post(ctx["url"], full_post())
    assert response.status_code == 302
    assignment = ComparisonAssignment.objects.get(pk=ctx["assignment"].pk)
    assert assignment.status == ComparisonAssignment.Status.SUBMITTED
    assert assignment.justification == JUSTIFY and assignment.time_spent_seconds <= 15
    page = client.get(ctx["url"]).content.decode()
    assert "Submitted" in page and "Claude Code" not in page and ctx["participant_name"] not in page
    assert client.post(ctx["url"], full_post(ranks=(3, 3, 3))).status_code == 302  # refused, nothing changes
    assert [p.rank for p in assignment.placements.order_by("position")] == [1, 2, 2]


def test_other_experts_workers_and_anonymous_visitors_cannot_open_it(client, ctx):
    client.force_login(make_expert().user)
    assert client.get(ctx["url"]).status_code == 404
    assert client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, 1, 1])).status_code == 404
    client.force_login(ctx["with_agent"].participant.user or UserFactory(roles=["worker"]))
    assert client.get(ctx["url"]).status_code == 404
    client.logout()
    assert client.get(ctx["url"]).status_code == 302


def test_a_grading_assignment_of_one_deliverable_hides_the_open_comparison(client, ctx):
    ExpertAssignment.objects.create(episode=ctx["alone"], expert=ctx["expert"])
    assert client.get(ctx["url"]).status_code == 404
    assert "Start comparing" not in client.get(reverse("expert:home")).content.decode()


def test_the_home_queue_lists_the_comparison(client, ctx):
    page = client.get(reverse("expert:home")).content.decode()
    assert ctx["url"] in page and "Start comparing" in page


def test_staff_build_a_set_on_the_staff_page_and_see_the_answer_with_arms(client, ctx):
    staff = ctx["staff"]
    client.force_login(staff)
    page_url = reverse("expert:staff_comparisons")
    page = client.get(page_url, {"study": ctx["study"].pk, "task": ctx["task"].pk}).content.decode()
    assert "Worker + Claude Code" in page and "Claude Code alone" in page and "Worker alone" in page
    second = make_expert(username="second-expert")
    response = client.post(page_url, {
        "study": ctx["study"].pk, "task": ctx["task"].pk, "experts": [second.pk],
        "deliverables": [f"episode:{ctx['with_agent'].pk}", f"solo_run:{ctx['run'].pk}"]})
    assert response.status_code == 302
    created = ComparisonSet.objects.exclude(pk=ctx["set"].pk).get()
    assert created.items.count() == 2 and created.assignments.get().expert == second
    # The first expert answers; the staff page shows it by arm, with the raw counts.
    client.force_login(ctx["expert"].user)
    client.get(ctx["url"])
    client.post(ctx["url"], full_post(ranks=(1, 1, 1)))
    client.force_login(staff)
    page = client.get(page_url, {"study": ctx["study"].pk}).content.decode()
    assert JUSTIFY in page and "Raw win / tie counts" in page
    assert re.search(r"<td>Claude Code alone</td><td>Worker \+ Claude Code</td><td>0</td><td>0</td><td>1</td>", page)


@pytest.mark.parametrize("ticked, message", [(["with_agent"], "at least 2"), ([], "at least 2")])
def test_a_bad_set_on_the_staff_page_is_a_clear_error_and_keeps_the_choices(client, ctx, ticked, message):
    client.force_login(ctx["staff"])
    before = ComparisonSet.objects.count()
    response = client.post(reverse("expert:staff_comparisons"), {
        "study": ctx["study"].pk, "task": ctx["task"].pk, "experts": [ctx["expert"].pk],
        "deliverables": [f"episode:{ctx[name].pk}" for name in ticked]})
    assert response.status_code == 400 and message in response.content.decode()
    assert ComparisonSet.objects.count() == before


def test_staff_give_a_set_to_one_more_expert_and_withdraw_an_open_one(client, ctx):
    client.force_login(ctx["staff"])
    grader = make_expert()
    ExpertAssignment.objects.create(episode=ctx["with_agent"], expert=grader)
    response = client.post(reverse("expert:staff_comparison_assign", args=[ctx["set"].pk]),
                           {"expert": grader.pk}, follow=True)
    assert "never shown to its grader" in response.content.decode()
    client.post(reverse("expert:staff_comparison_cancel", args=[ctx["assignment"].pk]))
    assert ComparisonAssignment.objects.get(pk=ctx["assignment"].pk).status == "cancelled"


def test_the_staff_page_is_staff_only(client, ctx):
    response = client.get(reverse("expert:staff_comparisons"))
    assert response.status_code in (302, 403, 404)
    assert "Raw win" not in response.content.decode()


def test_the_admin_shows_sets_and_answers_read_only(client, ctx):
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    for name, pk in (("comparisonset", ctx["set"].pk), ("comparisonassignment", ctx["assignment"].pk)):
        assert client.get(reverse(f"admin:experts_{name}_changelist")).status_code == 200
        page = client.get(reverse(f"admin:experts_{name}_change", args=[pk]))
        assert page.status_code == 200 and 'type="submit" value="Save"' not in page.content.decode()
        assert client.get(reverse(f"admin:experts_{name}_add")).status_code == 403


def test_stored_file_names_never_reach_the_expert(client, ctx):
    """A stored name can tell the arm (an agent's naming habit, a harness's fixed output name); the page, the
    previews and the downloads use ``deliverable-<position>-file-<n>`` with the extension only."""
    from studies.models import EpisodeFile, SoloRunFile

    EpisodeFile.objects.filter(episode=ctx["with_agent"]).update(name="claude_code_session_output.md")
    EpisodeFile.objects.filter(episode=ctx["alone"]).update(name="written_alone_by_me.TXT")
    SoloRunFile.objects.filter(run=ctx["run"]).update(name="solo-harness/answer.md")
    page = client.get(ctx["url"]).content.decode()
    for telling in ("claude_code_session_output", "written_alone_by_me", "solo-harness", "answer.md"):
        assert telling not in page, telling
    shown = set(re.findall(r"deliverable-\d-file-1\.(?:md|txt)", page))
    assert len(shown) == 3, shown
    for position in (1, 2, 3):
        response = client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, position, 1]))
        disposition = response["Content-Disposition"]
        assert f"deliverable-{position}-file-1." in disposition, disposition
        assert not any(t in disposition for t in ("claude", "alone", "harness", "answer")), disposition


def test_shown_names_keep_only_a_plain_extension_and_rename_archive_members():
    from experts.comparison_selectors import ShownFile, shown_file_name, shown_part_name

    assert shown_file_name(2, 1, "Report FINAL.DOCX") == "deliverable-2-file-1.docx"
    assert shown_file_name(1, 3, "no_extension") == "deliverable-1-file-3"
    assert shown_file_name(1, 1, "weird.name-with-agent") == "deliverable-1-file-1"
    files = [ShownFile(1, "bundle.zip", 1, "", None, "deliverable-1-file-1.zip"),
             ShownFile(2, "bundle.zip.txt", 1, "", None, "deliverable-1-file-2.txt")]
    assert shown_part_name("bundle.zip/inner/table.csv", files) == "deliverable-1-file-1.zip/inner/table.csv"
    assert shown_part_name("bundle.zip.txt", files) == "deliverable-1-file-2.txt"
    assert shown_part_name("something else", files) == "part of deliverable"


def test_a_solo_run_s_session_file_never_reaches_the_expert(client, ctx):
    """Session files price the run; they are not deliverables, so no link, preview or download shows them."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from grading.services.solo_runs import SESSION, solo_run_add_files
    from tests.grading.transcripts.conftest import SAMPLES

    content = (SAMPLES / "claude_code_session_v2.jsonl").read_bytes()
    solo_run_add_files(solo_run=ctx["run"], files=[SimpleUploadedFile("session.jsonl", content)], actor=None,
                       kind=SESSION)
    page = client.get(ctx["url"]).content.decode()
    assert "claude-sonnet" not in page and "msg_A1" not in page and "session.jsonl" not in page
    assert len(re.findall(r'href="(/expert/compare/[^"]+/files/[^"]+)"', page)) == 3
    position = ctx["assignment"].placements.get(item__solo_run=ctx["run"]).position
    assert client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, position, 1])).status_code == 200
    assert client.get(reverse("expert:compare_file", args=[ctx["assignment"].pk, position, 2])).status_code == 404
