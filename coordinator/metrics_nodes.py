"""Node figures at scrape time: states, what each node offers and what is allocated on
it, from its allocation state's derived totals (kept by the placement engine on every
change), so a scrape costs O(nodes x cores), not a walk of the containers. Written as
text (``metrics_text``): eight series a node, ten with a pressure reading.

allot_nodes{state}                  nodes by health
allot_node_cpu_cores{node,kind}     offered, bound (to pinned containers),
                                    shared_requested (what unbound ones ask for)
allot_node_memory_bytes{node,kind}  offered, requested
allot_node_gpus{node,kind}          offered (whole GPUs + MIG devices), bound
allot_node_cordoned{node}           1 when cordoned
allot_node_cpu_pressure_percent{node,source}
                                    the CPU pressure its agent reads, avg10: PSI
                                    "some", or CFS periods throttled (source)
allot_node_cpu_pressured{node}      1 while the coordinator holds it under pressure
                                    (the [pressure] thresholds, with hysteresis)

The two pressure series exist for the nodes whose agent reports a reading, on the leader
only: readings reach the leader, are kept in memory and never stored (a standby, or a
new leader before its agents' first reports, has none).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from coordinator.metrics_fleet import Fleet
from coordinator.metrics_text import TextGauge
from shared.api.nodes import NodeHealth, NodeRecord


class NodeFigures:
    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet

    def exposition(self) -> Iterator[str]:
        fleet = self._fleet
        records = fleet.nodes()
        by_state = TextGauge("allot_nodes", "Nodes by state.", ("state",))
        counts = Counter(record.state for record in records)
        for health in NodeHealth:
            by_state.add((health.value,), counts[health])
        per_kind = ("node", "kind")
        cpu = TextGauge(
            "allot_node_cpu_cores",
            "A node's CPU in cores: offered for placement, bound to pinned containers,"
            " and asked for by unbound containers on its shared pool (shared_requested).",
            per_kind,
        )
        memory = TextGauge(
            "allot_node_memory_bytes",
            "A node's memory: offered, and requested by its containers.",
            per_kind,
        )
        gpus = TextGauge(
            "allot_node_gpus",
            "A node's GPU devices (whole GPUs and MIG devices): offered, and bound to containers.",
            per_kind,
        )
        cordoned = TextGauge(
            "allot_node_cordoned", "1 when the node is cordoned, else 0.", ("node",)
        )
        pressure = TextGauge(
            "allot_node_cpu_pressure_percent",
            "A node's CPU pressure as its agent reads it, in percent: PSI 'some' avg10 (the"
            " share of the last 10 s some task waited for a CPU), or where the kernel has no"
            " PSI the share of its containers' CFS periods throttled (source).",
            ("node", "source"),
        )
        pressured = TextGauge(
            "allot_node_cpu_pressured",
            "1 while the coordinator holds the node under CPU pressure (entered at"
            " [pressure] enter_percent, left at leave_percent), else 0.",
            ("node",),
        )
        books = fleet.books
        for record in records:
            name = record.name
            cordoned.add((name,), 1 if name in books.cordoned else 0)
            reading = fleet.pressure(name)
            if reading is not None:
                pressure.add((name, reading.source), reading.avg10)
                pressured.add((name,), 1 if reading.under else 0)
            offered_gpus = _offered_gpus(record)
            gpus.add((name, "offered"), offered_gpus)
            gpus.add((name, "bound"), _bound_gpus(fleet, name) if offered_gpus else 0)
            state = fleet.node_state(name)
            if state is None:  # its inventory gives no allocation state: nothing offered
                continue
            base = state.share_base
            cpu.add((name, "offered"), sum(state.cores.values()) / base)
            cpu.add((name, "bound"), state.bound_cpu / base)
            cpu.add((name, "shared_requested"), state.unbound_cpu / base)
            memory.add((name, "offered"), state.memory)
            memory.add((name, "requested"), state.memory_used)
        for family in (by_state, cpu, memory, gpus, cordoned, pressure, pressured):
            yield from family.lines()


def _offered_gpus(record: NodeRecord) -> int:
    inventory = record.inventory
    whole = sum(1 for gpu in inventory.gpus if not gpu.mig_enabled)
    return whole + inventory.mig_device_count()


def _bound_gpus(fleet: Fleet, node: str) -> int:
    """Devices held by the node's containers, stopping ones included: O(its containers),
    paid only for nodes that have GPUs."""
    books = fleet.books
    return sum(len(c.gpus) for c in [*books.on_node(node), *books.stopping_on(node)])
