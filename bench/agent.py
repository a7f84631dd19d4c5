"""Agent runtime on the real Docker engine: how fast limits change and containers converge.

    .venv/bin/python bench/agent.py [--changes 50] [--rounds 3] [--timeout 60]

Needs a Docker engine and the image ``allot/busybox:test`` (``scripts/provision``). An
in-process ``Runtime`` (its ``run()`` as an asyncio task, ``stop_timeout_seconds=1``,
state file in a temporary directory) manages the containers of a node of its own,
``bench-<random>``, so it never touches any other container. Prints:

- limits change latency: one running container (``sleep 3600`` bound to the highest CPU
  this process may use); ``--changes`` times its limits change in a new revision
  (cpu_shares 512 <-> 768, memory and memory+swap 64 MiB <-> 96 MiB). Each is timed
  from just before ``set_desired`` until both cgroup files (``cpu.shares`` and
  ``memory.limit_in_bytes`` on cgroup v1, ``cpu.weight`` and ``memory.max`` on v2),
  polled every millisecond, hold the new values: median, p95, min and max in ms; the
  same up to the runtime's report showing the revision applied, for context;
- convergence of 20 new containers: from no containers, one ``set_desired`` with 20
  (half bound to the highest CPU, half on the shared pool, each with a CPU weight and a
  memory limit), timed until ``runtime.report()``, polled every 5 ms, shows all 20
  running at that revision with nothing pending; then checked with the Docker SDK (20
  running under the node's label, each cgroup holding its limits). Each of ``--rounds``
  rounds is printed, then the median; between rounds all are removed (empty desired
  state, until the report shows none);
- a naive reference: the plain Docker SDK creating and starting the same 20 containers
  one after another in one thread (``containers.run(..., detach=True)``), per round
  and median, and the ratio of the medians, ours / naive.

Wall clock (``perf_counter``). Every container the bench made is removed at the end,
found by label, even on failure. A step that does not converge within ``--timeout``
seconds ends the bench with an error and a non-zero exit status. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import math
import os
import secrets
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import requests
from docker.errors import DockerException, NotFound

# Run as a script, Python puts bench/ first on the path, where this file would stand in for
# the ``agent`` package; the repository root goes there instead (it also holds ``tests``).
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from agent.discovery.inventory import discover  # noqa: E402
from agent.runtime import labels  # noqa: E402
from agent.runtime.docker_engine import DockerEngine  # noqa: E402
from agent.runtime.plan import Host, shared_pool  # noqa: E402
from agent.runtime.reconciler import Runtime, RuntimeOptions  # noqa: E402
from shared.cpuset import CpuSet, docker_cpuset  # noqa: E402
from shared.logs import configure  # noqa: E402
from shared.protocol import DesiredContainer, Limits, Status  # noqa: E402
from tests.docker.cgroups import cgroup_dir  # noqa: E402

IMAGE = "allot/busybox:test"
COMMAND = ["sleep", "3600"]
MiB = 1024 * 1024
NAIVE_LABEL = "allot-bench.naive"  # not allot's: the runtime must not see these
LIMIT_POLL_SECONDS = 0.001
REPORT_POLL_SECONDS = 0.005
FLEET = 20

Filters = dict[str, str | list[str] | bool]  # the Docker SDK's container filters


def by_label(name: str, value: str, *, running: bool = False) -> Filters:
    filters: Filters = {"label": [f"{name}={value}"]}
    if running:
        filters["status"] = ["running"]
    return filters


class BenchError(Exception):
    """A step did not do what it should (in time); the bench stops with this message."""


@dataclass(frozen=True)
class Expected:
    """What one container's cgroup files should hold."""

    cpu_shares: int
    memory: int


class CgroupFiles:
    """The cpu weight and memory limit files of one container's cgroup, found once."""

    def __init__(self, pid: int) -> None:
        cpu = cgroup_dir(pid, "cpu")
        memory = cgroup_dir(pid, "memory")
        self.v2 = not (cpu / "cpu.shares").exists()
        self.cpu = cpu / ("cpu.weight" if self.v2 else "cpu.shares")
        self.memory = memory / ("memory.max" if self.v2 else "memory.limit_in_bytes")
        self.cpuset = cgroup_dir(pid, "cpuset") / "cpuset.cpus"

    def holds(self, expected: Expected) -> bool:
        cpu = int(self.cpu.read_text())
        memory = int(self.memory.read_text())
        return cpu == self.cpu_value(expected.cpu_shares) and memory == expected.memory

    def cpu_value(self, shares: int) -> int:
        """What the cpu file holds for ``shares``: runc's conversion to a v2 weight."""
        return 1 + ((shares - 2) * 9999) // 262142 if self.v2 else shares


class Revisions:
    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def summary(values: list[float]) -> str:
    return (
        f"median {ms(statistics.median(values))}, p95 {ms(percentile(values, 0.95))},"
        f" min {ms(min(values))}, max {ms(max(values))}"
    )


def limits(cpuset: str, shares: int, memory: int) -> Limits:
    return Limits(cpuset_cpus=cpuset, cpu_shares=shares, mem_limit=memory, memswap_limit=memory)


def fleet(node: str, cpu: str) -> list[DesiredContainer]:
    """20 containers: even ones bound to ``cpu``, odd ones on the shared pool."""
    return [
        DesiredContainer(
            id=f"{node}-c{i:02d}",
            image=IMAGE,
            namespace="bench",
            deployment="fleet",
            command=COMMAND,
            limits=limits("" if i % 2 else cpu, 256 + 64 * (i % 4), (32 + 16 * (i % 3)) * MiB),
            shared_pool=bool(i % 2),
        )
        for i in range(FLEET)
    ]


class Bench:
    def __init__(self, runtime: Runtime, task: asyncio.Task[None], timeout: float) -> None:
        self.runtime = runtime
        self.task = task
        self.timeout = timeout
        self.revisions = Revisions()

    def check_alive(self) -> None:
        if self.task.done():
            error = None if self.task.cancelled() else self.task.exception()
            raise BenchError(f"the runtime's run() task ended: {error!r}")

    async def until(
        self, done: Callable[[], bool], what: str, poll: float, explain: Callable[[], str]
    ) -> None:
        """Poll ``done`` every ``poll`` seconds, at most ``timeout`` seconds."""
        deadline = time.perf_counter() + self.timeout
        while not done():
            self.check_alive()
            if time.perf_counter() > deadline:
                raise BenchError(f"{what}: not done after {self.timeout:g} s; {explain()}")
            await asyncio.sleep(poll)

    def explain_report(self) -> str:
        report = self.runtime.report()
        shown = [
            f"{c.id}: {c.state} rev {c.revision}{' error ' + c.error if c.error else ''}"
            for c in report.containers
        ]
        return (
            f"report: applied_revision {report.applied_revision} (desired"
            f" {self.revisions.last}), problems {report.problems},"
            f" {len(report.containers)} containers: {'; '.join(shown[:6]) or '-'}"
            + (" ..." if len(shown) > 6 else "")
        )

    def applied(self, revision: int, ids: set[str]) -> bool:
        """The report shows exactly ``ids``, all running at ``revision``, nothing pending."""
        report: Status = self.runtime.report()
        return (
            report.applied_revision == revision
            and {c.id for c in report.containers} == ids
            and all(
                c.state == "running" and c.revision == revision and not c.error
                for c in report.containers
            )
        )

    async def apply(self, containers: list[DesiredContainer], what: str) -> float:
        """A new revision with ``containers``; seconds until the report shows it applied."""
        revision = self.revisions.next()
        ids = {c.id for c in containers}
        started = time.perf_counter()
        self.runtime.set_desired(revision, containers, full=True)
        await self.until(
            lambda: self.applied(revision, ids), what, REPORT_POLL_SECONDS, self.explain_report
        )
        return time.perf_counter() - started


async def limits_latency(
    bench: Bench, client: docker.DockerClient, node: str, cpu: str, changes: int, pause: float
) -> None:
    states = [(512, 64 * MiB), (768, 96 * MiB)]

    def desired(step: int) -> DesiredContainer:
        shares, memory = states[step % 2]
        return DesiredContainer(
            id=f"{node}-limits",
            image=IMAGE,
            namespace="bench",
            deployment="limits",
            command=COMMAND,
            limits=limits(cpu, shares, memory),
        )

    created = await bench.apply([desired(0)], "creating the limits container")
    (container,) = client.containers.list(filters=by_label(labels.NODE, node))
    files = CgroupFiles(int(container.attrs["State"]["Pid"]))
    kind = "v2 (cpu.weight, memory.max)" if files.v2 else "v1 (cpu.shares, memory.limit_in_bytes)"
    print(f"limits change latency: 1 container on CPU {cpu}, cgroup {kind}")
    print(f"  first create+start, until reported running: {ms(created)}")
    if not files.holds(Expected(*states[0])):
        raise BenchError(f"the new container's cgroup does not hold {states[0]}")

    to_cgroup: list[float] = []
    to_report: list[float] = []
    for step in range(1, changes + 1):
        await asyncio.sleep(pause)  # let the event-triggered pass of the last change end
        wanted = Expected(*states[step % 2])
        revision = bench.revisions.next()
        one = desired(step)
        started = time.perf_counter()
        bench.runtime.set_desired(revision, [one], full=True)
        await bench.until(
            functools.partial(files.holds, wanted),
            f"limits change {step} in the cgroup files",
            LIMIT_POLL_SECONDS,
            lambda: (
                f"{files.cpu} {files.cpu.read_text().strip()},"
                f" {files.memory} {files.memory.read_text().strip()}; {bench.explain_report()}"
            ),
        )
        to_cgroup.append(time.perf_counter() - started)
        await bench.until(
            functools.partial(bench.applied, revision, {one.id}),
            f"limits change {step} in the report",
            REPORT_POLL_SECONDS,
            bench.explain_report,
        )
        to_report.append(time.perf_counter() - started)
    print(f"  {changes} changes (cpu_shares 512 <-> 768, memory 64 MiB <-> 96 MiB):")
    print(f"    set_desired -> both cgroup files:  {summary(to_cgroup)}")
    print(f"    set_desired -> report applied:     {summary(to_report)}")

    emptied = await bench.apply([], "removing the limits container")
    print(f"  removed (stop timeout 1 s), until the report shows none: {ms(emptied)}\n")


def check_fleet(
    client: docker.DockerClient, node: str, host: Host, wanted: list[DesiredContainer]
) -> None:
    """Docker's own view: every one of ``wanted`` running, its cgroup holding its limits."""
    running = client.containers.list(filters=by_label(labels.NODE, node, running=True))
    if len(running) != len(wanted):
        raise BenchError(f"Docker shows {len(running)} running containers, not {len(wanted)}")
    by_id = {c.id: c for c in wanted}
    pool = shared_pool(wanted, host)
    for container in running:
        desired = by_id[container.labels[labels.ID]]
        files = CgroupFiles(int(container.attrs["State"]["Pid"]))
        expected = Expected(desired.limits.cpu_shares, desired.limits.mem_limit)
        cpus = CpuSet.parse(files.cpuset.read_text())
        should = pool if desired.shared_pool else CpuSet.parse(desired.limits.cpuset_cpus)
        if not files.holds(expected) or cpus != should:
            raise BenchError(
                f"{desired.id}: cgroup does not hold {expected} on CPUs {should}"
                f" (CPUs {cpus}, {files.cpu.read_text().strip()},"
                f" {files.memory.read_text().strip()})"
            )


async def convergence(
    bench: Bench, client: docker.DockerClient, node: str, cpu: str, rounds: int
) -> list[float]:
    wanted = fleet(node, cpu)
    times = []
    print(f"convergence of {FLEET} new containers (half bound to CPU {cpu}, half shared pool):")
    for number in range(1, rounds + 1):
        took = await bench.apply(wanted, f"round {number}: {FLEET} containers running")
        await asyncio.to_thread(check_fleet, client, node, bench.runtime.host, wanted)
        emptied = await bench.apply([], f"round {number}: removing the {FLEET} containers")
        times.append(took)
        print(f"  round {number}: {ms(took)}   (then removed in {ms(emptied)}, not timed)")
    print(f"  median   {ms(statistics.median(times))}\n")
    return times


def naive(client: docker.DockerClient, node: str, host: Host, rounds: int) -> list[float]:
    """The same 20 containers made one by one with the plain SDK, removed after each round."""
    cpu = str(max(os.sched_getaffinity(0)))
    wanted = fleet(node, cpu)
    shared = docker_cpuset(shared_pool(wanted, host))
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for one in wanted:
            client.containers.run(
                IMAGE,
                COMMAND,
                detach=True,
                labels={NAIVE_LABEL: node},
                cpuset_cpus=shared if one.shared_pool else cpu,
                cpu_shares=one.limits.cpu_shares,
                mem_limit=one.limits.mem_limit,
                memswap_limit=one.limits.memswap_limit,
            )
        times.append(time.perf_counter() - started)
        remove_all(client, by_label(NAIVE_LABEL, node))
    return times


def remove_all(client: docker.DockerClient, filters: Filters) -> int:
    removed = 0
    for container in client.containers.list(all=True, filters=filters):
        with contextlib.suppress(NotFound):
            container.remove(force=True)
            removed += 1
    return removed


@contextlib.contextmanager
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
        client.images.get(IMAGE)
    except DockerException as error:
        raise BenchError(
            f"no Docker engine or no image {IMAGE} ({error}); run scripts/provision as root"
        ) from error
    try:
        yield client
    finally:
        client.close()


async def run(args: argparse.Namespace) -> None:
    node = f"bench-{secrets.token_hex(4)}"
    cpu = str(max(os.sched_getaffinity(0)))
    inventory = discover(sysfs_root=Path("/"), reserved=CpuSet(), hostname=socket.gethostname())
    host = Host.of(inventory)
    print(f"node {node}, host CPUs offered {host.offered}, image {IMAGE}\n")
    with docker_client() as client, tempfile.TemporaryDirectory() as state_dir:
        engine = DockerEngine.connect(node=node, base_url="", timeout=30)
        options = RuntimeOptions(
            node=node, state_path=Path(state_dir) / "agent.json", stop_timeout_seconds=1
        )
        runtime = Runtime(engine, host, options)
        task = asyncio.create_task(runtime.run())
        try:
            bench = Bench(runtime, task, args.timeout)
            await limits_latency(bench, client, node, cpu, args.changes, args.pause)
            ours = await convergence(bench, client, node, cpu, args.rounds)
            reference = await asyncio.to_thread(naive, client, node, host, args.rounds)
            print("naive reference: the plain Docker SDK, containers.run() x 20, one thread:")
            for number, took in enumerate(reference, 1):
                print(f"  round {number}: {ms(took)}")
            median_ours, median_naive = statistics.median(ours), statistics.median(reference)
            print(f"  median   {ms(median_naive)}")
            print(f"ours / naive (medians): {median_ours / median_naive:.2f}")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task  # a task that failed was reported by check_alive already
            engine.close()
            cleanup(client, node)


def cleanup(client: docker.DockerClient, node: str) -> None:
    """Remove every container the bench made; say so when the engine does not let us."""
    try:
        left = remove_all(client, by_label(labels.NODE, node))
        left += remove_all(client, by_label(NAIVE_LABEL, node))
    except (DockerException, requests.RequestException) as error:
        print(
            f"cleanup failed ({error}): remove the containers labelled {labels.NODE}={node}"
            f" or {NAIVE_LABEL}={node} by hand",
            file=sys.stderr,
        )
        return
    if left:
        print(f"cleanup: removed {left} containers left behind", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=50, help="limits changes to time")
    parser.add_argument("--rounds", type=int, default=3, help="convergence rounds")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds one step may take before failing"
    )
    parser.add_argument(
        "--pause", type=float, default=0.1, help="seconds between two limits changes"
    )
    parser.add_argument("--log-level", default="warning", help="the runtime's log level")
    args = parser.parse_args()
    if args.changes < 1 or args.rounds < 1:
        parser.error("--changes and --rounds must be at least 1")
    configure(args.log_level)
    try:
        asyncio.run(run(args))
    except BenchError as error:
        print(f"bench failed: {error}", file=sys.stderr)
        return 1
    except (DockerException, requests.RequestException) as error:
        print(f"bench failed: the Docker engine: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
