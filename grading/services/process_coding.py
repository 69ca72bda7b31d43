"""Code an episode's parsed log for theory of mind (the worker's prompts) and response quality (the agent's turns).

Each instrument is coded by the study's two judges of different model families (`providers.tom_coders`), one
coding per episode x instrument version x judge. Exactly once under faults: a coding is claimed as a RUNNING row
with a lease (renewed while the paid call is in flight) under the episode's row lock, so a duplicate message finds
it in flight, a killed worker's claim lapses and is taken over, and a slow worker whose claim was taken over does
not store a second coding (its cost is still recorded: it was paid). An episode without a parsable log gets a
"not coded" row with the reason, never a score.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel

from grading import llm
from grading.conf import grading_settings
from grading.consent import consent_refusal
from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable, RetryLater
from grading.models import EpisodeTranscript, GradingFollowUp, LLMUsage, ProcessCoding
from grading.prompts import RenderedPrompt, render_quality_prompt, render_tom_prompt
from grading.providers import JudgeSpec, not_configured_note, provider_config, provider_configured, tom_coders
from grading.schemas import ResponseQualityOut, ToMOut, one_line
from grading.selectors import CODABLE_STATUSES, PROCESS_VERSIONS, process_coding_done, process_codings_missing
from grading.services import claims
from grading.services.budget import budget_ensure_available, llm_usage_record
from grading.services.follow_ups import follow_ups_close
from grading.services.judging import lease_seconds
from grading.services.leases import LeaseKeeper
from grading.services.transcripts import episode_transcript_build
from grading.transcripts.process_view import bounded, dialogue, worker_prompts
from studies.models import Episode, Participant

logger = logging.getLogger(__name__)

Status = ProcessCoding.Status
INSTRUMENTS: tuple[str, ...] = tuple(PROCESS_VERSIONS)


@dataclass(frozen=True)
class _Instrument:
    code: str
    purpose: str
    schema: type[BaseModel]


_SPECS = {
    ProcessCoding.Instrument.TOM: _Instrument(ProcessCoding.Instrument.TOM, LLMUsage.Purpose.TOM, ToMOut),
    ProcessCoding.Instrument.RESPONSE_QUALITY: _Instrument(ProcessCoding.Instrument.RESPONSE_QUALITY,
                                                           LLMUsage.Purpose.RESPONSE_QUALITY, ResponseQualityOut),
}


def study_tom_coders(study: Any) -> tuple[JudgeSpec, JudgeSpec]:
    """The study's judge pair; a misconfigured pair waits with the reason (staff fix it, then run the command)."""
    try:
        return tom_coders(study)
    except ImproperlyConfigured as exc:
        raise GradingWaiting(f"ToM coding is not configured: {exc}") from exc


# ------------------------------------------------------------------------------------------ what is read


def _unreadable_reason(episode: Episode, transcript: EpisodeTranscript) -> str | None:
    """Why the log has no parsed text to code (None when a file was parsed)."""
    # The link itself is the participant's data (exports hold it only with identifying information): not named.
    link = " The worker shared a session link; it is recorded but not fetched." if episode.share_url else ""
    if transcript.status == EpisodeTranscript.Status.NO_LOG:
        return "No collaboration log file was uploaded." + link
    if transcript.status == EpisodeTranscript.Status.SCREENSHOTS_ONLY:
        return "Only screenshots of the session were uploaded; there is no parsed text of the worker's prompts." + link
    if transcript.status == EpisodeTranscript.Status.UNREADABLE:
        problems = "; ".join(f"{f['name']}: {f.get('note') or 'no readable content'}" for f in transcript.files)
        return f"No log file could be parsed ({problems})." + link
    return None


def _prompt(instrument: str, episode: Episode, transcript: EpisodeTranscript) -> tuple[RenderedPrompt | None, str]:
    """The instrument's prompt for this log, or (None, why it cannot be coded)."""
    if (reason := _unreadable_reason(episode, transcript)) is not None:
        return None, reason
    budget = int(grading_settings()["EXTRACT_MAX_CHARS"])
    if instrument == ProcessCoding.Instrument.TOM:
        prompts = worker_prompts(transcript.files)
        if not prompts:
            return None, "The parsed log holds no message typed by the worker."
        kept, cut = bounded(prompts, budget)
        return render_tom_prompt(prompts=kept, truncated=cut or transcript.truncated), ""
    turns = dialogue(transcript.files)
    if not any(speaker == "AGENT" for speaker, _ in turns):
        return None, "The parsed log holds no reply from the agent."
    texts, cut = bounded([text for _, text in turns], budget)
    return render_quality_prompt(turns=list(zip((s for s, _ in turns), texts, strict=False)),
                                 truncated=cut or transcript.truncated), ""


# ------------------------------------------------------------------------------------------------ writes


def _key(episode: Episode, instrument: str, spec: JudgeSpec) -> dict[str, Any]:
    return {"episode": episode, "instrument": instrument, "provider": spec.provider, "model": spec.model}


def _lock(episode: Episode) -> None:
    Episode.objects.select_for_update().filter(pk=episode.pk).first()


def _store_outcome(episode: Episode, instrument: str, spec: JudgeSpec, *, force: bool, status: str,
                   error: str) -> ProcessCoding:
    """Store a coding that needed no call (not coded, consent refused) as current, unless one is stored."""
    with transaction.atomic():
        _lock(episode)
        if not force and (done := process_coding_done(episode_id=episode.pk, instrument=instrument,
                                                      provider=spec.provider, model=spec.model)) is not None:
            return done
        ProcessCoding.objects.filter(**_key(episode, instrument, spec), is_current=True).update(is_current=False)
        return ProcessCoding.objects.create(**_key(episode, instrument, spec), family=spec.family, status=status,
                                            prompt_version=PROCESS_VERSIONS[instrument], error=error[:4000],
                                            is_current=True, finished_at=timezone.now())


def _claim(episode: Episode, instrument: str, spec: JudgeSpec, *, force: bool) -> ProcessCoding:
    """Return a stored coding (nothing to do) or a RUNNING row this worker now holds; CodingInFlight if held."""
    with transaction.atomic():
        _lock(episode)
        if not force and (done := process_coding_done(episode_id=episode.pk, instrument=instrument,
                                                      provider=spec.provider, model=spec.model)) is not None:
            return done
        version = PROCESS_VERSIONS[instrument]
        return claims.running_claim(
            ProcessCoding, _key(episode, instrument, spec), create={"family": spec.family, "prompt_version": version},
            take_over={"prompt_version": version},
            in_flight=f"episode {episode.pk}: its {instrument} coding by {spec.label} is in flight")


def _renew(row_id: int, token: str) -> int:
    return claims.lease_renew(ProcessCoding, row_id, token)


def _release(row: ProcessCoding, token: str, *, purpose: str, responses: Sequence[llm.LLMResponse]) -> None:
    """Give the claim back for a retry (the row stays RUNNING with no lease); record what was paid."""
    with transaction.atomic():
        llm_usage_record(study=row.episode.study, purpose=purpose, prompt_version=row.prompt_version,
                         responses=responses, accepted_last=False)
        claims.lease_drop(ProcessCoding, row.pk, token)


def _finish(row: ProcessCoding, token: str, *, purpose: str, responses: Sequence[llm.LLMResponse],
            accepted: bool, **fields: Any) -> ProcessCoding:
    """Record the paid replies and, if this worker still holds the claim, make the row the current coding."""
    episode = row.episode
    with transaction.atomic():
        _lock(episode)
        cost = llm_usage_record(study=episode.study, purpose=purpose, prompt_version=row.prompt_version,
                                responses=responses, accepted_last=accepted)
        if not claims.claim_held(ProcessCoding, row.pk, token):
            logger.warning("process coding %s was taken over while its call ran; this reply is not stored", row.pk)
            return ProcessCoding.objects.get(pk=row.pk)
        ProcessCoding.objects.filter(episode=episode, instrument=row.instrument, provider=row.provider,
                                     model=row.model, is_current=True).update(is_current=False)
        ProcessCoding.objects.filter(pk=row.pk).update(is_current=True, claim="", lease_expires_at=None,
                                                       finished_at=timezone.now(), cost_usd=cost, **fields)
    row.refresh_from_db()
    return row


def _call(row: ProcessCoding, spec: JudgeSpec, prompt: RenderedPrompt, *, final_attempt: bool) -> ProcessCoding:
    """Make the paid call under the claim's lease and store its outcome."""
    instrument = _SPECS[ProcessCoding.Instrument(row.instrument)]
    token = row.claim
    try:
        with LeaseKeeper(lambda: _renew(row.pk, token), lease_seconds() / 3):
            out, responses = llm.complete_json(
                provider_config(spec), system=prompt.system, user_text=prompt.user, schema=instrument.schema,
                repair_attempts=int(grading_settings()["JUDGE_REPAIR_ATTEMPTS"]), max_tokens=2048)
    except llm.LLMError as exc:
        if isinstance(exc, llm.LLMNotConfigured) or (exc.retryable and not final_attempt):
            _release(row, token, purpose=instrument.purpose, responses=exc.responses)
            if isinstance(exc, llm.LLMNotConfigured):
                raise GradingWaiting(exc.reason) from exc
            raise RetryLater(f"episode {row.episode_id} {row.instrument} coding: {exc.reason}") from exc
        logger.warning("%s coding of episode %s by %s failed: %s", row.instrument, row.episode_id, spec.label,
                       exc.reason)
        return _finish(row, token, purpose=instrument.purpose, responses=exc.responses, accepted=False,
                       status=Status.FAILED, error=exc.reason[:4000])
    except BaseException:  # a time limit or shutdown: the next message takes the claim over at once
        claims.lease_drop(ProcessCoding, row.pk, token)
        raise
    markers = sorted(set(getattr(out, "markers", ())))
    scored = cast(ToMOut | ResponseQualityOut, out)  # the instrument's own schema validated the reply
    return _finish(row, token, purpose=instrument.purpose, responses=responses, accepted=True,
                   status=Status.SUCCEEDED, score=scored.score, markers=markers, reason=one_line(scored.reason, 1500))


def _code_one(episode: Episode, transcript: EpisodeTranscript, instrument: str, spec: JudgeSpec, *, force: bool,
              final_attempt: bool) -> ProcessCoding:
    prompt, reason = _prompt(instrument, episode, transcript)
    if prompt is None:
        return _store_outcome(episode, instrument, spec, force=force, status=Status.NOT_CODED, error=reason)
    refusal = consent_refusal(episode.participant, spec.provider)
    if refusal is not None:
        return _store_outcome(episode, instrument, spec, force=force, status=Status.FAILED,
                              error=f"Log not sent to {spec.provider}: {refusal}.")
    if not force and (done := process_coding_done(episode_id=episode.pk, instrument=instrument,
                                                  provider=spec.provider, model=spec.model)) is not None:
        return done
    if not provider_configured(spec.provider):
        raise GradingWaiting(not_configured_note((spec.provider,), then="manage.py code_processes --pending"))
    budget_ensure_available(study=episode.study)
    row = _claim(episode, instrument, spec, force=force)
    if row.status != Status.RUNNING:
        return row  # stored since the first look
    return _call(row, spec, prompt, final_attempt=final_attempt)


def _codable_episode(episode_id: int) -> Episode:
    episode = Episode.objects.select_related("participant__consent_version", "study").get(pk=episode_id)
    if not episode.study.tom_coding:
        raise NotGradable(f"episode {episode.pk}: study {episode.study.slug} does not code theory of mind "
                          "(turn ToM coding on in the study's settings)")
    if episode.status not in CODABLE_STATUSES:
        raise NotGradable(f"episode {episode.pk} is {episode.get_status_display().lower()}; nothing to code")
    if episode.participant.status == Participant.Status.WITHDRAWN:
        raise NotGradable(f"episode {episode.pk}: the participant withdrew")
    return episode


def episode_code_process(*, episode_id: int, instruments: Sequence[str] = INSTRUMENTS, force: bool = False,
                         final_attempt: bool = True) -> list[ProcessCoding]:
    """Code one episode with every instrument by both judges; idempotent unless `force` (a staff re-run).

    Raises NotGradable (study not coding ToM, nothing submitted, withdrawn), GradingWaiting (judges not
    configured or of one family, no key, budget reached), RetryLater (provider trouble on a non-final attempt,
    after the other codings were done) or CodingInFlight (every owed coding is held by another worker).
    """
    unknown = sorted(set(instruments) - set(INSTRUMENTS))
    if unknown:
        raise ValueError(f"unknown instruments {unknown}; use {', '.join(INSTRUMENTS)}")
    episode = _codable_episode(episode_id)
    coders = study_tom_coders(episode.study)
    transcript = episode_transcript_build(episode_id=episode.pk)
    results: list[ProcessCoding] = []
    retry: RetryLater | None = None
    in_flight: CodingInFlight | None = None
    for instrument in instruments:
        for spec in coders:
            try:
                results.append(_code_one(episode, transcript, instrument, spec, force=force,
                                         final_attempt=final_attempt))
            except RetryLater as exc:
                retry = exc
            except CodingInFlight as exc:
                in_flight = exc
    if not process_codings_missing(episode_id=episode.pk, coders=[(s.provider, s.model) for s in coders]):
        follow_ups_close(episode_id=episode.pk, kind=GradingFollowUp.Kind.PROCESS)
    if retry is not None:
        raise retry
    if in_flight is not None and not results:
        raise in_flight
    return results
