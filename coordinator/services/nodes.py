"""Node records and their state machine, pure: every transition takes the time.

    ready <-> degraded    the agent reports problems (NVML unreadable, ...) or clears them
    ready/degraded -> lost  the node's lease expired: no heartbeat for lease_seconds
    lost -> ready/degraded  the agent said hello again

A node is never forgotten by these rules; an operator deletes a lost one
(``deployments.node_admin.delete_node``).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence

import msgspec

from shared.api.nodes import NodeHealth, NodeRecord
from shared.inventory import Inventory

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def node_name_problem(name: str) -> str | None:
    """Why ``name`` is not a node name (a lower-case DNS name, as hostnames are), or None."""
    if not name or len(name) > 253:
        return f"node name {name!r} must have 1 to 253 characters"
    if not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return (
            f"node name {name!r} must be a lower-case DNS name: labels of a-z, 0-9 and '-',"
            " each at most 63 characters, separated by dots"
        )
    return None


def _health(problems: Sequence[str]) -> tuple[NodeHealth, str]:
    if problems:
        return NodeHealth.DEGRADED, "; ".join(problems)
    return NodeHealth.READY, ""


def on_hello(
    previous: NodeRecord | None,
    *,
    name: str,
    inventory: Inventory,
    address: str,
    agent_version: str,
    now: float,
) -> NodeRecord:
    """The record after the node's agent said hello with this inventory."""
    state, reason = _health(inventory.problems)
    unchanged = previous is not None and previous.state == state and previous.reason == reason
    return NodeRecord(
        name=name,
        state=state,
        reason=reason,
        inventory=inventory,
        address=address,
        agent_version=agent_version,
        registered_at=previous.registered_at if previous else now,
        state_since=previous.state_since if previous and unchanged else now,
    )


def on_problems(record: NodeRecord, problems: Sequence[str], *, now: float) -> NodeRecord:
    """The record after the agent reported its current problems (none: healthy)."""
    state, reason = _health(problems)
    if record.state == NodeHealth.LOST or (state, reason) == (record.state, record.reason):
        return record
    return msgspec.structs.replace(record, state=state, reason=reason, state_since=now)


def on_lease_expired(record: NodeRecord, *, lease_seconds: float, now: float) -> NodeRecord:
    if record.state == NodeHealth.LOST:
        return record
    reason = f"no heartbeat for {lease_seconds:g}s"
    return msgspec.structs.replace(record, state=NodeHealth.LOST, reason=reason, state_since=now)


class NodeLeases:
    """When each live node's lease ends; ``expired`` pops the ones that have.

    Deadlines are on a monotonic clock. A heap with lazy deletion: renewing pushes a new
    entry and the stale one is skipped when popped, so a renewal costs O(log n) and an
    expiry check O(k log n) for k entries due, never a scan of every node.
    """

    def __init__(self, lease_seconds: float) -> None:
        self.lease_seconds = lease_seconds
        self._deadline: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        # Nodes whose agent was given a longer lease than ``lease_seconds`` (a heartbeat
        # interval stretched with the fleet: ``coordinator.heartbeat_pace``).
        self._length: dict[str, float] = {}

    def length_of(self, name: str) -> float:
        """How long the node's lease lasts from each renewal."""
        return self._length.get(name, self.lease_seconds)

    def stretch(self, name: str, seconds: float, *, now: float) -> None:
        """From now on the node's lease lasts ``seconds`` (never less than
        ``lease_seconds``), and it is renewed for that long at once: its agent is about
        to be told to heartbeat less often."""
        if seconds > self.lease_seconds:
            self._length[name] = seconds
        else:
            self._length.pop(name, None)
        self.renew(name, now=now)

    def renew(self, name: str, *, now: float) -> None:
        self.set_deadline(name, now + self.length_of(name))

    def set_deadline(self, name: str, deadline: float) -> None:
        self._deadline[name] = deadline
        heapq.heappush(self._heap, (deadline, name))

    def expired(self, *, now: float) -> list[str]:
        """Names whose lease ended at or before ``now``, removed from the table."""
        due: list[str] = []
        while self._heap and self._heap[0][0] <= now:
            deadline, name = heapq.heappop(self._heap)
            if self._deadline.get(name) == deadline:
                del self._deadline[name]
                due.append(name)
        return due

    def __contains__(self, name: object) -> bool:
        return name in self._deadline
