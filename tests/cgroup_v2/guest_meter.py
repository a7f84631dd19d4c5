"""CPU burners in the cgroup v2 guest, measured there (bench/pools_on_host.py's ``Meter``).

Each window is read in the guest by one shell command, with shell builtins only between
its two readings: the guest's clock (``/proc/uptime``), its ``/proc/stat``, each burner's
``usage_usec`` and the sum of the top-level cgroups' (every process of the guest). So
neither the ssh round trips nor this machine's clock enter the figures, and the guest says
where the rest of its CPUs went: its other processes (agent, dockerd), from the cgroups'
exact times, and from ``/proc/stat``'s ticks, what it counted busy, idle and stolen (an
emulated guest whose host is busy loses ticks: then the ticks fall short of its CPUs).
Around each command this machine's ``/proc/stat`` and QEMU's CPU time say what else ran
here.

    meter = GuestMeter(guest, {"pa": [id, ...], "pb": [id]})
    meter.pause(pb_id, True)          # the stop goes with the next window's command
    readings = meter.measure(10.0, 2)
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.pools_on_host import Reading, busy_seconds
from tests.cgroup_v2.guest import Guest

GUEST_HZ = 100  # USER_HZ: /proc/stat's unit in the guest


@dataclass(frozen=True)
class Snapshot:
    """One reading in the guest: its clock (s), /proc/stat's cpu line and each burner's
    CPU time (s)."""

    clock: float
    stat: list[int]  # user nice system idle iowait irq softirq steal ...
    used: dict[str, float]
    everything: float  # CPU time of every process in the guest's cgroups

    @classmethod
    def parse(cls, line: str, ids: list[str]) -> Snapshot:
        # "<uptime> cpu <fields...> | <usage_usec per burner> | <usage_usec of all>"
        head, burners, everything = line.split("|")
        words = head.split()
        usecs = [int(word) for word in burners.split()]
        assert len(usecs) == len(ids), line
        return cls(
            clock=float(words[0]),
            stat=[int(word) for word in words[2:]],
            used={cid: usec / 1e6 for cid, usec in zip(ids, usecs, strict=True)},
            everything=int(everything) / 1e6,
        )


@dataclass(frozen=True)
class GuestCrowding:
    """What else used the CPUs during a window, in cores: in the guest, its other
    processes, and what its ticks counted busy, idle and stolen; on this machine, QEMU
    (the whole guest) and everything else."""

    guest_others: float
    ticks_busy: float
    ticks_idle: float
    ticks_stolen: float
    qemu: float
    host_others: float

    @property
    def others(self) -> float:
        return self.guest_others

    def line(self, case: str) -> str:
        return (
            f"{case:13} in the guest others used {self.guest_others:.2f} core (ticks: busy"
            f" {self.ticks_busy:.2f}, idle {self.ticks_idle:.2f}, stolen"
            f" {self.ticks_stolen:.2f}); on this machine QEMU used {self.qemu:.2f} core,"
            f" everything else {self.host_others:.2f} (load average {os.getloadavg()[0]:.2f})"
        )


def crowding(first: Snapshot, last: Snapshot, burners: float, host: HostTimes) -> GuestCrowding:
    """``burners``: the cores all burners used between the two snapshots."""
    seconds = last.clock - first.clock
    delta = [b - a for a, b in zip(first.stat, last.stat, strict=False)]
    user, nice, system, idle, iowait, irq, softirq, steal = delta[:8]
    return GuestCrowding(
        guest_others=(last.everything - first.everything) / seconds - burners,
        ticks_busy=(user + nice + system + irq + softirq) / GUEST_HZ / seconds,
        ticks_idle=(idle + iowait) / GUEST_HZ / seconds,
        ticks_stolen=steal / GUEST_HZ / seconds,
        qemu=host.qemu,
        host_others=host.others,
    )


@dataclass(frozen=True)
class HostTimes:
    qemu: float  # cores QEMU used
    others: float  # cores everything else on this machine used


class HostWatch:
    """This machine's busy time and QEMU's CPU time since the watch was made."""

    def __init__(self, qemu_pid: int) -> None:
        self._pid = qemu_pid
        self._began = time.monotonic()
        self._busy, self._qemu = busy_seconds(), self._qemu_seconds()

    def _qemu_seconds(self) -> float:
        after_name = Path(f"/proc/{self._pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")

    def times(self) -> HostTimes:
        elapsed = time.monotonic() - self._began
        qemu = (self._qemu_seconds() - self._qemu) / elapsed
        return HostTimes(qemu=qemu, others=(busy_seconds() - self._busy) / elapsed - qemu)


class GuestMeter:
    """``Meter`` of the burners in ``guest`` (pool -> its containers' allot ids)."""

    def __init__(self, guest: Guest, ids: Mapping[str, list[str]]) -> None:
        self._guest = guest
        self._ids = ids
        self._every = [cid for members in ids.values() for cid in members]
        docker_ids = {cid: guest.docker_id(cid) for cid in self._every}
        # in system.slice, or in the pool's slice there
        self._files = [f"/sys/fs/cgroup/{guest.cgroup_dir(cid)}/cpu.stat" for cid in self._every]
        pids = guest.sh(
            "docker inspect -f '{{.State.Pid}}' " + " ".join(docker_ids[c] for c in self._every)
        ).split()
        self._pids = dict(zip(self._every, pids, strict=True))
        self._qemu_pid = int((guest.run_dir / "qemu.pid").read_text())
        self._before = ""  # a stop to send with the next window's command

    def pause(self, container_id: str, stopped: bool) -> None:
        """A stop goes with the next window's command, so that the window begins as the
        burner stops; a resume is sent at once."""
        if stopped:
            self._before = f"kill -STOP {self._pids[container_id]}; "
        else:
            self._guest.sh(f"kill -CONT {self._pids[container_id]}")

    def hold(self, stopped: bool) -> None:
        """Stop (or resume) every burner at once, e.g. while the test waits for its turn."""
        self._guest.sh(f"kill -{'STOP' if stopped else 'CONT'} {' '.join(self._pids.values())}")

    def measure(self, seconds: float, windows: int) -> list[Reading]:
        return [self._window(seconds) for _ in range(windows)]

    def _window(self, seconds: float) -> Reading:
        files = " ".join(shlex.quote(f) for f in self._files)
        # builtins only between the readings but the one sleep
        snap = (
            "snap() { read -r up _ < /proc/uptime; read -r cpu < /proc/stat;"
            ' printf "%s %s |" "$up" "$cpu";'
            f" for f in {files}; do while read -r k v; do"
            ' [ "$k" = usage_usec ] && printf " %s" "$v"; done < "$f"; done;'
            " all=0; for f in /sys/fs/cgroup/*/cpu.stat; do while read -r k v; do"
            ' [ "$k" = usage_usec ] && all=$((all + v)); done < "$f"; done;'
            ' printf " | %s\n" "$all"; }'
        )
        watch = HostWatch(self._qemu_pid)
        said = self._guest.sh(f"{snap}; {self._before}snap; sleep {seconds}; snap")
        self._before = ""
        host = watch.times()
        first, last = (Snapshot.parse(line, self._every) for line in said.splitlines()[-2:])
        elapsed = last.clock - first.clock
        cores = {
            pool: sum(last.used[cid] - first.used[cid] for cid in members) / elapsed
            for pool, members in self._ids.items()
        }
        return Reading(cores, crowding(first, last, sum(cores.values()), host))
