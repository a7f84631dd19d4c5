"""The pools' cgroups on this node (``shared.pool_cgroups``): which containers are in one,
and their weights written to the cgroup files.

    grouped = grouping(desired, observed, node="n1", enabled=True)   # id -> its pool's cgroup
    parent = new_parent(container, node="n1", enabled=True)          # for a create
    files = PoolCgroupFiles()                                         # this host's /sys/fs/cgroup
    problems = files.apply(group_weights(desired, grouped))

Only with Docker's cgroupfs driver (``enabled``): the systemd driver takes a slice for a
parent and manages its weight itself, so under it every container runs as Docker makes it,
weighted by its own ``cpu_shares`` (as before pools had cgroups). A container keeps the
place it was made in: one made before its agent grouped (or while its pool was another)
stays where it is, weighted as before, beside the pools' cgroups, until it is made anew.

A pool's cgroup is made (``mkdir``) and weighted before its first member is created, so
the member never runs under Docker's default weight of the parent; runc makes the cgroup's
other controllers' directories as it starts the member. One this agent weighted that no
desired container holds any more is removed once empty (it is kept while a member still
runs, and tried again at the next pass).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from agent.runtime.labels import spec_digest
from agent.runtime.plan import Observed, keeper_first
from agent.runtime.settings import DEFAULT_CPU_SHARES
from agent.runtime.usage import CGROUP_ROOT
from shared.pool_cgroups import group_shares, is_pool_parent, parent_of, v2_weight
from shared.protocol import DesiredContainer


def new_parent(container: DesiredContainer, *, node: str, enabled: bool) -> str:
    """The cgroup a container is made under: its pool's, or "" for Docker's default (a
    bound container, one of no pool, or a node whose agent does not group)."""
    if enabled and container.shared_pool and container.pool:
        return parent_of(node, container.pool)
    return ""


def grouping(
    desired: Mapping[str, DesiredContainer], observed: list[Observed], *, node: str, enabled: bool
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
            else new_parent(container, node=node, enabled=enabled)
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


class PoolCgroupFiles:
    """The pools' cgroups under ``root`` (cgroup v1, or v2 where the root has
    ``cgroup.controllers``): their directories and their weights."""

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.root = root
        self.v2 = (root / "cgroup.controllers").exists()
        self._weighted: set[str] = set()  # the cgroups this agent weighted and has not removed

    def weight_file(self, parent: str) -> Path:
        relative = parent.lstrip("/")
        if self.v2:
            return self.root / relative / "cpu.weight"
        return self.root / "cpu" / relative / "cpu.shares"

    def apply(self, weights: Mapping[str, int]) -> list[str]:
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
