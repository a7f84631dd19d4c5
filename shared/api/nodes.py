"""A registered node as the API shows it: ``GET /v1/nodes``, ``GET /v1/nodes/{name}``.
Its state machine is the coordinator's (``coordinator.services.nodes``)."""

from __future__ import annotations

import enum

import msgspec

from shared.inventory import Inventory


class NodeHealth(enum.StrEnum):
    READY = "ready"
    DEGRADED = "degraded"
    LOST = "lost"


class NodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    state: NodeHealth
    reason: str  # why the node is degraded or lost; "" when ready
    inventory: Inventory
    address: str  # the agent's peer address at its last hello
    agent_version: str
    registered_at: float  # wall-clock seconds: first hello ever
    state_since: float  # wall-clock seconds: last change of state


class NodePressure(msgspec.Struct, frozen=True, kw_only=True):
    """The node's CPU pressure as its agent last reported it (``shared.protocol``'s
    ``CpuPressure``), and whether the coordinator holds it under pressure (the
    ``[pressure]`` thresholds, with hysteresis) and since when."""

    under: bool
    source: str  # psi or throttling
    avg10: float  # percent
    avg60: float | None  # percent; None for throttling
    at: float  # wall-clock seconds: when the reading came
    since: float  # wall-clock seconds: when ``under`` last changed, or the first reading


class NodeView(NodeRecord, frozen=True, kw_only=True):
    """A node as the API shows it: its record, whether an administrator cordoned it (it
    takes no new containers; ``allotctl nodes`` shows ``ready,cordoned``), and its CPU
    pressure (None while its agent has reported none)."""

    cordoned: bool = False
    pressure: NodePressure | None = None

    @classmethod
    def of(
        cls, record: NodeRecord, *, cordoned: bool, pressure: NodePressure | None = None
    ) -> NodeView:
        return cls(**msgspec.structs.asdict(record), cordoned=cordoned, pressure=pressure)


class NodeList(msgspec.Struct, frozen=True):
    """``GET /v1/nodes``, which the coordinator builds as a plain dict."""

    nodes: list[NodeView]
