"""A fleet against one coordinator: deploy throughput, latency as the state grows, the
lease API under that load, memory, and restart, through the public surfaces only.

    .venv/bin/python bench/fleet.py [--agents 1000] [--containers 10000] [--deploy-size 1000]
                                    [--lease-rate 1000] [--lease-process] [--workers 1]
                                    [--store sqlite|etcd]
                                    [--json FILE]
    .venv/bin/python bench/fleet.py --smoke      # 20 agents, 200 containers: seconds
    .venv/bin/python bench/fleet.py --targets [--profile FILE]   # issue 29's size

A real ``allot-coordinator`` process on a free loopback port, its SQLite store in a new
temporary directory (under ``--workdir``, the current directory by default, so on this
disk), with one resource template for leases. With ``--store etcd`` its store is a
local 3-member etcd cluster started in that directory instead (``etcd_cluster``, as the
tests start one), and the coordinator, the only one, leads it: every commit is fenced.
``--agents`` simulated agents (``fleet_agents``: real websockets, real frames,
heterogeneous inventories of 8 to 128 cores, no Docker) run in ``--workers`` processes
of their own, as does the lease load (``fleet_leases``), so the coordinator's RSS and CPU
are its own. Steps and figures:

1. start: the coordinator until ``/readyz`` answers 200 (it leads); the fleet until every agent has
   its welcome. Then idle: ``--settle`` seconds for the last pace the coordinator gave
   (it stretches the heartbeat interval as the fleet connects) to take over, and the
   heartbeats a second the fleet sends over ``--idle-seconds``.
2. deploys: ``--containers`` in deployments of ``--deploy-size`` (cpu ``--cpu``, memory
   ``--memory``), one ``POST /v1/namespaces/fleet/deployments`` after another, while the
   lease load sends ``POST /v1/capacity`` at ``--lease-rate`` requests/s (open loop).
   Prints containers/s *committed* (the placed containers in the 201 answers over the
   time from the first POST to the last answer) and *acknowledged* (over the time until
   the last of them was in a desired state its node's agent received); POST latency
   p50/p99 over the first and the last tenth of the POSTs and last/first; the lease
   figures during the deploys, next to those of ``--lease-idle`` seconds just before
   them; sessions the fleet lost meanwhile. With ``--profile FILE``, py-spy samples the
   coordinator during the POSTs (``spy``; ``pip install py-spy`` in the venv, not a
   dependency of the project) and the top of the profile is printed.
3. loaded: the CPU the coordinator used during the deploys, next to what this
   benchmark's processes and every other process on the host used (on a shared machine
   the last competes with the coordinator: read the figures with it); the coordinator's
   RSS (``VmRSS``) and the agents' processes'.
4. single deploys: ``--singles`` deployments of one container on the loaded fleet, one
   after another: POST latency and time until acknowledged.
5. restart: the coordinator is killed (SIGKILL) once every agent has noticed, started
   again on the same store and port: seconds until ``/readyz`` answers (next to the
   first start on an empty store) and until every agent is welcomed again, and whether
   their welcomes hold every container they held before. Agents retry with the agent's
   backoff, but capped at ``--backoff-cap`` seconds so the figure is the coordinator's.
6. targets: a line per row of issue 29's table, the figure beside its target and the
   load average when it was taken (``fleet_targets``); a standby's build is measured by
   ``bench/takeover_build.py``, which the line names.

``--targets`` sets issue 29's size: 10,000 agents in 2 processes, 200,000 containers in
deployments of 1,000. The coordinator's ``max_connections`` is set above the fleet, and
this process raises its open-files limit to the hard limit (the workers inherit it).

Latencies are wall clock, ``time.monotonic`` in every process. A step that does not finish
within ``--timeout`` seconds ends the run with what was measured and exit status 1.
``--json`` also writes the figures to a file; ``--keep`` keeps the temporary directory
with the store and the coordinator's log. The benchmark is not part of ``make test``;
its smoke test (``tests/bench/test_fleet_smoke.py``, ``--smoke``, checking sense, not
speed) is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path

import aiohttp
import fleet_agents
import fleet_leases
import msgspec
from etcd_cluster import EtcdCluster
from fleet_agents import (
    ACKNOWLEDGED,
    COLUMNS,
    CONNECTED,
    DROPPED,
    FAILED,
    HEARTBEATS,
    HELD,
    REFUSED,
    WELCOMES,
    FleetOptions,
    Shapes,
)
from fleet_leases import MISSED, LeaseLoad, Samples
from fleet_targets import print_targets
from spy import Spy, top_of

NAMESPACE = "fleet"
LEASE_RESOURCE = "fleet"
IMAGE = "allot/busybox:test"
MB = 1e6
POLL_SECONDS = 0.005
PROGRESS_SECONDS = 15.0
SMOKE = {
    "agents": 20,
    "containers": 200,
    "deploy_size": 100,
    "lease_rate": 50.0,
    "lease_idle": 0.5,
    "singles": 5,
    "backoff_cap": 0.5,
    "timeout": 60.0,
    "settle": 0.5,
    "idle_seconds": 1.0,
}
# Issue 29's size: 10,000 agents in 2 processes, 0 -> 200,000 containers.
TARGETS = {
    "agents": 10_000,
    "workers": 2,
    "containers": 200_000,
    "deploy_size": 1000,
    "timeout": 900.0,
}
# The coordinator closes a connection idle for 30 s; ours go first, so that no POST is
# written to one it is closing (the fleet's handshakes take longer than that).
CLIENT_KEEPALIVE_SECONDS = 10.0


class Failed(Exception):
    """A step did not finish in time, or the coordinator died."""


# -- the coordinator process ------------------------------------------------------------


class Coordinator:
    """``allot-coordinator`` as a subprocess on a fixed port, started again at will."""

    def __init__(
        self,
        workdir: Path,
        port: int,
        join_token: str,
        api_token: str,
        more: str = "",
        *,
        max_connections: int = 10_000,
    ) -> None:
        """``more``: further TOML settings, such as the store's (none: SQLite in
        ``workdir``); ``max_connections``: the coordinator's cap, above the fleet."""
        self.url = f"http://127.0.0.1:{port}"
        self.log = workdir / "coordinator.log"
        self.config = workdir / "coordinator.toml"
        self.config.write_text(
            f'host = "127.0.0.1"\nport = {port}\ndata_dir = "{workdir / "data"}"\n'
            f'join_token = "{join_token}"\napi_tokens = ["{api_token}"]\n'
            f"max_connections = {max_connections}\n{more}"
            f'[[resources]]\nidentifier_glob = "{LEASE_RESOURCE}"\ncapacity = 1000000\n'
            '[resources.algorithm]\nkind = "FAIR_SHARE"\nlease_length = 300\n'
            "refresh_interval = 10\nlearning_mode_duration = 0\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        binary = Path(sys.executable).parent / "allot-coordinator"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [str(binary), f"--config={self.config}"], stdout=log, stderr=subprocess.STDOUT
            )

    def kill(self) -> None:
        """SIGKILL; until the next ``start`` the coordinator is meant to be down."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def stop(self) -> None:
        """SIGTERM, which closes every agent session; SIGKILL after a minute."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()

    def check_alive(self) -> None:
        """Raises ``Failed`` if the coordinator died while it was meant to run."""
        if self.process is not None and self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise Failed(f"the coordinator is not running; the end of its log:\n{tail}")


def rss_bytes(pid: int) -> int:
    """The resident set of a process, from ``VmRSS`` in /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_busy_seconds() -> float:
    """CPU time every process on the host has used since boot (``/proc/stat``)."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds used from its creation until ``read``: by the coordinator, by this
    benchmark's own processes (``own``: agents, lease load, this one), and by every
    other process on the host, which on a shared machine competes with both."""

    def __init__(self, coordinator: int, own: list[int]) -> None:
        self._coordinator = coordinator
        self._own = own
        self._start = self._now()
        self._started = time.monotonic()

    def _now(self) -> tuple[float, float, float]:
        return (
            cpu_seconds(self._coordinator),
            sum(map(cpu_seconds, self._own)),
            host_busy_seconds(),
        )

    def read(self) -> tuple[float, float, float, float]:
        """(wall-clock seconds, coordinator, own, others)"""
        coordinator, own, host = (b - a for a, b in zip(self._start, self._now(), strict=True))
        return time.monotonic() - self._started, coordinator, own, host - coordinator - own


def deployment(name: str, count: int, cpu: str, memory: str) -> dict[str, object]:
    """The body of a POST of the deployment ``name`` of ``count`` containers."""
    return {
        "name": name,
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "count": count,
        "resources": {"cpu": cpu, "memory": memory},
    }


def deployments_url(coordinator: str) -> str:
    return f"{coordinator}/v1/namespaces/{NAMESPACE}/deployments"


def etcd_settings(endpoints: tuple[str, ...]) -> str:
    """A coordinator's TOML settings for an etcd store at ``endpoints``."""
    return f'store = "etcd"\netcd_endpoints = [{", ".join(map(json.dumps, endpoints))}]\n'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# -- the fleet and the lease load, each in processes of its own ----------------------------


class Fleet:
    """The simulated agents in ``workers`` processes, and their counts."""

    def __init__(
        self, context: SpawnContext, options: FleetOptions, agents: int, workers: int
    ) -> None:
        self.agents = agents
        self.workers = workers
        self.counts = context.RawArray("q", workers * COLUMNS)
        self.stamps = context.RawArray("d", workers)
        self.stop = context.Event()
        self.processes: list[SpawnProcess] = [
            context.Process(
                target=fleet_agents.worker,
                args=(
                    options,
                    list(range(w, agents, workers)),
                    self.counts,
                    self.stamps,
                    w,
                    self.stop,
                ),
                name=f"fleet-agents-{w}",
            )
            for w in range(workers)
        ]

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def total(self, column: int) -> int:
        return fleet_agents.total(self.counts, column, self.workers)

    def __str__(self) -> str:
        columns = (
            ("connected", CONNECTED),
            ("welcomes", WELCOMES),
            ("held", HELD),
            ("acknowledged", ACKNOWLEDGED),
            ("dropped", DROPPED),
            ("failed attempts", FAILED),
            ("refused", REFUSED),
        )
        return ", ".join(f"{name} {self.total(column):,}" for name, column in columns)

    def last_acknowledged_at(self) -> float:
        return float(max(self.stamps))

    def rss_bytes(self) -> int:
        return sum(rss_bytes(p.pid) for p in self.processes if p.pid is not None)

    def close(self) -> None:
        self.stop.set()
        for process in self.processes:
            if process.pid is None:
                continue  # never started: the run failed before
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()


class Leases:
    """The lease load in a process of its own, and its samples once stopped."""

    def __init__(self, context: SpawnContext, load: LeaseLoad) -> None:
        self.ready = context.Event()
        self.stop = context.Event()
        self._results, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=fleet_leases.worker,
            args=(load, self.ready, self.stop, sender),
            name="fleet-leases",
        )

    def start(self) -> None:
        self.process.start()

    def finish(self, timeout: float) -> Samples:
        self.stop.set()
        if not self._results.poll(timeout):
            raise Failed("the lease load sent no samples")
        samples: Samples = self._results.recv()
        self.process.join(timeout=10)
        return samples

    def close(self) -> None:
        self.stop.set()
        if self.process.is_alive():
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


@dataclass(frozen=True)
class LeaseFigures:
    asked_per_s: float
    answered_per_s: float  # 200s answered, over the window
    p50_ms: float
    p99_ms: float
    errors: int  # answered with another status, or not at all
    missed: int  # due while too many were in flight, so not sent

    @classmethod
    def of(cls, samples: Samples, start: float, end: float, rate: float) -> LeaseFigures:
        took, errors, missed = [], 0, 0
        for due, seconds, status in zip(samples.due, samples.took, samples.status, strict=True):
            if not start <= due < end:
                continue
            if status == 200:
                took.append(seconds * 1e3)
            elif status == MISSED:
                missed += 1
            else:
                errors += 1
        span = max(end - start, 1e-9)
        return cls(
            rate, len(took) / span, percentile(took, 0.5), percentile(took, 0.99), errors, missed
        )

    def line(self) -> str:
        return (
            f"{self.answered_per_s:8,.0f} req/s answered of {self.asked_per_s:,.0f} asked,"
            f" p50 {self.p50_ms:8.1f} ms, p99 {self.p99_ms:8.1f} ms"
            f" ({self.errors} errors, {self.missed} not sent)"
        )


# -- figures ------------------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN for a denominator of 0 (a clock tick too short)."""
    return numerator / denominator if denominator else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile of ``values`` (NaN when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@dataclass
class Figures:
    store: str = "sqlite"
    agents: int = 0
    agent_cpus: int = 0  # logical CPUs over the fleet
    coordinator_start_s: float = math.nan  # first start, empty store, to /readyz
    fleet_connected_s: float = math.nan
    idle_s: float = math.nan  # the idle window, after the settle
    idle_heartbeats_per_s: float = math.nan
    idle_load_average: float = math.nan
    deployments: int = 0
    containers_asked: int = 0
    containers_committed: int = 0  # placed, in the 201 answers
    refused_posts: int = 0
    first_refusal: str = ""
    commit_s: float = math.nan
    committed_per_s: float = math.nan
    containers_acknowledged: int = 0
    acknowledge_s: float = math.nan
    acknowledged_per_s: float = math.nan
    post_first_p50_ms: float = math.nan
    post_first_p99_ms: float = math.nan
    post_last_p50_ms: float = math.nan
    post_last_p99_ms: float = math.nan
    post_last_over_first: float = math.nan  # of the p50s
    # The coordinator's CPU time while each POST was under way, which other processes on
    # the host slow down less than the wall clock: p50 of the first and last tenth.
    post_cpu_first_p50_ms: float = math.nan
    post_cpu_last_p50_ms: float = math.nan
    lease_idle: LeaseFigures | None = None
    lease_deploys: LeaseFigures | None = None
    sessions_dropped: int = 0  # during the deploys
    coordinator_rss_mb: float = math.nan
    # CPU seconds during the deploys (cpu_window_s, from the first POST until every
    # container was acknowledged): the coordinator's, this benchmark's other processes'
    # (agents, lease load, this one), and every other process's on the host
    cpu_window_s: float = math.nan
    coordinator_cpu_s: float = math.nan
    bench_cpu_s: float = math.nan
    others_cpu_s: float = math.nan
    host_cpus: int = 0
    load_average: float = math.nan  # over the minute before the run
    deploys_load_average: float = math.nan  # as the deploys ended
    agents_rss_mb: float = math.nan
    singles: int = 0
    single_post_p50_ms: float = math.nan
    single_post_max_ms: float = math.nan
    single_acknowledged_p50_ms: float = math.nan
    held_before_restart: int = 0
    restart_ready_s: float = math.nan
    restart_load_average: float = math.nan
    restart_reconnected_s: float = math.nan
    restart_agents_back: int = 0  # agents in a session when the wait for all of them ended
    held_after_restart: int = 0
    failed: str = ""
    posts_ms: list[float] = field(default_factory=list)
    post_cpus_ms: list[float] = field(default_factory=list)


class _Record(msgspec.Struct):
    node: str = ""


class _View(msgspec.Struct):
    record: _Record


class _Placed(msgspec.Struct):
    containers: list[_View] = []


_decode_placed = msgspec.json.Decoder(_Placed)


# -- the run ------------------------------------------------------------------------------


class Bench:
    """The steps of a run, each printing its figures as it ends, all kept in ``figures``."""

    def __init__(
        self,
        args: argparse.Namespace,
        coordinator: Coordinator,
        fleet: Fleet,
        http: aiohttp.ClientSession,
        api_token: str,
    ) -> None:
        self.args = args
        self.coordinator = coordinator
        self.fleet = fleet
        self.http = http
        self.headers = {"Authorization": f"Bearer {api_token}"}
        self.figures = Figures(store=args.store, agents=args.agents)

    async def until(self, what: str, done: Callable[[], bool]) -> float:
        """Seconds until ``done()``; raises ``Failed`` after ``--timeout``. A long wait
        shows the fleet's counts on stderr every ``PROGRESS_SECONDS``."""
        started = time.monotonic()
        shown = started
        while not done():
            now = time.monotonic()
            if now - started > self.args.timeout:
                raise Failed(f"{what}: not within {self.args.timeout:g} s ({self.fleet})")
            if now - shown > PROGRESS_SECONDS:
                print(f"  waiting {now - started:4.0f} s for {what}: {self.fleet}", file=sys.stderr)
                shown = now
            self.coordinator.check_alive()
            await asyncio.sleep(POLL_SECONDS)
        return time.monotonic() - started

    async def ready(self) -> float:
        """Seconds until the coordinator's /readyz answers 200: it leads (on etcd, a
        restarted one first deletes the leader key its killed run left)."""
        started = time.monotonic()
        while True:
            self.coordinator.check_alive()
            try:
                async with self.http.get(self.coordinator.url + "/readyz") as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except aiohttp.ClientConnectionError:
                pass
            if time.monotonic() - started > self.args.timeout:
                raise Failed(f"the coordinator did not answer within {self.args.timeout:g} s")
            await asyncio.sleep(POLL_SECONDS)

    async def deploy(self, name: str, count: int) -> tuple[float, int, str]:
        """One POST: (seconds until its answer was read, containers placed, refusal)."""
        body = deployment(name, count, self.args.cpu, self.args.memory)
        url = deployments_url(self.coordinator.url)
        started = time.monotonic()
        async with self.http.post(url, json=body, headers=self.headers) as response:
            answer = await response.read()
            took = time.monotonic() - started
        if response.status != 201:
            return took, 0, f"HTTP {response.status}: {answer[:300].decode(errors='replace')}"
        placed = sum(1 for view in _decode_placed.decode(answer).containers if view.record.node)
        return took, placed, ""

    async def start(self) -> None:
        figures = self.figures
        figures.host_cpus = os.cpu_count() or 0
        figures.load_average = os.getloadavg()[0]
        self.coordinator.start()
        figures.coordinator_start_s = await self.ready()
        shapes = Shapes(self.args.seed)
        figures.agent_cpus = sum(
            cores * threads for cores, threads, _, _ in map(shapes.shape_of, range(figures.agents))
        )
        self.fleet.start()
        figures.fleet_connected_s = await self.until(
            "every agent welcomed", lambda: self.fleet.total(CONNECTED) == self.args.agents
        )
        print(
            f"host: {figures.host_cpus} CPUs, load average {figures.load_average:.2f} over the"
            f" minute before; store: {figures.store}\n"
            f"coordinator up in {figures.coordinator_start_s:.2f} s; {figures.agents:,} agents"
            f" ({figures.agent_cpus:,} CPUs, 8-128 cores, 1-4 NUMA nodes) welcomed in"
            f" {figures.fleet_connected_s:.1f} s"
            f" ({self.fleet.total(FAILED)} failed attempts, {self.fleet.total(REFUSED)} refused)"
        )

    async def idle(self) -> None:
        """Heartbeats a second from the idle fleet, once the pace it was last given
        (as it connected) has had ``--settle`` seconds to take over."""
        figures, args = self.figures, self.args
        await asyncio.sleep(args.settle)
        beats, started = self.fleet.total(HEARTBEATS), time.monotonic()
        await asyncio.sleep(args.idle_seconds)
        figures.idle_s = time.monotonic() - started
        figures.idle_heartbeats_per_s = (self.fleet.total(HEARTBEATS) - beats) / figures.idle_s
        figures.idle_load_average = os.getloadavg()[0]
        print(
            f"idle fleet: {figures.idle_heartbeats_per_s:,.1f} heartbeats/s over"
            f" {figures.idle_s:.0f} s, {args.settle:g} s after the last welcome (load average"
            f" {figures.idle_load_average:.2f})"
        )

    async def deploys(self, leases: Leases | None) -> None:
        args, figures = self.args, self.figures
        sizes = [args.deploy_size] * (args.containers // args.deploy_size)
        if args.containers % args.deploy_size:
            sizes.append(args.containers % args.deploy_size)
        figures.deployments, figures.containers_asked = len(sizes), sum(sizes)
        own = [os.getpid(), *(p.pid for p in self.fleet.processes if p.pid is not None)]
        if leases is not None:
            await self.until("the lease load ready", leases.ready.is_set)
            await asyncio.sleep(args.lease_idle)
            own += [leases.process.pid] if leases.process.pid is not None else []
        dropped_before = self.fleet.total(DROPPED)
        meter = CpuMeter(self.coordinator.pid, own)
        spy = None if args.profile is None else Spy(self.coordinator.pid, args.profile)
        first = time.monotonic()
        try:
            await self.post_all(sizes)
        finally:
            if spy is not None:
                spy.stop()
        last_answer = time.monotonic()
        committed = figures.containers_committed
        figures.commit_s = last_answer - first
        figures.committed_per_s = ratio(committed, figures.commit_s)
        try:
            await self.until(
                "every committed container acknowledged",
                lambda: self.fleet.total(ACKNOWLEDGED) >= committed,
            )
        finally:
            figures.containers_acknowledged = self.fleet.total(ACKNOWLEDGED)
            figures.sessions_dropped = self.fleet.total(DROPPED) - dropped_before
            (
                figures.cpu_window_s,
                figures.coordinator_cpu_s,
                figures.bench_cpu_s,
                figures.others_cpu_s,
            ) = meter.read()
        figures.acknowledge_s = self.fleet.last_acknowledged_at() - first
        figures.acknowledged_per_s = ratio(committed, figures.acknowledge_s)
        tenth = max(1, len(figures.posts_ms) // 10)
        head, tail = figures.posts_ms[:tenth], figures.posts_ms[-tenth:]
        figures.post_first_p50_ms = percentile(head, 0.5)
        figures.post_first_p99_ms = percentile(head, 0.99)
        figures.post_last_p50_ms = percentile(tail, 0.5)
        figures.post_last_p99_ms = percentile(tail, 0.99)
        figures.post_last_over_first = ratio(figures.post_last_p50_ms, figures.post_first_p50_ms)
        head, tail = figures.post_cpus_ms[:tenth], figures.post_cpus_ms[-tenth:]
        figures.post_cpu_first_p50_ms = percentile(head, 0.5)
        figures.post_cpu_last_p50_ms = percentile(tail, 0.5)
        if leases is not None:
            samples, rate = leases.finish(args.timeout), args.lease_rate
            figures.lease_idle = LeaseFigures.of(samples, first - args.lease_idle, first, rate)
            figures.lease_deploys = LeaseFigures.of(samples, first, last_answer, rate)
        figures.coordinator_rss_mb = rss_bytes(self.coordinator.pid) / MB
        figures.agents_rss_mb = self.fleet.rss_bytes() / MB
        figures.deploys_load_average = os.getloadavg()[0]
        self.print_deploys()
        if args.profile is not None:
            print(f"the coordinator during the POSTs (py-spy, {args.profile}):")
            for line in top_of(args.profile, 25):
                print(f"  {line}")

    async def post_all(self, sizes: list[int]) -> None:
        """One deployment per size, one POST after another; progress on stderr."""
        figures = self.figures
        every = max(1, len(sizes) // 10)
        for number, size in enumerate(sizes):
            cpu = cpu_seconds(self.coordinator.pid)
            took, placed, refusal = await self.deploy(f"d{number:05d}", size)
            figures.post_cpus_ms.append((cpu_seconds(self.coordinator.pid) - cpu) * 1e3)
            figures.posts_ms.append(took * 1e3)
            figures.containers_committed += placed
            if refusal:
                figures.refused_posts += 1
                figures.first_refusal = figures.first_refusal or refusal
            if (number + 1) % every == 0 or number + 1 == len(sizes):
                print(
                    f"  POST {number + 1:>5}/{len(sizes)}: {placed:,} placed in"
                    f" {took * 1e3:,.0f} ms{'; ' + refusal if refusal else ''}",
                    file=sys.stderr,
                )

    def print_deploys(self) -> None:
        f = self.figures
        if f.lease_idle is not None and f.lease_deploys is not None:
            leases = (
                f"  leases idle before {f.lease_idle.line()}\n"
                f"  leases meanwhile   {f.lease_deploys.line()}\n"
            )
        else:
            leases = "  leases: no load (--lease-rate 0)\n"
        refused = f" ({f.refused_posts} refused: {f.first_refusal})" if f.refused_posts else ""
        print(
            f"{f.deployments:,} deployments of up to {self.args.deploy_size:,}"
            f" ({f.containers_asked:,} containers, cpu {self.args.cpu},"
            f" memory {self.args.memory}), one POST at a time{refused}\n"
            f"  committed    {f.containers_committed:>9,} in {f.commit_s:7.2f} s:"
            f" {f.committed_per_s:9,.0f} containers/s\n"
            f"  acknowledged {f.containers_acknowledged:>9,} in {f.acknowledge_s:7.2f} s:"
            f" {f.acknowledged_per_s:9,.0f} containers/s\n"
            f"  POST latency first tenth p50 {f.post_first_p50_ms:8,.0f} ms"
            f" p99 {f.post_first_p99_ms:8,.0f} ms\n"
            f"               last tenth  p50 {f.post_last_p50_ms:8,.0f} ms"
            f" p99 {f.post_last_p99_ms:8,.0f} ms; last/first {f.post_last_over_first:.1f}x\n"
            f"  coordinator CPU while a POST was under way, p50: first tenth"
            f" {f.post_cpu_first_p50_ms:,.0f} ms, last tenth {f.post_cpu_last_p50_ms:,.0f} ms;"
            f" last/first {ratio(f.post_cpu_last_p50_ms, f.post_cpu_first_p50_ms):.1f}x\n"
            f"{leases}"
            f"  agent sessions dropped meanwhile: {f.sessions_dropped}\n"
            f"  CPU meanwhile ({f.cpu_window_s:.1f} s on {f.host_cpus} CPUs): the coordinator"
            f" {f.coordinator_cpu_s:.1f} s ({ratio(f.coordinator_cpu_s, f.cpu_window_s):.0%} of one"
            f" core; {ratio(f.containers_committed, f.coordinator_cpu_s):,.0f} containers per"
            f" second of its CPU), this benchmark's processes {f.bench_cpu_s:.1f} s, other"
            f" processes on the host {f.others_cpu_s:.1f} s\n"
            f"coordinator loaded: RSS {f.coordinator_rss_mb:,.0f} MB; the agents' processes"
            f" {f.agents_rss_mb:,.0f} MB ({f.agents_rss_mb * MB / f.agents / 1e3:,.0f} kB per"
            " agent)"
        )

    async def singles(self) -> None:
        figures = self.figures
        if not self.args.singles:
            return
        posts, acknowledged = [], []
        for number in range(self.args.singles):
            before = self.fleet.total(ACKNOWLEDGED)
            started = time.monotonic()
            took, placed, refusal = await self.deploy(f"single-{number:03d}", 1)
            if refusal:
                raise Failed(f"a single-container deploy was refused: {refusal}")
            await self.until(
                "a single container acknowledged",
                lambda: self.fleet.total(ACKNOWLEDGED) >= before + placed,  # noqa: B023
            )
            posts.append(took * 1e3)
            acknowledged.append((self.fleet.last_acknowledged_at() - started) * 1e3)
        figures.singles = len(posts)
        figures.single_post_p50_ms = percentile(posts, 0.5)
        figures.single_post_max_ms = max(posts, default=math.nan)
        figures.single_acknowledged_p50_ms = percentile(acknowledged, 0.5)
        print(
            f"{figures.singles} single-container deploys on the loaded fleet: POST p50"
            f" {figures.single_post_p50_ms:,.1f} ms (max {figures.single_post_max_ms:,.1f} ms),"
            f" acknowledged p50 {figures.single_acknowledged_p50_ms:,.1f} ms"
        )

    async def restart(self) -> None:
        figures, fleet = self.figures, self.fleet
        figures.held_before_restart = fleet.total(HELD)
        self.coordinator.kill()
        await self.until("every agent noticed the kill", lambda: fleet.total(CONNECTED) == 0)
        started = time.monotonic()
        self.coordinator.start()
        await self.ready()
        figures.restart_ready_s = time.monotonic() - started
        try:
            await self.until(
                "every agent welcomed again", lambda: fleet.total(CONNECTED) == fleet.agents
            )
        finally:
            figures.restart_agents_back = fleet.total(CONNECTED)
            figures.held_after_restart = fleet.total(HELD)
        figures.restart_reconnected_s = time.monotonic() - started
        figures.restart_load_average = os.getloadavg()[0]
        same = "all" if figures.held_after_restart == figures.held_before_restart else "NOT all"
        print(
            f"restart (SIGKILL, same store): /readyz after {figures.restart_ready_s:.2f} s"
            f" (empty store: {figures.coordinator_start_s:.2f} s), every agent welcomed after"
            f" {figures.restart_reconnected_s:.2f} s, holding {figures.held_after_restart:,}"
            f" containers: {same} of the {figures.held_before_restart:,} held before"
        )


async def run(args: argparse.Namespace, workdir: Path) -> Figures:
    if args.store == "etcd":
        etcd = EtcdCluster(workdir / "etcd")
        etcd.start()
        try:
            return await run_on(args, workdir, etcd_settings(etcd.endpoints))
        finally:
            etcd.stop()
    return await run_on(args, workdir, "")


async def run_on(args: argparse.Namespace, workdir: Path, store: str) -> Figures:
    """The run, with the coordinator's store settings ``store`` (TOML; "": SQLite)."""
    join_token, api_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    port = free_port()
    lease_url = f"http://127.0.0.1:{port}"
    if args.lease_process:  # the lease API served by a process of its own, on its port
        lease_port = free_port()
        lease_url = f"http://127.0.0.1:{lease_port}"
        store += f'lease_address = "127.0.0.1:{lease_port}"\n'
    # Each agent holds a connection, as do the lease load and this process.
    max_connections = max(10_000, args.agents + args.lease_in_flight + 1000)
    coordinator = Coordinator(
        workdir, port, join_token, api_token, store, max_connections=max_connections
    )
    context = multiprocessing.get_context("spawn")
    options = FleetOptions(
        url=f"ws://127.0.0.1:{port}/v1/agent",
        join_token=join_token,
        seed=args.seed,
        connect_concurrency=args.connect_concurrency,
        backoff_initial=0.5,  # the agent's default
        backoff_cap=args.backoff_cap,
        nice=args.fleet_nice,
    )
    fleet = Fleet(context, options, args.agents, args.workers)
    load = LeaseLoad(
        url=lease_url,
        token=api_token,
        resource=LEASE_RESOURCE,
        rate=args.lease_rate,
        clients=args.lease_clients,
        max_in_flight=args.lease_in_flight,
    )
    leases = Leases(context, load) if args.lease_rate > 0 else None
    try:
        connector = aiohttp.TCPConnector(keepalive_timeout=CLIENT_KEEPALIVE_SECONDS)
        timeout = aiohttp.ClientTimeout(total=None)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            bench = Bench(args, coordinator, fleet, http, api_token)
            try:
                await bench.start()
                await bench.idle()
                if leases is not None:
                    leases.start()
                await bench.deploys(leases)
                await bench.singles()
                await bench.restart()
            except (Failed, aiohttp.ClientError) as error:
                bench.figures.failed = f"{type(error).__name__}: {error}"
                print(f"fleet: {bench.figures.failed}", file=sys.stderr)
            print_targets(bench.figures)
            return bench.figures
    finally:
        fleet.stop.set()  # no reconnecting while the coordinator closes the sessions
        coordinator.stop()
        fleet.close()
        if leases is not None:
            leases.close()


def without_nan(value: object) -> object:
    """``value`` with every NaN (a figure not measured) as None, which JSON can carry."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: without_nan(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_nan(item) for item in value]
    return value


def raise_file_limit(agents: int) -> None:
    """Each agent holds a socket in its worker and one in the coordinator, which inherit
    this process's limit (the coordinator raises its own as ``max_connections`` needs)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    needed = agents + 1000
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(
            f"fleet: {agents:,} agents need {needed:,} open files in the coordinator, but the"
            f" limit is {hard:,} (ulimit -Hn)"
        )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"a small run: {SMOKE}")
    parser.add_argument("--targets", action="store_true", help=f"issue 29's size: {TARGETS}")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--containers", type=int, default=10_000, help="in all, before singles")
    parser.add_argument("--deploy-size", type=int, default=1000, help="containers per POST")
    parser.add_argument("--cpu", default="0.01", help="each container's cpu request")
    parser.add_argument("--memory", default="8Mi", help="each container's memory request")
    parser.add_argument("--lease-rate", type=float, default=1000.0, help="requests/s; 0: none")
    parser.add_argument("--lease-clients", type=int, default=1000, help="distinct client ids")
    parser.add_argument("--lease-in-flight", type=int, default=256, help="most outstanding")
    parser.add_argument("--lease-idle", type=float, default=3.0, help="seconds before deploys")
    parser.add_argument(
        "--lease-process",
        action="store_true",
        help="serve leases from a process of their own (lease_address) and send the lease"
        " load there",
    )
    parser.add_argument("--singles", type=int, default=20, help="single-container deploys")
    parser.add_argument("--workers", type=int, default=1, help="processes of agents")
    parser.add_argument(
        "--fleet-nice",
        type=int,
        default=0,
        help="niceness added to the agents' processes (19: they take only the CPU the"
        " coordinator, its lease process and the lease clients leave, as agents on other"
        " machines would)",
    )
    parser.add_argument("--connect-concurrency", type=int, default=256, help="handshakes")
    parser.add_argument("--backoff-cap", type=float, default=2.0, help="agents' retry bound")
    parser.add_argument("--seed", type=int, default=1, help="of the inventories")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per step")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before idle")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="the idle window")
    parser.add_argument(
        "--profile", type=Path, help="py-spy the coordinator during the POSTs into this file"
    )
    parser.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where the store goes")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the store and the log")
    if argv is None:
        argv = sys.argv[1:]
    if "--smoke" in argv:
        parser.set_defaults(**SMOKE)
    elif "--targets" in argv:
        parser.set_defaults(**TARGETS)
    args = parser.parse_args(argv)
    if not 1 <= args.deploy_size <= 1000:
        parser.error("--deploy-size must be 1 to 1000 (the API's largest count)")
    if args.agents < 1 or args.workers < 1 or args.containers < 1:
        parser.error("--agents, --workers and --containers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    raise_file_limit(args.agents)
    directory = Path(tempfile.mkdtemp(prefix="allot-fleet-", dir=args.workdir))
    try:
        figures = asyncio.run(run(args, directory))
    finally:
        if args.keep:
            print(f"fleet: the store and the coordinator's log are in {directory}")
        else:
            shutil.rmtree(directory)
    if args.json is not None:
        args.json.write_text(json.dumps(without_nan(asdict(figures)), indent=2) + "\n")
    return 1 if figures.failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up as for Ctrl-C
    sys.exit(main())
