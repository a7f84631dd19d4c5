"""What a what-if placement answers: ``POST /v1/plans`` (``coordinator.http.plans``)."""

from __future__ import annotations

import msgspec

from shared.protocol import Limits


class PlannedContainer(msgspec.Struct, frozen=True, kw_only=True):
    cores: dict[int, int]  # core id -> pieces; empty in memory mode
    fragment: int | None  # the fragment core, if the request has a fraction of a core
    numa: int | None  # the NUMA node of a NUMA-local plan
    memory: int  # bytes charged to the node
    docker: Limits


class PlannedNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    capacity: int
    existing: int
    deploy: int
    containers: list[PlannedContainer]


class PlanResponse(msgspec.Struct, frozen=True, kw_only=True):
    cpu_pieces: int
    share_base: int
    memory: int
    cpu_bind: bool
    strategy: str
    count: int
    capacity: int  # the sum over the nodes
    nodes: list[PlannedNode]
    skipped_nodes: dict[str, str] = {}  # registered nodes left out -> why
