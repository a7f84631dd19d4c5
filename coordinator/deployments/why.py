"""Why one more container of a deployment does not fit, in numbers an operator can act on:
what it needs, and the nearest miss among the nodes that take containers -- or, when no
node takes any, what keeps each one out.

    needs 1.7 CPU + 512Mi on one node; the best fit, n3, has 1.2 CPU and 2.0Gi free
    needs 0.5 CPU + 128Mi on one node; no node takes containers: 2 cordoned (n1, n2), 1 lost (n0)
    waiting for 2 stopping containers on n1 to be removed by its agent (c1, c2); needs ...

Stopping containers hold their allocation until their agent reports them gone, so a
container that does not fit may fit once they are: the reason names them first.

Refusals that are not about room (a quota's max, a pool's limit) already carry their
numbers and are given as they are.
"""

from __future__ import annotations

from collections import defaultdict

from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused
from coordinator.placement import NodeState, Normalized
from shared.api.nodes import NodeHealth
from shared.quantity import format_cpu, format_memory_approx

MOST_NAMED = 5  # nodes named per reason; the rest are counted


def why_not(draft: Draft, resources: Normalized, refusal: DeployRefused) -> str:
    if refusal.reason != "capacity":
        return refusal.message
    need = f"needs {resources.describe()} on one node"
    states = draft.candidates()
    if not states:
        return f"{need}; no node takes containers: {_kept_out(draft)}"
    waiting = stopping_on(draft, [state.name for state in states])
    waiting = f"{waiting}; " if waiting else ""
    free = {state.name: _free(state, resources.cpu_bind) for state in states}
    best = max(free, key=lambda name: (*free[name], name))
    cpu, memory = free[best]
    shared = "" if resources.cpu_bind else " of its shared pool"
    return waiting + (
        f"{need}; the best fit, {best}, has {format_cpu(cpu, share_base=resources.share_base)}"
        f" CPU{shared} and {format_memory_approx(memory)} free"
    )


def _free(state: NodeState, bound: bool) -> tuple[int, int]:
    """The node's free CPU pieces (on its cores for a bound container, in its shared
    pool's limit for an unbound one) and free memory."""
    view = state.view()
    cpu = sum(view.cores.values()) if bound else max(0, state.shared_limit - state.unbound_cpu)
    return cpu, view.memory


def stopping_on(draft: Draft, nodes: list[str]) -> str:
    """What the stopping containers on ``nodes`` keep others waiting for -- "waiting for
    N stopping containers on n1 to be removed by its agent (ids)" -- or "" when there are
    none. O(nodes + them) + O(the draft's change)."""
    held = draft.stopping_on_nodes(nodes)
    if not held:
        return ""
    ids = [record.id for records in held.values() for record in records]
    agents = "its agent" if len(held) == 1 else "their agents"
    return (
        f"waiting for {len(ids)} stopping container{'s' if len(ids) > 1 else ''} on"
        f" {_named(list(held))} to be removed by {agents} ({_named(ids)})"
    )


def _kept_out(draft: Draft) -> str:
    """Why no node takes containers: how many are cordoned, not ready, or unusable."""
    reasons: defaultdict[str, list[str]] = defaultdict(list)
    for record in draft.context.registry.all():
        if record.state != NodeHealth.READY:
            reasons[record.state.value].append(record.name)
        elif draft.cordoned(record.name):
            reasons["cordoned"].append(record.name)
        elif draft.context.registry.unusable(record.name) is not None:
            reasons["unusable"].append(record.name)
    if not reasons:
        return "none is registered"
    return ", ".join(f"{len(names)} {why} ({_named(names)})" for why, names in reasons.items())


def _named(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:MOST_NAMED])
    return shown if len(names) <= MOST_NAMED else f"{shown}, ..."
