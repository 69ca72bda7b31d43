"""No import cycle anywhere in the project's packages: not between apps, not between files.

`make lint` keeps the layer contracts (pyproject's [tool.importlinter]); this test walks the whole module graph
(function-level imports included, as grimp reads every import statement) and fails on any cycle with the
modules that form it, so a new one is caught even where no contract names the packages involved.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

from tests.packages import PROJECT_PACKAGES

ROOT = Path(__file__).resolve().parent.parent


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Return the graph's strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_module_graph_has_no_import_cycle() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PROJECT_PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    assert _cycles(graph) == []


def test_the_cycle_finder_reports_a_cycle_between_two_files() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]
