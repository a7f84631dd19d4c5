"""Small, valid values that many tests need, built in one place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.runtime.docker_engine import DockerEngine
from agent.runtime.plan import Host
from agent.runtime.reconciler import Runtime, RuntimeOptions
from shared.api.nodes import NodeHealth, NodeRecord
from shared.codec import to_builtins, to_json
from shared.cpuset import CpuSet
from shared.inventory import Cpu, Inventory, NumaNode


def make_inventory(problems: list[str] | None = None) -> Inventory:
    """A two-CPU host on one NUMA node, healthy unless ``problems`` say otherwise."""
    cpus = CpuSet([0, 1])
    return Inventory(
        hostname="host-a",
        cpus=[Cpu(id=0, core=0, package=0, numa=0), Cpu(id=1, core=1, package=0, numa=0)],
        online=cpus,
        isolated=CpuSet(),
        reserved=CpuSet(),
        numa_nodes=[NumaNode(id=0, cpus=cpus, memory=2**30, distances={0: 10})],
        memory=2**30,
        problems=list(problems or []),
    )


def idle_runtime(inventory: Inventory, node: str = "n1") -> Runtime:
    """A runtime whose reconcile loop never runs, for tests of the coordinator link alone:
    it takes desired states and reports its (unchanging) status."""
    engine = DockerEngine.connect(node=node, base_url="unix:///nonexistent/docker.sock", timeout=1)
    options = RuntimeOptions(
        node=node,
        state_path=Path("/nonexistent/agent.json"),
        applied_path=Path("/nonexistent/applied.json"),
    )
    return Runtime(engine, Host.of(inventory), options)


def old_node_record(name: str, **inventory_fields: Any) -> bytes:
    """A ready node's record as an older version may have stored it: the test host's
    inventory with ``inventory_fields`` written over it, unchecked (memory=-5, ...)."""
    record = NodeRecord(
        name=name,
        state=NodeHealth.READY,
        reason="",
        inventory=make_inventory(),
        address="10.0.0.7",
        agent_version="0.0.9",
        registered_at=1.0,
        state_since=2.0,
    )
    raw = to_builtins(record)
    raw["inventory"] |= inventory_fields
    return to_json(raw)
