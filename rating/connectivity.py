"""Connectivity of the agent-human graph: agents not linked through shared participants are compared only
through their priors, so the leaderboard warns about them (DESIGN §4).

Pure numpy/scipy: no Django, no settings, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import connected_components

from rating.arrays import first_appearance_codes, id_array, reject_blank_ids

__all__ = ["Connectivity", "connectivity"]


@dataclass(frozen=True)
class Connectivity:
    """Components of the agent-human graph (paper §4: rankings need agents linked through shared humans).

    Attributes
    ----------
    n_components
        Number of connected components (each holds at least one agent).
    agent_component
        Component number of every agent id.
    components
        Agent ids per component, largest first.
    warning
        Plain-language warning when the agents are not all linked, else ``None``.
    """

    n_components: int
    agent_component: dict[str, int]
    components: list[list[str]]
    warning: str | None

    @property
    def connected(self) -> bool:
        """Return whether every agent is linked to every other through shared humans."""
        return self.n_components <= 1

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable summary."""
        return {
            "connected": self.connected,
            "n_components": self.n_components,
            "agent_component": dict(self.agent_component),
            "components": [list(c) for c in self.components],
            "warning": self.warning,
        }


def connectivity(agent_ids: Any, human_ids: Any) -> Connectivity:
    """Find which agents are compared through shared participants.

    Two agents are comparable when a chain agent - human - agent - ... links them; otherwise the model
    can only separate their skills through the priors, and their relative ranking says nothing.
    """
    agents = id_array(agent_ids, "agent_ids")
    humans = id_array(human_ids, "human_ids")
    if humans.shape[0] != agents.shape[0]:
        raise ValueError(f"human_ids has {humans.shape[0]} entries but agent_ids has {agents.shape[0]}")
    reject_blank_ids(agents, "agent_ids")
    reject_blank_ids(humans, "human_ids")
    a_idx, a_uniq = first_appearance_codes(agents)
    h_idx, _ = first_appearance_codes(humans)
    n_a = a_uniq.shape[0]
    n_nodes = n_a + (int(h_idx.max()) + 1 if h_idx.size else 0)
    graph = scipy.sparse.coo_matrix((np.ones(a_idx.shape[0]), (a_idx, n_a + h_idx)), shape=(n_nodes, n_nodes))
    _, labels = connected_components(graph, directed=False)
    agent_labels = labels[:n_a]
    members: dict[int, list[str]] = {}
    for agent, label in zip(a_uniq.tolist(), agent_labels.tolist(), strict=True):
        members.setdefault(label, []).append(str(agent))
    groups = sorted(members.values(), key=lambda g: (-len(g), g[0]))
    component_of = {agent: number for number, group in enumerate(groups) for agent in group}
    warning = None
    if len(groups) > 1:
        described = "; ".join("{" + ", ".join(group) + "}" for group in groups)
        first, second = groups[0][0], groups[1][0]
        warning = (
            f"The agents fall into {len(groups)} groups that share no participant: {described}. "
            f"For example, {first} and {second} never worked with the same person, even indirectly, so the "
            "model cannot tell their skills apart from the participants' skills; their relative ranking "
            "rests on the priors only. Pair participants across these groups before trusting the order."
        )
    return Connectivity(n_components=len(groups), agent_component=component_of, components=groups, warning=warning)
