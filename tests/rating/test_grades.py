"""The grade ledger (one row per judge run and expert grade of an episode) and the judge-aware refresh."""

from __future__ import annotations

import numpy as np
import pytest

from rating import selectors
from rating.exceptions import InvalidScore
from rating.grader_fit import fit_graded
from rating.models import EntityRating, GradeObservation
from rating.services.analysis import (
    judge_aware_episode_arrays,
    study_fit,
    study_grader_report,
    study_model_checks,
    study_stability_report,
)
from rating.services.ledger import (
    SUPERSEDED,
    GradeInput,
    episode_grades_record,
    observation_record,
    observations_retract_participant,
)
from rating.services.refresh import posterior_refresh
from studies.models import Agent, Episode, Participant, Study
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, StudyFactory, TaskFactory

pytestmark = pytest.mark.django_db

GPT, CLAUDE = "openai/gpt-4.1", "anthropic/claude-sonnet-4-6"


def _panel(gpt: float, claude: float, run: int = 1) -> list[GradeInput]:
    return [GradeInput(grader=GPT, family="openai", y=gpt, source_id=run),
            GradeInput(grader=CLAUDE, family="anthropic", y=claude, source_id=run + 1)]


def _rows(episode: Episode) -> dict[str, tuple[float, bool, str]]:
    return {r.grader: (r.y, r.active, r.retraction_reason) for r in GradeObservation.objects.filter(episode=episode)}


def test_an_episodes_panel_becomes_one_active_row_per_judge_with_both_families() -> None:
    episode = EpisodeFactory(agent=AgentFactory(family="anthropic"), status=Episode.Status.GRADED, auto_score=70.0)
    assert episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))
    rows = {r.grader: r for r in GradeObservation.objects.filter(episode=episode)}
    assert {g: (r.y, r.active, r.grader_family, r.agent_family) for g, r in rows.items()} == {
        GPT: (68.0, True, "openai", "anthropic"), CLAUDE: (72.0, True, "anthropic", "anthropic")}
    assert rows[GPT].participant_id == episode.participant_id and rows[GPT].study_id == episode.study_id
    # The same grades again change nothing.
    assert not episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))


def test_a_regrade_replaces_the_panel_and_keeps_the_judges_no_longer_current_inactive() -> None:
    episode = EpisodeFactory(status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))
    assert episode_grades_record(episode_id=episode.pk, kind="judge",
                                 grades=[GradeInput(grader=GPT, family="openai", y=61.0, source_id=9)])
    assert _rows(episode) == {GPT: (61.0, True, ""), CLAUDE: (72.0, False, SUPERSEDED)}
    # The judge comes back in a later panel: its row counts again.
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(61.0, 75.0, run=10))
    assert _rows(episode) == {GPT: (61.0, True, ""), CLAUDE: (75.0, True, "")}


def test_expert_grades_are_their_own_kind_and_do_not_replace_the_judges() -> None:
    episode = EpisodeFactory(status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))
    episode_grades_record(episode_id=episode.pk, kind="expert",
                          grades=[GradeInput(grader="expert:3", family="", y=80.0, source_id=4)])
    rows = {r.grader: r for r in GradeObservation.objects.filter(episode=episode)}
    assert set(rows) == {GPT, CLAUDE, "expert:3"}
    assert rows["expert:3"].grader_kind == "expert" and rows["expert:3"].grader_family == ""
    assert all(r.active for r in rows.values())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: Episode.objects.filter(pk=e.pk).update(status=Episode.Status.SKIPPED), "episode skipped"),
        (lambda e: Participant.objects.filter(pk=e.participant_id).update(status=Participant.Status.WITHDRAWN),
         "participant withdrawn"),
        (lambda e: Episode.objects.filter(pk=e.pk).update(is_gold=True), "gold QA episode"),
    ],
)
def test_grades_of_an_episode_that_does_not_count_stay_inactive_with_the_reason(change, reason) -> None:
    episode = EpisodeFactory(status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))
    change(episode)
    observation_record(episode_id=episode.pk)
    assert _rows(episode) == {GPT: (68.0, False, reason), CLAUDE: (72.0, False, reason)}
    # A later panel of the same episode is recorded, inactive.
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(60.0, 62.0, run=5))
    assert _rows(episode) == {GPT: (60.0, False, reason), CLAUDE: (62.0, False, reason)}


def test_a_participant_retraction_holds_for_grades_recorded_after_it() -> None:
    episode = EpisodeFactory(status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))
    observations_retract_participant(participant_id=episode.participant_id, reason="excluded by staff")
    marker = "participant retracted: excluded by staff"
    assert _rows(episode) == {GPT: (68.0, False, marker), CLAUDE: (72.0, False, marker)}
    # The participant is still "working" (staff excluded them): a regrade must not bring the grades back.
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(50.0, 52.0, run=7))
    observation_record(episode_id=episode.pk)
    assert _rows(episode) == {GPT: (50.0, False, marker), CLAUDE: (52.0, False, marker)}


@pytest.mark.parametrize(
    ("kind", "grades", "error"),
    [
        ("judge", [GradeInput(grader=GPT, family="openai", y=101.0, source_id=1)], InvalidScore),
        ("judge", [GradeInput(grader=GPT, family="openai", y=float("nan"), source_id=1)], InvalidScore),
        ("judge", _panel(50.0, 50.0) + [GradeInput(grader=GPT, family="openai", y=3.0, source_id=3)], ValueError),
        ("llm", _panel(50.0, 50.0), ValueError),
    ],
)
def test_bad_grades_are_refused_and_nothing_is_written(kind, grades, error) -> None:
    episode = EpisodeFactory(status=Episode.Status.GRADED, auto_score=70.0)
    with pytest.raises(error):
        episode_grades_record(episode_id=episode.pk, kind=kind, grades=grades)
    assert not GradeObservation.objects.filter(episode=episode).exists()


def _judge_aware_study(*, seed: int = 0, n_participants: int = 24, reference: str = "panel") -> Study:
    """A study on the judge-aware model: three agents (one anthropic), two judges, every episode graded twice."""
    rng = np.random.default_rng(seed)
    study = StudyFactory(rating_model=Study.RatingModel.JUDGE_AWARE, grade_reference=reference)
    agents = [AgentFactory(family=family) for family in ("anthropic", "openai", "google")]
    skill = {agents[0].pk: 72.0, agents[1].pk: 70.0, agents[2].pk: 68.0}
    for p in range(n_participants):
        participant = ParticipantFactory(study=study)
        person = rng.normal(0.0, 6.0)
        for position in range(1, 4):
            agent = agents[(p + position) % 3]
            episode = EpisodeFactory(participant=participant, study=study, agent=agent, position=position,
                                     task=TaskFactory(studies=[study]), status=Episode.Status.GRADED,
                                     auto_score=70.0)
            quality = skill[agent.pk] + person + rng.normal(0.0, 8.0)
            claude_bonus = 4.0 if agent.family == "anthropic" else 0.0
            grades = [GradeInput(grader=GPT, family="openai", y=float(np.clip(quality + rng.normal(0, 4), 0, 100)),
                                 source_id=2 * episode.pk),
                      GradeInput(grader=CLAUDE, family="anthropic",
                                 y=float(np.clip(quality + 3 + claude_bonus + rng.normal(0, 4), 0, 100)),
                                 source_id=2 * episode.pk + 1)]
            episode_grades_record(episode_id=episode.pk, kind="judge", grades=grades)
    return study


def test_a_judge_aware_refresh_is_the_judge_aware_fit_of_the_grade_ledger() -> None:
    study = _judge_aware_study()
    snapshot = posterior_refresh(study_id=study.pk)
    ledger = selectors.grade_arrays(study)
    assert snapshot.n_observations == ledger.n == 2 * 24 * 3
    assert snapshot.config["kind"] == "judge_aware" and snapshot.config["reference"] == "panel"
    expected = fit_graded(ledger.agent_ids, ledger.participant_ids, ledger.y, episode=ledger.episode_ids,
                          grader=ledger.graders, agent_family=ledger.agent_families,
                          grader_family=ledger.grader_families, spec=selectors.study_model_spec(study),
                          reference="panel")
    stored = {r.entity_id: r for r in EntityRating.objects.filter(snapshot=snapshot, entity_kind="agent")}
    for i, agent_id in enumerate(expected.agent_ids.astype(int)):
        assert stored[agent_id].mu == pytest.approx(expected.agent_mu[i], rel=1e-12)
        assert stored[agent_id].sigma == pytest.approx(float(np.sqrt(expected.agent_cov[i, i])), rel=1e-12)
    graders = snapshot.fit["diagnostics"]["graders"]
    terms = {t["grader"]: t for t in graders["self_preference"]}
    assert terms[CLAUDE]["identifiable"] and terms[CLAUDE]["estimate"] is not None
    # The same ledger and settings again: the refresh request writes nothing new.
    assert posterior_refresh(study_id=study.pk, only_if_changed=True).pk == snapshot.pk


def test_a_judge_aware_study_is_stale_when_a_grade_or_the_reference_changes() -> None:
    study = _judge_aware_study(n_participants=8)
    posterior_refresh(study_id=study.pk)
    assert study.pk not in selectors.studies_needing_refresh()
    episode = Episode.objects.filter(study=study).order_by("pk").first()
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(10.0, 12.0, run=999))
    assert study.pk in selectors.studies_needing_refresh()
    posterior_refresh(study_id=study.pk)
    assert study.pk not in selectors.studies_needing_refresh()
    Study.objects.filter(pk=study.pk).update(grade_reference=Study.GradeReference.EXPERTS)
    assert study.pk in selectors.studies_needing_refresh()


def test_a_grade_change_of_a_judge_aware_study_schedules_a_refresh(django_capture_on_commit_callbacks,
                                                                   monkeypatch) -> None:
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    study = StudyFactory(rating_model=Study.RatingModel.JUDGE_AWARE)
    episode = EpisodeFactory(study=study, participant=ParticipantFactory(study=study),
                             status=Episode.Status.GRADED, auto_score=70.0)
    from django.core.cache import cache

    cache.clear()
    with django_capture_on_commit_callbacks(execute=True):
        episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(68.0, 72.0))
    assert ("rating.tasks.refresh_posterior", [study.pk]) in sent


def test_the_grader_report_names_the_self_preference_and_puts_both_leaderboards_side_by_side() -> None:
    study = _judge_aware_study(seed=3, n_participants=60)
    report = study_grader_report(study)
    terms = {t["grader"]: t for t in report["self_preference"]}
    claude = terms[CLAUDE]
    assert claude["identifiable"] and claude["ci_low"] < 4.0 < claude["ci_high"] and claude["p_value"] < 0.05
    assert report["verdict"].startswith(f"The {CLAUDE} judge scores anthropic agents")
    assert {row["grader"] for row in report["leniency"]} == {GPT, CLAUDE}
    assert len(report["agents"]) == 3
    assert all(row["mu_uncorrected"] is not None and row["rank_corrected"] for row in report["agents"])
    # Corrected, the anthropic agent loses most of the 2 points (half of the Claude judge's 4) the panel mean
    # gives it; the other agents move by the same shift of level only.
    anthropic = str(GradeObservation.objects.filter(study=study, agent_family="anthropic").first().agent_id)
    shift = {row["agent_id"]: row["mu_corrected"] - row["mu_uncorrected"] for row in report["agents"]}
    others = [value for key, value in shift.items() if key != anthropic]
    assert shift[anthropic] < min(others) - 1.0


def test_the_grader_report_of_a_one_grader_study_says_there_is_nothing_to_compare() -> None:
    study = StudyFactory()
    agents = [AgentFactory(family="anthropic"), AgentFactory(family="openai")]
    for p in range(6):
        participant = ParticipantFactory(study=study)
        for position, agent in enumerate(agents, start=1):
            episode = EpisodeFactory(study=study, participant=participant, agent=agent, position=position,
                                     status=Episode.Status.GRADED, auto_score=70.0)
            episode_grades_record(episode_id=episode.pk, kind="judge", grades=[
                GradeInput(grader=GPT, family="openai", y=60.0 + p + 5 * position, source_id=episode.pk)])
    report = study_grader_report(study)
    assert report["verdict"].startswith("Only one grader has graded this study's episodes")
    assert study_grader_report(StudyFactory()) is None


def test_a_ledger_too_small_to_estimate_gives_a_report_that_says_why() -> None:
    study = StudyFactory()
    episode = EpisodeFactory(study=study, status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(60.0, 64.0))
    report = study_grader_report(study)
    assert report["verdict"].startswith("The graders' effects cannot be estimated from these grades yet")
    assert report["agents"] == [] and report["n_grades"] == 2


def test_a_self_preference_no_neutral_grader_can_separate_is_reported_as_not_measurable() -> None:
    study = StudyFactory()
    agents = [AgentFactory(family="anthropic"), AgentFactory(family="openai")]
    rng = np.random.default_rng(5)
    for p in range(12):
        participant = ParticipantFactory(study=study)
        for position, agent in enumerate(agents, start=1):
            episode = EpisodeFactory(study=study, participant=participant, agent=agent, position=position,
                                     status=Episode.Status.GRADED, auto_score=70.0)
            episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(
                float(rng.uniform(50, 80)), float(rng.uniform(50, 80)), run=2 * episode.pk))
    report = study_grader_report(study)
    assert [t["identifiable"] for t in report["self_preference"]] == [False, False]
    assert all(t["estimate"] is None and t["reason"] for t in report["self_preference"])
    assert "cannot be measured" in report["verdict"]


def test_a_sessions_file_of_a_judge_aware_study_is_refused_unless_another_model_is_named() -> None:
    from rating.exceptions import SessionsImportError
    from rating.services.sessions_import import HEADER_RECORD_TYPE, sessions_model

    header = {"record_type": HEADER_RECORD_TYPE, "skipped": True,
              "rating_model": {"kind": "judge_aware", "k": 3.0, "reference": "panel"}}
    with pytest.raises(SessionsImportError, match="judge-aware model"):
        sessions_model([header])


def test_judge_aware_episode_scores_remove_each_graders_fitted_leniency_and_self_preference() -> None:
    study = _judge_aware_study(seed=5, n_participants=12)
    ledger = selectors.grade_arrays(study)
    fit = study_fit(study, ledger)
    episode = Episode.objects.filter(study=study).order_by("pk").first()
    # A third grade on one episode: its average holds more grades, so it weighs more.
    episode_grades_record(episode_id=episode.pk, kind="expert", grades=[
        GradeInput(grader="expert:1", family="", y=71.0, source_id=1)])
    arrays, basis = judge_aware_episode_arrays(study, fit)
    assert basis.kind == "calibrated" and arrays.n == Episode.objects.filter(study=study).count()
    graders = fit.diagnostics["graders"]
    leniency = {r["grader"]: r["leniency"] for r in graders["leniency"]}
    preference = {r["grader"]: r["estimate"] for r in graders["self_preference"] if r["identifiable"]}
    rows = GradeObservation.objects.filter(study=study, active=True)
    for index in (0, 5, arrays.n - 1):
        agent, participant = int(arrays.agent_ids[index]), int(arrays.participant_ids[index])
        grades = rows.filter(agent_id=agent, participant_id=participant)
        expected = np.mean([
            g.y - leniency.get(g.grader, 0.0)
            - (preference.get(g.grader, 0.0) if g.grader_family == g.agent_family else 0.0)
            for g in grades
        ])
        assert arrays.y[index] == pytest.approx(expected, abs=1e-9)
    first = list(zip(arrays.agent_ids.tolist(), arrays.participant_ids.tolist(), strict=True)).index(
        (episode.agent_id, episode.participant_id))
    assert arrays.w[first] > np.median(arrays.w) and arrays.w.mean() == pytest.approx(1.0)


def test_a_judge_aware_study_gets_stability_tables_and_model_checks_on_its_corrected_scores() -> None:
    study = _judge_aware_study(seed=3, n_participants=30)
    report = study_stability_report(study, rounds=200, seed=1)
    fit = study_fit(study)
    assert report["basis"].startswith("Judge-aware model")
    assert report["n_observations"] == Episode.objects.filter(study=study).count()
    # The tables rank the agents as the judge-aware fit does, at nearly its levels.
    by_agent = {row["agent_id"]: row for row in report["leaderboard"]}
    order = [str(a) for a in fit.agent_ids[np.argsort(-fit.agent_mu)]]
    assert sorted(by_agent, key=lambda a: by_agent[a]["rank"]) == order
    for i, agent in enumerate(fit.agent_ids.astype(str)):
        assert by_agent[agent]["mu"] == pytest.approx(fit.agent_mu[i], abs=0.25 * fit.agent_sigma()[i])
    checks = study_model_checks(study)
    assert checks["model"]["kind"] == "judge_aware" and "sigma_episode" in checks["hyper"]
    assert checks["coverage"]["n_predicted"] > 0 and "graders panel" in checks["comparison_note"]
    assert study_stability_report(StudyFactory(rating_model=Study.RatingModel.JUDGE_AWARE), rounds=10) is None


# --------------------------------------------------------------------------------------------------------
# Model families: stored one way, matched whatever the spelling, unknown ones named
# --------------------------------------------------------------------------------------------------------


def test_an_agents_family_is_stored_stripped_and_lower_case_so_judges_of_its_family_match_it() -> None:
    agent = AgentFactory(family="  Anthropic ")
    agent.refresh_from_db()
    assert agent.family == "anthropic"
    agent.family = " OpenAI"
    agent.full_clean()
    assert agent.family == "openai"
    episode = EpisodeFactory(agent=AgentFactory(family="anthropic"), status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=[
        GradeInput(grader=CLAUDE, family=" Anthropic ", y=70.0, source_id=1)])
    row = GradeObservation.objects.get(episode=episode)
    assert (row.grader_family, row.agent_family) == ("anthropic", "anthropic")


def test_an_unknown_family_is_named_in_the_grader_report() -> None:
    study = _judge_aware_study(seed=4, n_participants=12)
    agent_id = GradeObservation.objects.filter(study=study, agent_family="openai").first().agent_id
    Agent.objects.filter(pk=agent_id).update(family="opnai")
    GradeObservation.objects.filter(study=study, agent_id=agent_id).update(agent_family="opnai")
    notes = study_grader_report(study)["notes"]
    name = Agent.objects.get(pk=agent_id).name
    warning = f"Model family 'opnai' (agents {name}) is not one this platform knows"
    assert any(note.startswith(warning) for note in notes)
    assert not any("'openai'" in note and "not one this platform knows" in note for note in notes)


def test_the_family_migration_normalises_stored_families_and_only_those() -> None:
    import importlib

    from django.apps import apps

    studies_migration = importlib.import_module("studies.migrations.0014_agent_family_normalised")
    rating_migration = importlib.import_module("rating.migrations.0011_grade_families_normalised")
    episode = EpisodeFactory(agent=AgentFactory(family="anthropic"), status=Episode.Status.GRADED, auto_score=70.0)
    episode_grades_record(episode_id=episode.pk, kind="judge", grades=_panel(60.0, 64.0))
    clean = AgentFactory(family="google")
    Agent.objects.filter(pk=episode.agent_id).update(family=" Anthropic")  # as written before the models did
    GradeObservation.objects.filter(episode=episode).update(agent_family=" Anthropic")
    GradeObservation.objects.filter(episode=episode, grader=GPT).update(grader_family="OpenAI ")
    before = {r.pk: r.updated_at for r in GradeObservation.objects.all()}
    studies_migration.normalise(apps, None)
    rating_migration.normalise(apps, None)
    assert Agent.objects.get(pk=episode.agent_id).family == "anthropic"
    assert Agent.objects.get(pk=clean.pk).family == "google"
    rows = {r.grader: (r.grader_family, r.agent_family) for r in GradeObservation.objects.filter(episode=episode)}
    assert rows == {GPT: ("openai", "anthropic"), CLAUDE: ("anthropic", "anthropic")}
    assert all(r.updated_at > before[r.pk] for r in GradeObservation.objects.all())  # the study is refitted
