"""manage.py demo builds a complete, clearly simulated study and is idempotent."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.urls import reverse
from django.utils.html import escape

from experts.models import ExpertProfile
from rating.models import Observation, RatingSnapshot
from studies.models import Agent, Episode, Occupation, Participant, Sector, Study, TaskFile, TaskInstance
from studies.roles import EXPERT, STAFF, WORKER, has_role
from surveys.models import Answer

pytestmark = pytest.mark.django_db


def _counts() -> dict[str, int]:
    return {
        "studies": Study.objects.count(), "agents": Agent.objects.count(), "tasks": TaskInstance.objects.count(),
        "task_files": TaskFile.objects.count(), "participants": Participant.objects.count(),
        "episodes": Episode.objects.count(), "observations": Observation.objects.filter(active=True).count(),
        "answers": Answer.objects.count(), "experts": ExpertProfile.objects.count(),
    }


def test_demo_runs_twice_and_leaves_the_same_counts(capsys):
    call_command("demo")
    first = _counts()
    call_command("demo")
    assert _counts() == first
    out = capsys.readouterr().out
    assert "demo-password" in out and "SIMULATED" in out
    study = Study.objects.get(slug="collabskill-demo")
    assert f"http://127.0.0.1:8000/join/{study.invite_code}/" in out


def test_make_run_prints_the_link_and_accounts_on_every_start_not_only_the_first(capsys):
    call_command("demo", "--no-cohort", "--if-empty")
    capsys.readouterr()
    TaskInstance.objects.filter(studies__slug="collabskill-demo", sector__code="soc-51").delete()
    call_command("demo", "--no-cohort", "--if-empty", "--base-url", "http://127.0.0.1:8123")
    out = capsys.readouterr().out
    study = Study.objects.get(slug="collabskill-demo")
    assert f"http://127.0.0.1:8123/join/{study.invite_code}/" in out and "demo-expert" in out
    assert study.tasks.filter(sector__code="soc-51").count() == 2, "an older demo is brought up to date"

    Study.objects.create(name="Our real study", slug="real")
    call_command("demo", "--no-cohort", "--if-empty", "--base-url", "http://127.0.0.1:8123")
    out = capsys.readouterr().out
    assert "demo not loaded" in out and f"/join/{study.invite_code}/" in out
    # What `make run` prints again below the worker's banner: the same lines, nothing loaded or changed.
    tasks = TaskInstance.objects.count()
    call_command("demo", "--access", "--base-url", "http://127.0.0.1:8123")
    out = capsys.readouterr().out
    assert f"http://127.0.0.1:8123/join/{study.invite_code}/" in out and "demo-staff" in out
    assert "Demo study" not in out and TaskInstance.objects.count() == tasks


def test_every_occupation_of_the_demo_reaches_a_full_session_through_the_real_matcher():
    from pairing.services import episode_assign
    from studies.selectors import occupations_offered
    from tests.factories import ParticipantFactory

    call_command("demo", "--no-cohort")
    study = Study.objects.get(slug="collabskill-demo")
    offered = set(occupations_offered(study))
    assert offered == set(Occupation.objects.all()), "every occupation of the shipped list is selectable"
    for occupation in Occupation.objects.filter(soc_code__in=["19-3011.00", "51-1011.00", "29-1141.00"]):
        participant = ParticipantFactory(study=study, occupation=occupation, consent_version=study.current_consent())
        for position in range(1, study.tasks_per_session + 1):
            episode = episode_assign(participant=participant, position=position)
            Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.SUBMITTED)
        assert participant.episodes.count() == study.tasks_per_session


def test_demo_prints_the_invitation_link_for_the_given_address(capsys):
    call_command("demo", "--no-cohort", "--base-url", "http://study.example.org:9000/")
    study = Study.objects.get(slug="collabskill-demo")
    assert f"http://study.example.org:9000/join/{study.invite_code}/" in capsys.readouterr().out


def test_demo_covers_eight_sectors_twenty_tasks_five_agents_and_a_simulated_cohort():
    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    assert study.is_simulated
    assert Sector.objects.filter(tasks__studies=study).distinct().count() >= 8
    assert study.tasks.count() >= 20
    assert study.agents.count() == 5
    participants = study.participants.filter(is_simulated=True)
    assert 80 <= participants.count() <= 100
    episodes = study.episodes.filter(is_simulated=True, status=Episode.Status.GRADED)
    assert 340 <= episodes.filter(condition=Episode.Condition.WITH_AGENT).count() <= 420
    assert episodes.filter(condition=Episode.Condition.SOLO, agent__isnull=True).count() == 2 * participants.count()
    real = study.episodes.filter(is_simulated=False)
    assert real.count() == 3 and set(real.values_list("status", flat=True)) == {Episode.Status.SUBMITTED}


def test_the_demo_expert_has_real_submissions_with_files_to_grade_blind(client):
    call_command("demo", "--no-cohort")
    call_command("demo", "--no-cohort")
    study = Study.objects.get(slug="collabskill-demo")
    real = list(study.episodes.filter(is_simulated=False))
    assert len(real) == 3, "created once"
    expert = ExpertProfile.objects.get(user__username="demo-expert")
    for episode in real:
        kinds = set(episode.files.values_list("kind", flat=True))
        assert kinds == {"deliverable", "log"}
        assert episode.expert_assignments.get().expert == expert
        assert episode.task.rubrics.filter(status="approved").exists()
    client.login(username="demo-expert", password="demo-password")
    assignment = real[0].expert_assignments.get()
    page = client.get(reverse("expert:grade", args=[assignment.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and escape(real[0].task.title) in html and "reconciliation.xlsx" in html
    assert real[0].participant.pseudonym not in html and real[0].agent.name not in html, "graded blind"


def test_every_demo_task_has_reference_files_of_each_kind_and_hidden_evaluator_info():
    call_command("demo", "--no-cohort")
    kinds = set()
    for task in TaskInstance.objects.prefetch_related("files"):
        assert task.hidden_info
        assert task.files.filter(kind=TaskFile.Kind.HIDDEN).exists()
        refs = task.files.filter(kind=TaskFile.Kind.REFERENCE)
        assert refs.exists()
        kinds |= {f.name.rsplit(".", 1)[-1] for f in refs}
        for ref in refs:
            with ref.file.open("rb") as handle:
                assert len(handle.read()) == ref.size > 0
    assert {"xlsx", "docx", "pdf", "csv"} <= kinds


def test_simulated_scores_go_through_the_rating_ledger_and_recover_the_true_agent_order():
    from console.demo import TRUE_AGENT_SKILL

    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    # The real sample submissions wait for grading; solo episodes (no agent) never enter the CollabSkill ledger.
    scored = study.episodes.filter(is_simulated=True, condition=Episode.Condition.WITH_AGENT).count()
    assert Observation.objects.filter(study=study, active=True).count() == scored
    assert not Observation.objects.filter(study=study, episode__condition=Episode.Condition.SOLO).exists()
    snapshot = RatingSnapshot.objects.filter(study=study).latest()
    ranked = list(snapshot.ratings.filter(entity_kind="agent").order_by("rank").values_list("label", flat=True))
    truth = sorted(Agent.objects.filter(studies=study), key=lambda a: -TRUE_AGENT_SKILL[a.slug])
    assert ranked[0] == truth[0].name
    assert ranked[-1] == truth[-1].name


def test_demo_accounts_sign_in_with_their_roles():
    call_command("demo", "--no-cohort")
    for username, role in (("demo-staff", STAFF), ("demo-expert", EXPERT), ("demo-worker", WORKER)):
        user = authenticate(username=username, password="demo-password")
        assert user is not None, username
        assert has_role(user, role)
    assert ExpertProfile.objects.get(user__username="demo-expert").sectors.exists()


def test_the_demo_writes_one_snapshot_and_the_refreshes_it_queued_add_none():
    from rating.tasks import refresh_posterior

    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    assert RatingSnapshot.objects.filter(study=study).count() == 1
    for _ in range(5):  # what the refresh requests the demo's recordings queued do when they run
        refresh_posterior(study.pk)
    call_command("demo")  # loading again changes nothing, so no new snapshot either
    assert RatingSnapshot.objects.filter(study=study).count() == 1


def test_the_demo_judges_planted_leniency_and_self_preference_are_found_by_the_grader_report():
    from console.demo import JUDGE_LENIENCY, SELF_PREFERENCE
    from rating.models import GradeObservation
    from rating.services.analysis import study_grader_report

    call_command("demo")
    study = Study.objects.get(slug="collabskill-demo")
    simulated = study.episodes.filter(is_simulated=True, condition=Episode.Condition.WITH_AGENT)
    assert GradeObservation.objects.filter(study=study, active=True).count() == 2 * simulated.count()
    report = study_grader_report(study)
    for term in report["self_preference"]:
        assert term["identifiable"] and term["ci_low"] < SELF_PREFERENCE < term["ci_high"] and term["p_value"] < 0.05
    gap = JUDGE_LENIENCY["anthropic"] - JUDGE_LENIENCY["openai"]
    leniency = {row["family"]: row for row in report["leniency"]}
    measured = leniency["anthropic"]["leniency"] - leniency["openai"]["leniency"]
    assert abs(measured - gap) < 3 * (leniency["anthropic"]["se"] + leniency["openai"]["se"])
    assert "higher than the other graders do" in report["verdict"]
