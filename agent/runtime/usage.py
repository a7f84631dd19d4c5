"""What a running container uses, read from its cgroup files (v1 or v2).

    directory = cgroup_dir(pid, "cpuacct")          # from /proc/<pid>/cgroup
    first = sample(pid, at=time.monotonic())
    later = sample(pid, at=time.monotonic())
    cores = cpu_cores(first, later)                  # CPU time / wall time, e.g. 0.49

The cgroup comes from ``/proc/<pid>/cgroup`` of the container's main process, so it does
not depend on Docker's cgroup driver (cgroupfs or systemd). CPU is the cumulative CPU time
(v1 ``cpuacct.usage`` in ns, v2 ``usage_usec`` of ``cpu.stat``); memory is what the cgroup
charges less its inactive file cache (v1 ``memory.usage_in_bytes`` less
``total_inactive_file``, v2 ``memory.current`` less ``inactive_file``), which is what
``docker stats`` shows: cache the kernel can drop at once is not counted as used. How much
it waits for CPU (``pressure``) comes from the same cgroup: the CFS periods it ran in and
was throttled in (``nr_periods``, ``nr_throttled`` of the cpu controller's ``cpu.stat``) and,
under v2, its PSI (``cpu.pressure``).

Reading is a few small sysfs files per container, microseconds each, so it is done on the
event loop. A file that is missing or unreadable (the container just exited, an unusual
hierarchy) gives None for that figure, never an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.runtime.psi import psi_averages

Reader = Callable[[Path], str]  # the file's text; OSError when it cannot be read

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC = Path("/proc")


def read_text(path: Path) -> str:
    return path.read_text()


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic seconds
    cpu_ns: int | None  # CPU time used since the container started
    memory: int | None  # bytes in use, less inactive file cache
    periods: int | None = None  # CFS periods with runnable tasks since it started
    throttled: int | None = None  # of those, the periods its quota ran out in
    psi_avg10: float | None = None  # v2: "some avg10" of its cpu.pressure, in percent


def cgroup_dir(
    pid: int,
    controller: str,
    *,
    read: Reader = read_text,
    proc: Path = PROC,
    root: Path = CGROUP_ROOT,
) -> Path:
    """The cgroup directory of ``pid`` holding ``controller``'s files (e.g. "cpuacct"):
    under v1 the controller's own tree, under v2 the one unified tree. ``LookupError``
    when the process is in no such cgroup; ``OSError`` when it has gone."""
    unified: str | None = None
    for line in read(proc / str(pid) / "cgroup").splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return root / controller / path.lstrip("/")
        if hierarchy == "0" and controllers == "":
            unified = path
    if unified is None:
        raise LookupError(f"process {pid} is in no cgroup with the {controller} controller")
    return root / unified.lstrip("/")


def sample(
    pid: int, *, at: float, read: Reader = read_text, proc: Path = PROC, root: Path = CGROUP_ROOT
) -> Sample:
    """The CPU time and memory of the cgroup ``pid`` runs in, at time ``at``."""

    def directory(controller: str) -> Path | None:
        try:
            return cgroup_dir(pid, controller, read=read, proc=proc, root=root)
        except (OSError, LookupError, ValueError):
            return None

    def figure(path: Path | None, name: str, parse: Callable[[str], int]) -> int | None:
        if path is None:
            return None
        try:
            return parse(read(path / name))
        except (OSError, ValueError, KeyError):
            return None

    cpu, memory, scheduler = directory("cpuacct"), directory("memory"), directory("cpu")
    cpu_ns = figure(cpu, "cpuacct.usage", int)
    if cpu_ns is None:
        cpu_ns = figure(cpu, "cpu.stat", lambda text: _stat(text)["usage_usec"] * 1000)
    used = figure(memory, "memory.usage_in_bytes", int)
    inactive_key = "total_inactive_file"
    if used is None:
        used = figure(memory, "memory.current", int)
        inactive_key = "inactive_file"
    inactive = figure(memory, "memory.stat", lambda text: _stat(text)[inactive_key])
    in_use = None if used is None else max(0, used - (inactive or 0))
    return Sample(
        at=at,
        cpu_ns=cpu_ns,
        memory=in_use,
        periods=figure(scheduler, "cpu.stat", lambda text: _stat(text)["nr_periods"]),
        throttled=figure(scheduler, "cpu.stat", lambda text: _stat(text)["nr_throttled"]),
        psi_avg10=_psi(read, scheduler),
    )


def cpu_cores(previous: Sample | None, current: Sample) -> float | None:
    """Cores used on average between the two samples: CPU time over wall time. None
    without an earlier sample with a CPU figure, or when no time passed."""
    if previous is None or previous.cpu_ns is None or current.cpu_ns is None:
        return None
    elapsed = current.at - previous.at
    if elapsed <= 0:
        return None
    return max(0, current.cpu_ns - previous.cpu_ns) / 1e9 / elapsed


def _psi(read: Reader, directory: Path | None) -> float | None:
    if directory is None:
        return None
    try:
        return psi_averages(read(directory / "cpu.pressure"))[0]
    except (OSError, ValueError):
        return None


def _stat(text: str) -> dict[str, int]:
    """A flat-keyed cgroup stat file ("name value" per line)."""
    return {name: int(value) for name, value in (line.split() for line in text.splitlines())}
