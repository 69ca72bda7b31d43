"""Per-episode process metrics from the normalised transcripts of all of an episode's log files.

- Counts: the worker's prompts, agent turns, tool calls, interventions (interruptions and refused tool
  calls: the human halting the agent), sub-agent turns kept apart.
- Time: session duration (first to last timestamp, summed over files) and active time (gaps between
  consecutive events up to IDLE_GAP_SECONDS; longer gaps are idle).
- Initiative entropy (Co-Gym, Eq. 2): H = -sum_i p_i log_N p_i over the N = 2 parties, 0 when a party took
  no initiative. Without an utterance annotator, initiative-taking utterances are read from the structure:
  each worker prompt directs the task; an agent message that ends by asking the worker something takes
  dialogue initiative. Undefined (None) when the transcript has no dialogue.
- Effort (collaborative effort scaling): the worker's effort as the number of human-led rounds (prompts)
  and the characters the worker wrote; the agent-to-worker output ratio in characters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from grading.transcripts.model import FileStatus, FileTranscript, Format

METRIC_FIELDS: tuple[str, ...] = (
    "user_prompts", "agent_turns", "tool_calls", "interventions", "duration_seconds", "active_seconds",
    "initiative_entropy", "human_initiative_share", "user_chars", "agent_chars", "effort_ratio",
    "sidechain_turns",
)


def initiative_entropy(counts: Sequence[int]) -> float | None:
    """Return H_init = -sum p_i log_N p_i (N parties); 0 if some party has no initiative, None if nobody has."""
    total = sum(counts)
    n = len(counts)
    if total <= 0 or n < 2:
        return None
    if any(c <= 0 for c in counts):
        return 0.0
    return -sum((c / total) * math.log(c / total, n) for c in counts)


@dataclass(frozen=True)
class TranscriptMetrics:
    user_prompts: int
    agent_turns: int
    tool_calls: int
    interventions: int
    duration_seconds: float | None
    active_seconds: float | None
    initiative_entropy: float | None
    human_initiative_share: float | None
    user_chars: int
    agent_chars: int
    effort_ratio: float | None
    sidechain_turns: int
    screenshots: int
    heuristic: bool
    truncated: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def transcript_metrics(files: Sequence[FileTranscript]) -> TranscriptMetrics:
    """Combine the files of one episode (several sessions add up) into its process metrics."""
    read = [f for f in files if f.status in (FileStatus.PARSED, FileStatus.PARTIAL)]
    timed = [f for f in read if f.duration_seconds is not None]
    human = sum(f.user_prompts for f in read)
    agent_initiative = sum(f.agent_questions for f in read)
    entropy = initiative_entropy([human, agent_initiative])
    user_chars = sum(f.user_chars for f in read)
    agent_chars = sum(f.agent_chars for f in read)
    return TranscriptMetrics(
        user_prompts=human,
        agent_turns=sum(f.agent_turns for f in read),
        tool_calls=sum(f.tool_calls for f in read),
        interventions=sum(f.interventions for f in read),
        duration_seconds=sum(f.duration_seconds or 0.0 for f in timed) if timed else None,
        active_seconds=sum(f.active_seconds for f in timed) if timed else None,
        initiative_entropy=entropy,
        human_initiative_share=human / (human + agent_initiative) if human + agent_initiative else None,
        user_chars=user_chars,
        agent_chars=agent_chars,
        effort_ratio=agent_chars / user_chars if user_chars else None,
        sidechain_turns=sum(f.sidechain_turns for f in read),
        screenshots=sum(1 for f in files if f.format is Format.SCREENSHOT),
        heuristic=any(f.heuristic for f in read),
        truncated=any(f.truncated for f in read),
    )
