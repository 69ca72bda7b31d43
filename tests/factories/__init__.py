"""Test data builders, one per model, in modules named after what they build; multi-model ones in scenarios.

The study-domain factories are re-exported here because the suite imports them as ``tests.factories.X``.
"""

from tests.factories.agents import AgentFactory
from tests.factories.episodes import EpisodeFactory
from tests.factories.participants import ParticipantFactory
from tests.factories.studies import ConsentVersionFactory, StudyFactory
from tests.factories.tasks import TaskFactory
from tests.factories.taxonomy import OccupationFactory, SectorFactory
from tests.factories.users import UserFactory

__all__ = [
    "AgentFactory",
    "ConsentVersionFactory",
    "EpisodeFactory",
    "OccupationFactory",
    "ParticipantFactory",
    "SectorFactory",
    "StudyFactory",
    "TaskFactory",
    "UserFactory",
]
