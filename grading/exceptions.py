"""Domain errors of the grading pipeline; tasks and admin actions turn them into statuses and messages."""

from __future__ import annotations


class GradingError(Exception):
    """Base class; `reason` is a sentence fit to show staff."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotGradable(GradingError):
    """The submission is in a state grading must not touch (not submitted, skipped, withdrawn …)."""


class RetryRefused(GradingError):
    """A staff retry that has nothing to redo (the work was never submitted, was skipped, or is being graded)."""


class GradingWaiting(GradingError):
    """Grading cannot start now (no judge configured, budget reached, consent) and waits without failing."""


class BudgetExhausted(GradingWaiting):
    """The study's LLM spend reached its cap: no new LLM calls until staff raise it."""


class CodingInFlight(GradingError):
    """Another worker holds the lease on this episode's log coding; this message has nothing to do."""


class RetryLater(GradingError):
    """A transient problem (provider 429/5xx/timeouts, a rubric being generated elsewhere): try again later."""

    def __init__(self, reason: str, *, countdown: float | None = None) -> None:
        super().__init__(reason)
        self.countdown = countdown


class BudgetBusy(RetryLater):
    """The study's spend is under its cap, but the rest is reserved by calls in flight: try once they settle."""


class RubricBusy(RetryLater):
    """Another worker is generating this task's rubric right now."""


class RubricGenerationFailed(GradingError):
    """The generator kept returning an unusable rubric, or refused; the failed version records why."""


class RubricInvalid(GradingError):
    """A rubric's criteria do not add up (four fixed categories, 100 points); it cannot be approved or used."""

    def __init__(self, reason: str, *, problems: list[str]) -> None:
        super().__init__(reason)
        self.problems = problems
