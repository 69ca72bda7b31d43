"""Builders for the ToM gold tests: ToM-coded episodes (judges' rows stored directly) and a real parsed log."""

from __future__ import annotations

import json

from grading.models import ProcessCoding
from grading.prompts import TOM_PROMPT_VERSION
from grading.services.transcripts import episode_transcript_build
from tests.factories import StudyFactory
from tests.factories.agents import AgentFactory
from tests.factories.scenarios import submitted_episode

AGENT_SAYS = "AGENT-ONLY-TURN: I will reconcile the ledger now."
JUDGE_REASON = "JUDGE-REASON-SECRET the worker names what the agent lacks"
PROMPTS = ("Hello! You can't see our ledger, so: Q2 means April to June for us.",
           "Thanks. You assumed calendar quarters; could you be wrong? Check the CSV please.")


def session(*prompts: str) -> bytes:
    records = []
    for i, text in enumerate(prompts):
        records.append({"type": "user", "sessionId": "s", "uuid": f"u{i}", "timestamp": f"2025-06-02T10:0{i}:00Z",
                        "message": {"role": "user", "content": text}})
        records.append({"type": "assistant", "sessionId": "s", "uuid": f"a{i}",
                        "timestamp": f"2025-06-02T10:0{i}:05Z",
                        "message": {"id": f"m{i}", "role": "assistant", "content": [{"type": "text",
                                                                                     "text": AGENT_SAYS}]}})
    return "\n".join(json.dumps(r) for r in records).encode()


def judge_codes(episode, scores: tuple[int, int], *, reason: str = JUDGE_REASON) -> None:
    for (provider, model), score in zip((("openai", "gpt-4.1"), ("anthropic", "claude-sonnet-4-6")), scores,
                                        strict=True):
        ProcessCoding.objects.create(episode=episode, instrument="tom", prompt_version=TOM_PROMPT_VERSION,
                                     provider=provider, model=model, family=provider, status="succeeded",
                                     score=score, markers=["rapport"], reason=reason, is_current=True)


def coded_episode(study, scores=(4, 3), *, agent=None, parsed: bool = True, prompts=PROMPTS, **fields):
    episode = submitted_episode(study=study, logs={"session.jsonl": session(*prompts)} if parsed else {},
                                **({"agent": agent} if agent is not None else {}), **fields)
    if parsed:
        episode_transcript_build(episode_id=episode.pk)
    judge_codes(episode, scores)
    return episode


def tom_study(**fields):
    return StudyFactory(tom_coding=True, **fields)


def secret_agent():
    return AgentFactory(name="Secret Agent X", model_version="sx-9000")
