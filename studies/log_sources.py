"""Where each agent keeps its own session file, told to workers on the task page.

The platform parses these files into normalised transcripts (grading/transcripts), so the exact file
matters more than a copy of the screen. Format keys match grading.transcripts.Format.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models


class LogFormat(models.TextChoices):
    CLAUDE_CODE = "claude_code", "Claude Code session file (.jsonl)"
    CODEX = "codex", "Codex CLI session file (.jsonl)"
    GEMINI = "gemini", "Gemini CLI saved chat (.json)"
    TERMINAL = "terminal", "Terminal transcript (.txt)"
    SCREENSHOT = "screenshot", "Screenshots"


@dataclass(frozen=True)
class LogPlace:
    system: str
    path: str


@dataclass(frozen=True)
class LogSource:
    """What to upload for one agent: the file, where it is on each operating system, and the steps."""

    format: str
    label: str
    summary: str
    places: tuple[LogPlace, ...]
    steps: tuple[str, ...]


LOG_SOURCES: dict[str, LogSource] = {
    LogFormat.CLAUDE_CODE: LogSource(
        LogFormat.CLAUDE_CODE, LogFormat.CLAUDE_CODE.label,
        "Claude Code saves every session as one .jsonl file in a folder named after the folder you worked in "
        "(its path with each / replaced by -, e.g. -home-ana-sales-report).",
        (LogPlace("macOS and Linux", "~/.claude/projects/<your project folder>/<session id>.jsonl"),
         LogPlace("Windows", r"%USERPROFILE%\.claude\projects\<your project folder>\<session id>.jsonl")),
        ("Finish the task and quit Claude Code (type /exit) so the file is complete.",
         "Open the folder above and sort it by date: the newest .jsonl file is this session.",
         "Upload that file as it is (do not open and re-save it). If you restarted Claude Code during the task, "
         "upload each session file from this task."),
    ),
    LogFormat.CODEX: LogSource(
        LogFormat.CODEX, LogFormat.CODEX.label,
        "Codex CLI saves every session as a rollout-….jsonl file in a folder for the day you started it.",
        (LogPlace("macOS and Linux", "~/.codex/sessions/<year>/<month>/<day>/rollout-<date>T<time>-<id>.jsonl"),
         LogPlace("Windows", r"%USERPROFILE%\.codex\sessions\<year>\<month>\<day>\rollout-…jsonl")),
        ("Finish the task and quit Codex (Ctrl+C twice or /quit).",
         "Open today's folder above; the newest rollout file is this session.",
         "Upload that file unchanged; upload each rollout file from this task if you restarted Codex."),
    ),
    LogFormat.GEMINI: LogSource(
        LogFormat.GEMINI, LogFormat.GEMINI.label,
        "Gemini CLI keeps a chat only when you save it, in a folder for your project.",
        (LogPlace("macOS and Linux", "~/.gemini/tmp/<project id>/checkpoint-<name>.json"),
         LogPlace("Windows", r"%USERPROFILE%\.gemini\tmp\<project id>\checkpoint-<name>.json")),
        ("Before you quit Gemini CLI, type /chat save task (any one-word name works).",
         "Open the folder above (the project id is a long code; pick the most recently changed folder) and "
         "upload checkpoint-task.json.",
         "If the same folder has a chats folder with a session-….json file from today, upload it as well."),
    ),
    LogFormat.TERMINAL: LogSource(
        LogFormat.TERMINAL, LogFormat.TERMINAL.label,
        "This agent keeps no session file we can read, so save the terminal text.",
        (LogPlace("macOS and Linux", "start the agent inside: script -q session.txt"),
         LogPlace("Windows", "Terminal menu → Export text, saved as session.txt")),
        ("Start the recording before you start the agent and stop it (exit) after you finish.",
         "Upload session.txt. Prompts are recognised from the text, so keep your messages on the prompt line."),
    ),
    LogFormat.SCREENSHOT: LogSource(
        LogFormat.SCREENSHOT, LogFormat.SCREENSHOT.label,
        "This agent has no file export, so screenshots are the log.",
        (),
        ("Take screenshots that together show the whole conversation, including your own messages.",
         "Upload them as PNG or JPEG files, named in order (01.png, 02.png, …)."),
    ),
}

# Terminal agents whose session file we can read, recognised from the agent's name when no format is set.
_NAME_HINTS = (("claude", LogFormat.CLAUDE_CODE), ("codex", LogFormat.CODEX), ("gemini", LogFormat.GEMINI))


def agent_log_source(agent) -> LogSource | None:
    """Return the upload guidance for an agent: its configured log format, else one inferred for CLI agents."""
    fmt = agent.log_format
    if not fmt and agent.interface == "terminal":
        words = f"{agent.slug} {agent.name} {agent.product}".lower()
        fmt = next((value for hint, value in _NAME_HINTS if hint in words), "")
    return LOG_SOURCES.get(fmt) if fmt else None
