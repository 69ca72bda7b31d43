"""Grading models: rubrics, judge runs, expert grades and log codings."""

from .experts import ExpertAssignment, ExpertCriterionGrade, ExpertGrade, ExpertProfile
from .judging import CriterionScore, EpisodeGrading, Extraction, FluencyCoding, GradingFollowUp, JudgeRun, LLMUsage
from .rubrics import Criterion, Rubric
from .transcripts import EpisodeTranscript

__all__ = [
    "Criterion", "CriterionScore", "EpisodeGrading", "ExpertAssignment", "ExpertCriterionGrade", "ExpertGrade",
    "EpisodeTranscript", "ExpertProfile", "Extraction", "FluencyCoding", "GradingFollowUp", "JudgeRun", "LLMUsage",
    "Rubric",
]
