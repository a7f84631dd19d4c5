"""Pools on one real host: how the CPU of CPU burners splits between two pools.

    .venv/bin/python bench/pools_on_host.py [--window 10] [--windows 1] [--cpus 2] [--settle 0]

A real coordinator and agent of this host (``--cpus`` CPUs offered, node ``cpu_overcommit``
2) run burners (``sh -c 'while :; do :; done'`` in allot/busybox:test), each requesting
half the node's CPUs (1 CPU of 2), in two pools of equal weight: 3 in ``pa`` and 1 in
``pb``. Each pool's CPU is measured from
its containers' cgroups (CPU time over ``--windows`` windows of ``--window`` seconds each)
in three cases:

- ``both``: every burner burns; the tree says 1.0 and 1.0 core;
- ``idle pb``: ``pb``'s burner is stopped (SIGSTOP; its container stays, so its pool keeps
  its demand and its fair share), and ``pa`` may take what ``pb`` leaves idle; the first
  window begins as it stops;
- ``strong pa``: ``pa`` holds a strong guarantee of 3/4 of the CPUs, 1.5 of 2 (every
  burner burns); the tree says 1.75 and 0.25 core (pools spec section 3, step 5).

It prints, per case and pool, the tree's fair share beside the cores measured and the
pool's fraction of what all burners got; and, per case, what the rest of the machine used
meanwhile (``/proc/stat``'s busy time less the burners') and how the kernel placed the
burners (sampled every 0.1 s: how often ``pb``'s burner had a CPU without any of ``pa``'s,
the placement that gives 50/50 on two CPUs), to tell foreign load from the kernel's
balancing. The machine is shared, so the absolute cores
depend on what else runs; the fractions are what the pools' weights decide. Before each
case it waits for the agent to report the containers' weights; ``--settle S`` sleeps S
seconds instead, for a coordinator from before pools set weights.

tests/docker/test_pools_on_host.py runs the same cases (``run_cases``) and asserts cores.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

REPOSITORY = Path(__file__).resolve().parents[1]
if str(REPOSITORY) not in sys.path:  # run as a script: the repository's modules
    sys.path.insert(0, str(REPOSITORY))

import docker  # noqa: E402

from agent.runtime.usage import sample  # noqa: E402
from coordinator.pools.host_weights import SHARES_PER_CORE  # noqa: E402
from shared.cpuset import CpuSet  # noqa: E402
from tests.docker.clusters import running_cluster, wait_until_running  # noqa: E402
from tests.e2e.processes import api  # noqa: E402

IMAGE = "allot/busybox:test"
BURN = ["sh", "-c", "while :; do :; done"]
BURNERS = {"pa": 3, "pb": 1}
STRONG_FRACTION = 0.75  # of the node's CPUs: 1.5 of 2
SETTLE_SECONDS = 60.0  # at most, for the weights to reach the containers (a loaded host)

PLACEMENT_EVERY = 0.1  # seconds between looks at which CPU each burner is on

# Container id -> CPU seconds its cgroup has used so far.
CpuClock = Callable[[list[str]], dict[str, float]]


class Said(Protocol):
    @property
    def others(self) -> float:
        """Cores everything but the burners used on the burners' CPUs during the window."""
        ...

    def line(self, case: str) -> str:
        """What else used the CPUs during the case's window, on one line."""
        ...


@dataclass(frozen=True)
class Split:
    """One case's figures per pool: fair cores (the tree's), cores measured, and the
    pool's fraction of the CPU all burners got together."""

    case: str
    fair: dict[str, float]
    cores: dict[str, float]
    crowding: Said | None = None

    def fraction(self, pool: str) -> float:
        total = sum(self.cores.values())
        return self.cores[pool] / total if total else 0.0

    def fair_fraction(self, pool: str) -> float:
        return self.fair[pool] / sum(self.fair.values())

    def lines(self) -> list[str]:
        lines = [
            f"{self.case:13} {pool}: fair {self.fair[pool]:.2f} core,"
            f" measured {self.cores[pool]:.2f} core,"
            f" {self.fraction(pool):.0%} of the burners' CPU (fair {self.fair_fraction(pool):.0%})"
            for pool in sorted(self.cores)
        ]
        if self.crowding is not None:
            lines.append(self.crowding.line(self.case))
        return lines


def set_up(url: str, node: str, *, request: str = "1") -> dict[str, list[str]]:
    """Overcommit 2 on ``node``, pools ``pa`` and ``pb`` of equal weight, the burners
    deployed (namespace = pool), each requesting ``request`` CPUs; pool -> its
    containers' ids."""
    api(url, f"/v1/nodes/{node}/capacity", {"mode": "delta", "cpu_overcommit": "2"}, "PATCH")
    set_strong(url, 0.0)
    api(url, "/v1/pools/pb", {}, method="PUT")
    ids: dict[str, list[str]] = {}
    for pool, count in BURNERS.items():
        body = {
            "name": "burn",
            "image": IMAGE,
            "command": BURN,
            "count": count,
            "resources": {"cpu": request, "memory": "16Mi"},
        }
        answer = api(url, f"/v1/namespaces/{pool}/deployments", body)
        ids[pool] = [view["record"]["id"] for view in answer["containers"]]
    return ids


def set_strong(url: str, cores: float) -> None:
    """``pa``'s strong guarantee: ``cores`` CPUs (none for 0)."""
    pool = {"strong_guarantee_resources": {"cpu": cores}} if cores else {}
    api(url, "/v1/pools/pa", pool, method="PUT")


def fair_cores(url: str, pools: list[str]) -> dict[str, float]:
    """Each pool's fair share in cores, as the last pool update computed it: its share
    of the ready nodes' CPUs."""
    total = sum(len(offered(node["inventory"])) for node in api(url, "/v1/nodes")["nodes"])
    return {pool: api(url, f"/v1/pools/{pool}")["share"]["total"] * total for pool in pools}


def wait_for_weights(
    url: str, ids: Mapping[str, list[str]], *, within: float = SETTLE_SECONDS
) -> None:
    """Until every burner's Docker weight is its even part of its pool's fair share (1024
    per core, within 5 % and one unit) as its agent reports it, for at most ``within`` s
    (the burners of a pool request alike)."""
    deadline = time.monotonic() + within
    while True:
        fair = fair_cores(url, sorted(ids))
        seen = {
            pool: [api(url, f"/v1/containers/{cid}").get("observed") or {} for cid in members]
            for pool, members in ids.items()
        }
        off = {
            pool: [(view.get("limits") or {}).get("cpu_shares") for view in views]
            for pool, views in seen.items()
            if not all(_near(view, SHARES_PER_CORE * fair[pool] / len(views)) for view in views)
        }
        if not off:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"weights never followed the fair shares {fair}: {off}")
        time.sleep(0.2)


def wait_for_update(url: str, before: Mapping[str, float]) -> None:
    """Until the pools' fair shares differ from ``before`` (a pool update ran)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while fair_cores(url, sorted(before)) == before:
        if time.monotonic() > deadline:
            raise AssertionError(f"the fair shares stayed {dict(before)}")
        time.sleep(0.2)


def _near(observed: Mapping[str, Any], shares: float) -> bool:
    held = (observed.get("limits") or {}).get("cpu_shares")
    return isinstance(held, int) and abs(held - shares) <= 0.05 * shares + 1


def offered(inventory: Mapping[str, Any]) -> CpuSet:
    """The CPUs a node offers (``Inventory.offered``), from its JSON."""
    online, isolated, reserved = (
        CpuSet.parse(inventory[name]) for name in ("online", "isolated", "reserved")
    )
    return online - isolated - reserved


def measure(
    clock: CpuClock,
    pools: Mapping[str, list[str]],
    seconds: float,
    *,
    meanwhile: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Each pool's cores over ``seconds``: the CPU time its containers used, per second;
    ``meanwhile()`` is called every ``PLACEMENT_EVERY`` s during the window."""
    every = [cid for ids in pools.values() for cid in ids]
    first, began = clock(every), time.monotonic()
    if meanwhile is None:
        time.sleep(seconds)
    while meanwhile is not None and time.monotonic() - began < seconds:
        time.sleep(PLACEMENT_EVERY)
        meanwhile()
    last, elapsed = clock(every), time.monotonic() - began
    return {
        pool: sum(last[cid] - first[cid] for cid in ids) / elapsed for pool, ids in pools.items()
    }


@dataclass(frozen=True)
class Crowding:
    """What else ran during a window: ``others`` cores used by everything but the burners,
    ``busy`` cores used by everything (of the machine's ``os.cpu_count()``), and
    ``pb_alone`` the fraction of samples in which ``pb``'s burner shared its CPU with none
    of ``pa``'s."""

    others: float
    busy: float
    pb_alone: float

    def line(self, case: str) -> str:
        return (
            f"{case:13} others used {self.others:.2f} core, the machine {self.busy:.2f} of"
            f" {os.cpu_count()} (load average {os.getloadavg()[0]:.2f}); pb's burner had a"
            f" CPU without pa's in {self.pb_alone:.0%} of samples"
        )


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting on I/O)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def on_cpu(pid: int) -> int:
    """The CPU process ``pid`` last ran on (``/proc/PID/stat`` field 39)."""
    after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(after_name[36])


class CrowdWatch:
    """Samples, when called, which CPU each burner is on; ``crowding`` then gives the
    window's ``Crowding`` since the watch was made."""

    def __init__(self, pools: Mapping[str, list[str]], pids: Mapping[str, int]) -> None:
        self._pa = [pids[cid] for cid in pools["pa"]]
        (self._pb,) = (pids[cid] for cid in pools["pb"])
        self._busy, self._began = busy_seconds(), time.monotonic()
        self._alone = self._samples = 0

    def __call__(self) -> None:
        pb_cpu = on_cpu(self._pb)
        self._alone += all(on_cpu(pid) != pb_cpu for pid in self._pa)
        self._samples += 1

    def crowding(self, burners: float) -> Crowding:
        """``burners``: the cores all burners used over the window."""
        elapsed = time.monotonic() - self._began
        busy = (busy_seconds() - self._busy) / elapsed
        alone = self._alone / max(self._samples, 1)
        return Crowding(others=busy - burners, busy=busy, pb_alone=alone)


def host_clock(client: docker.DockerClient) -> CpuClock:
    """CPU seconds from the cgroups of this host's containers (v1 ``cpuacct.usage``, v2
    ``cpu.stat``), found by their ``allot.id`` label."""
    pids: dict[str, int] = {}

    def clock(ids: list[str]) -> dict[str, float]:
        for cid in ids:
            if cid not in pids:
                pids[cid] = host_pid(client, cid)
        used = {cid: sample(pids[cid], at=time.monotonic()).cpu_ns for cid in ids}
        missing = [cid for cid, ns in used.items() if ns is None]
        if missing:
            raise LookupError(f"no CPU time for containers {missing}")
        return {cid: (ns or 0) / 1e9 for cid, ns in used.items()}

    return clock


def host_pid(client: docker.DockerClient, container_id: str) -> int:
    """The main process of the container with ``allot.id`` ``container_id``."""
    (found,) = client.containers.list(filters={"label": f"allot.id={container_id}"})
    return int(found.attrs["State"]["Pid"])


@dataclass(frozen=True)
class Reading:
    """One window: each pool's cores, and what else used the CPUs meanwhile."""

    cores: dict[str, float]
    crowding: Said


class Meter(Protocol):
    """Where the burners run: this host, or a VM."""

    def measure(self, seconds: float, windows: int) -> list[Reading]:
        """``windows`` windows of ``seconds``, one after the other."""
        ...

    def pause(self, container_id: str, stopped: bool) -> None:
        """Stop (SIGSTOP) or resume the burner of one container."""
        ...


class HostMeter:
    """The burners of this host: CPU time from their cgroups, and the machine's
    ``/proc/stat`` and the burners' CPUs for what else ran (``CrowdWatch``)."""

    def __init__(self, client: docker.DockerClient, ids: Mapping[str, list[str]]) -> None:
        self._ids = ids
        self._clock = host_clock(client)
        self._pids = {cid: host_pid(client, cid) for members in ids.values() for cid in members}

    def measure(self, seconds: float, windows: int) -> list[Reading]:
        readings = []
        for _ in range(windows):
            crowd = CrowdWatch(self._ids, self._pids)
            cores = measure(self._clock, self._ids, seconds, meanwhile=crowd)
            readings.append(Reading(cores, crowd.crowding(sum(cores.values()))))
        return readings

    def pause(self, container_id: str, stopped: bool) -> None:
        os.kill(self._pids[container_id], signal.SIGSTOP if stopped else signal.SIGCONT)


CASES = ("both", "idle pb", "strong pa")


def run_cases(
    url: str,
    ids: dict[str, list[str]],
    meter: Meter,
    *,
    window: float,
    windows: int,
    settle: Callable[[], None],
) -> dict[str, list[Split]]:
    """The three cases, in order: each case (``CASES``) -> its windows' splits;
    ``settle()`` waits for the containers' weights."""
    pools = sorted(ids)

    def splits(case: str) -> list[Split]:
        fair = fair_cores(url, pools)
        return [
            Split(f"{case} {n}/{windows}", fair, reading.cores, reading.crowding)
            for n, reading in enumerate(meter.measure(window, windows), start=1)
        ]

    settle()
    cases = {"both": splits("both")}
    (idle,) = ids["pb"]
    meter.pause(idle, True)
    try:
        cases["idle pb"] = splits("idle pb")
    finally:
        meter.pause(idle, False)
    before = fair_cores(url, pools)
    set_strong(url, STRONG_FRACTION * sum(before.values()))  # every CPU is shared out
    wait_for_update(url, before)
    settle()
    cases["strong pa"] = splits("strong pa")
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--windows", type=int, default=1, help="measurements per case")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs the node offers")
    parser.add_argument("--settle", type=float, default=0.0, help="sleep, not wait for weights")
    args = parser.parse_args()
    client = docker.from_env()

    with (
        tempfile.TemporaryDirectory(prefix="allot-pools-bench-") as workdir,
        running_cluster(Path(workdir), client, nodes=1, cpus_each=args.cpus) as cluster,
    ):
        ids = set_up(cluster.url, cluster.nodes[0], request=str(args.cpus / 2))
        wait_until_running(cluster.url, sum(BURNERS.values()))

        def settle() -> None:
            if args.settle:
                time.sleep(args.settle)
            else:
                wait_for_weights(cluster.url, ids)

        cases = run_cases(
            cluster.url,
            ids,
            HostMeter(client, ids),
            window=args.window,
            windows=args.windows,
            settle=settle,
        )
    load = os.getloadavg()[0]
    print(f"node of {args.cpus} CPU(s); load average at the end {load:.2f} on this shared host")
    for splits in cases.values():
        for split in splits:
            print("\n".join(split.lines()))


if __name__ == "__main__":
    main()
