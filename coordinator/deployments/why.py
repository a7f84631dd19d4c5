"""Why one more container of a deployment does not fit, in numbers an operator can act on:
what it needs, and the nearest miss among the nodes that take containers -- or, when no
node takes any, what keeps each one out.

    needs 1.7 CPU + 512Mi on one node; the best fit, n3, has 1.2 CPU and 2Gi free
    needs 0.5 CPU + 128Mi on one node; no node takes containers: 2 cordoned (n1, n2), 1 lost (n0)

Refusals that are not about room (a quota's max, a pool's limit) already carry their
numbers and are given as they are.
"""

from __future__ import annotations

from collections import defaultdict

from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused
from coordinator.placement import Node, Normalized
from shared.api.nodes import NodeHealth
from shared.quantity import format_cpu, format_memory_approx

MOST_NAMED = 5  # nodes named per reason; the rest are counted


def why_not(draft: Draft, resources: Normalized, refusal: DeployRefused) -> str:
    if refusal.reason != "capacity":
        return refusal.message
    need = f"needs {resources.describe()} on one node"
    views = [state.view() for state in draft.candidates()]
    if not views:
        return f"{need}; no node takes containers: {_kept_out(draft)}"
    best = max(views, key=lambda view: (_free_cpu(view), view.memory, view.name))
    cpu = format_cpu(_free_cpu(best), share_base=best.share_base)
    return (
        f"{need}; the best fit, {best.name}, has {cpu} CPU and"
        f" {format_memory_approx(best.memory)} free"
    )


def _free_cpu(view: Node) -> int:
    """The node's free CPU pieces, every core's together."""
    return sum(view.cores.values())


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
