"""Simulated agents for ``bench/fleet.py``: many nodes in one process, each speaking the
real protocol (``shared.protocol``) over its own websocket, with no Docker behind it.

    tally = Tally(counts, stamps, worker=0)
    await run_fleet(url, join_token, names, seed=1, tally=tally, ...)   # until stopped

A simulated agent does what ``agent.session`` does, minus the runtime: it opens the
agent socket with the join token, says hello with its inventory (and, on a reconnect,
the containers it holds), takes the welcome's desired state, heartbeats (a heartbeat
frame and a websocket ping) every interval the welcome names, or a later desired frame
stretches it to, and answers every ``desired`` frame with a ``status`` frame saying each
desired container is running at the revision that brought it (a delta on another
revision than the one it holds: a heartbeat asking for the whole state instead). As the
real agent does, the first status of a session lists every container, and when the
welcome says the coordinator takes partial statuses each later one lists only the
containers that are new or changed since the status sent before, with the ids of those
removed in ``gone`` (``shared.status_delta.partial_report``). A lost session is retried
after a capped, fully jittered backoff.

Inventories are heterogeneous and fixed by the seed and the node's index: 8 to 128
cores, with or without SMT, on 1, 2 or 4 NUMA nodes, 4 to 16 GiB per core, no GPUs.
Nodes of one shape share one ``Inventory`` but for its hostname, so ten thousand of
them cost little memory.

What the fleet has seen is counted in shared memory (``Tally``), one row per worker
process, for the benchmark's process to read while it runs: a container is
*acknowledged* the first time its node's agent receives a desired state holding it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Sequence
from ctypes import Array
from dataclasses import dataclass
from multiprocessing.synchronize import Event as EventType
from typing import Any

import aiohttp
import msgspec

from shared.backoff import Backoff
from shared.cpuset import CpuSet
from shared.inventory import Cpu, Inventory, NumaNode
from shared.protocol import (
    PROTOCOL_VERSION,
    SUBPROTOCOL,
    ContainerStatus,
    Desired,
    DesiredContainer,
    Error,
    Heartbeat,
    Hello,
    ProtocolError,
    Status,
    Welcome,
    decode_from_coordinator,
    encode,
)
from shared.status_delta import partial_report

GiB = 1024**3
CORE_COUNTS = (8, 16, 24, 32, 48, 64, 96, 128)
AGENT_VERSION = "fleet-bench"
# Longer than the agent's 10 s: a slow welcome is measured rather than given up on.
WELCOME_TIMEOUT_SECONDS = 30.0
HANDSHAKE_TIMEOUT = aiohttp.ClientTimeout(total=60.0)

# The columns of a worker's row of counts.
CONNECTED = 0  # agents in a session (welcomed, not yet ended)
WELCOMES = 1  # welcomes received, ever
ACKNOWLEDGED = 2  # distinct containers received in a desired state, summed over agents
HELD = 3  # containers in the agents' current desired states, summed
DESIRED_FRAMES = 4
STATUS_FRAMES = 5
HEARTBEATS = 6
DROPPED = 7  # sessions that ended while the fleet was not stopping
FAILED = 8  # connection attempts that got no welcome
REFUSED = 9  # attempts the coordinator answered with an error frame
DESIRED_BYTES = 10  # bytes of the desired frames received
COLUMNS = 11


class Tally:
    """One worker's row of counts in shared memory, and the time of its last
    acknowledgement (``time.monotonic``, which every process on the host shares)."""

    def __init__(self, counts: Array[Any], stamps: Array[Any], worker: int) -> None:
        self._counts = counts
        self._stamps = stamps
        self._base = worker * COLUMNS
        self._worker = worker

    def add(self, column: int, amount: int = 1) -> None:
        self._counts[self._base + column] += amount

    def acknowledged(self, amount: int) -> None:
        self._counts[self._base + ACKNOWLEDGED] += amount
        self._stamps[self._worker] = time.monotonic()


def total(counts: Array[Any], column: int, workers: int) -> int:
    """A column summed over every worker's row."""
    return sum(counts[w * COLUMNS + column] for w in range(workers))


def node_name(index: int) -> str:
    return f"fleet-{index:05d}"


def shape(rng: random.Random) -> tuple[int, int, int, int]:
    """(cores, threads per core, NUMA nodes, GiB per core) of one node."""
    cores = rng.choice(CORE_COUNTS)
    numa = rng.choice([n for n in (1, 2, 4) if cores % n == 0 and cores // n >= 4])
    return cores, rng.choice((1, 2)), numa, rng.choice((4, 8, 16))


def build_inventory(cores: int, threads: int, numa: int, gib_per_core: int) -> Inventory:
    """A host the way Linux numbers it: CPU ``c + t * cores`` is thread ``t`` of core
    ``c``; cores are split evenly over NUMA nodes in order, each node one package."""
    per_node = cores // numa
    cpus = [
        Cpu(id=c + t * cores, core=c, package=c // per_node, numa=c // per_node)
        for t in range(threads)
        for c in range(cores)
    ]
    memory = cores * gib_per_core * GiB
    nodes = [
        NumaNode(
            id=n,
            cpus=CpuSet(cpu.id for cpu in cpus if cpu.numa == n),
            memory=memory // numa,
            distances={m: 10 if m == n else 20 for m in range(numa)},
        )
        for n in range(numa)
    ]
    everything = CpuSet(cpu.id for cpu in cpus)
    return Inventory(
        hostname="",
        cpus=cpus,
        online=everything,
        isolated=CpuSet(),
        reserved=CpuSet(),
        numa_nodes=nodes,
        memory=memory,
    )


class Shapes:
    """Each node's inventory, drawn from the seed and its index; one per shape is built."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._built: dict[tuple[int, int, int, int], Inventory] = {}

    def shape_of(self, index: int) -> tuple[int, int, int, int]:
        return shape(random.Random(self._seed * 1_000_003 + index))

    def inventory(self, index: int) -> Inventory:
        key = self.shape_of(index)
        if key not in self._built:
            self._built[key] = build_inventory(*key)
        return msgspec.structs.replace(self._built[key], hostname=node_name(index))


class Refused(Exception):
    """The coordinator answered the hello with an error frame."""


class SimulatedAgent:
    """One node: its desired state, the containers it has ever been sent, its sessions."""

    def __init__(self, name: str, inventory: Inventory, tally: Tally) -> None:
        self.name = name
        self.inventory = inventory
        self.tally = tally
        self.revision = 0
        self.interval = 0.0  # between heartbeats
        self.held: dict[str, DesiredContainer] = {}
        self.taken_at: dict[str, int] = {}  # the revision that last brought each held one
        self.seen: set[str] = set()
        # The status last sent in this session (None: none yet, the next one is full),
        # and whether the coordinator takes partial ones.
        self.last_sent: Status | None = None
        self.partial = False

    async def run(
        self,
        http: aiohttp.ClientSession,
        url: str,
        join_token: str,
        gate: asyncio.Semaphore,
        backoff: Backoff,
        stopping: asyncio.Event,
    ) -> None:
        """Sessions, one after another, until ``stopping`` is set."""
        while not stopping.is_set():
            try:
                await self._session(http, url, join_token, gate, backoff, stopping)
            except Refused:
                self.tally.add(REFUSED)
            except (aiohttp.ClientError, OSError, TimeoutError, ProtocolError):
                self.tally.add(FAILED)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), backoff.next_delay())

    async def _session(
        self,
        http: aiohttp.ClientSession,
        url: str,
        join_token: str,
        gate: asyncio.Semaphore,
        backoff: Backoff,
        stopping: asyncio.Event,
    ) -> None:
        # The gate bounds the handshakes in flight, not the sessions.
        async with gate:
            ws = await http.ws_connect(
                url, protocols=(SUBPROTOCOL,), headers={"Authorization": f"Bearer {join_token}"}
            )
            try:
                welcome = await self._greet(ws, join_token)
            except BaseException:
                await ws.close()
                raise
        backoff.reset()
        self._take(welcome.revision, welcome.containers, full=True, removed=())
        self.tally.add(WELCOMES)
        self.tally.add(CONNECTED)  # last: a count of CONNECTED sees what is HELD
        self.interval = welcome.heartbeat_seconds
        self.last_sent, self.partial = None, welcome.partial_statuses
        beating = asyncio.create_task(self._heartbeats(ws))
        try:
            async with ws:
                await self._report(ws)
                await self._follow(ws)
        finally:
            self.tally.add(CONNECTED, -1)
            if not stopping.is_set():
                self.tally.add(DROPPED)
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _greet(self, ws: aiohttp.ClientWebSocketResponse, join_token: str) -> Welcome:
        hello = Hello(
            node=self.name,
            token=join_token,
            protocol=PROTOCOL_VERSION,
            inventory=self.inventory,
            agent_version=AGENT_VERSION,
            applied_revision=self.revision,
            containers=self._statuses(),
        )
        await ws.send_bytes(encode(hello))
        message = await ws.receive(timeout=WELCOME_TIMEOUT_SECONDS)
        if message.type != aiohttp.WSMsgType.BINARY:
            raise ConnectionError(f"socket closed before welcome ({ws.close_code})")
        frame = decode_from_coordinator(message.data)
        if isinstance(frame, Error):
            raise Refused(f"{frame.message} ({frame.code})")
        if not isinstance(frame, Welcome):
            raise ProtocolError("invalid_frame", f"expected welcome, got {type(frame).__name__}")
        return frame

    async def _follow(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Take every desired state and answer it, until the socket closes."""
        while True:
            message = await ws.receive()
            if message.type != aiohttp.WSMsgType.BINARY:
                return
            frame = decode_from_coordinator(message.data)
            if isinstance(frame, Desired):
                self.tally.add(DESIRED_FRAMES)
                self.tally.add(DESIRED_BYTES, len(message.data))
                if frame.heartbeat_seconds is not None:
                    self.interval = frame.heartbeat_seconds
                if not frame.full and frame.since not in (None, self.revision):
                    await ws.send_bytes(
                        encode(Heartbeat(applied_revision=self.revision, wants_full=True))
                    )
                    continue
                if (
                    frame.full
                    or frame.containers
                    or frame.removed
                    or frame.revision != self.revision
                ):
                    self._take(
                        frame.revision, frame.containers, full=frame.full, removed=frame.removed
                    )
                    await self._report(ws)

    def _take(
        self,
        revision: int,
        containers: Sequence[DesiredContainer],
        *,
        full: bool,
        removed: Sequence[str],
    ) -> None:
        held = {} if full else dict(self.held)
        taken_at = {} if full else dict(self.taken_at)
        for gone in removed:
            held.pop(gone, None)
            taken_at.pop(gone, None)
        fresh = 0
        for container in containers:
            held[container.id] = container
            taken_at[container.id] = revision
            if container.id not in self.seen:
                self.seen.add(container.id)
                fresh += 1
        if fresh:
            self.tally.acknowledged(fresh)
        self.tally.add(HELD, len(held) - len(self.held))
        self.held, self.taken_at = held, taken_at
        self.revision = revision

    def _statuses(self) -> list[ContainerStatus]:
        return [
            ContainerStatus(
                id=c.id,
                state="running",
                namespace=c.namespace,
                deployment=c.deployment,
                capacity=c.capacity,
                limits=c.limits,
                revision=self.taken_at[c.id],
            )
            for c in self.held.values()
        ]

    async def _report(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        status = Status(applied_revision=self.revision, containers=self._statuses())
        with contextlib.suppress(ConnectionError):
            await ws.send_bytes(encode(self._frame(status)))
            self.last_sent = status
            self.tally.add(STATUS_FRAMES)

    def _frame(self, status: Status) -> Status:
        """What goes of ``status``: the whole of it first in a session, or to a
        coordinator that takes no partial statuses; else only what changed since the
        status sent before."""
        if not self.partial or self.last_sent is None:
            return status
        return partial_report(self.last_sent, status)

    async def _heartbeats(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        with contextlib.suppress(ConnectionError):
            while not ws.closed:
                await ws.send_bytes(encode(Heartbeat(applied_revision=self.revision)))
                await ws.ping()
                self.tally.add(HEARTBEATS)
                await asyncio.sleep(self.interval)


async def run_fleet(
    url: str,
    join_token: str,
    indices: Sequence[int],
    *,
    seed: int,
    tally: Tally,
    connect_concurrency: int,
    backoff_initial: float,
    backoff_cap: float,
    stopping: asyncio.Event,
) -> None:
    """Run the agents of ``indices`` until ``stopping`` is set and their sessions end
    (the coordinator closes them), or for ten seconds more at most."""
    shapes = Shapes(seed)
    gate = asyncio.Semaphore(connect_concurrency)
    connector = aiohttp.TCPConnector(limit=0)  # the default of 100 would cap the sessions
    async with aiohttp.ClientSession(connector=connector, timeout=HANDSHAKE_TIMEOUT) as http:
        tasks = [
            asyncio.create_task(
                SimulatedAgent(node_name(i), shapes.inventory(i), tally).run(
                    http,
                    url,
                    join_token,
                    gate,
                    Backoff(initial=backoff_initial, cap=backoff_cap),
                    stopping,
                )
            )
            for i in indices
        ]
        await stopping.wait()
        _, running = await asyncio.wait(tasks, timeout=10.0)
        for task in running:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True)
class FleetOptions:
    url: str  # the agent socket, ws://host:port/v1/agent
    join_token: str
    seed: int
    connect_concurrency: int
    backoff_initial: float
    backoff_cap: float
    nice: int = 0  # added to the worker process's niceness


def worker(
    options: FleetOptions,
    indices: list[int],
    counts: Array[Any],
    stamps: Array[Any],
    number: int,
    stop: EventType,
) -> None:
    """A worker process's entry: the agents of ``indices`` until ``stop`` is set."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the benchmark's process cleans up
    os.nice(options.nice)
    asyncio.run(_worker(options, indices, Tally(counts, stamps, number), stop))


async def _worker(options: FleetOptions, indices: list[int], tally: Tally, stop: EventType) -> None:
    stopping = asyncio.Event()

    async def watch() -> None:
        await asyncio.to_thread(stop.wait)
        stopping.set()

    watcher = asyncio.create_task(watch())
    await run_fleet(
        options.url,
        options.join_token,
        indices,
        seed=options.seed,
        tally=tally,
        connect_concurrency=options.connect_concurrency,
        backoff_initial=options.backoff_initial,
        backoff_cap=options.backoff_cap,
        stopping=stopping,
    )
    await watcher
