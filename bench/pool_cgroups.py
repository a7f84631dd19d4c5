"""Pools spec section 9 on the real kernel: a pool with an idle and a busy container, beside
a pool with one busy container, all on one CPU, with the weights allot sets today (every
container a sibling under Docker's cgroup) and with a cgroup per pool.

    .venv/bin/python bench/pool_cgroups.py [--window 10] [--runs 2] [--cpu 1]

Pools ``pa`` and ``pb`` have a fair share of 1 core each on a 2-CPU host. ``pa`` has two
containers of 1 core's demand, one idle (``sleep``) and one busy (a shell loop); ``pb`` one
busy container of 2 cores. ``host_weights`` gives them cpu.shares 512, 512 and 1024. The
spec wants 1 and 1 core: ``pa`` wants 1 core, within its share, and ``pb`` is above its own.
The containers are pinned to one CPU (``--cpu``), so the split is the kernel's weight
arithmetic on one run queue whatever else runs on the machine; each case prints the part
of that CPU's time the two busy containers got that went to ``pa``'s:

- ``flat``: the three containers side by side (how allot runs them under Docker's systemd
  driver, or where they were made before their agent grouped them): the idle container's
  weight goes to both busy ones by weight, so ``pa`` gets 1/3 (the model's answer,
  ``tests/coordinator/pools/test_kernel_split.py``);
- ``per pool``: each pool's containers under a cgroup of its own (``--cgroup-parent``),
  whose cpu.shares are the pool's (1024 each), as allot's agent makes them under the
  cgroupfs driver (``shared.pool_cgroups``): the kernel fills per pool first, so ``pa``
  gets 1/2, the spec's answer.

cgroup v1 with Docker's cgroupfs driver only (this machine's); it writes the per-pool
cgroups' cpu.shares itself, so it runs as root.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
if str(REPOSITORY) not in sys.path:  # run as a script: the repository's modules
    sys.path.insert(0, str(REPOSITORY))

import docker  # noqa: E402

from agent.runtime.usage import sample  # noqa: E402

IMAGE = "allot/busybox:test"
BURN = ["sh", "-c", "while :; do :; done"]
IDLE = ["sleep", "3600"]
# name: (pool, cpu.shares as host_weights sets them, command)
CONTAINERS = {
    "pa-idle": ("pa", 512, IDLE),
    "pa-busy": ("pa", 512, BURN),
    "pb-busy": ("pb", 1024, BURN),
}
POOL_SHARES = 1024  # each pool's weight in the per-pool case: equal fair shares
PREFIX = "bench-pool-cgroups"
CPU_ROOT = Path("/sys/fs/cgroup/cpu")


def run_case(client: docker.DockerClient, cpu: int, window: float, per_pool: bool) -> float:
    """``pa``'s part of what the busy containers got over ``window`` seconds."""
    made = {}
    try:
        for name, (pool, shares, command) in CONTAINERS.items():
            parent = f"/{PREFIX}-{pool}" if per_pool else None
            made[name] = client.containers.run(
                IMAGE,
                command,
                name=f"{PREFIX}-{name}",
                detach=True,
                cpuset_cpus=str(cpu),
                cpu_shares=shares,
                cgroup_parent=parent,
            )
        if per_pool:
            for pool in {pool for pool, _, _ in CONTAINERS.values()}:
                (CPU_ROOT / f"{PREFIX}-{pool}" / "cpu.shares").write_text(f"{POOL_SHARES}\n")
        time.sleep(2.0)  # the loops running
        pids = {}
        for name, container in made.items():
            container.reload()
            pids[name] = container.attrs["State"]["Pid"]
        before = {name: sample(pids[name], at=time.monotonic()).cpu_ns or 0 for name in pids}
        time.sleep(window)
        after = {name: sample(pids[name], at=time.monotonic()).cpu_ns or 0 for name in pids}
        used = {name: after[name] - before[name] for name in pids}
        return used["pa-busy"] / (used["pa-busy"] + used["pb-busy"])
    finally:
        for container in made.values():
            container.remove(force=True)
        for pool in ("pa", "pb"):  # the per-pool cgroups runc made, in each hierarchy
            for made_dir in Path("/sys/fs/cgroup").glob(f"*/{PREFIX}-{pool}"):
                made_dir.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per case")
    parser.add_argument("--runs", type=int, default=2, help="runs of both cases")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU the containers share")
    args = parser.parse_args()
    if not CPU_ROOT.is_dir():
        sys.exit("cgroup v1 only: no /sys/fs/cgroup/cpu here")
    client = docker.from_env()
    print("case      pa's part  (spec 50.0 %)  load average")
    for _ in range(args.runs):
        for per_pool in (False, True):
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            part = run_case(client, args.cpu, args.window, per_pool)
            print(f"{'per pool' if per_pool else 'flat':<9} {part:>8.1%}  {'':<14} {load}")


if __name__ == "__main__":
    main()
