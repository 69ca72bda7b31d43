"""Study exports: a ZIP of tidy CSVs with a data dictionary and the released CollabSkill sessions.json.

Pseudonymous by default. Every person-level id (participant, episode, expert, grade, survey response) is
replaced by a per-study keyed hash, HMAC-SHA256(SECRET_KEY + study salt, "<kind>:<raw id>") truncated to
64 bits; the raw id never appears beside it, and the same person gets the same id in every file of one
study's exports. Free text a participant typed (notes, skip descriptions, share links, free-text survey
answers) and identities (email, name, recruitment-platform id) are written only when the export includes
identifying information, which the caller must have checked permission for.

Withdrawn participants and people who declined consent are left out of every file. Rows are streamed
from the database in chunks and written straight into the ZIP, so memory stays flat on big studies.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import IO, Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from console import economics
from console.jobs import (
    converged_part,
    finished_preferences_result,
    finished_stability_job,
    finished_synergy_result,
    finished_tom_result,
)
from experts import comparison_selectors
from experts.models import (
    ComparisonAssignment,
    ComparisonItem,
    ComparisonPlacement,
    ComparisonSet,
    ExpertCriterionGrade,
    ExpertGrade,
    JudgeComparison,
    ToMGoldCode,
)
from grading.models import CriterionScore, EpisodeTranscript, FluencyCoding, JudgeRun, ProcessCoding, ToMPairCoding
from rating import selectors as rating_selectors
from rating.models import EntityRating, RatingSnapshot
from rating.selectors import latest_snapshot, study_model_spec, study_rating_config
from rating.services.sessions_import import HEADER_RECORD_TYPE, SCORE_FIELDS
from studies.csv_safety import csv_writer
from studies.models import Agent, Episode, Participant, ParticipantIdentity, Study, TaskInstance
from surveys.models import Answer, Question

Progress = Callable[[int, int], None]

FORMAT_VERSION = "1"
CHUNK = 2000
EXCLUDED_STATUSES = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED, Participant.Status.INVITED)
_PREFIX = {"participant": "P", "episode": "E", "expert": "X", "grade": "G", "session": "S", "response": "R",
           "comparison": "C"}


# --------------------------------------------------------------------------------------------- hashing


class Pseudonymizer:
    """Map raw ids to stable per-study hashed ids (keyed by the secret key and a per-study salt)."""

    def __init__(self, study: Study) -> None:
        salt = f"collabskill-export:{study.pk}:{study.created_at.isoformat()}"
        self._key = f"{settings.SECRET_KEY}:{salt}".encode()
        self._cache: dict[tuple[str, str], str] = {}

    def __call__(self, kind: str, raw: Any) -> str:
        if raw is None or raw == "":
            return ""
        token = (kind, str(raw))
        hashed = self._cache.get(token)
        if hashed is None:
            digest = hmac.new(self._key, f"{kind}:{raw}".encode(), hashlib.sha256).hexdigest()[:16]
            hashed = f"{_PREFIX[kind]}{digest}"
            if len(self._cache) < 100_000:  # bounded: about 20 MB on the largest studies
                self._cache[token] = hashed
        return hashed


def session_id(hasher: Pseudonymizer, *, episode_id: int | None, external_id: str) -> str:
    """Return the exported session id of an observation: its episode's hashed id, else its hashed import id."""
    return hasher("episode", episode_id) if episode_id is not None else hasher("session", external_id)


# ------------------------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    pii: bool = False


@dataclass(frozen=True)
class Table:
    file: str
    description: str
    columns: tuple[Column, ...]
    pii_only: bool = False

    def header(self, include_pii: bool) -> list[str]:
        return [column.name for column in self.columns if include_pii or not column.pii]


def _c(name: str, kind: str, description: str, pii: bool = False) -> Column:
    return Column(name, kind, description, pii)


PID = _c("participant_id", "string", "Hashed participant id (same in every file of this study's exports).")
EID = _c("episode_id", "string", "Hashed episode id; equals session_id in sessions.json.")

_BOUNDS = (("", "."), ("_lower", ": lower interval bound."), ("_upper", ": upper interval bound."))

TABLES: tuple[Table, ...] = (
    Table("participants.csv", "One row per consenting participant who has not withdrawn.", (
        PID,
        _c("status", "string", "Journey step: consented, pre_survey, working, post_survey or complete."),
        _c("occupation_soc", "string", "O*NET-SOC code of the stated occupation."),
        _c("occupation_title", "string", "O*NET occupation title."),
        _c("sector", "string", "O*NET sector of the occupation."),
        _c("years_experience", "number", "Years of experience in the occupation, as stated (whole or half years)."),
        _c("consent_version", "integer", "Version of the consent text accepted."),
        _c("consented_at", "datetime", "When consent was given (UTC, ISO 8601)."),
        _c("completed_at", "datetime", "When the participant finished the study, if they did."),
        _c("n_episodes", "integer", "Tasks assigned to the participant."),
        _c("is_simulated", "boolean", "True for demonstration data drawn from a generative model."),
    )),
    Table("identities.csv", "Identifying information; present only in exports that include it.", (
        PID,
        _c("email", "string", "Email address.", pii=True),
        _c("full_name", "string", "Name.", pii=True),
        _c("platform", "string", "Recruitment platform.", pii=True),
        _c("platform_worker_id", "string", "The participant's id on the recruitment platform.", pii=True),
    ), pii_only=True),
    Table("agents.csv", "Agents used in the study.", (
        _c("agent", "string", "Agent name (the agent_id of sessions.json)."),
        _c("product", "string", "Product."),
        _c("model_version", "string", "Underlying model version."),
        _c("interface", "string", "terminal, desktop or browser."),
        _c("family", "string", "Model family the agent's work comes from (a judge of the same family may favour it)."),
    )),
    Table("tasks.csv", "Task instances that appear in the study's episodes or observations.", (
        _c("task_id", "string", "Task UUID from the source dataset (the task_id of sessions.json)."),
        _c("title", "string", "Task title."),
        _c("source", "string", "gdpval, apex, apex_agents or custom."),
        _c("sector", "string", "O*NET sector of the task."),
    )),
    Table("episodes.csv", "One row per episode (one participant with one agent on one task).", (
        EID, PID,
        _c("agent", "string", "Agent name."),
        _c("task_id", "string", "Task UUID."),
        _c("position", "integer", "1-based position in the participant's session."),
        _c("condition", "string", "with_agent, or solo: done without any AI tool (agent empty). Only in studies "
           "with a solo condition."),
        _c("condition_order", "string", "The participant's order of conditions: solo_first or agent_first."),
        _c("condition_order_probability", "number", "Probability with which that order was drawn (0.5 when "
           "counterbalanced at random, 1 when the study fixes it)."),
        _c("used_ai_anyway", "boolean", "On a solo task, the participant said they used an AI tool anyway."),
        _c("design_mode", "string", "Pairing design when the agent was chosen: uniform, balanced or adaptive; "
           "staff when staff moved the task to another agent (no probability then); empty for episodes "
           "assigned before designs were recorded."),
        _c("assignment_probability", "number", "Probability the design gave this agent for this task; weight "
           "by its inverse for design-unbiased estimates (empty when not recorded)."),
        _c("status", "string", "assigned, in_progress, submitted, grading, graded, skipped or failed."),
        _c("prior_experience", "string", "Earlier use of this agent: never, few or regular."),
        _c("assigned_at", "datetime", "When the task was assigned."),
        _c("started_at", "datetime", "When work started."),
        _c("submitted_at", "datetime", "When the deliverables were submitted."),
        _c("timed_out", "boolean", "Submitted after the time limit."),
        _c("skip_reason", "string", "Why the task was skipped: setup_failed, outside_expertise, staff, timed_out or "
           "abandoned."),
        _c("score", "number", "Final 0-100 score y used by the rating."),
        _c("score_source", "string", "auto, expert or blended."),
        _c("auto_score", "number", "Mean of the current judge totals (0-100)."),
        _c("expert_score", "number", "Score from submitted expert grades (0-100)."),
        _c("needs_expert_review", "boolean", "Flagged for expert review (judges disagreed, or held)."),
        _c("in_calibration_sample", "boolean", "Drawn at random for expert grading to measure the judges."),
        _c("calibration_probability", "number", "Probability of entering the calibration sample, fixed when the "
           "judges first scored the episode; weight sampled episodes by its inverse (empty: not drawn)."),
        _c("is_simulated", "boolean", "Demonstration data."),
        _c("skip_description", "string", "The participant's own words about a skip.", pii=True),
        _c("notes", "string", "The participant's notes to the study team.", pii=True),
        _c("share_url", "string", "Shared-session link to the agent log.", pii=True),
    )),
    Table("judge_runs.csv", "One row per LLM judge run on an episode.", (
        _c("judge_run_id", "integer", "Judge run id."), EID,
        _c("rubric_id", "integer", "Rubric id."),
        _c("rubric_version", "integer", "Rubric version within its task."),
        _c("provider", "string", "LLM provider."),
        _c("model", "string", "Judge model."),
        _c("prompt_version", "string", "Hash of the judge prompt template."),
        _c("status", "string", "queued, running, succeeded, failed or waiting."),
        _c("is_current", "boolean", "Part of the episode's current auto_score."),
        _c("total", "number", "Total points awarded (0-100)."),
        _c("category_totals", "json", "Points per rubric category."),
        _c("input_tokens", "integer", "Prompt tokens."),
        _c("output_tokens", "integer", "Completion tokens."),
        _c("cost_usd", "number", "Cost in US dollars."),
        _c("latency_ms", "integer", "Latency in milliseconds."),
        _c("error", "string", "Failure reason of a failed run."),
        _c("finished_at", "datetime", "When the run finished."),
    )),
    Table("criterion_scores.csv", "Points a judge run awarded per rubric criterion.", (
        _c("judge_run_id", "integer", "Judge run id."), EID,
        _c("criterion_key", "string", "Criterion key within its rubric (e.g. C1)."),
        _c("category", "string", "correctness, completeness, requirements or technical."),
        _c("points", "number", "Points available."),
        _c("earned", "number", "Points awarded."),
        _c("reason", "string", "The judge's reason."),
    )),
    Table("expert_grades.csv", "Expert grades of episodes, one row per grade.", (
        _c("grade_id", "string", "Hashed grade id."), EID,
        _c("expert_id", "string", "Hashed expert id."),
        _c("role", "string", "primary, second, adjudication or gold."),
        _c("rubric_id", "integer", "Rubric id graded against."),
        _c("attempt", "integer", "Attempt number."),
        _c("status", "string", "draft or submitted."),
        _c("overall", "string", "accept, revise or reject."),
        _c("score", "number", "0-100 rubric score: passed / evaluated."),
        _c("time_spent_seconds", "integer", "Time the expert spent."),
        _c("submitted_at", "datetime", "When the grade was submitted."),
        _c("feedback", "string", "The expert's feedback on the deliverable."),
    )),
    Table("expert_criterion_grades.csv", "Expert verdicts per rubric criterion.", (
        _c("grade_id", "string", "Hashed grade id."), EID,
        _c("criterion_key", "string", "Criterion key."),
        _c("category", "string", "Rubric category."),
        _c("points", "number", "Points of the criterion."),
        _c("verdict", "string", "pass, fail or skip."),
    )),
    Table("fluency_codings.csv", "AI-fluency behaviours coded from collaboration logs (current codings).", (
        EID,
        _c("behaviour", "string", "Behaviour code (AI Fluency Index)."),
        _c("present", "boolean", "Whether the behaviour was observed."),
        _c("model", "string", "Model that coded the log."),
    )),
    Table("transcript_metrics.csv", "Process metrics from each episode's parsed collaboration log (one row per "
          "episode whose log was parsed; metrics are empty when no transcript could be read).", (
        EID,
        _c("agent", "string", "Agent name."),
        _c("status", "string", "parsed, partial (some files or lines unreadable), screenshots_only, unreadable or "
                               "no_log."),
        _c("formats", "string", "Log formats found: claude_code, codex, gemini, terminal, screenshot, unknown."),
        _c("heuristic", "boolean", "Prompts were detected heuristically from terminal text."),
        _c("truncated", "boolean", "Stored turn text was shortened (the counts are still complete)."),
        _c("log_files", "integer", "Log files uploaded."),
        _c("screenshots", "integer", "Screenshots among them."),
        _c("unknown_records", "integer", "Records of unknown types skipped (format drift)."),
        _c("bad_lines", "integer", "Lines that were not valid JSON, skipped."),
        _c("user_prompts", "integer", "Prompts the worker typed (not tool results, sub-agent or injected text)."),
        _c("agent_turns", "integer", "Agent messages to the worker."),
        _c("tool_calls", "integer", "Tool calls by the main agent."),
        _c("interventions", "integer", "Times the worker interrupted the agent or refused a tool call."),
        _c("sidechain_turns", "integer", "Turns inside sub-agent chains (not counted above)."),
        _c("duration_seconds", "number", "First to last timestamp, summed over session files."),
        _c("active_seconds", "number", "Sum of gaps between events up to 5 minutes (longer gaps are idle)."),
        _c("initiative_entropy", "number", "H = -sum p_i log2 p_i over worker prompts and agent questions (Co-Gym "
                                           "Eq. 2); 0 if one side took no initiative."),
        _c("human_initiative_share", "number", "Worker share of initiative-taking utterances."),
        _c("user_chars", "integer", "Characters the worker wrote (effort)."),
        _c("agent_chars", "integer", "Characters of agent messages."),
        _c("effort_ratio", "number", "agent_chars / user_chars."),
    )),
    Table("episode_costs.csv", "Time and cost of each submitted episode. Model cost is the usage the agents' own "
          "session files recorded, priced from model_prices.csv on the submission date; empty (unknown) when no "
          "file recorded usage or a model has no price, never a guess.", (
        EID,
        _c("agent", "string", "Agent name."),
        _c("task_id", "string", "Task UUID."),
        _c("worker_seconds", "number", "Episode start to submission, from the platform's own timestamps."),
        _c("log_active_seconds", "number", "Active time the session file shows (gaps over 5 minutes are idle); "
                                           "a second, independent measure beside worker_seconds."),
        _c("pay", "number", "The worker's pay for the task (task payment lines; bonuses excluded)."),
        _c("currency", "string", "Currency of pay."),
        _c("expert_review_seconds", "number", "Time experts spent on their submitted grades of the episode."),
        _c("expert_grades", "integer", "Submitted expert grades of the episode."),
        _c("model_cost_usd", "number", "Model cost in US dollars; empty when unknown."),
        _c("model_cost_note", "string", "Why the model cost is unknown (empty when it is known)."),
        _c("models", "string", "Models named in the session files, space-separated."),
        _c("model_calls", "integer", "Model responses counted in the session files."),
        _c("input_tokens", "integer", "Uncached input tokens."),
        _c("cache_read_tokens", "integer", "Input tokens read from the provider's prompt cache."),
        _c("cache_write_tokens", "integer", "Input tokens written to the prompt cache."),
        _c("output_tokens", "integer", "Output tokens, reasoning included."),
        _c("reasoning_tokens", "integer", "The reasoning part of output_tokens."),
        _c("price_ids", "string", "Rows of model_prices.csv used, space-separated."),
        _c("self_reported_minutes", "integer", "Minutes the worker said the task took, asked (optionally) at "
                                                "submission; empty when not given. A third measure, kept apart from "
                                                "worker_seconds and log_active_seconds."),
    )),
    Table("model_prices.csv", "The price table the model costs were computed with (US dollars per million tokens).", (
        _c("price_id", "integer", "Row id, as referenced by episode_costs.csv."),
        _c("model", "string", "Model name, or the start of the names it prices (the longest match applies)."),
        _c("effective_from", "date", "First day the price applies."),
        _c("input_per_million", "number", "Uncached input tokens."),
        _c("cache_read_per_million", "number", "Input tokens read from the cache."),
        _c("cache_write_per_million", "number", "Input tokens written to the cache."),
        _c("output_per_million", "number", "Output tokens (reasoning included)."),
        _c("source", "string", "Where the price was read."),
    )),
    Table("survey_answers_long.csv", "One row per submitted survey answer.", (
        PID,
        _c("phase", "string", "pre or post."),
        _c("question", "string", "Item code (D1-D3 pre only, A1-A7 pre and post)."),
        _c("kind", "string", "choice, likert, has, number or text."),
        _c("value", "string", "The answer as given."),
        _c("numeric", "number", "Coded value used by the statistics (Likert 1-7, HAS H1=1..H5=5, choice code)."),
    )),
    Table("survey_answers_wide.csv", "One row per participant; columns <item>_pre and <item>_post hold the coded "
          "value (numeric when coded, else the answer as given).", (PID,)),
    Table("observations.csv", "The active rating ledger: one observation (A, H, y) per scored session.", (
        _c("session_id", "string", "Session id (hashed episode id, or hashed import id)."), PID,
        _c("agent", "string", "Agent name."),
        _c("task_id", "string", "Task UUID, if known."),
        _c("y", "number", "Score entering the rating."),
        _c("weight", "number", "Observation weight (1 unless configured)."),
        _c("source", "string", "auto, expert, blended or imported."),
    )),
    Table("grades.csv", "Every grade of a counted session by an LLM judge or an expert: the observations of the "
          "judge-aware model (y = agent + participant + session + grader leniency + self-preference + noise).", (
        _c("session_id", "string", "Session id (hashed episode id)."), PID,
        _c("agent", "string", "Agent name."),
        _c("agent_family", "string", "The agent's model family when the grade was recorded."),
        _c("grader", "string", "provider/model for a judge; a hashed expert id for an expert."),
        _c("grader_kind", "string", "judge or expert."),
        _c("grader_family", "string", "The judge's model family (empty for experts)."),
        _c("y", "number", "The grade on the 0-100 scale (a judge run's total, or an expert's rubric score)."),
    )),
    Table("ratings.csv", "Posterior of the latest snapshot (y = s_agent + s_human + noise).", (
        _c("snapshot_version", "integer", "Posterior version."),
        _c("entity_kind", "string", "agent or human."),
        _c("entity", "string", "Agent name, or hashed participant id for humans."),
        _c("mu", "number", "Posterior mean."),
        _c("sigma", "number", "Posterior standard deviation."),
        _c("conservative", "number", "CollabSkill score mu - k*sigma."),
        _c("n", "integer", "Observations of the entity."),
        _c("rank", "integer", "Rank by the conservative score within its kind."),
    )),
    Table("stability.csv", "Ranking stability for the latest snapshot, if the analysis was run before the export.", (
        _c("snapshot_version", "integer", "Posterior version analysed."),
        _c("agent", "string", "Agent name."),
        _c("rank", "integer", "Rank on the full data."),
        _c("mu", "number", "Posterior mean."),
        _c("sigma", "number", "Posterior standard deviation."),
        _c("conservative", "number", "mu - k*sigma."),
        _c("n", "integer", "Observations."),
        _c("bootstrap_rounds", "integer", "Bootstrap resamples."),
        _c("bootstrap_mean_rank", "number", "Mean rank across resamples."),
        _c("bootstrap_p_rank1", "number", "Share of resamples ranking the agent first."),
        _c("bootstrap_rank_low", "integer", "2.5 % quantile of the rank."),
        _c("bootstrap_rank_high", "integer", "97.5 % quantile of the rank."),
        _c("loo_human_mean_rank", "number", "Mean rank leaving out one participant at a time."),
        _c("loo_task_mean_rank", "number", "Mean rank leaving out one task at a time."),
    )),
    Table("stability_pairwise.csv", "P(skill of agent > skill of other agent) from the exact posterior.", (
        _c("snapshot_version", "integer", "Posterior version."),
        _c("agent", "string", "Agent name."),
        _c("other_agent", "string", "Agent compared with."),
        _c("p_greater", "number", "Probability that agent's skill exceeds other_agent's."),
    )),
)
# Written only for a study with a solo condition (has_solo_condition), so other studies' exports keep their files.
SYNERGY_TABLES: tuple[Table, ...] = (
    Table("synergy_workers.csv", "The synergy model's per-participant estimates (studies with a solo condition; "
          "empty when the synergy fit had not been run for the current data): ability alone theta, with an agent "
          "kappa and the boost kappa - theta, shrunk, each with its interval; empty where not identifiable.", (
        PID,
        _c("solo_episodes", "integer", "Scored episodes done alone."),
        _c("agent_episodes", "integer", "Scored episodes done with an agent."),
        *(_c(f"{name}{suffix}", "number", f"{label}{words}") for name, label in (
            ("theta", "Ability alone (deviation from the average participant)"),
            ("kappa", "Ability with an agent (deviation from the average participant)"),
            ("boost", "Participant's own boost kappa - theta around the agents' boosts"))
          for suffix, words in _BOUNDS),
    )),
    Table("synergy_tasks.csv", "The synergy model's per-task estimates (studies with a solo condition; empty when "
          "the synergy fit had not been run for the current data); empty where not identifiable.", (
        _c("task_id", "string", "Task UUID."),
        _c("solo_episodes", "integer", "Scored episodes done alone."),
        _c("agent_episodes", "integer", "Scored episodes done with an agent."),
        *(_c(f"{name}{suffix}", "number", f"{label}{words}") for name, label in (
            ("beta", "Task's shift of the score alone (beta; negative: harder)"),
            ("gamma", "Task's extra shift with an agent (gamma)"),
            ("beta_plus_gamma", "Task's shift with an agent (beta + gamma)"))
          for suffix, words in _BOUNDS),
    )),
)
# Written only for a study with comparison sets (has_comparisons), so other studies' exports keep their files.
COMPARISON_TABLES: tuple[Table, ...] = (
    Table("comparisons.csv", "Blind expert comparisons: one row per expert given a comparison set (two to four "
          "deliverables of one task shown in a random order drawn for that expert); withdrawn ones are left out.", (
        _c("comparison_id", "string", "Hashed id of this expert's comparison."),
        _c("set_id", "integer", "Comparison set id (the same deliverables for every expert given the set)."),
        _c("expert_id", "string", "Hashed expert id (as in expert_grades.csv)."),
        _c("task_id", "string", "Task UUID."),
        _c("status", "string", "assigned, in_progress or submitted (only submitted rankings are final)."),
        _c("shown_count", "integer", "Deliverables shown."),
        _c("order_probability", "number", "Probability of the shown order under the uniform draw (1/n!)."),
        _c("time_spent_seconds", "integer", "Time the expert spent (visible page time, capped by wall time)."),
        _c("submitted_at", "datetime", "When the comparison was submitted."),
        _c("justification", "string", "The expert's reasons for the ranking."),
    )),
    Table("comparison_rankings.csv", "One row per deliverable shown in a comparison, in shown order. A deliverable "
          "of a withdrawn participant is left out (its comparison row stays).", (
        _c("comparison_id", "string", "Hashed comparison id (comparisons.csv)."),
        _c("set_id", "integer", "Comparison set id."),
        _c("shown_position", "integer", "Position the expert saw it at (1 = first)."),
        _c("deliverable_kind", "string", "episode, or solo_run (an agent's autonomous baseline run)."),
        EID,
        _c("solo_run_id", "integer", "Solo-agent run id (empty for an episode)."),
        _c("arm", "string", "human_agent (worker with an agent), human_alone (solo condition) or agent_alone."),
        _c("agent", "string", "Agent name (empty for a worker alone)."),
        PID,
        _c("rank", "integer", "The expert's rank: 1 is best, equal ranks are ties; empty until answered."),
        _c("acceptability", "string", "ready, minor (after minor edits), major (needs major rework) or unusable."),
        _c("acceptability_code", "integer", "ready 4, minor 3, major 2, unusable 1; empty until answered."),
        _c("length_chars", "integer", "Characters of extracted deliverable text (empty: not extracted)."),
        _c("size_bytes", "integer", "Total size of the deliverable files."),
    )),
    Table("comparison_win_rates.csv", "The preference model's win / tie / loss rates of every arm against every "
          "other (rankings and rubric scores fitted jointly; at equal position and length), one row per arm pair; "
          "empty when the preference fit had not been run for the current comparisons and scores.", (
        _c("arm", "string", "Arm: worker alone, with agent: <agent> or agent alone: <agent>."),
        _c("versus", "string", "Arm compared with (the worker alone where it is one side)."),
        *(_c(f"{name}{suffix}", "number", f"{label}{words}") for name, label in (
            ("win", "Probability the arm's deliverable is preferred"),
            ("tie", "Probability of a tie (0 without a tie term: no tie was observed)"),
            ("loss", "Probability the other arm's deliverable is preferred"))
          for suffix, words in _BOUNDS),
        _c("level", "number", "Interval level (0.95)."),
        _c("raw_wins", "integer", "Raw count of ranked pairs the arm won (not modelled)."),
        _c("raw_ties", "integer", "Raw count of tied ranked pairs (not modelled)."),
        _c("raw_losses", "integer", "Raw count of ranked pairs the arm lost (not modelled)."),
        _c("not_identifiable", "string", "Why the model gives no rate for this pair (empty when it does)."),
    )),
)
# Written only for a study whose comparison sets LLM judges ranked, so other studies' exports keep their files.
JUDGE_COMPARISON_TABLES: tuple[Table, ...] = (
    Table("judge_comparisons.csv", "LLM judges in comparison mode: one row per comparison set, display order and "
          "judge; the judge saw the task, its reference files and the deliverables' text only, and ranked them as "
          "the experts do.", (
        _c("judge_comparison_id", "integer", "Judge ranking id."),
        _c("set_id", "integer", "Comparison set id (comparisons.csv, comparison_rankings.csv)."),
        _c("task_id", "string", "Task UUID."),
        _c("order", "string", "recorded: the set's items in id order; reversed: the same reversed (each set is "
                              "shown in both orders to measure position bias)."),
        _c("shown_deliverables", "string", "The deliverables in the order shown, space-separated: e:<hashed "
                                           "episode id> or s:<solo-run id>; a withdrawn participant's deliverable "
                                           "is written as -."),
        _c("ranks", "string", "The judge's rank of each shown deliverable, space-separated and aligned with "
                              "shown_deliverables: 1 is best, equal ranks are ties; empty unless succeeded."),
        _c("instrument_version", "string", "Hash of the comparison prompt and reply schema."),
        _c("provider", "string", "LLM provider of the judge."),
        _c("model", "string", "Judge model."),
        _c("family", "string", "Model family of the judge."),
        _c("status", "string", "succeeded; failed (see note): a reply that stayed invalid after the repair rounds, "
                               "a provider error or a consent refusal; running: in flight."),
        _c("attempts", "integer", "Calls made (0: refused without a call; more than 1: a failed call retried)."),
        _c("note", "string", "Why the ranking failed."),
        _c("cost_usd", "number", "Cost of the judge's call(s) in US dollars."),
        _c("finished_at", "datetime", "When it was stored."),
        _c("reason", "string", "The judge's short reason for the ranking."),
    )),
)
# Written only for a study that codes theory of mind or holds such codings, so other studies' exports keep their files.
PROCESS_TABLES: tuple[Table, ...] = (
    Table("process_codings.csv", "Every theory-of-mind and response-quality coding of an episode's parsed log, one "
          "row per episode, instrument version and judge (earlier codings kept beside the current one).", (
        _c("coding_id", "integer", "Coding id."), EID,
        _c("instrument", "string", "tom: theory of mind in the worker's prompts (the coder saw only the worker's "
                                   "messages); response_quality: quality of the agent's responses (the coder saw "
                                   "the worker-agent dialogue without tool traffic). Neither saw task or gold "
                                   "information."),
        _c("instrument_version", "string", "Hash of the instrument's prompt and reply schema; a new version is a "
                                           "new instrument, coded again."),
        _c("provider", "string", "LLM provider of the judge."),
        _c("model", "string", "Judge model."),
        _c("family", "string", "Model family of the judge (the two judges of a study differ in family)."),
        _c("status", "string", "succeeded; not_coded: no parsable log (see note), never a score of 0; failed: the "
                               "call failed or consent did not name the provider (see note); running: in flight."),
        _c("is_current", "boolean", "The judge's current coding of this instrument for the episode."),
        _c("score", "integer", "0-5: theory of mind (0 none, 5 several clear signs) or response quality (0 "
                               "unhelpful, 5 very helpful); empty unless succeeded."),
        _c("markers", "string", "Space-separated ToM marker codes the judge found (grading.schemas.TOM_MARKERS: "
                                "rapport, knowledge_gap_detection, perspective_taking, plan_coordination, "
                                "confirmation_seeking, challenges_ai, … and the low-ToM markers "
                                "irrelevant_information, assumes_shared_context, delegates_trivial, "
                                "treats_ai_as_search); empty for response quality."),
        _c("note", "string", "Why the episode was not coded or the coding failed."),
        _c("cost_usd", "number", "Cost of the judge's call(s) in US dollars."),
        _c("is_simulated", "boolean", "Demonstration coding drawn from a model, not a judge's reply."),
        _c("created_at", "datetime", "When the coding was started."),
        _c("finished_at", "datetime", "When it was stored."),
        _c("reason", "string", "The judge's short reason; it may quote the worker's prompts, so it is written only "
                               "with identifying information.", pii=True),
    )),
)
# Written only for a study with a ToM gold sample (experts' codes of a stratified sample of ToM-coded episodes).
GOLD_TABLES: tuple[Table, ...] = (
    Table("tom_gold_codes.csv", "Experts' theory-of-mind codes of the study's stratified gold sample, one row per "
          "sampled episode and assigned expert (the expert saw only the worker's prompts, as the ToM judges did).", (
        _c("gold_code_id", "integer", "Gold code id."), EID,
        _c("expert_id", "string", "Expert pseudonym (the same pseudonym as in expert_grades.csv)."),
        _c("stratum", "string", "band|condition when the sample was drawn: the ToM judges' mean score band (low < 2, "
                                "mid 2 to < 3.5, high >= 3.5) and the episode's condition."),
        _c("stratum_population", "integer", "N_h: ToM-coded episodes in the stratum when the sample was drawn."),
        _c("stratum_sample", "integer", "n_h: episodes sampled from the stratum."),
        _c("inclusion_probability", "number", "pi = n_h / N_h (stratified simple random sampling without "
                                              "replacement); weight estimates by 1/pi."),
        _c("judge_mean", "number", "The ToM judges' mean score of the episode when the sample was drawn."),
        _c("sample_seed", "integer", "Seed of the draw (re-running the draw on the same population reproduces it)."),
        _c("status", "string", "assigned (not opened), draft (opened or saved, not submitted) or submitted; only "
                               "submitted codes are gold."),
        _c("score", "integer", "The expert's 0-5 theory-of-mind score (the judges' scale); empty until chosen."),
        _c("markers", "string", "Space-separated ToM marker codes the expert found (the judges' marker list)."),
        _c("time_spent_seconds", "integer", "Seconds the coding page was visible, capped by the wall time since "
                                            "it was first opened."),
        _c("assigned_at", "datetime", "When the item was assigned to the expert."),
        _c("submitted_at", "datetime", "When the expert submitted the code."),
        _c("reason", "string", "The expert's reason; it may quote the worker's prompts, so it is written only with "
                               "identifying information.", pii=True),
    )),
)
PAIR_TABLES: tuple[Table, ...] = (
    Table("tom_pair_codings.csv", "The pairwise ToM robustness run (studies that ask for it): one row per pair of "
          "episodes, display order and judge; the judge saw the two workers' prompts only and said which shows more "
          "theory of mind.", (
        _c("pair_coding_id", "integer", "Comparison id."),
        _c("episode_a_id", "string", "Hashed id of the pair's first episode (the lower episode id)."),
        _c("episode_b_id", "string", "Hashed id of the pair's second episode."),
        _c("order", "string", "ab: episode a was shown as set A; ba: episode b was shown as set A (each pair is "
                              "shown in both orders to measure position bias)."),
        _c("seed", "integer", "Seed of the pair draw."),
        _c("instrument_version", "string", "Hash of the pairwise prompt and reply schema."),
        _c("provider", "string", "LLM provider of the judge."),
        _c("model", "string", "Judge model."),
        _c("family", "string", "Model family of the judge."),
        _c("status", "string", "succeeded; failed (see note); running: in flight."),
        _c("shown_choice", "string", "The judge's answer as shown: A (the set shown first), B or tie."),
        _c("winner", "string", "The answer mapped back to the pair: a, b or tie."),
        _c("note", "string", "Why the comparison failed (a consent refusal, no prompts, a provider error)."),
        _c("cost_usd", "number", "Cost of the judge's call(s) in US dollars."),
        _c("finished_at", "datetime", "When it was stored."),
        _c("reason", "string", "The judge's short reason; it may quote the workers' prompts, so it is written only "
                               "with identifying information.", pii=True),
    )),
)
# Written only for a study with ToM coding on and a solo condition, so other studies' exports keep their files.
TOM_TABLES: tuple[Table, ...] = (
    Table("tom_workers.csv", "Each participant's theory-of-mind trait, the mean of the two judges' mean ToM codes "
          "over their coded with-agent episodes (studies with ToM coding and a solo condition; empty when the ToM "
          "analysis had not been run for the current data).", (
        PID,
        _c("coded_episodes", "integer", "With-agent episodes with a ToM code from the study's judge pair."),
        _c("tom_trait", "number", "Mean ToM code (0-5) over those episodes; empty when none is coded (never 0)."),
        _c("is_simulated", "boolean", "The ToM analysis rests on demonstration codings drawn from a model."),
    )),
    Table("tom_estimates.csv", "The ToM analysis's estimates, one row per quantity (studies with ToM coding and a "
          "solo condition; empty when the analysis had not been run for the current data); a quantity that is not "
          "identifiable has empty numbers and the reason in note.", (
        _c("analysis", "string", "moderation: ToM trait as a covariate on ability alone (theta) and with an "
                                 "agent (kappa) in the synergy model; moderation_within: the same with the "
                                 "episode's within-worker deviation; response_quality: OLS of the agent's "
                                 "response quality on ToM and effort, errors clustered by worker; judges: "
                                 "agreement of the two judges' ToM codes."),
        _c("term", "string", "kappa, theta, boost (kappa - theta), deviation; a regression term "
                             "(tom_trait, tom_deviation, turns, characters_k, edit_ratio, intercept); icc_2_1 (one "
                             "judge) or icc_2_k (the judges' mean)."),
        _c("estimate", "number", "Points of 0-100 score per ToM point (moderation), quality points per unit "
                                 "(response_quality), or the ICC."),
        _c("se", "number", "Standard error (empty for ICCs)."),
        _c("lower", "number", "Lower bound of the interval at the stated level."),
        _c("upper", "number", "Upper bound of the interval."),
        _c("p_value", "number", "Two-sided p-value (empty for ICCs)."),
        _c("level", "number", "Interval level."),
        _c("n_episodes", "integer", "Episodes (or items coded by both judges) the estimate rests on."),
        _c("n_workers", "integer", "Participants the estimate rests on (empty for ICCs)."),
        _c("is_simulated", "boolean", "The codings behind it are simulated demonstration data, not judges' codes."),
        _c("note", "string", "Why the quantity is not identifiable; empty when it is estimated."),
    )),
)
TABLE_BY_FILE = {table.file: table for table in (*TABLES, *SYNERGY_TABLES, *PROCESS_TABLES, *GOLD_TABLES,
                                                  *PAIR_TABLES, *COMPARISON_TABLES, *JUDGE_COMPARISON_TABLES,
                                                  *TOM_TABLES)}
EXTRA_FILES = {
    "sessions.json": "Released CollabSkill session format: a JSON list of objects with session_id, agent_id "
    "(agent name), user_id (hashed participant id), task_id (task UUID), autograde_status (\"done\"), skipped "
    "(false), score_source (auto, expert or blended: what the rating's score y is) and y under its own name: "
    "autograde_overall_score (judges), expert_overall_score (experts) or blended_overall_score (with the "
    "components and blend_expert_weight beside it, since judge and expert scores are on different scales); "
    "active observations only. The first object is a study_config record (marked skipped, so released-format "
    "loaders pass over it) holding the rating model; `manage.py import_sessions` reads both back to the same "
    "ratings.",
    "transcripts.jsonl": "Only in exports that include identifying information: one JSON object per line with "
    "episode_id, agent and files, each file with name, format, status, note and turns (role user / agent / "
    "tool_call / tool_result, text, at, sidechain, intervention) of the normalised collaboration transcript.",
    "study.json": "Study settings needed to reproduce the analysis: rating model (rating_model, as in "
    "sessions.json), paper hyperparameters, the fitted hyperparameters of the latest snapshot, score source, "
    "snapshot version, export time and the id scheme.",
    "data_dictionary.csv": "This dictionary: file, column, type, description.",
    "README.txt": "What the export contains and how ids were protected.",
}


# ------------------------------------------------------------------------------------------- helpers


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


class _Writer:
    """Write CSV files and JSON into the ZIP, counting rows for the progress bar and the summary."""

    def __init__(self, archive: zipfile.ZipFile, include_pii: bool, progress: Progress, total: int,
                 stamp: datetime) -> None:
        self.archive = archive
        self.date_time = stamp.timetuple()[:6]
        self.include_pii = include_pii
        self.progress = progress
        self.total = max(total, 1)
        self.done = 0
        self.counts: dict[str, int] = {}
        self.headers: dict[str, list[str]] = {}

    def _tick(self, rows: int = 1) -> None:
        self.done += rows
        if self.done % CHUNK == 0:
            self.progress(min(self.done, self.total - 1), self.total)

    def table(self, table: Table, rows: Iterable[dict[str, Any]], header: list[str] | None = None) -> None:
        columns = header or table.header(self.include_pii)
        self.headers[table.file] = columns
        count = 0
        with self.archive.open(self.entry(table.file), "w", force_zip64=True) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            writer = csv_writer(text)
            writer.writerow(columns)
            for row in rows:
                writer.writerow([_cell(row.get(column)) for column in columns])
                count += 1
                self._tick()
            text.flush()
            text.detach()
        self.counts[table.file] = count

    def text(self, name: str, content: str) -> None:
        self.archive.writestr(self.entry(name), content)

    def entry(self, name: str) -> zipfile.ZipInfo:
        """Every member carries the export's own time, so the same data exported "at" the same time is the same
        bytes (a restored backup is checked that way: scripts/backup_restore_check.sh)."""
        entry = zipfile.ZipInfo(name, date_time=self.date_time)
        entry.compress_type = zipfile.ZIP_DEFLATED
        entry.external_attr = 0o600 << 16
        return entry


def _stream(queryset: QuerySet) -> Iterator[dict[str, Any]]:
    return queryset.iterator(chunk_size=CHUNK)


def _participants(study: Study) -> QuerySet:
    return Participant.objects.filter(study=study).exclude(status__in=EXCLUDED_STATUSES)


def _episodes(study: Study) -> QuerySet:
    return Episode.objects.filter(study=study).exclude(participant__status__in=EXCLUDED_STATUSES)


def _observations(study: Study) -> QuerySet:
    return rating_selectors.active_observations(study).exclude(participant__status__in=EXCLUDED_STATUSES)


def latest_stability(study: Study, snapshot: RatingSnapshot | None) -> dict[str, Any] | None:
    """Return the stored stability result of the snapshot, if one was computed."""
    if snapshot is None:
        return None
    job = finished_stability_job(study, snapshot)
    return job.result if job else None


# ------------------------------------------------------------------------------------------- tables


def _participant_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _participants(study).annotate(n_episodes=Count("episodes")).order_by("pk").values(
        "pk", "status", "occupation__soc_code", "occupation__title", "occupation__sector__name", "years_experience",
        "consent_version__version", "consented_at", "completed_at", "n_episodes", "is_simulated",
    )
    for row in _stream(rows):
        yield {
            "participant_id": hasher("participant", row["pk"]), "status": row["status"],
            "occupation_soc": row["occupation__soc_code"], "occupation_title": row["occupation__title"],
            "sector": row["occupation__sector__name"], "years_experience": _years(row["years_experience"]),
            "consent_version": row["consent_version__version"], "consented_at": row["consented_at"],
            "completed_at": row["completed_at"], "n_episodes": row["n_episodes"], "is_simulated": row["is_simulated"],
        }


def _years(value: float | None) -> float | int | None:
    """Whole years as integers (7, not 7.0), half years as they are (3.5)."""
    return int(value) if value is not None and float(value).is_integer() else value


def _identity_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = ParticipantIdentity.objects.filter(participant__in=_participants(study)).order_by("participant_id").values(
        "participant_id", "email", "full_name", "platform", "platform_worker_id"
    )
    for row in _stream(rows):
        yield {**row, "participant_id": hasher("participant", row["participant_id"])}


def _agent_rows(study: Study) -> Iterator[dict[str, Any]]:
    agents = Agent.objects.filter(
        Q(studies=study) | Q(episodes__study=study) | Q(observations__study=study)
    ).distinct().order_by("name")
    for agent in agents.values("name", "product", "model_version", "interface", "family"):
        yield {"agent": agent["name"], **{k: agent[k] for k in ("product", "model_version", "interface", "family")}}


def _task_rows(study: Study) -> Iterator[dict[str, Any]]:
    tasks = TaskInstance.objects.filter(
        Q(episodes__study=study) | Q(observations__study=study) | Q(studies=study)
    ).distinct().order_by("title")
    for task in _stream(tasks.values("uuid", "title", "source", "sector__name")):
        yield {"task_id": str(task["uuid"]), "title": task["title"], "source": task["source"],
               "sector": task["sector__name"]}


SOLO_COLUMNS = ("condition", "condition_order", "condition_order_probability", "used_ai_anyway")


def has_solo_condition(study: Study) -> bool:
    """Whether the study has (or had) a solo condition: only then do its exports carry the condition columns
    and the synergy files, so the export of a study without one stays as it always was."""
    return bool(study.solo_tasks_per_session) or Episode.objects.filter(
        study=study, condition=Episode.Condition.SOLO).exists()


def _episode_header(study: Study, include_pii: bool) -> list[str]:
    header = TABLE_BY_FILE["episodes.csv"].header(include_pii)
    return header if has_solo_condition(study) else [name for name in header if name not in SOLO_COLUMNS]


def _estimate_cells(row: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        value = row.get(name)
        if value:
            out.update({name: value["estimate"], f"{name}_lower": value["lower"], f"{name}_upper": value["upper"]})
    return out


def _synergy_worker_rows(result: dict[str, Any] | None, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    fit = (result or {}).get("fit") or {}
    workers = (result or {}).get("workers") or []
    for row in fit.get("workers") or []:
        yield {"participant_id": hasher("participant", workers[row["human"]]["participant_id"]),
               "solo_episodes": row["solo_episodes"], "agent_episodes": row["agent_episodes"],
               **_estimate_cells(row, ("theta", "kappa", "boost"))}


def _synergy_task_rows(result: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    fit = (result or {}).get("fit") or {}
    tasks = (result or {}).get("tasks") or []
    for row in fit.get("tasks") or []:
        yield {"task_id": tasks[row["task"]]["uuid"], "solo_episodes": row["solo_episodes"],
               "agent_episodes": row["agent_episodes"], **_estimate_cells(row, ("beta", "gamma", "beta_plus_gamma"))}


def _tom_worker_rows(result: dict[str, Any] | None, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    simulated = bool((result or {}).get("simulated"))
    for row in (result or {}).get("workers") or []:
        yield {"participant_id": hasher("participant", row["participant_id"]), "coded_episodes": row["n_coded"],
               "tom_trait": row["tom_mean"], "is_simulated": simulated}


def _tom_estimate(analysis: str, term: str, row: dict[str, Any] | None, base: dict[str, Any],
                  note: str | None) -> dict[str, Any]:
    numbers = {k: row.get(k) for k in ("estimate", "se", "lower", "upper", "p_value")} if row else {}
    return {"analysis": analysis, "term": term, **numbers, **base, "note": "" if row else (note or "")}


def _tom_estimate_rows(result: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    analysis = (result or {}).get("analysis")
    if not analysis:
        return
    common = {"level": result.get("level"), "is_simulated": bool(result.get("simulated"))}
    for name, terms in (("moderation", ("kappa", "theta", "boost")),
                        ("moderation_within", ("kappa", "theta", "boost", "deviation"))):
        part = converged_part(analysis["moderation" if name == "moderation" else "deviation"])
        reasons = {k: v for k, v in (part.get("reasons") or {}).items() if k != "position_effects"}
        raw = analysis["moderation" if name == "moderation" else "deviation"] or {}
        base = common | {"n_episodes": raw.get("n_episodes"), "n_workers": raw.get("n_workers")}
        for term in terms:
            yield _tom_estimate(name, term, part.get(term), base, "; ".join(reasons.values()) or "not estimated")
    quality = analysis.get("quality") or {}
    base = common | {"n_episodes": quality.get("n_episodes"), "n_workers": quality.get("n_workers")}
    coefficients = quality.get("coefficients") or {}
    for term in ("tom_trait", "tom_deviation", "turns", "characters_k", "edit_ratio", "intercept"):
        yield _tom_estimate("response_quality", term, coefficients.get(term), base,
                            result.get("quality_note") or quality.get("reason") or "not estimated")
    judges = analysis.get("judges") or {}
    base = common | {"n_episodes": judges.get("n_items"), "n_workers": None}
    for term, key in (("icc_2_1", "icc_single"), ("icc_2_k", "icc_average")):
        value, bounds = judges.get(key), judges.get(f"{key}_interval")
        row = {"estimate": value, "lower": bounds[0] if bounds else None,
               "upper": bounds[1] if bounds else None} if value is not None else None
        yield _tom_estimate("judges", term, row, base, judges.get("reason") or "no ToM code from the judges")


def _comparison_win_rate_rows(result: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """The stored preference fit's win-rate table; a rate without an interval (no tie term) keeps its bounds empty."""
    fit = (result or {}).get("fit") or {}
    for row in fit.get("win_rates") or []:
        out: dict[str, Any] = {"arm": row["cell"], "versus": row["versus"], "level": fit.get("level"),
                               "not_identifiable": row.get("not_identifiable", "")}
        for name in ("win", "tie", "loss"):
            value = row.get(name) or {}
            out.update({f"{name}{suffix}": value.get(key) for suffix, key in (
                ("", "estimate"), ("_lower", "lower"), ("_upper", "upper"))})
        observed = row.get("observed") or {}
        out.update({"raw_wins": observed.get("wins"), "raw_ties": observed.get("ties"),
                    "raw_losses": observed.get("losses")})
        yield out


def _episode_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _episodes(study).order_by("pk").values(
        "pk", "participant_id", "agent__name", "task__uuid", "position", *SOLO_COLUMNS, "design_mode",
        "assignment_probability",
        "status", "prior_experience", "assigned_at",
        "started_at", "submitted_at", "timed_out", "skip_reason", "score", "score_source", "auto_score",
        "expert_score", "needs_expert_review", "in_calibration_sample", "calibration_probability", "is_simulated",
        "skip_description", "notes", "share_url",
    )
    for row in _stream(rows):
        row["episode_id"] = hasher("episode", row.pop("pk"))
        row["participant_id"] = hasher("participant", row["participant_id"])
        row["agent"] = row.pop("agent__name")
        row["task_id"] = str(row.pop("task__uuid"))
        yield row


def _judge_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = JudgeRun.objects.filter(episode__in=_episodes(study)).order_by("pk").values(
        "pk", "episode_id", "rubric_id", "rubric__version", "provider", "model", "prompt_version", "status",
        "is_current", "total", "category_totals", "input_tokens", "output_tokens", "cost_usd", "latency_ms", "error",
        "finished_at",
    )
    for row in _stream(rows):
        row["judge_run_id"] = row.pop("pk")
        row["episode_id"] = hasher("episode", row["episode_id"])
        row["rubric_version"] = row.pop("rubric__version")
        yield row


def _criterion_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = CriterionScore.objects.filter(judge_run__episode__in=_episodes(study)).order_by("judge_run_id", "pk").values(
        "judge_run_id", "judge_run__episode_id", "criterion__key", "criterion__category", "criterion__points",
        "earned", "reason",
    )
    for row in _stream(rows):
        yield {
            "judge_run_id": row["judge_run_id"], "episode_id": hasher("episode", row["judge_run__episode_id"]),
            "criterion_key": row["criterion__key"], "category": row["criterion__category"],
            "points": row["criterion__points"], "earned": row["earned"], "reason": row["reason"],
        }


def _expert_grade_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = ExpertGrade.objects.filter(episode__in=_episodes(study)).order_by("pk").values(
        "pk", "episode_id", "expert_id", "assignment__role", "rubric_id", "attempt", "status", "overall", "score",
        "time_spent_seconds", "submitted_at", "feedback",
    )
    for row in _stream(rows):
        row["grade_id"] = hasher("grade", row.pop("pk"))
        row["episode_id"] = hasher("episode", row["episode_id"])
        row["expert_id"] = hasher("expert", row["expert_id"])
        row["role"] = row.pop("assignment__role")
        yield row


def _expert_criterion_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = ExpertCriterionGrade.objects.filter(grade__episode__in=_episodes(study)).order_by("grade_id", "pk").values(
        "grade_id", "grade__episode_id", "criterion__key", "criterion__category", "criterion__points", "verdict"
    )
    for row in _stream(rows):
        yield {
            "grade_id": hasher("grade", row["grade_id"]), "episode_id": hasher("episode", row["grade__episode_id"]),
            "criterion_key": row["criterion__key"], "category": row["criterion__category"],
            "points": row["criterion__points"], "verdict": row["verdict"],
        }


def has_comparisons(study: Study) -> bool:
    """Whether the study has comparison sets: only then do its exports carry the comparison files."""
    return ComparisonSet.objects.filter(study=study).exists()


def _comparisons(study: Study) -> QuerySet:
    return (ComparisonAssignment.objects.filter(comparison_set__study=study)
            .exclude(status=ComparisonAssignment.Status.CANCELLED))


def _comparison_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = (_comparisons(study).annotate(shown_count=Count("placements")).order_by("pk")
            .values("pk", "comparison_set_id", "expert_id", "comparison_set__task__uuid", "status", "shown_count",
                    "order_probability", "time_spent_seconds", "submitted_at", "justification"))
    for row in _stream(rows):
        row["comparison_id"] = hasher("comparison", row.pop("pk"))
        row["set_id"] = row.pop("comparison_set_id")
        row["expert_id"] = hasher("expert", row["expert_id"])
        row["task_id"] = row.pop("comparison_set__task__uuid")
        yield row


def _comparison_ranking_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    kept = set(_episodes(study).values_list("pk", flat=True))
    placements = (ComparisonPlacement.objects.filter(assignment__in=_comparisons(study))
                  .select_related("assignment", "item__episode__agent", "item__solo_run__agent")
                  .order_by("assignment_id", "position"))
    lengths = comparison_selectors.deliverable_lengths(study)
    sizes = comparison_selectors.deliverable_sizes(study)
    for placement in placements.iterator(chunk_size=CHUNK):
        item = placement.item
        if item.episode_id is not None and item.episode_id not in kept:
            continue
        arm = comparison_selectors.item_arm(item)
        key = ("episode", item.episode_id) if item.episode_id else ("solo_run", item.solo_run_id)
        yield {
            "comparison_id": hasher("comparison", placement.assignment_id),
            "set_id": placement.assignment.comparison_set_id, "shown_position": placement.position,
            "deliverable_kind": key[0], "episode_id": hasher("episode", item.episode_id),
            "solo_run_id": item.solo_run_id, "arm": arm.kind, "agent": arm.agent_name,
            "participant_id": hasher("participant", item.episode.participant_id) if item.episode_id else "",
            "rank": placement.rank, "acceptability": placement.acceptability,
            "acceptability_code": comparison_selectors.ACCEPTABILITY_CODE.get(placement.acceptability),
            "length_chars": lengths.get(key), "size_bytes": sizes.get(key, 0),
        }


def _judge_comparisons(study: Study) -> QuerySet:
    return JudgeComparison.objects.filter(study=study).order_by("pk")


def _shown_refs(item_ids: list[int], sources: dict[int, tuple[int | None, int | None]], kept: set[int],
                hasher: Pseudonymizer) -> str:
    refs = []
    for item_id in item_ids:
        episode_id, solo_run_id = sources.get(item_id, (None, None))
        if episode_id is not None:
            refs.append(f"e:{hasher('episode', episode_id)}" if episode_id in kept else "-")
        else:
            refs.append(f"s:{solo_run_id}")
    return " ".join(refs)


def _judge_comparison_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    kept = set(_episodes(study).values_list("pk", flat=True))
    sources = {pk: (episode_id, solo_run_id) for pk, episode_id, solo_run_id in ComparisonItem.objects.filter(
        comparison_set__study=study).values_list("pk", "episode_id", "solo_run_id")}
    rows = _judge_comparisons(study).values(
        "pk", "comparison_set_id", "comparison_set__task__uuid", "order", "shown_items", "ranks", "prompt_version",
        "provider", "model", "family", "status", "attempts", "error", "cost_usd", "finished_at", "reason")
    for row in _stream(rows):
        yield {**row, "judge_comparison_id": row.pop("pk"), "set_id": row.pop("comparison_set_id"),
               "task_id": row.pop("comparison_set__task__uuid"),
               "shown_deliverables": _shown_refs(row.pop("shown_items") or [], sources, kept, hasher),
               "ranks": " ".join(str(rank) for rank in row["ranks"] or []),
               "instrument_version": row.pop("prompt_version"), "note": row.pop("error")}


def _fluency_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = FluencyCoding.objects.filter(
        episode__in=_episodes(study), is_current=True, status=FluencyCoding.Status.SUCCEEDED
    ).order_by("episode_id", "pk").values("episode_id", "behaviours", "model")
    for row in _stream(rows):
        episode_id = hasher("episode", row["episode_id"])
        for code, entry in sorted((row["behaviours"] or {}).items()):
            present = entry.get("present") if isinstance(entry, dict) else entry
            if isinstance(present, bool):
                yield {"episode_id": episode_id, "behaviour": code, "present": present, "model": row["model"]}


def _process_codings(study: Study) -> QuerySet:
    return ProcessCoding.objects.filter(episode__in=_episodes(study)).order_by("episode_id", "instrument", "pk")


def has_process_codings(study: Study) -> bool:
    """Whether the export carries process_codings.csv: the study codes theory of mind, or once did."""
    return study.tom_coding or ProcessCoding.objects.filter(episode__study=study).exists()


def _process_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _process_codings(study).values(
        "pk", "episode_id", "instrument", "prompt_version", "provider", "model", "family", "status", "is_current",
        "score", "markers", "error", "cost_usd", "is_simulated", "created_at", "finished_at", "reason")
    for row in _stream(rows):
        yield {**row, "coding_id": row.pop("pk"), "episode_id": hasher("episode", row["episode_id"]),
               "instrument_version": row.pop("prompt_version"), "markers": " ".join(row["markers"] or []),
               "note": row.pop("error")}


def _tom_gold_codes(study: Study) -> QuerySet:
    return ToMGoldCode.objects.filter(item__sample__study=study, item__episode__in=_episodes(study)).order_by(
        "item__episode_id", "pk")


def _tom_gold_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _tom_gold_codes(study).values(
        "pk", "item__episode_id", "expert_id", "item__stratum", "item__stratum_population", "item__stratum_sample",
        "item__inclusion_probability", "item__judge_mean", "item__sample__seed", "status", "score", "markers",
        "time_spent_seconds", "assigned_at", "submitted_at", "reason")
    for row in _stream(rows):
        out = {key.removeprefix("item__"): value for key, value in row.items()}
        yield {**out, "gold_code_id": out.pop("pk"), "episode_id": hasher("episode", out.pop("episode_id")),
               "expert_id": hasher("expert", out["expert_id"]), "sample_seed": out.pop("sample__seed"),
               "markers": " ".join(out["markers"] or [])}


def _tom_pairs(study: Study) -> QuerySet:
    episodes = _episodes(study)
    return ToMPairCoding.objects.filter(study=study, episode_a__in=episodes, episode_b__in=episodes).order_by("pk")


def _tom_pair_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _tom_pairs(study).values(
        "pk", "episode_a_id", "episode_b_id", "order", "seed", "prompt_version", "provider", "model", "family",
        "status", "shown_choice", "winner", "error", "cost_usd", "finished_at", "reason")
    for row in _stream(rows):
        yield {**row, "pair_coding_id": row.pop("pk"), "episode_a_id": hasher("episode", row["episode_a_id"]),
               "episode_b_id": hasher("episode", row["episode_b_id"]), "instrument_version": row.pop("prompt_version"),
               "note": row.pop("error")}


def _transcripts(study: Study) -> QuerySet:
    return EpisodeTranscript.objects.filter(episode__in=_episodes(study)).order_by("episode_id")


_TRANSCRIPT_COLUMNS = ("user_prompts", "agent_turns", "tool_calls", "interventions", "sidechain_turns",
                       "duration_seconds", "active_seconds", "initiative_entropy", "human_initiative_share",
                       "user_chars", "agent_chars", "effort_ratio")


def _transcript_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _transcripts(study).values("episode_id", "episode__agent__name", "status", "formats", "heuristic",
                                      "truncated", "screenshots", "files", *_TRANSCRIPT_COLUMNS)
    for row in _stream(rows):
        files = row.pop("files") or []
        yield {
            **row, "episode_id": hasher("episode", row["episode_id"]), "agent": row.pop("episode__agent__name"),
            "formats": " ".join(row["formats"] or []), "log_files": len(files),
            "unknown_records": sum(sum((f.get("unknown_records") or {}).values()) for f in files),
            "bad_lines": sum(f.get("bad_lines", 0) for f in files),
        }


def _cost_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    for row in economics.episode_economics(study):
        tokens = row.tokens or {}
        known = row.cost.amount is not None
        yield {
            "episode_id": hasher("episode", row.episode_id), "agent": row.agent, "task_id": row.task_uuid,
            "worker_seconds": row.worker_seconds, "log_active_seconds": row.log_active_seconds, "pay": row.pay,
            "currency": row.currency, "expert_review_seconds": row.expert_seconds, "expert_grades": row.expert_grades,
            "model_cost_usd": row.cost.amount if known else None, "model_cost_note": "" if known else row.cost.reason,
            "models": " ".join(row.cost.per_model), "model_calls": tokens.get("calls"),
            "input_tokens": tokens.get("input"), "cache_read_tokens": tokens.get("cache_read"),
            "cache_write_tokens": tokens.get("cache_write"), "output_tokens": tokens.get("output"),
            "reasoning_tokens": tokens.get("reasoning"), "price_ids": " ".join(map(str, row.cost.prices_used)),
            "self_reported_minutes": row.self_reported_minutes,
        }


def _price_rows() -> Iterator[dict[str, Any]]:
    for price in economics.price_table():
        yield {"price_id": price.id, "model": price.model, "effective_from": price.effective_from,
               "input_per_million": price.input, "cache_read_per_million": price.cache_read,
               "cache_write_per_million": price.cache_write, "output_per_million": price.output,
               "source": price.source}


def _write_transcripts(writer: _Writer, study: Study, hasher: Pseudonymizer) -> None:
    """Write the normalised turns, one episode per line (identifying: the worker's own words)."""
    count = 0
    with writer.archive.open(writer.entry("transcripts.jsonl"), "w", force_zip64=True) as raw:
        rows = _transcripts(study).values("episode_id", "episode__agent__name", "files")
        for row in _stream(rows):
            files = [{key: f.get(key) for key in ("name", "format", "status", "note", "heuristic", "truncated",
                                                  "turns")} for f in row["files"] or []]
            line = {"episode_id": hasher("episode", row["episode_id"]), "agent": row["episode__agent__name"],
                    "files": files}
            raw.write(json.dumps(line, ensure_ascii=False).encode() + b"\n")
            count += 1
            writer._tick()
    writer.counts["transcripts.jsonl"] = count


def _answers(study: Study, include_pii: bool) -> QuerySet:
    answers = Answer.objects.filter(
        response__participant__in=_participants(study), response__submitted_at__isnull=False
    )
    if not include_pii:
        answers = answers.exclude(question__kind=Question.Kind.TEXT)
    return answers


def _answer_long_rows(study: Study, hasher: Pseudonymizer, include_pii: bool) -> Iterator[dict[str, Any]]:
    rows = (
        _answers(study, include_pii)
        .order_by("response__participant_id", "response__phase", "question__order")
        .values("response__participant_id", "response__phase", "question__code", "question__kind", "value", "numeric")
    )
    for row in _stream(rows):
        yield {
            "participant_id": hasher("participant", row["response__participant_id"]),
            "phase": row["response__phase"], "question": row["question__code"], "kind": row["question__kind"],
            "value": row["value"], "numeric": row["numeric"],
        }


def _wide_header(study: Study, include_pii: bool) -> list[str]:
    codes = (
        _answers(study, include_pii).values_list("question__code", "question__order").distinct().order_by()
    )
    order: dict[str, int] = {}
    for code, position in codes:
        order[code] = min(position, order.get(code, position))
    header = ["participant_id"]
    for code in sorted(order, key=lambda c: (order[c], c)):
        header += [f"{code}_pre", f"{code}_post"]
    return header


def _answer_wide_rows(study: Study, hasher: Pseudonymizer, include_pii: bool) -> Iterator[dict[str, Any]]:
    rows = _answers(study, include_pii).order_by("response__participant_id").values_list(
        "response__participant_id", "response__phase", "question__code", "value", "numeric"
    )
    current: int | None = None
    row: dict[str, Any] = {}
    for participant_id, phase, code, value, numeric in rows.iterator(chunk_size=CHUNK):
        if participant_id != current:
            if current is not None:
                yield row
            current = participant_id
            row = {"participant_id": hasher("participant", participant_id)}
        row[f"{code}_{phase}"] = numeric if numeric is not None else value
    if current is not None:
        yield row


def _observation_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = _observations(study).order_by("pk").values(
        "episode_id", "external_id", "participant_id", "agent__name", "task__uuid", "task_uuid", "y", "weight",
        "source",
    )
    for row in _stream(rows):
        task_uuid = row["task_uuid"] or row["task__uuid"]
        yield {
            "session_id": session_id(hasher, episode_id=row["episode_id"], external_id=row["external_id"]),
            "participant_id": hasher("participant", row["participant_id"]), "agent": row["agent__name"],
            "task_id": str(task_uuid) if task_uuid else "", "y": row["y"], "weight": row["weight"],
            "source": row["source"],
        }


def _grade_rows(study: Study, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    rows = rating_selectors.active_grades(study).exclude(participant__status__in=EXCLUDED_STATUSES).order_by(
        "episode_id", "grader").values("episode_id", "participant_id", "agent__name", "agent_family", "grader",
                                       "grader_kind", "grader_family", "y")
    for row in _stream(rows):
        grader = row["grader"]
        if row["grader_kind"] == "expert":
            grader = hasher("expert", grader.split(":", 1)[1])
        yield {
            "session_id": session_id(hasher, episode_id=row["episode_id"], external_id=""),
            "participant_id": hasher("participant", row["participant_id"]), "agent": row["agent__name"],
            "agent_family": row["agent_family"], "grader": grader, "grader_kind": row["grader_kind"],
            "grader_family": row["grader_family"], "y": row["y"],
        }


def _rating_rows(snapshot: RatingSnapshot | None, hasher: Pseudonymizer) -> Iterator[dict[str, Any]]:
    if snapshot is None:
        return
    # A snapshot taken before a withdrawal still rates that person; the export leaves them out regardless.
    left_out = Participant.objects.filter(study_id=snapshot.study_id, status__in=EXCLUDED_STATUSES).values("pk")
    rows = rating_selectors.snapshot_rating_rows(snapshot, exclude_participants=left_out).values(
        "entity_kind", "entity_id", "label", "mu", "sigma", "conservative", "n", "rank"
    )
    for row in _stream(rows):
        is_agent = row["entity_kind"] == EntityRating.Kind.AGENT
        entity = row["label"] if is_agent else hasher("participant", row["entity_id"])
        yield {
            "snapshot_version": snapshot.version, "entity_kind": row["entity_kind"], "entity": entity,
            **{key: row[key] for key in ("mu", "sigma", "conservative", "n", "rank")},
        }


def _stability_rows(stability: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    if not stability:
        return
    names = stability.get("agent_names", {})
    for row in stability.get("leaderboard", []):
        low, high = row.get("bootstrap_rank_interval") or (None, None)
        yield {
            "snapshot_version": stability.get("snapshot_version"), "agent": names.get(row["agent_id"], row["agent_id"]),
            "rank": row["rank"], "mu": row["mu"], "sigma": row["sigma"], "conservative": row["conservative"],
            "n": row["n"], "bootstrap_rounds": stability.get("rounds"),
            "bootstrap_mean_rank": row["bootstrap_mean_rank"], "bootstrap_p_rank1": row["bootstrap_p_rank1"],
            "bootstrap_rank_low": low, "bootstrap_rank_high": high,
            "loo_human_mean_rank": row["loo_human_mean_rank"], "loo_task_mean_rank": row.get("loo_task_mean_rank"),
        }


def _pairwise_rows(stability: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    if not stability or not stability.get("pairwise"):
        return
    names = stability.get("agent_names", {})
    ids = stability["pairwise"]["agent_ids"]
    for i, agent in enumerate(ids):
        for j, other in enumerate(ids):
            if i != j:
                yield {
                    "snapshot_version": stability.get("snapshot_version"), "agent": names.get(agent, agent),
                    "other_agent": names.get(other, other), "p_greater": stability["pairwise"]["prob_greater"][i][j],
                }


def study_rating_model(study: Study) -> dict[str, Any]:
    """Return the study's rating model as ``rating.fit.ModelSpec.to_dict()`` (what import_sessions reads)."""
    return study_model_spec(study).to_dict()


def sessions_header(study: Study) -> dict[str, Any]:
    """Return the study_config record that opens sessions.json."""
    return {
        "session_id": "study_config",
        "record_type": HEADER_RECORD_TYPE,
        "autograde_status": "not_a_session",
        "skipped": True,
        "rating_model": study_rating_model(study),
        "score_source": study.score_source,
        "blend_expert_weight": study.blend_expert_weight,
    }


def sessions(study: Study, hasher: Pseudonymizer | None = None) -> Iterator[dict[str, Any]]:
    """Yield the sessions.json records: the study_config record, then one per active observation.

    Each session names its score by what it is (``score_source``); a blended score carries its judge and
    expert components and the weight, so a reader sees that two scales were combined.
    """
    hasher = hasher or Pseudonymizer(study)
    yield sessions_header(study)
    rows = _observations(study).order_by("pk").values_list(
        "episode_id", "external_id", "participant_id", "agent__name", "task__uuid", "task_uuid", "y", "source",
        "episode__auto_score", "episode__expert_score",
    )
    weight = study.blend_expert_weight
    for row in _stream_values(rows):
        episode_id, external_id, participant_id, agent, task_fk_uuid, task_uuid, y, source, auto, expert = row
        task = task_uuid or task_fk_uuid
        kind = source if source in SCORE_FIELDS else "auto"  # legacy imported rows held the judges' score
        record: dict[str, Any] = {
            "session_id": session_id(hasher, episode_id=episode_id, external_id=external_id),
            "agent_id": agent,
            "user_id": hasher("participant", participant_id),
            "task_id": str(task) if task else None,
            "autograde_status": "done",
            "skipped": False,
            "score_source": kind,
            SCORE_FIELDS[kind]: y,
        }
        if kind == "blended" and episode_id is not None:
            record.update(autograde_overall_score=auto, expert_overall_score=expert, blend_expert_weight=weight)
        yield record


def _stream_values(queryset: QuerySet) -> Iterator[tuple[Any, ...]]:
    return queryset.iterator(chunk_size=5000)


def _write_sessions(writer: _Writer, study: Study, hasher: Pseudonymizer) -> int:
    count = 0
    with writer.archive.open(writer.entry("sessions.json"), "w", force_zip64=True) as raw:
        raw.write(b"[")
        for index, session in enumerate(sessions(study, hasher)):
            raw.write((b",\n" if index else b"\n") + json.dumps(session, ensure_ascii=False).encode())
            if index:  # the study_config record is not a session
                count += 1
                writer._tick()
        raw.write(b"\n]\n")
    writer.counts["sessions.json"] = count
    return count


# -------------------------------------------------------------------------------------------- the ZIP


def _row_total(study: Study, include_pii: bool, snapshot: RatingSnapshot | None) -> int:
    """Estimate rows to write (a handful of count queries) so the progress bar has a denominator."""
    episodes = _episodes(study)
    total = _participants(study).count() * (2 if include_pii else 1)
    total += episodes.count()
    total += JudgeRun.objects.filter(episode__in=episodes).count()
    total += CriterionScore.objects.filter(judge_run__episode__in=episodes).count()
    total += ExpertGrade.objects.filter(episode__in=episodes).count()
    total += _transcripts(study).count() * (2 if include_pii else 1)
    total += _process_codings(study).count()
    total += _tom_gold_codes(study).count()
    total += _tom_pairs(study).count()
    total += _judge_comparisons(study).count()
    total += _answers(study, include_pii).count() * 2
    total += _observations(study).count() * 2
    total += rating_selectors.active_grades(study).count()
    if snapshot is not None:
        total += rating_selectors.snapshot_ratings_count(snapshot)
    return total


def _dictionary(writer: _Writer) -> str:
    out = io.StringIO()
    rows = csv_writer(out)
    rows.writerow(["file", "column", "type", "description"])
    for name, description in EXTRA_FILES.items():
        rows.writerow([name, "", "file", description])
    for table in (*TABLES, *SYNERGY_TABLES, *PROCESS_TABLES, *GOLD_TABLES, *PAIR_TABLES, *COMPARISON_TABLES,
                  *JUDGE_COMPARISON_TABLES, *TOM_TABLES):
        if table.file not in writer.headers:
            continue
        rows.writerow([table.file, "", "file", table.description])
        described = {column.name: column for column in table.columns}
        for name in writer.headers[table.file]:
            column = described.get(name)
            if column is not None:
                rows.writerow([table.file, name, column.type, column.description])
            else:  # wide survey columns
                code, _, phase = name.rpartition("_")
                rows.writerow([table.file, name, "number or string", f"Answer to {code} in the {phase} survey."])
    return out.getvalue()


def _readme(study: Study, include_pii: bool, summary: dict[str, Any]) -> str:
    lines = [
        f"CollabSkill study export: {study.name} ({study.slug})",
        f"Exported at {summary['exported_at']} UTC; export format version {FORMAT_VERSION}.",
        "",
        "Identifiers: every participant, episode, expert and grade id is a keyed hash (HMAC-SHA256 of the",
        "raw id with the server's secret and a per-study salt, first 64 bits). The same participant has the",
        "same id in every file and in every export of this study; ids cannot be reversed without the server.",
        "Withdrawn participants and people who did not consent are left out entirely.",
        "",
        (
            "THIS EXPORT CONTAINS IDENTIFYING INFORMATION (identities.csv and free-text columns). Store it "
            "under your data protection plan and delete it when no longer needed."
            if include_pii
            else "No identifying information is included: no emails, names, platform ids or typed free text."
        ),
        "",
        "Scores of individual participants describe one study's tasks with particular agents; they are not",
        "a measure of anyone's job performance and must not be used for employment decisions.",
        "",
        "Files (rows):",
    ]
    for name, count in summary["tables"].items():
        lines.append(f"  {name}: {count}")
    if not summary.get("stability_included"):
        lines.append("")
        lines.append("stability.csv is empty: no stability analysis had been run for the latest posterior.")
    lines.append("")
    lines.append("See data_dictionary.csv for every column.")
    return "\n".join(lines) + "\n"


def build_export(
    study: Study, handle: IO[bytes], *, include_pii: bool = False, progress: Progress | None = None,
    exported_at: datetime | None = None,
) -> dict[str, Any]:
    """Write the study's export ZIP into ``handle`` and return a summary (row counts per file).

    ``exported_at`` (default: now) is the time written in the export and on its members. The members are
    written in a fixed order, group by group (the ZIP is byte-identical for the same data and time).
    """
    stamp = (exported_at or timezone.now()).astimezone(UTC)
    report = progress or (lambda done, total: None)
    hasher = Pseudonymizer(study)
    snapshot = latest_snapshot(study)
    stability = latest_stability(study, snapshot)
    total = _row_total(study, include_pii, snapshot)
    report(0, total)
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        writer = _Writer(archive, include_pii, report, total, stamp)
        _write_people_and_episodes(writer, study, hasher, include_pii)
        _write_grading(writer, study, hasher)
        _write_process_and_costs(writer, study, hasher, include_pii)
        _write_surveys_and_ratings(writer, study, hasher, include_pii, snapshot, stability)
        summary = {
            "exported_at": stamp.isoformat(),
            "format_version": FORMAT_VERSION,
            "snapshot_version": snapshot.version if snapshot else None,
            "stability_included": bool(stability),
            "include_pii": include_pii,
            "tables": dict(writer.counts),
        }
        writer.text("study.json", json.dumps(_study_info(study, snapshot, summary), indent=2,
                                             ensure_ascii=False) + "\n")
        writer.text("data_dictionary.csv", _dictionary(writer))
        writer.text("README.txt", _readme(study, include_pii, summary))
    report(total, total)
    return summary


def _write_people_and_episodes(writer: _Writer, study: Study, hasher: Pseudonymizer, include_pii: bool) -> None:
    """Participants, agents, tasks and episodes, with the synergy (and ToM) tables of a study with solo tasks."""
    writer.table(TABLE_BY_FILE["participants.csv"], _participant_rows(study, hasher))
    if include_pii:
        writer.table(TABLE_BY_FILE["identities.csv"], _identity_rows(study, hasher))
    writer.table(TABLE_BY_FILE["agents.csv"], _agent_rows(study))
    writer.table(TABLE_BY_FILE["tasks.csv"], _task_rows(study))
    writer.table(TABLE_BY_FILE["episodes.csv"], _episode_rows(study, hasher),
                 header=_episode_header(study, include_pii))
    if has_solo_condition(study):
        synergy = finished_synergy_result(study)
        writer.table(TABLE_BY_FILE["synergy_workers.csv"], _synergy_worker_rows(synergy, hasher))
        writer.table(TABLE_BY_FILE["synergy_tasks.csv"], _synergy_task_rows(synergy))
        if study.tom_coding:
            tom = finished_tom_result(study)
            writer.table(TABLE_BY_FILE["tom_workers.csv"], _tom_worker_rows(tom, hasher))
            writer.table(TABLE_BY_FILE["tom_estimates.csv"], _tom_estimate_rows(tom))


def _write_grading(writer: _Writer, study: Study, hasher: Pseudonymizer) -> None:
    """Judge runs, expert grades, comparisons and the codings; the optional tables only where the study has them
    (so a study without them exports exactly what it did before they existed)."""
    writer.table(TABLE_BY_FILE["judge_runs.csv"], _judge_rows(study, hasher))
    writer.table(TABLE_BY_FILE["criterion_scores.csv"], _criterion_rows(study, hasher))
    writer.table(TABLE_BY_FILE["expert_grades.csv"], _expert_grade_rows(study, hasher))
    writer.table(TABLE_BY_FILE["expert_criterion_grades.csv"], _expert_criterion_rows(study, hasher))
    if has_comparisons(study):
        writer.table(TABLE_BY_FILE["comparisons.csv"], _comparison_rows(study, hasher))
        writer.table(TABLE_BY_FILE["comparison_rankings.csv"], _comparison_ranking_rows(study, hasher))
        writer.table(TABLE_BY_FILE["comparison_win_rates.csv"],
                     _comparison_win_rate_rows(finished_preferences_result(study)))
    if _judge_comparisons(study).exists():
        writer.table(TABLE_BY_FILE["judge_comparisons.csv"], _judge_comparison_rows(study, hasher))
    writer.table(TABLE_BY_FILE["fluency_codings.csv"], _fluency_rows(study, hasher))
    if has_process_codings(study):
        writer.table(TABLE_BY_FILE["process_codings.csv"], _process_rows(study, hasher))
    if _tom_gold_codes(study).exists():
        writer.table(TABLE_BY_FILE["tom_gold_codes.csv"], _tom_gold_rows(study, hasher))
    if study.tom_pairwise_pairs > 0 or _tom_pairs(study).exists():
        writer.table(TABLE_BY_FILE["tom_pair_codings.csv"], _tom_pair_rows(study, hasher))


def _write_process_and_costs(writer: _Writer, study: Study, hasher: Pseudonymizer, include_pii: bool) -> None:
    """Transcript measures, per-episode costs and the price table; the transcripts themselves with PII only."""
    writer.table(TABLE_BY_FILE["transcript_metrics.csv"], _transcript_rows(study, hasher))
    writer.table(TABLE_BY_FILE["episode_costs.csv"], _cost_rows(study, hasher))
    writer.table(TABLE_BY_FILE["model_prices.csv"], _price_rows())
    if include_pii:
        _write_transcripts(writer, study, hasher)


def _write_surveys_and_ratings(writer: _Writer, study: Study, hasher: Pseudonymizer, include_pii: bool,
                               snapshot: Any, stability: Any) -> None:
    """Survey answers (long and wide), observations, grades, the rating snapshot, its stability and sessions."""
    writer.table(TABLE_BY_FILE["survey_answers_long.csv"], _answer_long_rows(study, hasher, include_pii))
    writer.table(
        TABLE_BY_FILE["survey_answers_wide.csv"], _answer_wide_rows(study, hasher, include_pii),
        header=_wide_header(study, include_pii),
    )
    writer.table(TABLE_BY_FILE["observations.csv"], _observation_rows(study, hasher))
    writer.table(TABLE_BY_FILE["grades.csv"], _grade_rows(study, hasher))
    writer.table(TABLE_BY_FILE["ratings.csv"], _rating_rows(snapshot, hasher))
    writer.table(TABLE_BY_FILE["stability.csv"], _stability_rows(stability))
    writer.table(TABLE_BY_FILE["stability_pairwise.csv"], _pairwise_rows(stability))
    _write_sessions(writer, study, hasher)


def _study_info(study: Study, snapshot: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """What ``study.json`` says about the study, its rating model and the export itself."""
    paper = study_rating_config(study)
    return {
        "name": study.name,
        "slug": study.slug,
        "is_simulated": study.is_simulated,
        "score_source": study.score_source,
        "blend_expert_weight": study.blend_expert_weight,
        "rating_model": study_rating_model(study),
        "rating_config": {
            "mu0": paper.mu0, "sigma0": paper.sigma0, "beta": paper.beta, "k": paper.k,
        },
        "snapshot_config": snapshot.config if snapshot else None,
        "snapshot_fit": snapshot.fit if snapshot else None,
        "id_scheme": "HMAC-SHA256(secret + per-study salt, '<kind>:<raw id>'), first 16 hex digits, kind prefix "
        "P participant, E episode, X expert, G grade, S imported session",
        **{key: summary[key] for key in ("exported_at", "format_version", "snapshot_version", "include_pii")},
    }
