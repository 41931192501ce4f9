"""Constructs that make a JSON Schema exponential to validate, found before any value is: the warnings of
``skillwire skills check``.

skillwire's own validator memoizes ``$ref`` and bounds each validation by a step budget (see ``schema``), so
these constructs cost it linear time; but the schema is also what a client may validate its input with
before sending it, and most validators do not memoize. Two shapes are reported::

    recursion that multiplies   a $ref cycle along which k >= 2 paths lead from a subschema back to itself
                                through the same part of the value (a two-branch anyOf/oneOf whose branches
                                both recurse into the same property): a value nested d levels deep is
                                checked k**d times
    fan-out                     one subschema applied FANOUT_LIMIT or more times to the same part of one
                                value, because anyOf/allOf/oneOf/if branches lead to the same definitions
                                level after level (2 branches over 20 levels: 2**20 times)

Both follow the graph of subschemas (``schema.schema_graph``): edges that apply a subschema to the same
value, and edges that step into a part of it (``/properties/name``, ``/items``, ...). Two paths reach "the
same part of the value" when they take the same steps; keywords that could overlap (``items`` and
``contains``, a property name and a pattern) are not compared, so the check can miss a case but does not
invent one. The analysis is bounded (ANALYSIS_LIMIT paths per question); a schema too large to analyse is
reported as such rather than analysed for ever. Written here because no JSON Schema library offers a cost
analysis; it is a graph walk over what the compiler already knows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Final

from skillwire.skills.schema import SchemaGraph, schema_graph

__all__ = ["ANALYSIS_LIMIT", "FANOUT_LIMIT", "CostWarning", "cost_warnings"]

#: Applications of one subschema to one part of a value from which fan-out is reported.
FANOUT_LIMIT: Final = 1000
#: Paths (or subschema-and-part pairs) the analysis follows for one question before it gives up.
ANALYSIS_LIMIT: Final = 100_000
_CAP: Final = 10**18  # counts are capped: only "at least this many" matters
_Labels = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CostWarning:
    """A construct in a schema that a validator without memoization takes exponential time on."""

    schema_path: str  # a JSON pointer into the schema ("" for the root)
    reason: str

    def __str__(self) -> str:
        return f"{self.schema_path or '/'}: {self.reason}"


def cost_warnings(schema: object) -> list[CostWarning]:
    """The exponential constructs of ``schema`` (raises SchemaError if it does not compile)."""
    graph = schema_graph(schema)
    return [*_recursion_warnings(graph), *_fan_out_warnings(graph)]


def _children(graph: SchemaGraph, node: str) -> list[tuple[str, str | None]]:
    return graph.get(node, [])


def _steps(labels: _Labels) -> str:
    text = "".join(labels) or "/"
    return text if len(text) <= 80 else f"{text[:38]}...{text[-39:]}"


# -- recursion that multiplies ------------------------------------------------------------------------------


def _recursion_warnings(graph: SchemaGraph) -> list[CostWarning]:
    warnings = []
    for component in _cycles(graph):
        members = set(component)
        worst: tuple[int, str, _Labels] | None = None
        for start in sorted(component, key=lambda node: (node.count("/"), node)):
            found = _repeated_trip(graph, start, members)
            if found is not None and (worst is None or found[0] > worst[0]):
                worst = (found[0], start, found[1])
        if worst is not None:
            k, start, labels = worst
            warnings.append(
                CostWarning(
                    start,
                    f"{k} paths lead from this subschema back to itself through the same part of the value "
                    f"({_steps(labels)}), so a value nested d levels deep is checked {k}**d times by a "
                    "validator that does not memoize $ref",
                )
            )
    return warnings


def _repeated_trip(graph: SchemaGraph, start: str, members: set[str]) -> tuple[int, _Labels] | None:
    """The largest number of paths from ``start`` back to it that take the same steps into the value, and
    those steps, if it is two or more (paths stay inside the cycle and visit no subschema twice)."""
    trips: dict[_Labels, int] = defaultdict(int)
    on_path = {start}
    stack: list[tuple[str, _Labels, int]] = [(start, (), 0)]  # (node, steps so far, next child index)
    budget = ANALYSIS_LIMIT
    while stack and budget > 0:
        node, labels, index = stack[-1]
        children = _children(graph, node)
        if index >= len(children):
            stack.pop()
            on_path.discard(node)
            continue
        stack[-1] = (node, labels, index + 1)
        budget -= 1
        child, label = children[index]
        steps = labels if label is None else (*labels, label)
        if child == start:
            trips[steps] += 1
        elif child in members and child not in on_path:
            on_path.add(child)
            stack.append((child, steps, 0))
    if not trips:
        return None
    labels, count = max(trips.items(), key=lambda item: item[1])
    return (count, labels) if count >= 2 else None


def _cycles(graph: SchemaGraph) -> list[list[str]]:
    """The strongly connected components (with more than one subschema) reachable from the root, by
    Tarjan's algorithm, iteratively (schemas can be deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    work: list[tuple[str, int]] = [("", 0)]
    while work:
        node, i = work.pop()
        if i == 0:
            index[node] = low[node] = len(index)
            stack.append(node)
            on_stack.add(node)
        children = _children(graph, node)
        if i < len(children):
            work.append((node, i + 1))
            child = children[i][0]
            if child not in index:
                work.append((child, 0))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
            continue
        for child, _ in children:  # children finished: take their low links
            if child in on_stack:
                low[node] = min(low[node], low[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)
    return found


# -- fan-out -------------------------------------------------------------------------------------------------


def _fan_out_warnings(graph: SchemaGraph) -> list[CostWarning]:
    """Count, for every subschema and every part of the value (the steps taken to reach it), the paths
    from the root that apply it there; recursion is left out (edges back into the current path), which
    leaves a graph without cycles to count over in topological order."""
    order, back = _topological(graph)
    counts: dict[str, dict[_Labels, int]] = defaultdict(dict)
    counts[""][()] = 1
    pairs = 1
    worst: tuple[int, str, _Labels] = (0, "", ())
    for node in order:
        for labels, count in counts[node].items():
            if count > worst[0]:
                worst = (count, node, labels)
            for child, label in _children(graph, node):
                if (node, child) in back:
                    continue
                steps = labels if label is None else (*labels, label)
                seen = counts[child]
                if steps not in seen:
                    pairs += 1
                    if pairs > ANALYSIS_LIMIT:
                        return [
                            CostWarning(
                                "",
                                f"the schema applies subschemas to more than {ANALYSIS_LIMIT:,} parts of a value; "
                                "it is too large to analyse for fan-out",
                            )
                        ]
                seen[steps] = min(_CAP, seen.get(steps, 0) + count)
    count, node, labels = worst
    if count < FANOUT_LIMIT:
        return []
    shown = f"{count:,}" if count < _CAP else f"more than {_CAP:,}"
    return [
        CostWarning(
            node,
            f"applied {shown} times to the same part of the value ({_steps(labels)}): anyOf/allOf/oneOf/if "
            "branches lead to it along that many paths, and a validator that does not memoize $ref repeats "
            "it on each",
        )
    ]


def _topological(graph: SchemaGraph) -> tuple[list[str], set[tuple[str, str]]]:
    """Subschemas reachable from the root in topological order once the back edges are left out, and those
    back edges (each closes a cycle: recursion)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    post: list[str] = []
    back: set[tuple[str, str]] = set()
    work: list[tuple[str, int]] = [("", 0)]
    state[""] = 1
    while work:
        node, i = work.pop()
        children = _children(graph, node)
        if i < len(children):
            work.append((node, i + 1))
            child = children[i][0]
            mark = state.get(child)
            if mark is None:
                state[child] = 1
                work.append((child, 0))
            elif mark == 1:
                back.add((node, child))
            continue
        state[node] = 2
        post.append(node)
    post.reverse()
    return post, back
