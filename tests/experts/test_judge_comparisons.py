"""LLM judges in comparison mode through the real SDKs and the local test server: one ranking per set x order x
judge, exactly once, the request holds the task, reference files and deliverables only, a bad reply is stored
as failed (never mended) and retried on request, consent and budget hold."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from experts.judge_comparison_selectors import study_judge_preferences, study_judge_rankings
from experts.models import JudgeComparison
from experts.services.comparisons import (
    PlacementInput,
    comparison_assign,
    comparison_open,
    comparison_set_create,
    comparison_submit,
)
from experts.services.judge_comparisons import comparison_set_judge
from experts.task_names import JUDGE_COMPARISON_SET
from experts.tasks import judge_comparison_set
from grading.exceptions import BudgetExhausted, CodingInFlight
from grading.models import LLMUsage
from grading.prompts import COMPARE_PROMPT_VERSION
from studies.models import Episode, TaskFile
from tests.factories import AgentFactory, StudyFactory, TaskFactory
from tests.factories.experts import make_expert, make_solo_run
from tests.factories.scenarios import submitted_episode
from tests.factories.tasks import TaskFileFactory
from tests.factories.users import UserFactory
from tests.grading.conftest import _fake_llm_session, llm_server  # noqa: F401  (the local LLM test server)
from tests.grading.responders import domain_responder
from tests.llm_server import prompt_of

pytestmark = pytest.mark.django_db

# What each deliverable says; the judge below prefers them in this order, whatever the order shown.
QUALITY = {"MEMO-WITH-AGENT": 1, "MEMO-BY-HAND": 2, "MEMO-AGENT-ALONE": 3}
SECRET_AGENT, SECRET_MODEL = "Secret Agent X", "sx-9000"
GOLD, HIDDEN_FILE = "GOLD: the correct total is 1,234,567.", "HIDDEN-FILE-GOLD 9,999"
REFERENCE = "REFERENCE-LEDGER region,total north,10"
NOTE = "STAFF-NOTE: the agent arm is the first one"
JUSTIFY = "The first memo answers the client's question; the others miss the deadline table."


def _is_compare(body) -> bool:
    return '"title": "ComparisonOut"' in prompt_of(body)[0]


def by_quality(body):
    """Rank the shown deliverables by what they say (order-independent)."""
    if not _is_compare(body):
        return domain_responder(body)
    _system, user = prompt_of(body)
    shown = re.findall(r"MEMO-(?:WITH-AGENT|BY-HAND|AGENT-ALONE)", user)
    return json.dumps({"reason": "The memo with the deadline table is the most usable.",
                       "ranks": [QUALITY[m] for m in shown]})


@pytest.fixture
def world(llm_server):  # noqa: F811
    llm_server.default_responder = by_quality
    study = StudyFactory(llm_budget_usd=Decimal("50"))
    task = TaskFactory(hidden_info=GOLD)
    TaskFileFactory(task=task, name="ledger.txt", content=REFERENCE.encode())
    TaskFileFactory(task=task, name="answers.csv", content=HIDDEN_FILE.encode(), kind=TaskFile.Kind.HIDDEN)
    agent = AgentFactory(name=SECRET_AGENT, model_version=SECRET_MODEL)
    with_agent = submitted_episode(study=study, task=task, agent=agent, score=88.5,
                                   files={"secret_agent_x_output.txt": b"MEMO-WITH-AGENT\n"})
    alone = submitted_episode(study=study, task=task, agent=None, condition=Episode.Condition.SOLO,
                              files={"memo.txt": b"MEMO-BY-HAND\n"})
    run = make_solo_run(study=study, task=task, agent=agent, content=b"MEMO-AGENT-ALONE\n", name="memo.txt")
    staff = UserFactory(is_staff=True)
    comparison_set = comparison_set_create(study=study, task=task, episode_ids=[with_agent.pk, alone.pk],
                                           solo_run_ids=[run.pk], actor=staff, note=NOTE)
    return {"study": study, "task": task, "set": comparison_set, "with_agent": with_agent, "alone": alone,
            "run": run, "staff": staff}


def _requests(server):
    return [r for r in server.requests if _is_compare(r.body)]


def test_each_set_is_ranked_by_each_judge_in_its_order_and_reversed(llm_server, world):  # noqa: F811
    rows = comparison_set_judge(comparison_set=world["set"])
    items = list(world["set"].items.order_by("pk").values_list("pk", flat=True))
    assert sorted((r.order, r.provider, r.status) for r in rows) == [
        ("recorded", "anthropic", "succeeded"), ("recorded", "openai", "succeeded"),
        ("reversed", "anthropic", "succeeded"), ("reversed", "openai", "succeeded")]
    for row in rows:
        assert row.shown_items == (items if row.order == "recorded" else items[::-1])
        assert row.prompt_version == COMPARE_PROMPT_VERSION and row.cost_usd > 0 and row.attempts == 1
    # Items in id order: the episode with the agent, the worker alone, the solo run; the judge's ranks follow
    # what each shows, so they map back to the same ranking in both orders.
    by_order = {r.order: dict(zip(r.shown_items, r.ranks, strict=True)) for r in rows if r.provider == "openai"}
    assert by_order["recorded"] == by_order["reversed"] == dict(zip(items, [1, 2, 3], strict=True))
    assert LLMUsage.objects.filter(purpose="judge_comparison").count() == 4
    assert len(study_judge_rankings(world["study"])) == 4


def test_the_request_holds_the_task_reference_and_deliverables_and_nothing_blinded(llm_server, world):  # noqa: F811
    comparison_set_judge(comparison_set=world["set"])
    bodies = _requests(llm_server)
    assert len(bodies) == 4
    orders = set()
    for request in bodies:
        raw = json.dumps(request.body)
        _system, user = prompt_of(request.body)
        assert world["task"].prompt in user and world["task"].title in user and REFERENCE in user
        assert all(marker in user for marker in QUALITY)
        assert "deliverable-1-file-1.txt" in user and "memo.txt" not in user
        for secret in (SECRET_AGENT, SECRET_MODEL, GOLD, HIDDEN_FILE, NOTE, "88.5", "solo", "SOLO",
                       "secret_agent_x_output", "answers.csv",
                       world["with_agent"].participant.pseudonym, world["alone"].participant.pseudonym,
                       "human_agent", "agent_alone", "worker alone", "with_agent"):
            assert secret not in raw, secret
        orders.add(tuple(re.findall(r"MEMO-(?:WITH-AGENT|BY-HAND|AGENT-ALONE)", user)))
    assert orders == {("MEMO-WITH-AGENT", "MEMO-BY-HAND", "MEMO-AGENT-ALONE"),
                      ("MEMO-AGENT-ALONE", "MEMO-BY-HAND", "MEMO-WITH-AGENT")}


def test_a_rerun_pays_for_nothing_and_a_live_claim_is_left_alone(llm_server, world):  # noqa: F811
    first = comparison_set_judge(comparison_set=world["set"])
    again = comparison_set_judge(comparison_set=world["set"])
    assert sorted(r.pk for r in again) == sorted(r.pk for r in first)
    assert len(_requests(llm_server)) == 4 and JudgeComparison.objects.count() == 4
    JudgeComparison.objects.all().delete()
    held = JudgeComparison.objects.create(
        study=world["study"], comparison_set=world["set"], order="recorded", provider="openai", model="gpt-4.1",
        prompt_version=COMPARE_PROMPT_VERSION, claim="other", lease_expires_at=timezone.now() + timedelta(minutes=5))
    with pytest.raises(CodingInFlight):
        comparison_set_judge(comparison_set=world["set"])
    held.refresh_from_db()
    assert held.status == "running" and held.claim == "other"
    # The other judge and order were done meanwhile; the held one is left to its holder.
    assert JudgeComparison.objects.filter(status="succeeded").count() == 3
    # A lapsed claim (a killed worker) is taken over: still one row per set x order x judge.
    JudgeComparison.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    comparison_set_judge(comparison_set=world["set"])
    assert JudgeComparison.objects.count() == 4 and not JudgeComparison.objects.filter(status="running").exists()
    assert JudgeComparison.objects.get(pk=held.pk).status == "succeeded"


def _bad(body):
    if not _is_compare(body):
        return domain_responder(body)
    return json.dumps({"reason": "Two are fine.", "ranks": [1, 2]})


def test_a_bad_reply_is_stored_as_failed_never_mended_and_retried_on_request(llm_server, world):  # noqa: F811
    llm_server.default_responder = _bad
    rows = comparison_set_judge(comparison_set=world["set"])
    assert {r.status for r in rows} == {"failed"} and all(r.ranks == [] for r in rows)
    assert all("give exactly 3 ranks" in r.error for r in rows)
    repairs = 1 + 2  # the first call and JUDGE_REPAIR_ATTEMPTS re-asks, each paid
    assert len(_requests(llm_server)) == 4 * repairs
    assert LLMUsage.objects.filter(purpose="judge_comparison", succeeded=False).count() == 4 * repairs
    assert study_judge_rankings(world["study"]) == []
    # A plain re-run leaves failed calls alone; --retry-failed calls again into the same rows.
    comparison_set_judge(comparison_set=world["set"])
    assert len(_requests(llm_server)) == 4 * repairs
    llm_server.default_responder = by_quality
    call_command("judge_comparisons", "--study", world["study"].slug, "--retry-failed")
    assert JudgeComparison.objects.count() == 4
    assert set(JudgeComparison.objects.values_list("status", "attempts", "error")) == {("succeeded", 2, "")}


def test_a_worker_who_did_not_consent_to_a_provider_is_never_sent_to_it(llm_server, world):  # noqa: F811
    shy = submitted_episode(study=world["study"], task=world["task"], providers=("openai",),
                            files={"memo.txt": b"MEMO-BY-HAND again\n"})
    comparison_set = comparison_set_create(study=world["study"], task=world["task"],
                                           episode_ids=[world["with_agent"].pk, shy.pk], actor=world["staff"])
    rows = {(r.order, r.provider): r for r in comparison_set_judge(comparison_set=comparison_set)}
    assert {k: r.status for k, r in rows.items()} == {
        ("recorded", "openai"): "succeeded", ("reversed", "openai"): "succeeded",
        ("recorded", "anthropic"): "failed", ("reversed", "anthropic"): "failed"}
    assert "not sent to anthropic" in rows[("recorded", "anthropic")].error
    assert rows[("recorded", "anthropic")].attempts == 0
    assert {r.provider for r in _requests(llm_server)} == {"openai"}


def test_a_spent_budget_makes_no_call(llm_server, world):  # noqa: F811
    world["study"].llm_budget_usd = Decimal("0")
    world["study"].save(update_fields=["llm_budget_usd"])
    with pytest.raises(BudgetExhausted):
        comparison_set_judge(comparison_set=world["set"])
    with pytest.raises(CommandError, match="LLM budget reached"):
        call_command("judge_comparisons", "--study", world["study"].slug)
    assert _requests(llm_server) == [] and not JudgeComparison.objects.exists()


def _expert_ranks(world, ranks_by_source):
    expert = make_expert()
    assignment = comparison_assign(comparison_set=world["set"], expert=expert, actor=world["staff"], seed=7)
    comparison_open(assignment=assignment, user=expert.user)
    placements = {}
    for p in assignment.placements.select_related("item"):
        source = "run" if p.item.solo_run_id else ("with_agent" if p.item.episode_id == world["with_agent"].pk
                                                   else "alone")
        placements[p.position] = PlacementInput(rank=ranks_by_source[source], acceptability="minor")
    comparison_submit(assignment=assignment, user=expert.user, placements=placements, justification=JUSTIFY,
                      visible_seconds=0)


def test_the_command_and_the_summary_against_the_experts(llm_server, world, capsys):  # noqa: F811
    _expert_ranks(world, {"with_agent": 1, "alone": 2, "run": 3})   # agrees with the judges on all 3 pairs
    _expert_ranks(world, {"with_agent": 2, "alone": 1, "run": 1})   # disagrees on all 3 pairs
    call_command("judge_comparisons", "--study", world["study"].slug)
    assert "4 succeeded" in capsys.readouterr().out
    call_command("judge_comparisons", "--study", world["study"].slug)
    assert len(_requests(llm_server)) == 4
    summary = study_judge_preferences(world["study"])
    assert summary["counts"] == {"running": 0, "succeeded": 4, "failed": 0}
    pooled = summary["rows"][-1]
    # 4 judge rankings x 2 experts x 3 pairs; the first expert matches all 12 of theirs, the second none.
    assert (pooled["expert_agreement"]["successes"], pooled["expert_agreement"]["n"]) == (12, 24)
    assert (pooled["order_consistency"]["successes"], pooled["order_consistency"]["n"]) == (6, 6)
    # Recorded order puts the best first (3 of 3 pairs won by the earlier one), reversed puts it last (0 of 3).
    assert (pooled["position_bias"]["successes"], pooled["position_bias"]["n"]) == (6, 12)
    assert pooled["position_bias"]["share"] == pytest.approx(0.0)
    assert [r["judge"] for r in summary["rows"]] == ["openai/gpt-4.1", "anthropic/claude-sonnet-4-6", "all judges"]


def test_the_admin_action_queues_one_task_per_set_and_the_task_judges_it(llm_server, world, client,  # noqa: F811
                                                                           sent_tasks,
                                                                           django_capture_on_commit_callbacks):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:experts_comparisonset_changelist"),
                               {"action": "judge_sets", "_selected_action": [world["set"].pk]}, follow=True)
    assert response.status_code == 200 and "Queued judge rankings of 1 comparison set(s)." in response.content.decode()
    assert sent_tasks == [(JUDGE_COMPARISON_SET, [world["set"].pk])]
    assert judge_comparison_set(world["set"].pk) == {"status": "judged", "rankings": {"succeeded": 4}}
    assert judge_comparison_set(world["set"].pk) == {"status": "judged", "rankings": {"succeeded": 4}}
    assert len(_requests(llm_server)) == 4
    assert judge_comparison_set(10**9) == {"status": "missing"}


def test_a_solo_run_s_session_file_never_reaches_a_judge(llm_server, world):  # noqa: F811
    from django.core.files.uploadedfile import SimpleUploadedFile

    from grading.services.solo_runs import SESSION, solo_run_add_files

    solo_run_add_files(solo_run=world["run"], actor=None, kind=SESSION,
                       files=[SimpleUploadedFile("session.txt", b"$ run\nSESSION-LOG-MARKER tokens: 5\n")])
    comparison_set_judge(comparison_set=world["set"])
    bodies = _requests(llm_server)
    assert len(bodies) == 4
    for request in bodies:
        _system, user = prompt_of(request.body)
        assert "MEMO-AGENT-ALONE" in user
        assert "SESSION-LOG-MARKER" not in json.dumps(request.body) and "session.txt" not in user
        assert "deliverable-3-file-2" not in user and "deliverable-1-file-2" not in user


def test_the_sweep_queues_a_set_whose_claim_lapsed_and_leaves_live_and_finished_ones(
        llm_server, world, sent_tasks, django_capture_on_commit_callbacks):  # noqa: F811
    from experts.services.judge_comparisons import judge_comparisons_reconcile
    from experts.tasks import reconcile_judge_comparisons

    key = {"study": world["study"], "comparison_set": world["set"], "provider": "openai", "model": "gpt-4.1",
           "prompt_version": COMPARE_PROMPT_VERSION}
    live = JudgeComparison.objects.create(**key, order="recorded", claim="other",
                                          lease_expires_at=timezone.now() + timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=True):
        assert judge_comparisons_reconcile() == {"sets_queued": 0}
    assert sent_tasks == []
    # The holder was killed: its lease lapses, and the sweep queues the set once, however many rows lapsed.
    JudgeComparison.objects.filter(pk=live.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    JudgeComparison.objects.create(**key, order="reversed", claim="", lease_expires_at=None)
    with django_capture_on_commit_callbacks(execute=True):
        assert reconcile_judge_comparisons() == {"sets_queued": 1}
    assert sent_tasks == [(JUDGE_COMPARISON_SET, [world["set"].pk])]
    # The queued run takes both claims over and finishes the set; the next sweep has nothing to do.
    assert judge_comparison_set(world["set"].pk)["status"] == "judged"
    assert not JudgeComparison.objects.filter(status="running").exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert judge_comparisons_reconcile() == {"sets_queued": 0}
    assert len(sent_tasks) == 1 and len(_requests(llm_server)) == 4
