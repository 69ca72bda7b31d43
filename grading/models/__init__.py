"""Grading models: rubrics, judge runs and log codings."""

from .gate import JudgeGate
from .judging import CriterionScore, EpisodeGrading, Extraction, FluencyCoding, GradingFollowUp, JudgeRun, LLMUsage
from .pricing import ModelPrice
from .process_coding import ProcessCoding, SimulatedEffort, ToMPairCoding
from .rubrics import Criterion, Rubric
from .transcripts import EpisodeTranscript

__all__ = [
    "Criterion", "CriterionScore", "EpisodeGrading", "EpisodeTranscript", "Extraction", "FluencyCoding",
    "GradingFollowUp", "JudgeGate", "JudgeRun", "LLMUsage", "ModelPrice", "ProcessCoding", "Rubric", "SimulatedEffort",
    "ToMPairCoding",
]
