"""agent.runtime.pool_cgroups and shared.pool_cgroups: which containers run in their
pool's cgroup, its weight, and the files written for it (on a directory laid out as
cgroup v1 and as v2; tests/docker/test_pool_cgroups.py does it on this host's kernel), or
the systemctl calls made for it under the systemd driver (the cgroup v2 VM's tests run the
real systemd).

- a container of a pool is made in its pool's cgroup when the agent groups, with the same
  Docker settings as beside it, its entitlement counted in the cgroup's weight;
- a container Docker holds stays where it was made: one made before the agent grouped
  keeps its own weight beside the pools' cgroups; only one made anew moves;
- bound containers and containers of no pool are never grouped;
- a pool's cgroup weighs its members' entitlements added, on every node apart;
- under the systemd driver a pool's cgroup is a slice one level below system.slice.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.labels import spec_digest
from agent.runtime.plan import Host, Observed, Update, plan, target_settings
from agent.runtime.pool_cgroups import (
    PoolCgroupFiles,
    PoolSlices,
    group_weights,
    grouping,
    new_parent,
    pool_weigher,
)
from shared.cpuset import CpuSet
from shared.pool_cgroups import (
    CGROUPFS,
    MAX_SHARES,
    SYSTEMD,
    group_shares,
    is_pool_parent,
    parent_of,
    slice_directory,
    v2_weight,
)
from shared.protocol import DesiredContainer, Limits

HOST = Host(
    offered=CpuSet.parse("0-1"),
    online=CpuSet.parse("0-1"),
    memory_nodes=CpuSet([0]),
    devices=frozenset(),
)
NODE = "n1"


def _desired(cid: str, pool: str, shares: int, *, bound: bool = False) -> DesiredContainer:
    limits = Limits(cpu_shares=shares, cpuset_cpus="0" if bound else "")
    return DesiredContainer(
        id=cid, image="busybox", limits=limits, shared_pool=not bound, pool=pool
    )


def _observed(container: DesiredContainer, parent: str, shares: int) -> Observed:
    settings = target_settings({container.id: container}, HOST)[container.id]
    limits = Limits(
        cpuset_cpus=str(settings.cpuset_cpus),
        cpuset_mems="0",
        cpu_shares=shares,
        cpu_quota=-1,
        cpu_period=100_000,
    )
    return Observed(
        docker_id=f"d-{container.id}",
        id=container.id,
        spec=spec_digest(container),
        state="running",
        limits=limits,
        created="2026-11-29T06:00:00Z",
        cgroup_parent=parent,
    )


IDLE = _desired("pa-idle", "pa", 512)
BUSY = _desired("pa-busy", "pa", 512)
OTHER = _desired("pb-busy", "pb", 1024)
PINNED = _desired("pa-pinned", "pa", 2, bound=True)
NO_POOL = _desired("old", "", 700)  # from a coordinator that does not name pools
DESIRED = {c.id: c for c in (IDLE, BUSY, OTHER, PINNED, NO_POOL)}


def test_new_containers_of_a_pool_go_to_its_cgroup_weighted_with_their_entitlements() -> None:
    grouped = grouping(DESIRED, [], node=NODE, driver=CGROUPFS)
    assert grouped == {
        "pa-idle": parent_of(NODE, "pa"),
        "pa-busy": parent_of(NODE, "pa"),
        "pb-busy": parent_of(NODE, "pb"),
    }
    assert group_weights(DESIRED, grouped) == {
        parent_of(NODE, "pa"): 1024,
        parent_of(NODE, "pb"): 1024,
    }
    assert new_parent(IDLE, node=NODE, driver=CGROUPFS) == parent_of(NODE, "pa")
    assert new_parent(PINNED, node=NODE, driver=CGROUPFS) == ""
    assert new_parent(NO_POOL, node=NODE, driver=CGROUPFS) == ""


def test_an_agent_that_does_not_group_makes_no_pool_cgroup() -> None:
    assert grouping(DESIRED, [], node=NODE, driver="") == {}
    assert new_parent(IDLE, node=NODE, driver="") == ""


def test_a_container_made_before_grouping_stays_beside_the_pools_cgroup() -> None:
    """``pa-idle`` was made by an agent that did not group (Docker's default parent): it
    stays there at its own entitlement, and its pool's cgroup weighs only the member
    inside it, so the two together still weigh the pool's fair share on the host. Both
    hold their entitlement as their own weight: nothing to do, and a new entitlement is
    an update in place wherever the container is."""
    flat = _observed(IDLE, "", 512)
    inside = _observed(BUSY, parent_of(NODE, "pa"), 512)
    desired = {IDLE.id: IDLE, BUSY.id: BUSY}
    grouped = grouping(desired, [flat, inside], node=NODE, driver=CGROUPFS)
    assert grouped == {"pa-busy": parent_of(NODE, "pa")}
    assert group_weights(desired, grouped) == {parent_of(NODE, "pa"): 512}
    assert plan(desired, [flat, inside], {}, HOST) == []
    moved = {
        cid: msgspec.structs.replace(c, limits=Limits(cpu_shares=400)) for cid, c in desired.items()
    }
    work = plan(moved, [flat, inside], {}, HOST)
    assert [(w.id, type(w.actions[0])) for w in work] == [("pa-busy", Update), ("pa-idle", Update)]
    assert group_weights(moved, grouped) == {parent_of(NODE, "pa"): 400}


def test_a_grouped_container_made_anew_after_a_spec_change_lands_in_its_pool() -> None:
    old = _observed(IDLE, "", 512)
    changed = msgspec.structs.replace(IDLE, command=["sleep", "1"])
    grouped = grouping({IDLE.id: changed}, [old], node=NODE, driver=CGROUPFS)
    assert grouped == {IDLE.id: parent_of(NODE, "pa")}


def test_names_keep_nodes_and_pools_apart_and_weights_in_bounds() -> None:
    assert parent_of("n1", "pa") != parent_of("n2", "pa")
    assert parent_of("n1", "a/b") != parent_of("n1", "a-b")
    assert "/" not in parent_of("n1", "../../x").removeprefix("/docker/")
    assert is_pool_parent(parent_of("n1", "Ünïcode pool"))
    assert not is_pool_parent("")
    assert not is_pool_parent("/docker")
    assert group_shares([]) == 2
    assert group_shares([MAX_SHARES, 5]) == MAX_SHARES
    assert (v2_weight(2), v2_weight(1024), v2_weight(MAX_SHARES)) == (1, 39, 10000)


@given(st.lists(st.integers(min_value=2, max_value=MAX_SHARES), min_size=1, max_size=20))
def test_a_pools_cgroup_weighs_its_members_entitlements_added(shares: list[int]) -> None:
    desired = {f"c{k}": _desired(f"c{k}", "pa", s) for k, s in enumerate(shares)}
    grouped = grouping(desired, [], node=NODE, driver=CGROUPFS)
    assert group_weights(desired, grouped) == {parent_of(NODE, "pa"): min(MAX_SHARES, sum(shares))}


def _v1_root(tmp_path: Path) -> Path:
    for hierarchy in ("cpu", "cpuset", "memory"):
        (tmp_path / hierarchy / "docker").mkdir(parents=True)
    return tmp_path


async def test_files_v1_weighted_then_removed_once_empty(tmp_path: Path) -> None:
    root = _v1_root(tmp_path)
    files = PoolCgroupFiles(root)
    parent = parent_of(NODE, "pa")
    shares_file = root / "cpu" / parent.lstrip("/") / "cpu.shares"
    assert await files.apply({parent: 1536}) == []
    assert shares_file.parent.is_dir()
    assert not shares_file.exists()
    shares_file.write_text("1024\n")  # as the kernel has it
    (root / "memory" / parent.lstrip("/")).mkdir()  # as runc makes it
    assert await files.apply({parent: 1536}) == []
    assert shares_file.read_text() == "1536\n"
    shares_file.unlink()  # the kernel's files go with the directory
    assert await files.apply({}) == []
    assert not any(root.glob(f"*/{parent.lstrip('/')}"))


async def test_files_v2_weight_and_a_cgroup_kept_while_it_holds_a_member(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    files = PoolCgroupFiles(tmp_path)
    parent = parent_of(NODE, "pb")
    weight = tmp_path / parent.lstrip("/") / "cpu.weight"
    await files.apply({parent: 2048})
    weight.write_text("100\n")
    await files.apply({parent: 2048})
    assert weight.read_text() == "79\n"  # runc 1.1.5's line: 2048 shares
    (weight.parent / "member").mkdir()  # still holds a member: not removed
    assert await files.apply({}) == []
    assert weight.parent.is_dir()


async def test_a_weight_that_cannot_be_written_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "docker").write_text("")  # no directory can be made below it
    problems = await PoolCgroupFiles(tmp_path).apply({parent_of(NODE, "pa"): 1024})
    assert len(problems) == 1
    assert "cannot set its weight 1024" in problems[0]


# -- the systemd driver: a slice per pool, weighted through systemctl ---------------------

UNIT_NAME = re.compile(r"system-allotpool_[a-z0-9_]+\.slice")


@given(node=st.text(max_size=30), pool=st.text(min_size=1, max_size=60))
def test_a_pools_slice_is_one_level_below_system_slice_for_any_name(node: str, pool: str) -> None:
    """systemd reads each ``-`` of a slice's name as a level: a pool's slice is always
    ``system-<one name>.slice``, a child of system.slice, in a unit name's characters."""
    name = parent_of(node, pool, SYSTEMD)
    assert UNIT_NAME.fullmatch(name), name
    assert is_pool_parent(name)
    assert name != parent_of(node + "x", pool, SYSTEMD)
    assert slice_directory(name) == f"system.slice/{name}"


def test_under_the_systemd_driver_a_pools_containers_are_made_in_its_slice() -> None:
    grouped = grouping(DESIRED, [], node=NODE, driver=SYSTEMD)
    assert grouped == {
        "pa-idle": parent_of(NODE, "pa", SYSTEMD),
        "pa-busy": parent_of(NODE, "pa", SYSTEMD),
        "pb-busy": parent_of(NODE, "pb", SYSTEMD),
    }
    assert (
        parent_of(NODE, "pa", SYSTEMD)
        == "system-allotpool_pa_" + parent_of(NODE, "pa").rsplit("-", 1)[1] + ".slice"
    )
    assert new_parent(PINNED, node=NODE, driver=SYSTEMD) == ""
    # one made under the cgroupfs layout's name stays where it is, in its pool's cgroup
    kept = _observed(BUSY, parent_of(NODE, "pa"), 512)
    assert grouping({BUSY.id: BUSY}, [kept], node=NODE, driver=SYSTEMD) == {
        BUSY.id: parent_of(NODE, "pa")
    }


def test_the_weigher_follows_the_engines_driver_and_the_cgroup_version(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v1.mkdir()
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    assert isinstance(pool_weigher(CGROUPFS, v1), PoolCgroupFiles)
    assert isinstance(pool_weigher(CGROUPFS, v2), PoolCgroupFiles)
    assert isinstance(pool_weigher(SYSTEMD, v2), PoolSlices)
    assert pool_weigher(SYSTEMD, v1) is None  # no slices on v1: each container by itself
    assert pool_weigher("", v2) is None


class Systemctl:
    """A ``systemctl`` stand-in on this host, which has no systemd to ask: it records its
    arguments, and fails while ``fail`` holds a message (the VM's test,
    tests/cgroup_v2/test_agent_on_cgroup_v2.py, runs the real one)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "systemctl"
        self.calls = directory / "calls"
        self.fail = directory / "fail"
        self.path.write_text(
            "#!/bin/sh\n"
            f'echo "$*" >>{self.calls}\n'
            f"if [ -e {self.fail} ]; then cat {self.fail} >&2; exit 1; fi\n"
        )
        self.path.chmod(0o755)

    def said(self) -> list[str]:
        """The calls since the last look."""
        if not self.calls.exists():
            return []
        lines = self.calls.read_text().splitlines()
        self.calls.unlink()
        return lines


async def test_slices_are_weighted_once_per_change_and_stopped_once_empty(tmp_path: Path) -> None:
    systemctl = Systemctl(tmp_path)
    slices = PoolSlices(tmp_path, systemctl=str(systemctl.path))
    pa, pb = parent_of(NODE, "pa", SYSTEMD), parent_of(NODE, "pb", SYSTEMD)
    assert await slices.apply({pa: 1024, pb: 2048}) == []
    assert systemctl.said() == [
        f"set-property --runtime {pa} CPUWeight=39",
        f"set-property --runtime {pb} CPUWeight=79",
    ]
    assert await slices.apply({pa: 1024, pb: 2048}) == []
    assert systemctl.said() == []  # as set: nothing asked
    member = tmp_path / slice_directory(pa) / "docker-1.scope"
    member.mkdir(parents=True)
    assert await slices.apply({pb: 4096}) == []
    assert systemctl.said() == [f"set-property --runtime {pb} CPUWeight=157"]  # pa still held
    member.rmdir()
    assert await slices.apply({pb: 4096}) == []
    assert systemctl.said() == [f"stop {pa}", f"revert {pa}"]
    assert await slices.apply({pb: 4096}) == []
    assert systemctl.said() == []


async def test_a_slice_systemd_would_not_weight_is_a_problem_asked_again(tmp_path: Path) -> None:
    systemctl = Systemctl(tmp_path)
    slices = PoolSlices(tmp_path, systemctl=str(systemctl.path))
    pa = parent_of(NODE, "pa", SYSTEMD)
    systemctl.fail.write_text("Failed to set unit properties: Access denied\n")
    assert await slices.apply({pa: 1024}) == [
        f"pool slice {pa}: cannot set its weight 39: Failed to set unit properties: Access denied"
    ]
    systemctl.fail.unlink()
    assert await slices.apply({pa: 1024}) == []
    assert systemctl.said() == [f"set-property --runtime {pa} CPUWeight=39"] * 2
    missing = PoolSlices(tmp_path, systemctl=str(tmp_path / "no-such-systemctl"))
    (problem,) = await missing.apply({pa: 1024})
    assert "No such file or directory" in problem
