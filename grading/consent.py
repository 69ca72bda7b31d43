"""Which judges may receive a participant's files: only providers their consent version names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from grading.providers import JudgeSpec
from studyapp.models import Participant


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
