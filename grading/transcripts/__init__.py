"""Agents' own session files parsed into one normalised transcript, and the process metrics drawn from it.

One module per format (claude_code, codex, gemini, terminal), `detect` to recognise a file, `model` for the
normalised turns and the bounded builder, `metrics` for per-episode counts, times, initiative and effort,
`render` for the text the log coder reads.
"""

from grading.transcripts.detect import parse_log
from grading.transcripts.metrics import METRIC_FIELDS, TranscriptMetrics, initiative_entropy, transcript_metrics
from grading.transcripts.model import FileStatus, FileTranscript, Format, Role, Turn

__all__ = [
    "METRIC_FIELDS", "FileStatus", "FileTranscript", "Format", "Role", "TranscriptMetrics", "Turn",
    "initiative_entropy", "parse_log", "transcript_metrics",
]
