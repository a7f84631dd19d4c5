"""The pools' cgroups on this node (``shared.pool_cgroups``): which containers are in one,
and their weights set.

    pools = pool_weigher("cgroupfs")          # by the engine's driver; None: no grouping
    grouped = grouping(desired, observed, node="n1", driver=pools.driver)  # id -> its cgroup
    parent = new_parent(container, node="n1", driver=pools.driver)        # for a create
    problems = await pools.apply(group_weights(desired, grouped))

Under Docker's cgroupfs driver the agent makes a pool's cgroup and writes its weight
(``PoolCgroupFiles``). Under the systemd driver on cgroup v2 a pool's cgroup is a slice,
which systemd makes as the first member starts in it and weights as the agent asks it
(``PoolSlices``). Under the systemd driver on cgroup v1 nothing is grouped: every
container runs as Docker makes it, weighted by its own ``cpu_shares`` (as before pools
had cgroups). A container keeps the place it was made in: one made before its agent
grouped (or while its pool was another) stays where it is, weighted as before, beside the
pools' cgroups, until it is made anew.

A pool's cgroup is weighted before its first member is created, so the member never runs
under the parent's default weight. One this agent weighted that no desired container
holds any more is removed once empty (it is kept while a member still runs, and tried
again at the next pass).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from agent.runtime.labels import spec_digest
from agent.runtime.plan import Observed, keeper_first
from agent.runtime.settings import DEFAULT_CPU_SHARES
from agent.runtime.usage import CGROUP_ROOT
from shared.pool_cgroups import (
    CGROUPFS,
    SYSTEMD,
    group_shares,
    is_pool_parent,
    parent_of,
    slice_directory,
    v2_weight,
)
from shared.protocol import DesiredContainer

SYSTEMCTL_SECONDS = 30.0  # the longest wait for one systemctl call


def new_parent(container: DesiredContainer, *, node: str, driver: str) -> str:
    """The cgroup a container is made under: its pool's, or "" for Docker's default (a
    bound container, one of no pool, or a node whose agent does not group: ``driver``
    "")."""
    if driver and container.shared_pool and container.pool:
        return parent_of(node, container.pool, driver)
    return ""


def grouping(
    desired: Mapping[str, DesiredContainer], observed: list[Observed], *, node: str, driver: str
) -> dict[str, str]:
    """Desired container id -> the pool's cgroup it runs in, or will be made in, for those
    in one. A container Docker holds with its desired spec stays where it is (the one the
    planner keeps, ``keeper_first``); any other is made anew under ``new_parent``."""
    seen: dict[str, list[Observed]] = defaultdict(list)
    for one in observed:
        if one.id in desired and one.state != "removing":
            seen[one.id].append(one)
    grouped = {}
    for container_id, container in desired.items():
        if not container.shared_pool:
            continue
        spec = spec_digest(container)
        same = [one for one in seen[container_id] if one.spec == spec]
        parent = (
            keeper_first(same)[0].cgroup_parent
            if same
            else new_parent(container, node=node, driver=driver)
        )
        if is_pool_parent(parent):
            grouped[container_id] = parent
    return grouped


def group_weights(
    desired: Mapping[str, DesiredContainer], grouped: Mapping[str, str]
) -> dict[str, int]:
    """Each pool's cgroup -> its weight (cgroup v1 shares): its members' entitlements,
    their desired ``cpu_shares``, added (``shared.pool_cgroups.group_shares``)."""
    members: dict[str, list[int]] = defaultdict(list)
    for container_id, parent in grouped.items():
        members[parent].append(desired[container_id].limits.cpu_shares or DEFAULT_CPU_SHARES)
    return {parent: group_shares(shares) for parent, shares in members.items()}


class PoolWeigher(Protocol):
    driver: str  # the engine's cgroup driver, which names the pools' cgroups

    async def apply(self, weights: Mapping[str, int]) -> list[str]:
        """Weight each pool's cgroup of ``weights`` (cgroup v1 shares), and remove the
        empty ones this agent weighted that ``weights`` leaves out; what failed, one
        line each."""
        ...


def pool_weigher(driver: str, root: Path = CGROUP_ROOT) -> PoolWeigher | None:
    """How the pools' cgroups are weighted under the engine's cgroup ``driver``; None
    where containers are not grouped (the systemd driver on cgroup v1, an unknown one)."""
    v2 = (root / "cgroup.controllers").exists()
    if driver == CGROUPFS:
        return PoolCgroupFiles(root)
    if driver == SYSTEMD and v2:
        return PoolSlices(root)
    return None


class PoolCgroupFiles:
    """The pools' cgroups under ``root`` (cgroup v1, or v2 where the root has
    ``cgroup.controllers``) as Docker's cgroupfs driver lays them out: their directories
    and their weights, written by the agent."""

    driver = CGROUPFS

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.root = root
        self.v2 = (root / "cgroup.controllers").exists()
        self._weighted: set[str] = set()  # the cgroups this agent weighted and has not removed

    def weight_file(self, parent: str) -> Path:
        relative = parent.lstrip("/")
        if self.v2:
            return self.root / relative / "cpu.weight"
        return self.root / "cpu" / relative / "cpu.shares"

    async def apply(self, weights: Mapping[str, int]) -> list[str]:
        """Make and weight each cgroup of ``weights``, and remove the empty ones this
        agent weighted that ``weights`` leaves out; what failed, one line each."""
        problems = []
        for parent, shares in sorted(weights.items()):
            path = self.weight_file(parent)
            value = str(v2_weight(shares) if self.v2 else shares)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._weighted.add(parent)
                # Under v2 the file is there once the cpu controller is enabled for the
                # directory above (runc enables it as it starts the first member).
                if path.exists() and path.read_text().strip() != value:
                    path.write_text(f"{value}\n")
            except OSError as error:
                problems.append(f"pool cgroup {parent}: cannot set its weight {value}: {error}")
        for parent in sorted(self._weighted - weights.keys()):
            if self._remove(parent):
                self._weighted.discard(parent)
        return problems

    def _remove(self, parent: str) -> bool:
        """Remove the cgroup in every hierarchy that has it; False while some member
        still holds one (the kernel refuses to remove a cgroup with processes or
        children)."""
        relative = parent.lstrip("/")
        found = [self.root / relative] if self.v2 else list(self.root.glob(f"*/{relative}"))
        for directory in found:
            try:
                directory.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                return False
        return True


class PoolSlices:
    """The pools' slices under Docker's systemd driver on cgroup v2, weighted through
    systemd. systemd owns a slice's cgroup: it makes it only as the first member's scope
    starts in it, so there is no file to write before then, and it sets the cgroup's
    attributes from the unit's settings whenever it sets the unit up again.
    ``systemctl set-property --runtime`` makes the weight the unit's own: set on a slice
    systemd has not made yet, it is there when the first member's scope makes it, and
    it holds through more members and a ``daemon-reload`` (checked in the cgroup v2
    VM, systemd 252). ``--runtime``: the setting lives in /run and ends with a reboot,
    as the containers' own settings do."""

    driver = SYSTEMD

    def __init__(self, root: Path = CGROUP_ROOT, systemctl: str = "systemctl") -> None:
        self.root = root
        self.systemctl = systemctl
        self._set: dict[str, int] = {}  # slice -> the CPUWeight this agent set on it

    async def apply(self, weights: Mapping[str, int]) -> list[str]:
        problems = []
        for name, shares in sorted(weights.items()):
            value = v2_weight(shares)
            if self._set.get(name) == value:
                continue
            failed = await self._run("set-property", "--runtime", name, f"CPUWeight={value}")
            if failed:
                problems.append(f"pool slice {name}: cannot set its weight {value}: {failed}")
            else:
                self._set[name] = value
        for name in sorted(self._set.keys() - weights.keys()):
            if await self._remove(name):
                del self._set[name]
        return problems

    async def _remove(self, name: str) -> bool:
        """Stop the slice and drop its setting; False while a member's scope is still
        in it (stopping the slice would stop the member)."""
        directory = self.root / slice_directory(name)
        if directory.is_dir() and any(child.is_dir() for child in directory.iterdir()):
            return False
        return not await self._run("stop", name) and not await self._run("revert", name)

    async def _run(self, *args: str) -> str:
        """Run systemctl; "" when it succeeded, else why not."""
        try:
            process = await asyncio.create_subprocess_exec(
                self.systemctl,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as error:
            return str(error)
        try:
            async with asyncio.timeout(SYSTEMCTL_SECONDS):
                _, errors = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            return f"systemctl {args[0]} took more than {SYSTEMCTL_SECONDS:g}s"
        if process.returncode:
            said = errors.decode(errors="replace").strip()
            return said or f"systemctl {args[0]} exited with {process.returncode}"
        return ""
