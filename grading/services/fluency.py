"""Code an episode's collaboration log for the 11 AI-fluency behaviours (paper App. H).

Logs arrive as text files, terminal transcripts, screenshots (sent to a vision model) or a shared-session
link. Links are recorded, never fetched: the platform does not follow worker-supplied URLs.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from grading import llm
from grading.conf import grading_settings
from grading.consent import consent_refusal
from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable, RetryLater
from grading.extract import Extraction
from grading.extract.budget import cut_text
from grading.models import EpisodeTranscript, FluencyCoding, GradingFollowUp, LLMUsage
from grading.prompts import FLUENCY_PROMPT_VERSION, render_fluency_prompt
from grading.providers import fluency_coder, not_configured_note, provider_config, provider_configured
from grading.schemas import FLUENCY_CODES, FluencyOut, one_line
from grading.selectors import current_fluency_coding
from grading.services.budget import budget_ensure_available, llm_usage_record
from grading.services.extraction import episode_log_extract
from grading.services.follow_ups import coding_claim, coding_release, coding_renew, follow_ups_close
from grading.services.judging import lease_seconds
from grading.services.leases import LeaseKeeper
from grading.services.transcripts import episode_transcript_build
from grading.transcripts.render import render_transcripts
from studies.models import Episode, Participant

logger = logging.getLogger(__name__)


def _store(episode: Episode, **fields: Any) -> FluencyCoding:
    """Add a coding as the episode's current one and close the follow-up it served; earlier codings stay.

    The episode row is locked so two codings finishing at once take turns (the database also allows only one
    current coding per episode).
    """
    with transaction.atomic():
        Episode.objects.select_for_update().filter(pk=episode.pk).first()
        FluencyCoding.objects.filter(episode=episode, is_current=True).update(is_current=False)
        coding = FluencyCoding.objects.create(episode=episode, is_current=True, **fields)
        follow_ups_close(episode_id=episode.pk, kind=GradingFollowUp.Kind.FLUENCY)
        return coding


def _no_log_reason(episode: Episode, extraction: Extraction) -> str | None:
    """Return why nothing in the log can be coded, or None when there is something to read."""
    link = (f" The worker shared a session link ({episode.share_url}); it is recorded but not fetched."
            if episode.share_url else "")
    if not extraction.parts:
        return "No collaboration log file was uploaded." + link
    readable = [p for p in extraction.parts if p.inspectable and (p.text.strip() or p.images)]
    if readable:
        return None
    problems = "; ".join(f"{p.name}: {p.note or 'no readable content'}" for p in extraction.parts)
    return f"No log file could be read ({problems})." + link


SCREENSHOTS_ONLY_NOTE = ("Only screenshots of this session were uploaded: there is no transcript text, so the "
                         "worker's messages are known only from what the screenshots show.")


def _coder_log(transcript: EpisodeTranscript, extraction: Extraction, *,
               images_attached: bool) -> tuple[str, bool]:
    """Return the log text for the coder and whether it was cut.

    Files parsed into a transcript are shown as normalised turns (speakers marked, sub-agent turns
    labelled); every other file (screenshots, unrecognised text) as extracted.
    """
    parsed = [f for f in transcript.files if f["status"] in ("parsed", "partial")]
    if not parsed:
        text = extraction.as_prompt_text(images_attached=images_attached)
        if transcript.status == EpisodeTranscript.Status.SCREENSHOTS_ONLY:
            text = (f"{SCREENSHOTS_ONLY_NOTE}\n\n{text}" if images_attached else
                    f"{SCREENSHOTS_ONLY_NOTE} They are not shown to you, so code only what the text below "
                    f"supports.\n\n{text}")
        return text, extraction.truncated
    names = {f["name"] for f in parsed}
    others = Extraction(parts=[p for p in extraction.parts if p.name not in names],
                        truncated=any(p.truncated for p in extraction.parts if p.name not in names),
                        total_chars=0)
    budget = int(grading_settings()["EXTRACT_MAX_CHARS"])
    text = render_transcripts(parsed)
    truncated = transcript.truncated or others.truncated
    if len(text) > budget:
        text, truncated = cut_text(text, budget, "the normalised transcripts", complete=True), True
    if others.parts:
        text += "\n\nOther log files:\n" + others.as_prompt_text(images_attached=images_attached)
    return text, truncated


def _already_coded(episode: Episode, model: str) -> FluencyCoding | None:
    current = current_fluency_coding(episode)
    if current is None or current.prompt_version != FLUENCY_PROMPT_VERSION:
        return None
    if current.status == FluencyCoding.Status.NO_LOG:
        return current
    if current.status == FluencyCoding.Status.SUCCEEDED and current.model == model:
        return current
    return None


def episode_code_log(*, episode_id: int, force: bool = False, final_attempt: bool = True) -> FluencyCoding:
    """Code one episode's log; idempotent unless `force` (a current coding with this prompt is kept).

    Raises NotGradable (no submitted work / withdrawn), GradingWaiting (no coder configured, budget
    reached) or RetryLater (provider trouble on a non-final attempt).
    """
    episode = Episode.objects.select_related("participant__consent_version", "agent", "task", "study").get(
        pk=episode_id)
    if episode.status not in (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED,
                              Episode.Status.FAILED):
        raise NotGradable(f"episode {episode.pk} is {episode.get_status_display().lower()}; nothing to code")
    if episode.participant.status == Participant.Status.WITHDRAWN:
        raise NotGradable(f"episode {episode.pk}: the participant withdrew")
    transcript = episode_transcript_build(episode_id=episode.pk)
    spec = fluency_coder()
    if not force and (existing := _already_coded(episode, spec.model)) is not None:
        return existing
    extraction = episode_log_extract(episode=episode)
    if (reason := _no_log_reason(episode, extraction)) is not None:
        return _store(episode, status=FluencyCoding.Status.NO_LOG, error=reason,
                      prompt_version=FLUENCY_PROMPT_VERSION)
    refusal = consent_refusal(episode.participant, spec.provider)
    if refusal is not None:
        return _store(episode, status=FluencyCoding.Status.FAILED, provider=spec.provider, model=spec.model,
                      prompt_version=FLUENCY_PROMPT_VERSION, error=f"Log not sent to {spec.provider}: {refusal}.")
    if not provider_configured(spec.provider):
        raise GradingWaiting(not_configured_note((spec.provider,), then="manage.py code_logs --pending"))
    budget_ensure_available(study=episode.study)
    config = provider_config(spec)
    images = extraction.images() if config.vision else []
    log_text, truncated = _coder_log(transcript, extraction, images_attached=bool(images))
    prompt = render_fluency_prompt(agent=str(episode.agent), title=episode.task.title, log=log_text,
                                   truncated=truncated, images_attached=len(images))
    if not coding_claim(episode_id=episode.pk):
        raise CodingInFlight(f"episode {episode.pk}: its log is being coded by another worker")
    if not force and (existing := _already_coded(episode, spec.model)) is not None:
        coding_release(episode_id=episode.pk)  # coded (and its row closed) since the first look
        return existing
    try:
        with LeaseKeeper(lambda: coding_renew(episode_id=episode.pk), lease_seconds() / 3):
            out, responses = llm.complete_json(
                config, system=prompt.system, user_text=prompt.user, schema=FluencyOut, images=images,
                repair_attempts=int(grading_settings()["JUDGE_REPAIR_ATTEMPTS"]), max_tokens=4096)
    except llm.LLMError as exc:
        coding_release(episode_id=episode.pk)
        llm_usage_record(study=episode.study, purpose=LLMUsage.Purpose.FLUENCY,
                         prompt_version=FLUENCY_PROMPT_VERSION, responses=exc.responses, accepted_last=False)
        if isinstance(exc, llm.LLMNotConfigured):
            raise GradingWaiting(exc.reason) from exc
        if exc.retryable and not final_attempt:
            raise RetryLater(f"episode {episode.pk} log coding: {exc.reason}") from exc
        logger.warning("log coding of episode %s failed: %s", episode.pk, exc.reason)
        return _store(episode, status=FluencyCoding.Status.FAILED, provider=spec.provider, model=spec.model,
                      prompt_version=FLUENCY_PROMPT_VERSION, error=exc.reason[:4000])
    except BaseException:  # a time limit or shutdown: let the next message take the coding over at once
        coding_release(episode_id=episode.pk)
        raise
    behaviours = {code: {"present": getattr(out, code).observed, "reason": one_line(getattr(out, code).reason)}
                  for code in FLUENCY_CODES}
    with transaction.atomic():
        llm_usage_record(study=episode.study, purpose=LLMUsage.Purpose.FLUENCY,
                         prompt_version=FLUENCY_PROMPT_VERSION, responses=responses, accepted_last=True)
        return _store(episode, status=FluencyCoding.Status.SUCCEEDED, provider=spec.provider, model=spec.model,
                      prompt_version=FLUENCY_PROMPT_VERSION, behaviours=behaviours,
                      behaviour_count=sum(1 for b in behaviours.values() if b["present"]))
