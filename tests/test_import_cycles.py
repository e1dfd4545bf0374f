"""No import cycles among swe-rl's modules, counting the imports inside functions too.

import-linter's layers keep packages in order; a cycle inside one package (two modules that import each other,
one of them lazily) slips past it, and such a pair is where code that should be one module or two layers hides.
"""

from __future__ import annotations

import grimp

SKIP = ".tasks.builtin.repos"  # the builtin tasks' own libraries, not swe-rl


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    # the control: a lazy import that closes a loop is a cycle, a diamond is not
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) == []


def test_swe_rl_has_no_import_cycle() -> None:
    graph = grimp.build_graph("swe_rl", include_external_packages=False, cache_dir=None)
    edges = {
        module: {m for m in graph.find_modules_directly_imported_by(module) if SKIP not in m}
        for module in graph.modules
        if SKIP not in module
    }
    assert len(edges) > 100  # the whole package was read
    assert "swe_rl.executors.ray" in edges["swe_rl.executors.config"]  # an import inside a function counts
    assert cycles(edges) == []
