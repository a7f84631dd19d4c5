"""Small, valid values that many tests need, built in one place."""

from __future__ import annotations

from pathlib import Path

from agent.runtime.docker_engine import DockerEngine
from agent.runtime.plan import Host
from agent.runtime.reconciler import Runtime, RuntimeOptions
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
