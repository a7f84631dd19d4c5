"""What a scrape of the coordinator's /metrics costs on a large fleet, against a naive
reference that walks every container, in the same run.

    .venv/bin/python bench/metrics_scrape.py [--nodes 10000] [--containers 200000]
                                             [--runs 20]

The books are built in-process, as a leader holds them after loading the store:
``--nodes`` ready nodes of 24 CPUs and 128 GiB (``bench/deployments.host``), each with
the same share of ``--containers`` in deployments of 500 across 10 namespaces: 2 in 5
bound to one whole core, the others unbound (0.5 CPU); 1 in 100 pending; every placed
container reported running by its agent with its CPU and memory usage. Then p50 and p99 of
``--runs`` renders of the whole exposition (``Metrics.render``, as ``GET /metrics`` sends
it, less the socket), in this process's CPU time (on a shared machine the wall time is
mostly other processes' turns; it is printed too), and of the figures alone, before
prometheus_client prints its families:

- ``container``: the node and deployment families and one usage series per container
  (``metrics_container_series = "container"``, the default);
- ``deployment``: the same with the usage summed per deployment;
- ``container``, on the event loop: the longest the loop was held during a scrape, in
  one go (``Metrics.render``, as ``GET /metrics`` wrote it before) and in slices
  (``Metrics.render_in_slices``, as it writes it now), as a task waking every 2 ms sees
  it: this process's CPU time between two of its wakings (the wall time too, which
  adds the machine's other processes' turns). The two texts are checked equal (but
  the process's own figures, which move between scrapes).
- ``naive``: the same families as ``deployment``, written as the same text, computed
  by walking every container and every allocation at each scrape (``container_state``
  per container, the nodes' totals summed from their allocations), as the figures would
  be without the books' indexes and tally. Its samples are checked equal to
  ``deployment``'s.

Quota, pool and lease families cost O(quotas x namespaces), O(pools) and O(resources)
and are left out: they do not grow with the fleet. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from prometheus_client.registry import Collector  # noqa: E402

from bench.deployments import host  # noqa: E402
from coordinator.deployments.books import Books  # noqa: E402
from coordinator.deployments.container_state import container_state  # noqa: E402
from coordinator.deployments.context import empty_state  # noqa: E402
from coordinator.deployments.decision import Decision  # noqa: E402
from coordinator.deployments.records import PendingRecord  # noqa: E402
from coordinator.metrics import Metrics, Written  # noqa: E402
from coordinator.metrics_deployments import DeploymentCollector  # noqa: E402
from coordinator.metrics_nodes import NodeFigures  # noqa: E402
from coordinator.metrics_text import TextGauge  # noqa: E402
from coordinator.metrics_usage import ContainerUsage  # noqa: E402
from coordinator.placement import Allocation, NodeState, Normalized, Plan  # noqa: E402
from coordinator.services.plan_nodes import usable_node  # noqa: E402
from shared.api.containers import ContainerRecord  # noqa: E402
from shared.api.deployments import DeploymentRecord, DeploymentSpec, ResourcesSpec  # noqa: E402
from shared.api.nodes import NodeHealth, NodePressure, NodeRecord  # noqa: E402
from shared.protocol import ContainerStatus, Limits  # noqa: E402

MiB = 2**20
SHARE_BASE = 100
DEPLOY_SIZE = 500
NAMESPACES = 10
BOUND = Normalized(100, 100, 512 * MiB, 512 * MiB, cpu_bind=True)
UNBOUND = Normalized(50, 0, 256 * MiB, 256 * MiB)
SMALL = ResourcesSpec(cpu="0.5", memory="256Mi")


class BuiltFleet:
    """``metrics_fleet.Fleet`` over books built here."""

    def __init__(self, books: Books, records: list[NodeRecord]) -> None:
        self._books = books
        self._records = records

    @property
    def books(self) -> Books:
        return self._books

    def nodes(self) -> Sequence[NodeRecord]:
        return self._records

    def node_state(self, name: str) -> NodeState | None:
        return self._books.nodes.get(name)

    def pressure(self, name: str) -> NodePressure | None:
        """None: no agent reports to books built here."""
        return None


def build(nodes: int, containers: int) -> BuiltFleet:
    records = [
        NodeRecord(
            name=f"node-{n:05}",
            state=NodeHealth.READY,
            reason="",
            inventory=host(f"node-{n:05}"),
            address="127.0.0.1",
            agent_version="bench",
            registered_at=0.0,
            state_since=0.0,
        )
        for n in range(nodes)
    ]
    change = Decision()
    allocations: dict[str, dict[str, Allocation]] = {r.name: {} for r in records}
    statuses: dict[str, list[ContainerStatus]] = {r.name: [] for r in records}
    for index in range(containers):
        deployment, number = divmod(index, DEPLOY_SIZE)
        namespace, name = f"team-{deployment % NAMESPACES}", f"app-{deployment}"
        key = (namespace, name)
        if key not in change.deployments:
            spec = DeploymentSpec(name=name, image="busybox", count=DEPLOY_SIZE, resources=SMALL)
            change.deployments[key] = DeploymentRecord(namespace=namespace, spec=spec, created=0)
        cid = f"{name}-{number}"
        if index % 100 == 99:
            change.pending[cid] = PendingRecord(
                id=cid, namespace=namespace, deployment=name, since=0.0, cause="bench"
            )
            continue
        node = records[index % nodes].name
        held = allocations[node]
        bound = (index // nodes) % 5 < 2  # 2 in 5 of each node's containers
        if bound:  # the node's next whole core
            core = sum(1 for a in held.values() if a.resources.cpu_bind)
            plan, need = Plan({core: 100}, memory=BOUND.memory_request), BOUND
        else:
            plan, need = Plan({}, memory=UNBOUND.memory_request), UNBOUND
        held[cid] = Allocation(plan, need)
        change.containers[cid] = ContainerRecord(
            id=cid,
            namespace=namespace,
            deployment=name,
            node=node,
            image="busybox",
            command=[],
            env={},
            labels={},
            restart_policy="always",
            cpu_bind=bound,
            requests={"cpu": "1" if bound else "0.5", "memory": need.memory_request},
            priority=0,
            pool=namespace,
            created=0.0,
            capacity="",
            limits=Limits(),
        )
        used = 0.9 if bound else 0.3
        statuses[node].append(
            ContainerStatus(id=cid, state="running", cpu_usage=used, memory_usage=100 * MiB)
        )
    for record in records:
        empty = empty_state(usable_node(record, None, share_base=SHARE_BASE), SHARE_BASE)
        change.nodes[record.name] = NodeState(
            record.name,
            empty.cores,
            numa=empty.numa,
            memory=empty.memory,
            numa_memory=empty.numa_memory,
            share_base=SHARE_BASE,
            allocations=allocations[record.name],
        )
    books = Books()
    books.apply(change, 1)
    for node, seen in statuses.items():
        books.observe(node, seen)
    return BuiltFleet(books, records)


class Collected:
    """A text gauge whose lines are kept until written, for the naive reference."""

    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        self._gauge = TextGauge(name, help_text, labels)
        self._lines = [self._gauge.header()]

    def add(self, values: Sequence[str], value: float) -> None:
        self._lines.append(self._gauge.line(values, value))

    def lines(self) -> list[str]:
        return self._lines


class NaiveFigures:
    """The same node and deployment families (usage per deployment), written as the same
    text, by walking every container and allocation at each scrape."""

    def __init__(self, fleet: BuiltFleet) -> None:
        self._fleet = fleet

    def exposition(self) -> Iterator[str]:
        for family in [*self._nodes(), *self._deployments()]:
            yield from family.lines()

    def _nodes(self) -> list[Collected]:
        books = self._fleet.books
        by_health = Counter(node.state for node in self._fleet.nodes())
        health = Collected("allot_nodes", "", ("state",))
        for each in NodeHealth:
            health.add((each.value,), by_health[each])
        per_kind = ("node", "kind")
        cpu = Collected("allot_node_cpu_cores", "", per_kind)
        memory = Collected("allot_node_memory_bytes", "", per_kind)
        gpus = Collected("allot_node_gpus", "", per_kind)
        cordoned = Collected("allot_node_cordoned", "", ("node",))
        for node in self._fleet.nodes():
            name = node.name
            held = books.nodes[name]
            allocations = list(held.allocations.values())
            bound = sum(sum(a.plan.cores.values()) for a in allocations)
            unbound = sum(a.resources.cpu_request for a in allocations if not a.resources.cpu_bind)
            cordoned.add((name,), 1 if name in books.cordoned else 0)
            gpus.add((name, "offered"), 0)
            gpus.add((name, "bound"), 0)
            cpu.add((name, "offered"), sum(held.cores.values()) / SHARE_BASE)
            cpu.add((name, "bound"), bound / SHARE_BASE)
            cpu.add((name, "shared_requested"), unbound / SHARE_BASE)
            memory.add((name, "offered"), held.memory)
            memory.add((name, "requested"), sum(a.resources.memory_request for a in allocations))
        return [health, cpu, memory, gpus, cordoned]

    def _deployments(self) -> list[Collected]:
        books = self._fleet.books
        counted: Counter[tuple[str, str, str]] = Counter()
        cores: dict[tuple[str, str], float] = {}
        used: Counter[tuple[str, str]] = Counter()
        for container in books.containers.values():
            key = (container.namespace, container.deployment)
            seen = books.observed.get(container.id)
            state, _ = container_state(container, seen)
            counted[(*key, "placed")] += 1
            counted[(*key, state)] += 1
            if seen is not None and state == "running":
                cores[key] = cores.get(key, 0.0) + (seen.cpu_usage or 0.0)
                used[key] += seen.memory_usage or 0
        for pending in books.pending.values():
            counted[(pending.namespace, pending.deployment, "pending")] += 1
        labels = ("namespace", "deployment")
        desired = Collected("allot_deployment_desired", "", labels)
        counts = Collected("allot_deployment_containers", "", (*labels, "state"))
        for key, deployment in books.deployments.items():
            desired.add(key, deployment.spec.count)
            for state_name in ("placed", "pending", "running", "failed"):
                counts.add((*key, state_name), counted[(*key, state_name)])
        pending_in_all = Collected("allot_scheduler_pending_containers", "", ())
        pending_in_all.add((), len(books.pending))
        usage_cpu = Collected("allot_container_cpu_usage_cores", "", labels)
        usage_memory = Collected("allot_container_memory_usage_bytes", "", labels)
        for key in cores.keys() | used.keys():
            usage_cpu.add(key, cores.get(key, 0.0))
            usage_memory.add(key, used[key])
        return [desired, counts, pending_in_all, usage_cpu, usage_memory]


def metrics_of(collectors: Sequence[Collector], written: Sequence[Written] = ()) -> Metrics:
    metrics = Metrics()
    for collector in collectors:
        metrics.follow(collector)
    for families in written:
        metrics.write(families)
    return metrics


def taken(collectors: Sequence[Collector], written: Sequence[Written] = ()) -> object:
    """Every family's figures (and text written by hand), as a scrape takes them before
    prometheus_client prints its families."""
    families = [list(collector.collect()) for collector in collectors]
    return families, ["".join(text.exposition()) for text in written]


def samples(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The allot_ samples but the process's own counters (which differ run to run)."""
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        if family.name.startswith(("allot_node", "allot_deployment", "allot_container")):
            for sample in family.samples:
                found[(sample.name, frozenset(sample.labels.items()))] = round(sample.value, 6)
    return found


def measure(
    name: str, metrics: Metrics, figures_alone: Callable[[], object], runs: int
) -> tuple[bytes, float]:
    """Render the exposition ``runs`` times, and take the figures alone (before they are
    written as text) as often; print the CPU time of both (this process's: on a shared
    machine its wall time is mostly other processes' turns) and the render's wall time;
    the last text and the figures' CPU p50."""
    renders, walls, figures = [], [], []
    text = b""
    for _ in range(runs):
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        text = metrics.render()
        renders.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - started)
        gc.collect()
        cpu = time.process_time()
        figures_alone()
        figures.append(time.process_time() - cpu)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    print(
        f"  {name:<10} scrape CPU {_spread(renders)}, wall {_spread(walls)};"
        f" figures alone CPU {_spread(figures)}; {len(text) / 1e6:.1f} MB, {series:,} series",
        flush=True,
    )
    return text, statistics.median(figures)


TICK_SECONDS = 0.002


async def held_while(scrape: Callable[[], Awaitable[bytes]]) -> tuple[bytes, float, float]:
    """The text ``scrape`` gives, and the longest the event loop was held meanwhile as a
    task waking every ``TICK_SECONDS`` sees it: (text, CPU seconds, wall seconds)."""
    done = False
    longest_cpu = longest_wall = 0.0

    async def tick() -> None:
        nonlocal longest_cpu, longest_wall
        wall, cpu = time.perf_counter(), time.process_time()
        while not done:
            await asyncio.sleep(TICK_SECONDS)
            now_wall, now_cpu = time.perf_counter(), time.process_time()
            longest_cpu = max(longest_cpu, now_cpu - cpu)
            longest_wall = max(longest_wall, now_wall - wall - TICK_SECONDS)
            wall, cpu = now_wall, now_cpu

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(TICK_SECONDS * 2)  # the ticker runs
    text = await scrape()
    done = True
    await ticker
    return text, longest_cpu, longest_wall


def loop_holds(metrics: Metrics, runs: int) -> None:
    """The longest hold of the loop by a scrape in one go and by one in slices, best and
    worst of ``runs`` each; their texts checked equal."""

    async def in_one_go() -> bytes:
        return metrics.render()

    holds: dict[str, list[tuple[float, float]]] = {"one go": [], "slices": []}
    texts: dict[str, bytes] = {}
    for _ in range(runs):
        for name, scrape in (("one go", in_one_go), ("slices", metrics.render_in_slices)):
            gc.collect()
            texts[name], cpu, wall = asyncio.run(held_while(scrape))
            holds[name].append((cpu, wall))
    if _steady(texts["one go"]) != _steady(texts["slices"]):
        raise SystemExit("the scrape in slices wrote another text than the one in one go")
    worst = {name: max(cpu for cpu, _ in taken) for name, taken in holds.items()}
    for name, taken in holds.items():
        cpus, walls = sorted(cpu for cpu, _ in taken), sorted(wall for _, wall in taken)
        print(
            f"  loop held by a scrape in {name:<6}: CPU {cpus[0] * 1e3:6.1f} to"
            f" {cpus[-1] * 1e3:6.1f} ms, wall {walls[0] * 1e3:6.1f} to {walls[-1] * 1e3:6.1f} ms"
            f" at longest ({runs} scrapes)",
            flush=True,
        )
    print(
        f"  in slices the longest hold is {worst['slices'] / worst['one go']:.3f}x the one"
        " go's (CPU, worst of each); same text"
    )


def _steady(text: bytes) -> list[bytes]:
    """The lines of an exposition but the process's and the collector's own figures,
    which move from one scrape to the next."""
    return [line for line in text.splitlines() if not line.startswith((b"process_", b"python_"))]


def _spread(times: list[float]) -> str:
    p99 = statistics.quantiles(times, n=100)[98] if len(times) > 1 else times[0]
    return f"p50 {statistics.median(times) * 1000:.0f} ms p99 {p99 * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--containers", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    fleet = build(args.nodes, args.containers)
    print(
        f"{args.containers:,} containers ({len(fleet.books.pending):,} pending) in"
        f" {len(fleet.books.deployments):,} deployments on {args.nodes:,} nodes, built in"
        f" {time.perf_counter() - started:.1f} s; {args.runs} scrapes each (load average"
        f" {os.getloadavg()[0]:.2f}):",
        flush=True,
    )
    collectors = [DeploymentCollector(fleet)]
    per_container: list[Written] = [NodeFigures(fleet), ContainerUsage(fleet)]
    scraped = metrics_of(collectors, per_container)
    measure("container", scraped, lambda: taken(collectors, per_container), args.runs)
    loop_holds(scraped, min(args.runs, 5))
    per_deployment: list[Written] = [
        NodeFigures(fleet),
        ContainerUsage(fleet, series_per="deployment"),
    ]
    fast_text, fast = measure(
        "deployment",
        metrics_of(collectors, per_deployment),
        lambda: taken(collectors, per_deployment),
        args.runs,
    )
    naive: list[Written] = [NaiveFigures(fleet)]
    naive_text, slow = measure("naive", metrics_of([], naive), lambda: taken([], naive), args.runs)
    if samples(fast_text) != samples(naive_text):
        raise SystemExit("the collectors and the naive reference disagree")
    print(f"  the naive walk's figures take {slow / fast:.1f}x the collectors' (p50); same samples")


if __name__ == "__main__":
    main()
