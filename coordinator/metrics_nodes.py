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
from coordinator.placement import NodeState
from shared.api.nodes import NodeHealth, NodeRecord


class NodeFigures:
    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet

    def exposition(self) -> Iterator[str]:
        """The families a line at a time, each over the node records as they were at the
        first line (a node deleted since still shows, with what it had then)."""
        fleet = self._fleet
        records = list(fleet.nodes())
        by_state = TextGauge("allot_nodes", "Nodes by state.", ("state",))
        counts = Counter(record.state for record in records)
        yield by_state.header()
        for health in NodeHealth:
            yield by_state.line((health.value,), counts[health])
        per_kind = ("node", "kind")
        cpu = TextGauge(
            "allot_node_cpu_cores",
            "A node's CPU in cores: offered for placement, bound to pinned containers,"
            " and asked for by unbound containers on its shared pool (shared_requested).",
            per_kind,
        )
        states: list[tuple[str, NodeState]] = []  # nodes without one offer nothing
        yield cpu.header()
        for record in records:
            state = fleet.node_state(record.name)
            if state is None:  # its inventory gives no allocation state
                continue
            states.append((record.name, state))
            base = state.share_base
            yield cpu.line((record.name, "offered"), sum(state.cores.values()) / base)
            yield cpu.line((record.name, "bound"), state.bound_cpu / base)
            yield cpu.line((record.name, "shared_requested"), state.unbound_cpu / base)
        memory = TextGauge(
            "allot_node_memory_bytes",
            "A node's memory: offered, and requested by its containers.",
            per_kind,
        )
        yield memory.header()
        for name, state in states:
            yield memory.line((name, "offered"), state.memory)
            yield memory.line((name, "requested"), state.memory_used)
        gpus = TextGauge(
            "allot_node_gpus",
            "A node's GPU devices (whole GPUs and MIG devices): offered, and bound to containers.",
            per_kind,
        )
        yield gpus.header()
        for record in records:
            offered_gpus = _offered_gpus(record)
            yield gpus.line((record.name, "offered"), offered_gpus)
            bound = _bound_gpus(fleet, record.name) if offered_gpus else 0
            yield gpus.line((record.name, "bound"), bound)
        cordoned = TextGauge(
            "allot_node_cordoned", "1 when the node is cordoned, else 0.", ("node",)
        )
        yield cordoned.header()
        for record in records:
            yield cordoned.line((record.name,), 1 if record.name in fleet.books.cordoned else 0)
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
        readings = [(r.name, fleet.pressure(r.name)) for r in records]
        known = [(name, reading) for name, reading in readings if reading is not None]
        if known:  # no family without a reading (a standby's scrape)
            yield pressure.header()
            for name, reading in known:
                yield pressure.line((name, reading.source), reading.avg10)
            yield pressured.header()
            for name, reading in known:
                yield pressured.line((name,), 1 if reading.under else 0)


def _offered_gpus(record: NodeRecord) -> int:
    inventory = record.inventory
    whole = sum(1 for gpu in inventory.gpus if not gpu.mig_enabled)
    return whole + inventory.mig_device_count()


def _bound_gpus(fleet: Fleet, node: str) -> int:
    """Devices held by the node's containers, stopping ones included: O(its containers),
    paid only for nodes that have GPUs."""
    books = fleet.books
    return sum(len(c.gpus) for c in [*books.on_node(node), *books.stopping_on(node)])
