"""Read a container's limits back from its cgroup files, under cgroup v1 or v2.

The path comes from ``/proc/<pid>/cgroup`` of the container's main process, so it does
not depend on Docker's cgroup driver (cgroupfs or systemd) or on where the hierarchy is.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_dir(pid: int, controller: str) -> Path:
    """The cgroup directory of ``pid`` holding ``controller``'s files (e.g. "cpuset")."""
    unified: str | None = None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/")  # v1: one tree per controller
        if hierarchy == "0" and controllers == "":
            unified = path
    if unified is None:
        raise LookupError(f"process {pid} is in no cgroup with the {controller} controller")
    return CGROUP_ROOT / unified.lstrip("/")  # v2: one tree holds every controller's files


def read_limit(pid: int, controller: str, *, v1: str, v2: str) -> str:
    """The content of the controller's file: ``v1`` under cgroup v1, ``v2`` under v2."""
    directory = cgroup_dir(pid, controller)
    name = v1 if (directory / v1).exists() else v2
    return (directory / name).read_text().strip()
