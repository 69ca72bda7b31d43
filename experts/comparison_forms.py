"""Parsers that turn a comparison page's POST or autosave JSON into service input, and the staff set form."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django import forms

from experts.forms import _seconds, _text
from experts.models import ExpertProfile
from experts.services.comparisons import MAX_ITEMS, PlacementInput


@dataclass
class ComparisonInput:
    """The page's answers keyed by shown position; ``posted`` keeps them to re-display on error."""

    placements: dict[int, PlacementInput]
    justification: str
    visible_seconds: float | None

    @property
    def posted(self) -> dict[int, tuple[int | None, str]]:
        return {pos: (p.rank, p.acceptability) for pos, p in self.placements.items()}

    def kwargs(self) -> dict[str, Any]:
        return {"placements": self.placements, "justification": self.justification,
                "visible_seconds": self.visible_seconds}


def _rank(value: Any) -> int | None:
    """A rank as typed: empty is undecided; anything not a whole number is refused by the service's range check."""
    text = str(value if value is not None else "").strip()
    if not text:
        return None
    if not text.isdigit():
        return 0  # out of range: the service names the problem
    return int(text)


def comparison_input_from_post(data: Any, positions: list[int]) -> ComparisonInput:
    """Read ``rank_<position>``, ``accept_<position>``, ``justification`` and ``visible_seconds``."""
    placements = {pos: PlacementInput(rank=_rank(data.get(f"rank_{pos}")),
                                      acceptability=_text(data.get(f"accept_{pos}"), 16))
                  for pos in positions}
    return ComparisonInput(placements, _text(data.get("justification")), _seconds(data.get("visible_seconds")))


def comparison_input_from_json(body: bytes) -> ComparisonInput:
    """Parse ``{"placements": {"<position>": {"rank", "acceptability"}}, "justification", "visible_seconds"}``."""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ValueError("The autosave payload is not JSON.")
    if not isinstance(data, dict) or not isinstance(data.get("placements", {}), dict):
        raise ValueError("The autosave payload has the wrong shape.")
    placements = {}
    for key, value in data.get("placements", {}).items():
        if not str(key).isdigit() or not isinstance(value, dict) or len(placements) >= MAX_ITEMS:
            raise ValueError("The autosave payload has the wrong shape.")
        placements[int(key)] = PlacementInput(rank=_rank(value.get("rank")),
                                              acceptability=_text(value.get("acceptability"), 16))
    return ComparisonInput(placements, _text(data.get("justification")), _seconds(data.get("visible_seconds")))


class ComparisonSetForm(forms.Form):
    """The staff form: deliverables as ``episode:<id>`` / ``solo_run:<id>`` tokens, experts, a note."""

    deliverables = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False)
    experts = forms.ModelMultipleChoiceField(queryset=ExpertProfile.objects.none(), required=False,
                                             widget=forms.CheckboxSelectMultiple)
    note = forms.CharField(required=False, max_length=500)

    def __init__(self, *args: Any, choices: list[tuple[str, str]], experts: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["deliverables"].choices = choices
        self.fields["experts"].queryset = experts
        self.fields["experts"].label_from_instance = lambda p: p.user.get_username()

    def sources(self) -> tuple[list[int], list[int]]:
        episodes, runs = [], []
        for token in self.cleaned_data.get("deliverables") or []:
            kind, _, pk = token.partition(":")
            (episodes if kind == "episode" else runs).append(int(pk))
        return episodes, runs
