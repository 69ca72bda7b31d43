"""Model usage recorded in the agents' own session files: which models ran and how many tokens they used.

Each CLI reports usage its own way, and the parsers translate it to one shape per model:

* ``input``: prompt tokens billed at the full input price (cached reads and cache writes excluded);
* ``cache_read``: prompt tokens served from the provider's prompt cache;
* ``cache_write``: prompt tokens written to the cache (Anthropic bills them apart);
* ``output``: generated tokens, reasoning included (every provider bills reasoning as output);
* ``reasoning``: the part of ``output`` spent on reasoning, shown apart, never added twice;
* ``calls``: model responses counted.

Claude Code writes one line per content part of a response, each repeating the response's usage, so a
response is counted once by its message id (the last line of a response carries its final count). Codex
reports cumulative totals, so each report adds what is new since the previous one, to the model then in use.
Gemini CLI reports each response's counts with its message. A file that reports no usage has none:
"unknown", never zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

UNKNOWN_MODEL = "(model not recorded)"


@dataclass(slots=True)
class ModelUsage:
    calls: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    def add(self, other: ModelUsage) -> None:
        for name in (f.name for f in fields(self)):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def minus(self, other: ModelUsage) -> ModelUsage:
        """Return what this running total adds to an earlier one (a total that went down started anew)."""
        counted = [f.name for f in fields(self) if f.name != "calls"]
        delta = ModelUsage(**{name: getattr(self, name) - getattr(other, name) for name in counted})
        if any(getattr(delta, name) < 0 for name in counted):
            return ModelUsage(**{name: getattr(self, name) for name in counted})
        return delta

    @property
    def tokens(self) -> int:
        return self.input + self.cache_read + self.cache_write + self.output


def _count(value: Any) -> int:
    """A token count as the file gives it; anything that is not a non-negative whole number counts nothing."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return 0
    return int(value)


def _model(name: Any) -> str:
    text = str(name).strip() if name is not None else ""
    return text[:120] if text else UNKNOWN_MODEL


class UsageLedger:
    """Usage per model for one file, fed record by record by its parser."""

    def __init__(self) -> None:
        self._responses: dict[Any, tuple[str, ModelUsage]] = {}
        self._anonymous: list[tuple[str, ModelUsage]] = []
        self._cumulative: ModelUsage | None = None
        self.model: str | None = None  # the model in use, for formats that name it apart from the counts

    def response(self, model: Any, usage: ModelUsage, *, response_id: Any = None) -> None:
        """Record one response's usage; a later report of the same response replaces the earlier one."""
        usage.calls = 1
        entry = (_model(model), usage)
        if response_id is None:
            self._anonymous.append(entry)
        else:
            self._responses[response_id] = entry

    def cumulative(self, total: ModelUsage) -> None:
        """Record a running total (Codex): what is new since the last total goes to the model in use."""
        delta = total.minus(self._cumulative or ModelUsage())
        self._cumulative = total
        if delta.tokens:
            delta.calls = 1
            self._anonymous.append((_model(self.model), delta))

    def totals(self) -> dict[str, dict[str, int]] | None:
        """Return usage per model, or None when the file reported no usage at all."""
        if not self._responses and not self._anonymous:
            return None
        by_model: dict[str, ModelUsage] = {}
        for model, usage in [*self._responses.values(), *self._anonymous]:
            by_model.setdefault(model, ModelUsage()).add(usage)
        return {model: asdict(usage) for model, usage in sorted(by_model.items())}


def claude_usage(message: dict[str, Any]) -> ModelUsage | None:
    """Usage of one Claude Code assistant message (Anthropic's usage object), or None when it has none."""
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    return ModelUsage(input=_count(usage.get("input_tokens")),
                      cache_read=_count(usage.get("cache_read_input_tokens")),
                      cache_write=_count(usage.get("cache_creation_input_tokens")),
                      output=_count(usage.get("output_tokens")))


def codex_total(info: Any) -> ModelUsage | None:
    """The running total of a Codex ``token_count`` event (OpenAI counts: cached and reasoning included)."""
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None
    prompt, cached = _count(total.get("input_tokens")), _count(total.get("cached_input_tokens"))
    return ModelUsage(input=max(prompt - cached, 0), cache_read=min(cached, prompt),
                      output=_count(total.get("output_tokens")),
                      reasoning=_count(total.get("reasoning_output_tokens")))


def gemini_usage(message: dict[str, Any]) -> ModelUsage | None:
    """Usage of one Gemini CLI response: prompt (cached part included) plus tool-use prompt, answer, thoughts."""
    tokens = message.get("tokens")
    if not isinstance(tokens, dict):
        return None
    prompt, cached = _count(tokens.get("input")), _count(tokens.get("cached"))
    thoughts = _count(tokens.get("thoughts"))
    return ModelUsage(input=max(prompt - cached, 0) + _count(tokens.get("tool")), cache_read=min(cached, prompt),
                      output=_count(tokens.get("output")) + thoughts, reasoning=thoughts)


def merge_usage(reports: list[dict[str, dict[str, int]] | None]) -> dict[str, dict[str, int]] | None:
    """Add the files' usage per model; None when no file reported any."""
    known = [report for report in reports if report is not None]
    if not known:
        return None
    by_model: dict[str, ModelUsage] = {}
    for report in known:
        for model, counts in report.items():
            by_model.setdefault(model, ModelUsage()).add(ModelUsage(**counts))
    return {model: asdict(usage) for model, usage in sorted(by_model.items())}
