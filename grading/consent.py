"""Which outside LLM providers a participant's files go to: named on the consent page, checked before grading."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured

from grading.conf import grading_settings
from grading.providers import JudgeSpec, rubric_generator, study_judges, tom_coders
from studies.models import ConsentVersion, Participant

PROVIDER_NAMES = {
    "openai": "OpenAI", "anthropic": "Anthropic", "google": "Google", "gemini": "Google (Gemini)",
    "mistral": "Mistral AI", "azure": "Microsoft Azure OpenAI", "bedrock": "Amazon Bedrock", "xai": "xAI",
}


def consent_providers(version: ConsentVersion) -> list[str]:
    """Name the outside LLM providers that receive deliverables and logs for grading.

    The consent version lists them; if staff left the list empty, the providers of the study's judges and of
    the rubric generator are named instead, so the page never under-reports who receives the files.
    """
    keys = [str(k).strip().lower() for k in version.llm_providers or [] if str(k).strip()]
    if not keys:
        try:
            keys = [spec.provider for spec in study_judges(version.study)] + [rubric_generator().provider]
            if version.study.tom_coding:  # the ToM judges receive the logs too
                keys += [spec.provider for spec in tom_coders(version.study)]
        except ImproperlyConfigured:
            # A malformed judge list stops grading with its own error; the consent page still names every
            # provider the list mentions rather than failing.
            entries = list(version.study.judges or grading_settings()["DEFAULT_JUDGES"])
            entries.append(grading_settings()["RUBRIC_GENERATOR"] or {})
            if version.study.tom_coding:
                entries += list(version.study.tom_coders or grading_settings()["TOM_CODERS"] or [])
            keys = [str(e.get("provider", "")).strip().lower() for e in entries if isinstance(e, dict)]
    names: list[str] = []
    for key in keys:
        name = PROVIDER_NAMES.get(key, key.title() if key else "")
        if name and name not in names:
            names.append(name)
    return names


@dataclass
class ConsentDecision:
    allowed: list[JudgeSpec] = field(default_factory=list)
    refused: list[tuple[JudgeSpec, str]] = field(default_factory=list)

    def note(self) -> str:
        """One sentence per refused judge, for the episode's grading note."""
        return " ".join(f"Judge {spec.label} not used: {reason}." for spec, reason in self.refused)


def consent_refusal(participant: Participant | None, provider: str) -> str | None:
    """Return why the participant's files may not go to `provider`, or None when they may.

    Simulated participants are not people and have nothing to consent to; solo runs have no participant.
    """
    if participant is None or participant.is_simulated:
        return None
    consent = participant.consent_version
    if consent is None:
        return "the participant has no recorded consent"
    providers = {str(p).strip().lower() for p in (consent.llm_providers or [])}
    if provider not in providers:
        named = ", ".join(sorted(providers)) or "none"
        return f"consent version {consent.version} does not name {provider} (it names: {named})"
    return None


def judges_allowed(*, participant: Participant | None, judges: Sequence[JudgeSpec]) -> ConsentDecision:
    """Split a judge list into judges the participant's consent allows and those it does not."""
    decision = ConsentDecision()
    for spec in judges:
        reason = consent_refusal(participant, spec.provider)
        if reason is None:
            decision.allowed.append(spec)
        else:
            decision.refused.append((spec, reason))
    return decision
