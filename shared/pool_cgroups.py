"""A cgroup per pool per host: how a pool's unbound containers on a node are grouped, and
the weight of their group (pools spec section 9).

The coordinator gives every unbound container its entitlement as a CPU weight
(``Limits.cpu_shares``, 1024 per core: ``coordinator.pools.host_weights``) and names its
pool (``DesiredContainer.pool``). An agent whose Docker uses the cgroupfs driver, or the
systemd driver on cgroup v2, makes each such container under its pool's cgroup on the
node (Docker's ``cgroup_parent``, ``parent_of``), weights that cgroup with the sum of its
members' entitlements (``group_shares``: the pool's fair share on the host); each member
keeps its own entitlement as its weight inside, relative to its siblings only. The
kernel then splits the host's CPU between the pools by their fair shares first, and a
pool's CPU between its own containers by their demand second, so CPU that one container
of a pool leaves idle goes to its busy siblings before anyone else: the spec's order
holds even when a pool's containers on a host are loaded unlike. A container's own
Docker settings are the same inside its pool's cgroup as outside: only its place differs.

The pools' cgroups sit beside the containers Docker makes by default, so a pool's cgroup
weighs against a container made without one (made before the agent grouped, or not
allot's) as that container's own weight would: the layout the host's other processes see
does not change. Under the cgroupfs driver that is ``/docker``; under the systemd driver
(cgroup v2) it is ``system.slice``, and a pool's cgroup is a slice there, since that
driver takes only a slice for a parent (a ``-`` in a slice's name is a level of the
tree, so the pool's name is shown with ``_`` for it):

    parent_of("n1", "batch")              -> "/docker/allot-pool-batch-3f0c1a9e2b7d"
    parent_of("n1", "batch", SYSTEMD)     -> "system-allotpool_batch_3f0c1a9e2b7d.slice"
    group_shares([341, 341])              -> 682

Pure: names and numbers only; the agent writes the files (``agent.runtime.pool_cgroups``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

CGROUPFS = "cgroupfs"  # Docker's cgroup drivers, as ``docker info`` names them
SYSTEMD = "systemd"
DOCKER_PARENT = "/docker"  # where Docker's cgroupfs driver puts containers by default
PREFIX = "allot-pool-"
SLICE_PREFIX = "system-allotpool_"  # a slice under system.slice, the systemd driver's default
MIN_SHARES = 2  # cgroup v1's bounds on cpu.shares
MAX_SHARES = 262_144
_READABLE = re.compile(r"[^a-z0-9-]+")
_READABLE_LENGTH = 40


def parent_of(node: str, pool: str, driver: str = CGROUPFS) -> str:
    """The cgroup of ``pool``'s containers on ``node``, as Docker's ``cgroup_parent``
    takes it under ``driver``. The pool's name (any string) is shown as far as it is a
    plain one, and a digest of the node's and the pool's names keeps every (node, pool)
    apart: several agents on one host (as in the tests) never share a pool's cgroup."""
    readable = _READABLE.sub("-", pool.lower()).strip("-")[:_READABLE_LENGTH] or "pool"
    digest = hashlib.sha256(f"{node}\0{pool}".encode()).hexdigest()[:12]
    if driver == SYSTEMD:
        return f"{SLICE_PREFIX}{readable.replace('-', '_')}_{digest}.slice"
    return f"{DOCKER_PARENT}/{PREFIX}{readable}-{digest}"


def is_pool_parent(cgroup_parent: str) -> bool:
    """Whether a container's ``cgroup_parent`` (as Docker reports it) is a pool's."""
    if cgroup_parent.startswith(SLICE_PREFIX):
        return cgroup_parent.endswith(".slice")
    return cgroup_parent.startswith(f"{DOCKER_PARENT}/{PREFIX}")


def slice_directory(slice_name: str) -> str:
    """Where systemd keeps a pool's slice, below the cgroup v2 root."""
    return f"system.slice/{slice_name}"


def group_shares(member_shares: Iterable[int]) -> int:
    """A pool's cgroup's weight: its members' entitlements added, as cgroup v1
    ``cpu.shares`` (2..262144)."""
    return min(MAX_SHARES, max(MIN_SHARES, sum(member_shares)))


def v2_weight(shares: int) -> int:
    """``shares`` as a cgroup v2 ``cpu.weight`` (1..10000), the way runc before 1.3.2
    writes a container's (linearly, 1024 -> 39), so that a pool's cgroup weighs against a
    container beside it made without one as their shares say."""
    return 1 + (min(MAX_SHARES, max(MIN_SHARES, shares)) - 2) * 9999 // 262_142
