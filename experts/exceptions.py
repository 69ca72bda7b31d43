"""Domain errors of the expert workspace; views turn them into form errors, messages or JSON statuses.

Every error carries a ``message`` fit to show the person who acted.
"""

from __future__ import annotations


class ExpertError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InviteInvalid(ExpertError):
    """The invitation link is malformed, expired or already used."""


class RubricNotEditable(ExpertError):
    """The rubric version is not a draft of this expert (submitted, approved, someone else's …)."""


class StaleRubricEdit(ExpertError):
    """The draft changed since the editor was opened (optimistic lock); nothing was saved."""

    def __init__(self, message: str, *, current_lock_version: int) -> None:
        super().__init__(message)
        self.current_lock_version = current_lock_version


class RubricIncomplete(ExpertError):
    """The draft was saved but cannot be submitted yet; ``problems`` lists why, per criterion where known."""

    def __init__(self, message: str, *, problems: list[tuple[int | None, str]]) -> None:
        super().__init__(message)
        self.problems = problems


class RubricReviewError(ExpertError):
    """Approval or rejection is not possible (wrong status, missing note, own rubric)."""


class NoGradingRubric(ExpertError):
    """The task has no rubric to grade against yet."""


class GradeNotEditable(ExpertError):
    """The grade was already submitted (or the assignment cancelled); changes are refused."""


class GradeIncomplete(ExpertError):
    """The draft was saved but cannot be submitted; ``problems`` maps criterion id (or "overall") to why."""

    def __init__(self, message: str, *, problems: dict[str, str]) -> None:
        super().__init__(message)
        self.problems = problems


class RoutingError(ExpertError):
    """An episode cannot be routed, planted as gold or adjudicated as asked."""


class ComparisonError(ExpertError):
    """A comparison set cannot be created or assigned as asked (too few deliverables, mixed tasks, …)."""


class ComparisonNotEditable(ExpertError):
    """The comparison was already submitted, withdrawn, or belongs to someone else; changes are refused."""


class ComparisonIncomplete(ExpertError):
    """The draft was saved but cannot be submitted; ``problems`` maps a shown position (or a field) to why."""

    def __init__(self, message: str, *, problems: dict[str, str]) -> None:
        super().__init__(message)
        self.problems = problems
