"""Reads for grading: which rubric grades a task, LLM spend, queues of pending work, audit views."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from grading.costs import Price
from grading.models import (
    EpisodeTranscript,
    FluencyCoding,
    GradingFollowUp,
    JudgeGate,
    JudgeRun,
    LLMUsage,
    ModelPrice,
    ProcessCoding,
    Rubric,
    ToMPairCoding,
)
from grading.prompts import QUALITY_PROMPT_VERSION, TOM_PROMPT_VERSION
from grading.transcripts.detect import detect_log_format
from grading.transcripts.effort import edit_ratio
from grading.transcripts.model import Format
from grading.transcripts.process_view import worker_prompts
from grading.transcripts.version import PARSER_VERSION, files_fingerprint
from studies.log_sources import LogFormat, agent_log_source
from studies.models import Episode, EpisodeFile, Participant, SoloRun, Study, TaskInstance


def rubric_for_grading(task: TaskInstance) -> Rubric | None:
    """Return the latest approved rubric, else the latest auto-generated draft, else None (generate one)."""
    approved = task.rubrics.filter(status=Rubric.Status.APPROVED).order_by("-version").first()
    if approved is not None:
        return approved
    return (task.rubrics.filter(status=Rubric.Status.DRAFT, origin=Rubric.Origin.AUTO)
            .order_by("-version").first())


def rubric_generating(task: TaskInstance) -> Rubric | None:
    """Return a rubric version being generated right now (not yet stale), if any."""
    return task.rubrics.filter(status=Rubric.Status.GENERATING, lease_expires_at__gte=timezone.now()).first()


def study_llm_spend(study: Study) -> Decimal:
    """Return the study's LLM spend in USD over every recorded call (rubrics, judges, log coding)."""
    total = LLMUsage.objects.filter(study=study).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal("0")


def studies_over_budget() -> list[tuple[Study, Decimal]]:
    """Return capped studies whose spend reached the cap, with the spend, for warnings."""
    spend_by_study = dict(LLMUsage.objects.filter(study__llm_budget_usd__isnull=False)
                          .values_list("study_id").annotate(total=Sum("cost_usd")))
    over = []
    for study in Study.objects.filter(llm_budget_usd__isnull=False).order_by("name"):
        spend = spend_by_study.get(study.pk) or Decimal("0")
        if study.llm_budget_usd is not None and spend >= study.llm_budget_usd:
            over.append((study, spend))
    return over


def _live_lease(subject: str) -> Exists:
    """A judge call in flight (RUNNING under a live lease) or a task retry scheduled for a QUEUED run."""
    return Exists(JudgeRun.objects.filter(**{subject: OuterRef("pk")},
                                          status__in=[JudgeRun.Status.RUNNING, JudgeRun.Status.QUEUED],
                                          lease_expires_at__gte=timezone.now()))


def episodes_pending_grading(*, quiet_for: float = 0.0, waiting_quiet_for: float = 0.0) -> QuerySet[Episode]:
    """Episodes grading owes work: submitted (incl. waiting) or grading, with no judge call under a live lease and
    no task retry scheduled (a QUEUED run held until the retry is due).

    `quiet_for` skips episodes touched in the last so many seconds (a message for them is probably on its way);
    waiting ones (a note says why: no key, budget) use the longer `waiting_quiet_for`.
    """
    now = timezone.now()
    recent = now - timedelta(seconds=quiet_for)
    waiting_recent = now - timedelta(seconds=waiting_quiet_for)
    due = (Q(status=Episode.Status.SUBMITTED, grading_note="", updated_at__lte=recent)
           | Q(status=Episode.Status.SUBMITTED, updated_at__lte=waiting_recent) & ~Q(grading_note="")
           | Q(status=Episode.Status.GRADING, updated_at__lte=recent))
    # A judge waiting for its provider is sent again by the provider probe (episodes_waiting_for_providers) as
    # soon as the provider answers, not at the waiting cadence, which would pay a retry round while it is down.
    outage = Exists(JudgeRun.objects.filter(episode=OuterRef("pk"), status=JudgeRun.Status.WAITING,
                                            error__startswith=PROVIDER_DOWN))
    return (Episode.objects.filter(due).filter(~_live_lease("episode"))
            .filter(~(Q(status=Episode.Status.SUBMITTED) & outage))
            .exclude(participant__status=Participant.Status.WITHDRAWN)
            .order_by("submitted_at", "pk"))


HELD_MARK = "Held out of the rating"
# A WAITING run's error starts with this when its provider kept failing (5xx, 429, timeouts) through every task
# attempt: the run waits for the provider to answer again instead of failing (docs/grading-reliability.md).
PROVIDER_DOWN = "Waiting for the provider to answer again"
# The note of a submission no judge could score because every provider kept failing (it waits, not failed).
PROVIDER_WAIT_MARK = "Waiting for the judge providers"


def episodes_waiting_for_providers(*, quiet_for: float, limit: int) -> dict[int, set[tuple[str, str]]]:
    """Submitted episodes with a judge waiting for its provider (held or waiting), with those judges.

    Only episodes untouched for `quiet_for` seconds with no judge call in flight or task retry scheduled: a
    grading message sent for them is probably on its way.
    """
    quiet = timezone.now() - timedelta(seconds=quiet_for)
    runs = (JudgeRun.objects.filter(status=JudgeRun.Status.WAITING, error__startswith=PROVIDER_DOWN,
                                    episode__status=Episode.Status.SUBMITTED, episode__updated_at__lte=quiet)
            .exclude(episode__participant__status=Participant.Status.WITHDRAWN)
            .filter(~Exists(JudgeRun.objects.filter(episode=OuterRef("episode"),
                                                    status__in=[JudgeRun.Status.RUNNING, JudgeRun.Status.QUEUED],
                                                    lease_expires_at__gte=timezone.now())))
            .order_by("episode_id").values_list("episode_id", "provider", "model"))
    waiting: dict[int, set[tuple[str, str]]] = {}
    for episode_id, provider, model in runs.iterator():
        if episode_id not in waiting and len(waiting) >= limit:
            break
        waiting.setdefault(episode_id, set()).add((provider, model))
    return waiting


def episodes_held(study: Study) -> QuerySet[Episode]:
    """Episodes a partial judge panel holds out of the rating (study policy 'hold'); the note says why."""
    return (Episode.objects.filter(study=study, grading_note__contains=HELD_MARK)
            .filter(status__in=[Episode.Status.SUBMITTED, Episode.Status.GRADED]).order_by("submitted_at", "pk"))


def episodes_pending_log_coding() -> QuerySet[Episode]:
    """Submitted or graded episodes without a current log coding."""
    coded = FluencyCoding.objects.filter(episode=OuterRef("pk"), is_current=True)
    return (Episode.objects.filter(status__in=[Episode.Status.SUBMITTED, Episode.Status.GRADING,
                                               Episode.Status.GRADED])
            .exclude(participant__status=Participant.Status.WITHDRAWN)
            .filter(~Exists(coded)).order_by("pk"))


def episodes_owing_transcript(*, settled_before: datetime, recent_since: datetime, limit: int) -> list[int]:
    """Return episodes whose stored transcript does not match their log files (a parse message was lost).

    Only files uploaded before `settled_before` count (a fresher upload's own message is on its way).
    Indexed queries find a missing transcript, an older parser version or a file uploaded after the parse;
    episodes whose files can still change (open, or submitted since `recent_since`) are also compared by
    fingerprint, which catches a removed file and an upload racing an earlier parse.
    """
    logs = EpisodeFile.objects.filter(episode=OuterRef("pk"), kind=EpisodeFile.Kind.LOG)
    episodes = (Episode.objects.exclude(participant__status=Participant.Status.WITHDRAWN)
                .filter(~Exists(logs.filter(uploaded_at__gt=settled_before))))
    stale = (~Exists(EpisodeTranscript.objects.filter(episode=OuterRef("pk")))
             | Exists(EpisodeTranscript.objects.filter(episode=OuterRef("pk")).exclude(parser_version=PARSER_VERSION))
             | Exists(logs.filter(uploaded_at__gt=OuterRef("transcript__parsed_at"))))
    owing = list(episodes.filter(Exists(logs)).filter(stale).order_by("pk").values_list("pk", flat=True)[:limit])
    changing = (episodes.filter(Q(status__in=[Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS])
                                | Q(submitted_at__gte=recent_since))
                .filter(Exists(logs) | Exists(EpisodeTranscript.objects.filter(episode=OuterRef("pk"))))
                .exclude(pk__in=owing).order_by("-pk")[:limit])
    stored = dict(EpisodeTranscript.objects.filter(episode__in=changing).values_list("episode_id", "files_fingerprint"))
    files: dict[int, list[tuple[str, str]]] = {}
    for episode_id, name, sha256 in EpisodeFile.objects.filter(episode__in=changing, kind=EpisodeFile.Kind.LOG) \
            .values_list("episode_id", "name", "sha256"):
        files.setdefault(episode_id, []).append((name, sha256))
    for episode_id in changing.values_list("pk", flat=True):
        if stored.get(episode_id) != files_fingerprint(files.get(episode_id, ())):
            owing.append(episode_id)
    return owing[:limit]


def solo_runs_pending_grading() -> QuerySet[SoloRun]:
    """Solo runs submitted, or grading with no judge call under a live lease."""
    return SoloRun.objects.filter(Q(status=Episode.Status.SUBMITTED) | Q(status=Episode.Status.GRADING)).filter(
        ~_live_lease("solo_run")).order_by("pk")


def current_judge_runs(episode: Episode) -> QuerySet[JudgeRun]:
    """The judge runs that make up the episode's current auto score, with their criterion scores."""
    return (episode.judge_runs.filter(is_current=True).select_related("rubric")
            .prefetch_related("criterion_scores__criterion").order_by("provider", "model"))


def current_fluency_coding(episode: Episode) -> FluencyCoding | None:
    return episode.fluency_codings.filter(is_current=True).order_by("-created_at").first()


def episodes_with_outdated_scores(study: Study | None = None) -> list[int]:
    """Graded episodes whose current judge runs differ from what grading would use now.

    "Now" means the task's rubric for grading, the study's judge list (as the participant's consent allows)
    and the current judge prompt version; a new approved rubric, judge model or prompt makes scores outdated.
    """
    from grading.consent import judges_allowed
    from grading.prompts import JUDGE_PROMPT_VERSION
    from grading.providers import study_judges

    episodes = (Episode.objects.filter(status=Episode.Status.GRADED)
                .exclude(participant__status=Participant.Status.WITHDRAWN)
                .select_related("study", "task", "participant__consent_version").order_by("pk"))
    if study is not None:
        episodes = episodes.filter(study=study)
    rubrics: dict[int, Rubric | None] = {}
    judges: dict[int, list] = {}
    current: dict[int, set[tuple]] = {}
    for run in JudgeRun.objects.filter(episode__in=episodes, is_current=True).values_list(
            "episode_id", "rubric_id", "provider", "model", "prompt_version"):
        current.setdefault(run[0], set()).add(run[1:])
    outdated = []
    for episode in episodes:
        if episode.task_id not in rubrics:
            rubrics[episode.task_id] = rubric_for_grading(episode.task)
        if episode.study_id not in judges:
            judges[episode.study_id] = study_judges(episode.study)
        rubric = rubrics[episode.task_id]
        if rubric is None:
            continue
        allowed = judges_allowed(participant=episode.participant, judges=judges[episode.study_id]).allowed
        expected = {(rubric.pk, j.provider, j.model, JUDGE_PROMPT_VERSION) for j in allowed}
        if expected and current.get(episode.pk, set()) != expected:
            outdated.append(episode.pk)
    return outdated


_CLI_FORMATS = frozenset({Format.CLAUDE_CODE, Format.CODEX, Format.GEMINI})


def log_format_warning(*, expected: str | None, found: Format, agent_name: str) -> str:
    """Return what a worker should know when a log file is not the agent's own session file ("" if it is).

    A warning, never a refusal: the worker may have good reasons, and the study team reads any log.
    """
    if not expected or found in (Format.SCREENSHOT, expected):
        return ""
    wanted = LogFormat(expected).label if expected in LogFormat.values else expected
    if found in _CLI_FORMATS:
        looks_like = f"This looks like a {LogFormat(str(found)).label}, but this task's agent is {agent_name}"
        if expected in _CLI_FORMATS:
            return (f"{looks_like}, which writes a {wanted}. If you worked with {agent_name}, please upload its "
                    "session file instead (see “Which file to upload”); you can still submit as it is.")
        # An agent that writes no session file: say what stands in for one (screenshots or terminal text).
        instead = "screenshots of your work" if expected == LogFormat.SCREENSHOT else "a copy of the terminal text"
        return (f"{looks_like}, which saves no session file. If you worked with {agent_name}, please upload "
                f"{instead} instead (see “Which file to upload”); you can still submit as it is.")
    if expected not in _CLI_FORMATS:
        return ""
    if found is Format.TERMINAL:
        return (f"This is plain text, not the {wanted} {agent_name} saves. That file shows the whole "
                "collaboration, so please add it if you can; you can still submit as it is.")
    return (f"We could not recognise this file as a {wanted}. Please check that it is the session file "
            f"{agent_name} saved for this task; you can still submit as it is.")


# What a recognised session file is called in the worker's confirmation ("Claude Code session: 14 prompts").
_SESSION_NAMES = {Format.CLAUDE_CODE: "Claude Code session", Format.CODEX: "Codex CLI session",
                  Format.GEMINI: "Gemini CLI saved chat", Format.TERMINAL: "Terminal transcript"}


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def log_format_confirmation(*, expected: str | None, found: Format, report: dict | None) -> str:
    """Return the worker's confirmation that a log file is the agent's session file, with what it holds ("" if
    the file is not one to confirm).

    ``report`` is the file's stored parse report; ``None`` while the parse is on its way (the file was recognised
    from its first bytes), and the confirmation then says the counts follow. Terminal text is confirmed only where
    the agent's log is terminal text: any plain text file reads as one.
    """
    if found not in _SESSION_NAMES or (found is Format.TERMINAL and expected != Format.TERMINAL):
        return ""
    if expected and found != expected:
        return ""  # someone else's session file: the warning speaks
    name = _SESSION_NAMES[found]
    if report is None:
        return (f"Recognised as a {LogFormat(str(found)).label}. Its prompts are being counted; reload the page in "
                "a minute to see them.")
    if report.get("status") not in ("parsed", "partial"):
        return ""
    prompts = _counted(int(report.get("user_prompts") or 0), "prompt")
    if found is Format.TERMINAL:
        text = f"{name}: {prompts} found in the text."
    else:
        text = f"{name}: {prompts}, {_counted(int(report.get('tool_calls') or 0), 'tool call')}."
    if bad := int(report.get("bad_lines") or 0):
        # Broken lines are the worker's to know (a file cut short, edited); record types this parser does not know
        # yet are ours, and are not mentioned.
        text += f" {_counted(bad, 'line')} could not be read; the rest is kept."
    return text


@dataclass(frozen=True)
class LogFileNote:
    """What the task page tells the worker about one uploaded log file."""

    text: str
    warning: bool  # True: not the agent's session file (said, never refused); False: recognised


def episode_log_file_notes(episode: Episode, files: Iterable[EpisodeFile]) -> dict[int, LogFileNote]:
    """Return per log file of the episode a warning when it is not the task's agent's session file, or a
    confirmation with its prompts and tool calls when it is.

    The parsed transcript answers when it matches the current files; a file uploaded since (its parse
    message still on its way) is recognised from its first bytes, so the note shows at once.
    """
    logs = [f for f in files if f.kind == EpisodeFile.Kind.LOG]
    if not logs:
        return {}
    source = agent_log_source(episode.agent) if episode.agent else None
    expected = source.format if source else None
    agent_name = episode.agent.name if episode.agent else ""
    transcript = EpisodeTranscript.objects.filter(episode=episode).values("files_fingerprint", "files").first()
    reports: dict[str, dict] = {}
    if transcript and transcript["files_fingerprint"] == files_fingerprint((f.name, f.sha256) for f in logs):
        reports = {str(r.get("name")): r for r in transcript["files"] or ()}
    notes = {}
    for f in logs:
        report = reports.get(f.name)
        if report is not None:
            found = next((fmt for fmt in Format if fmt == report.get("format")), Format.UNKNOWN)
        else:
            try:
                with f.file.storage.open(f.file.name, "rb") as handle:
                    found = detect_log_format(handle, f.size)
            except OSError:
                continue
        if warning := log_format_warning(expected=expected, found=found, agent_name=agent_name):
            notes[f.pk] = LogFileNote(warning, warning=True)
        elif confirmation := log_format_confirmation(expected=expected, found=found, report=report):
            notes[f.pk] = LogFileNote(confirmation, warning=False)
    return notes


def episode_log_format_warnings(episode: Episode, files: Iterable[EpisodeFile]) -> dict[int, str]:
    """Return per log file of the episode a warning when it is not the task's agent's session file."""
    return {pk: note.text for pk, note in episode_log_file_notes(episode, files).items() if note.warning}


def judge_gates(study: Study) -> dict[tuple[str, str], JudgeGate]:
    """The study's stored gate verdicts by (judge "provider/model", rubric category)."""
    return {(g.judge, g.category): g for g in JudgeGate.objects.filter(study=study)}


# ----------------------------------------------------------------------------------- process codings (ToM)

#: Instrument code -> the version its codings are current under now.
PROCESS_VERSIONS: dict[str, str] = {ProcessCoding.Instrument.TOM: TOM_PROMPT_VERSION,
                                    ProcessCoding.Instrument.RESPONSE_QUALITY: QUALITY_PROMPT_VERSION}
PROCESS_DONE = (ProcessCoding.Status.SUCCEEDED, ProcessCoding.Status.NOT_CODED, ProcessCoding.Status.FAILED)
CODABLE_STATUSES = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED)
GAVE_UP = "gave up"


def process_coding_done(*, episode_id: int, instrument: str, provider: str, model: str) -> ProcessCoding | None:
    """The current coding of this judge under the instrument's current version, if one is stored (any outcome)."""
    return ProcessCoding.objects.filter(
        episode_id=episode_id, instrument=instrument, provider=provider, model=model, is_current=True,
        prompt_version=PROCESS_VERSIONS[instrument], status__in=PROCESS_DONE).first()


def process_codings_missing(*, episode_id: int, coders: Sequence[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(instrument, provider, model) of every coding the episode still owes its study's two judges."""
    done = set(ProcessCoding.objects.filter(episode_id=episode_id, is_current=True, status__in=PROCESS_DONE)
               .values_list("instrument", "provider", "model", "prompt_version"))
    return [(instrument, provider, model) for instrument, version in PROCESS_VERSIONS.items()
            for provider, model in coders if (instrument, provider, model, version) not in done]


def process_coding_in_flight(episode_id: int) -> bool:
    """True while a worker holds a live claim on one of the episode's process codings."""
    return ProcessCoding.objects.filter(episode_id=episode_id, status=ProcessCoding.Status.RUNNING,
                                        lease_expires_at__gte=timezone.now()).exists()


def episodes_owing_process_coding(study: Study, coders: Sequence[tuple[str, str]], *, limit: int,
                                  with_follow_up: bool = False) -> list[int]:
    """Codable episodes of a ToM-coding study that lack a current coding of some instrument by some judge (episodes
    with a current simulated coding are not owed one).

    Unless `with_follow_up`, episodes with an open process follow-up (already on their way) or one the sweep gave
    up on (staff re-run those with `manage.py code_processes`) are left out, so the sweep opens one row each.
    """
    episodes = (Episode.objects.filter(study=study, status__in=CODABLE_STATUSES)
                .exclude(participant__status=Participant.Status.WITHDRAWN))
    complete = Q()
    for instrument, version in PROCESS_VERSIONS.items():
        for provider, model in coders:
            complete &= Q(Exists(ProcessCoding.objects.filter(
                episode=OuterRef("pk"), instrument=instrument, provider=provider, model=model, is_current=True,
                prompt_version=version, status__in=PROCESS_DONE)))
    # An episode carrying simulated codings (the demo's) has no log behind them: a judge would only replace them
    # with "not coded" rows. Staff can still code it explicitly with `manage.py code_processes --episode`.
    simulated = ProcessCoding.objects.filter(episode=OuterRef("pk"), is_current=True, is_simulated=True)
    owing = episodes.exclude(complete).exclude(Exists(simulated))
    if not with_follow_up:
        rows = GradingFollowUp.objects.filter(episode=OuterRef("pk"), kind=GradingFollowUp.Kind.PROCESS)
        owing = owing.exclude(Exists(rows.filter(done_at__isnull=True))).exclude(
            Exists(rows.filter(note__startswith=GAVE_UP)))
    return list(owing.order_by("pk").values_list("pk", flat=True)[:limit])


@dataclass(frozen=True)
class JudgeCode:
    """One judge's current coding of one instrument: its score (None unless succeeded) and how it was reached."""

    provider: str
    model: str
    family: str
    prompt_version: str
    status: str
    score: int | None
    markers: tuple[str, ...] = ()
    reason: str = ""
    is_simulated: bool = False


@dataclass(frozen=True)
class EpisodeProcessCodes:
    """Plain data for the ToM analysis: one episode, its worker and condition, its codes and effort measures.

    `tom` and `response_quality` map "provider/model" to that judge's current coding. Effort: `worker_turns`
    (the worker's prompts), `worker_chars` (characters the worker wrote), `edit_ratio` (normalised edit distance
    of the prompts from the task's text, :mod:`grading.transcripts.effort`; None when the worker wrote nothing or
    no log was parsed). `effort_simulated`: the effort was drawn for a simulated episode without a parsed log
    (the demo's `SimulatedEffort`), not read from a log.
    """

    episode_id: int
    worker_id: int
    condition: str
    agent: str
    task_id: int
    score: float | None
    worker_turns: int | None
    worker_chars: int | None
    edit_ratio: float | None
    tom: dict[str, JudgeCode] = field(default_factory=dict)
    response_quality: dict[str, JudgeCode] = field(default_factory=dict)
    effort_simulated: bool = False


def _edit_ratio(transcript: EpisodeTranscript | None, question: str) -> float | None:
    return edit_ratio(worker_prompts(transcript.files), question) if transcript else None


def _effort(episode: Episode) -> tuple[int | None, int | None, float | None, bool]:
    """(turns, characters, edit ratio, simulated): from the parsed log; for a simulated episode without parsed
    measures, its simulated draw; a real episode's simulated row (never written by the service) is ignored."""
    transcript = getattr(episode, "transcript", None)
    drawn = getattr(episode, "simulated_effort", None) if episode.is_simulated else None
    if drawn is not None and (transcript is None or transcript.user_prompts is None):
        return drawn.worker_turns, drawn.worker_chars, drawn.edit_ratio, True
    if transcript is None:
        return None, None, None, False
    return transcript.user_prompts, transcript.user_chars, _edit_ratio(transcript, episode.task.prompt), False


def study_process_codes(study_id: int) -> list[EpisodeProcessCodes]:
    """Every episode of the study with its current ToM and response-quality codes per judge (two queries).

    Withdrawn participants are left out; episodes without any coding are included with empty code maps, so the
    caller sees what is missing. Solo episodes carry their condition "solo" (no agent turns to code).
    """
    episodes = (Episode.objects.filter(study_id=study_id).exclude(participant__status=Participant.Status.WITHDRAWN)
                .select_related("agent", "transcript", "task", "simulated_effort").order_by("pk"))
    codes: dict[int, dict[str, dict[str, JudgeCode]]] = {}
    rows = ProcessCoding.objects.filter(episode__study_id=study_id, is_current=True).order_by("provider", "model")
    for row in rows:
        code = JudgeCode(provider=row.provider, model=row.model, family=row.family, prompt_version=row.prompt_version,
                         status=row.status, score=row.score, markers=tuple(row.markers or ()), reason=row.reason,
                         is_simulated=row.is_simulated)
        codes.setdefault(row.episode_id, {}).setdefault(row.instrument, {})[f"{row.provider}/{row.model}"] = code
    out = []
    for episode in episodes:
        found = codes.get(episode.pk, {})
        turns, chars, ratio, simulated = _effort(episode)
        out.append(EpisodeProcessCodes(
            episode_id=episode.pk, worker_id=episode.participant_id,
            condition=episode.condition,
            agent=episode.agent.name if episode.agent is not None else "", task_id=episode.task_id,
            score=episode.score, worker_turns=turns, worker_chars=chars, edit_ratio=ratio,
            tom=found.get(ProcessCoding.Instrument.TOM, {}),
            response_quality=found.get(ProcessCoding.Instrument.RESPONSE_QUALITY, {}), effort_simulated=simulated))
    return out


# ------------------------------------------------------------------------------------------ pairwise ToM


def tom_pair_population(study_id: int) -> list[int]:
    """Episodes of the study with a succeeded current ToM coding (their worker prompts exist and were coded)."""
    return list(Episode.objects.filter(study_id=study_id, status__in=CODABLE_STATUSES)
                .exclude(participant__status=Participant.Status.WITHDRAWN)
                .filter(Exists(ProcessCoding.objects.filter(episode=OuterRef("pk"), instrument="tom",
                                                            is_current=True, status=ProcessCoding.Status.SUCCEEDED)))
                .order_by("pk").values_list("pk", flat=True))


def tom_pair_done(**key: Any) -> ToMPairCoding | None:
    """The stored comparison for this pair, order, judge and version (succeeded or failed), if any."""
    return ToMPairCoding.objects.filter(**key).exclude(status=ToMPairCoding.Status.RUNNING).first()


@dataclass(frozen=True)
class PairComparison:
    """One judge's pairwise ToM comparison in one order: `winner` is "a", "b" or "tie" (episode_a < episode_b);
    `shown_choice` is what the judge answered ("A" is the episode shown first: a for order "ab", b for "ba")."""

    episode_a: int
    episode_b: int
    order: str
    provider: str
    model: str
    family: str
    prompt_version: str
    shown_choice: str
    winner: str


def study_tom_pair_results(study_id: int) -> list[PairComparison]:
    """Every succeeded pairwise ToM comparison of the study, as plain data for the stats module (one query)."""
    rows = (ToMPairCoding.objects.filter(study_id=study_id, status=ToMPairCoding.Status.SUCCEEDED)
            .order_by("episode_a_id", "episode_b_id", "order", "provider", "model"))
    return [PairComparison(episode_a=r.episode_a_id, episode_b=r.episode_b_id, order=r.order, provider=r.provider,
                           model=r.model, family=r.family, prompt_version=r.prompt_version,
                           shown_choice=r.shown_choice, winner=r.winner) for r in rows]


def price_table() -> list[Price]:
    """Return every row of the price table as plain values for the pricing arithmetic."""
    return [Price(model=p.model, effective_from=p.effective_from, input=p.input_per_million,
                  cache_read=p.cache_read_per_million, cache_write=p.cache_write_per_million,
                  output=p.output_per_million, id=p.pk, source=p.source) for p in ModelPrice.objects.all()]
