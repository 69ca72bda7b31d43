"""The agent-human graph's connectivity check (rating/connectivity.py); no database, no Django."""

from __future__ import annotations

import json

import pytest

from rating.connectivity import connectivity


def test_connectivity_warns_when_agents_share_no_participant() -> None:
    split = connectivity(["A", "B", "C", "A"], ["h1", "h1", "h2", "h3"])
    assert split.n_components == 2 and not split.connected
    assert split.components == [["A", "B"], ["C"]]
    assert split.agent_component == {"A": 0, "B": 0, "C": 1}
    assert split.warning is not None
    assert "A" in split.warning and "C" in split.warning and "priors" in split.warning
    json.dumps(split.to_dict())

    joined = connectivity(["A", "B", "C", "C"], ["h1", "h1", "h2", "h1"])
    assert joined.connected and joined.n_components == 1
    assert joined.warning is None


def test_a_blank_participant_id_is_rejected_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="human_ids"):
        connectivity(["a", "b"], ["h", " "])
