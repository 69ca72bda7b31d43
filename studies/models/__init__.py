"""Study domain models, split by what they hold."""

from .agents import Agent
from .audit import AuditEvent
from .episodes import Episode, EpisodeFile, SoloRun, SoloRunFile
from .jobs import BackgroundJob
from .participants import ConsentRecord, Participant, ParticipantIdentity, StepVisit
from .payments import Payment
from .study import ConsentVersion, Study
from .tasks import TaskFile, TaskInstance
from .taxonomy import Occupation, Sector, SectorFallback

__all__ = [
    "Agent", "AuditEvent", "BackgroundJob", "ConsentRecord", "ConsentVersion", "Episode", "EpisodeFile",
    "Occupation", "Participant", "ParticipantIdentity", "Payment", "Sector", "SectorFallback", "SoloRun",
    "SoloRunFile", "StepVisit", "Study", "TaskFile", "TaskInstance",
]
