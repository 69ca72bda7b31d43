"""Domain errors of the study journey; each carries a message that can be shown to the worker as is."""

from __future__ import annotations


class StudyError(Exception):
    """Base class: the message is written for the person using the page, never a stack trace."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class StudyNotOpen(StudyError):
    """The study is not recruiting, so new participants cannot join."""


class IdentityConflict(StudyError):
    """A recruitment-platform id already belongs to another account (or the account to another id)."""


class InvalidInvitation(StudyError):
    """The invitation parameters are malformed."""


class StepNotAvailable(StudyError):
    """The participant cannot do this step now (withdrawn, finished, or an earlier step is open)."""


class NoTaskAvailable(StudyError):
    """No task fits the worker's occupation, even through the fallback sectors."""


class NoAgentAvailable(StudyError):
    """The study has no active agent to pair with."""


class EpisodeLocked(StudyError):
    """The episode was already submitted or skipped; its files and answers can no longer change."""


class SubmitRejected(StudyError):
    """The final submission is incomplete (no ready confirmation, no deliverable, no log…)."""


class UploadRejected(StudyError):
    """An uploaded file was refused: type, size, name or limits."""


class DuplicateFileName(UploadRejected):
    """A file with this name is already attached; the worker may choose to replace it."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


class InvalidShareUrl(StudyError):
    """The shared-session link is not an https link to one of the agent's hosts."""


class SurveyAnswerInvalid(StudyError):
    """An answer does not fit its question (out of range, unknown option…)."""


class SurveyIncomplete(StudyError):
    """Required questions are unanswered or invalid; ``errors`` maps question codes to what is wrong."""

    def __init__(self, message: str, *, errors: dict[str, str]) -> None:
        super().__init__(message)
        self.errors = errors
