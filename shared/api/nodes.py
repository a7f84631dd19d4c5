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


class NodeView(NodeRecord, frozen=True, kw_only=True):
    """A node as the API shows it: its record, and whether an administrator cordoned it
    (it takes no new containers; ``allotctl nodes`` shows ``ready,cordoned``)."""

    cordoned: bool = False

    @classmethod
    def of(cls, record: NodeRecord, *, cordoned: bool) -> NodeView:
        return cls(**msgspec.structs.asdict(record), cordoned=cordoned)


class NodeList(msgspec.Struct, frozen=True):
    """``GET /v1/nodes``, which the coordinator builds as a plain dict."""

    nodes: list[NodeView]
