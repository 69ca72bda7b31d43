"""Normalised collaboration transcripts and their process metrics, one row per episode."""

from __future__ import annotations

from django.db import models


class EpisodeTranscript(models.Model):
    """The episode's log files parsed into normalised turns, with per-episode process metrics.

    `files` holds each file's parse report and bounded turns (see grading/transcripts); the metric columns
    are the episode totals. Rebuilt whenever the log is parsed again (parser version or new files).
    """

    class Status(models.TextChoices):
        PARSED = "parsed", "Parsed"
        PARTIAL = "partial", "Parsed with problems"
        SCREENSHOTS_ONLY = "screenshots_only", "Screenshots only"
        UNREADABLE = "unreadable", "Nothing readable"
        NO_LOG = "no_log", "No log uploaded"

    episode = models.OneToOneField("studyapp.Episode", on_delete=models.CASCADE, related_name="transcript")
    status = models.CharField(max_length=20, choices=Status.choices)
    parser_version = models.CharField(max_length=16)
    files_fingerprint = models.CharField(max_length=64, help_text="Hash of the log files' checksums parsed.")
    formats = models.JSONField(default=list, blank=True)
    files = models.JSONField(default=list, blank=True, help_text="Per file: parse report and normalised turns.")
    heuristic = models.BooleanField(default=False, help_text="Prompts detected heuristically (terminal text).")
    truncated = models.BooleanField(default=False, help_text="Turn text was shortened to bound storage.")
    screenshots = models.PositiveIntegerField(default=0)
    user_prompts = models.PositiveIntegerField(null=True, blank=True)
    agent_turns = models.PositiveIntegerField(null=True, blank=True)
    tool_calls = models.PositiveIntegerField(null=True, blank=True)
    interventions = models.PositiveIntegerField(null=True, blank=True)
    sidechain_turns = models.PositiveIntegerField(null=True, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    active_seconds = models.FloatField(null=True, blank=True)
    initiative_entropy = models.FloatField(null=True, blank=True)
    human_initiative_share = models.FloatField(null=True, blank=True)
    user_chars = models.PositiveIntegerField(null=True, blank=True)
    agent_chars = models.PositiveIntegerField(null=True, blank=True)
    effort_ratio = models.FloatField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True, help_text="Tokens per model recorded in the session files; "
                                                              "empty when no file recorded any (unknown).")
    parsed_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"Transcript of episode {self.episode_id} ({self.status})"
