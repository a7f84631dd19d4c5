"""agent.runtime.pool_cgroups and shared.pool_cgroups: which containers run in their
pool's cgroup, its weight, and the files written for it (on a directory laid out as
cgroup v1 and as v2; tests/docker/test_pool_cgroups.py does it on this host's kernel).

- a container of a pool is made in its pool's cgroup when the agent groups, with the same
  Docker settings as beside it, its entitlement counted in the cgroup's weight;
- a container Docker holds stays where it was made: one made before the agent grouped
  keeps its own weight beside the pools' cgroups; only one made anew moves;
- bound containers and containers of no pool are never grouped;
- a pool's cgroup weighs its members' entitlements added, on every node apart.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.labels import spec_digest
from agent.runtime.plan import Host, Observed, Update, plan, target_settings
from agent.runtime.pool_cgroups import PoolCgroupFiles, group_weights, grouping, new_parent
from shared.cpuset import CpuSet
from shared.pool_cgroups import (
    MAX_SHARES,
    group_shares,
    is_pool_parent,
    parent_of,
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
    grouped = grouping(DESIRED, [], node=NODE, enabled=True)
    assert grouped == {
        "pa-idle": parent_of(NODE, "pa"),
        "pa-busy": parent_of(NODE, "pa"),
        "pb-busy": parent_of(NODE, "pb"),
    }
    assert group_weights(DESIRED, grouped) == {
        parent_of(NODE, "pa"): 1024,
        parent_of(NODE, "pb"): 1024,
    }
    assert new_parent(IDLE, node=NODE, enabled=True) == parent_of(NODE, "pa")
    assert new_parent(PINNED, node=NODE, enabled=True) == ""
    assert new_parent(NO_POOL, node=NODE, enabled=True) == ""


def test_an_agent_that_does_not_group_makes_no_pool_cgroup() -> None:
    assert grouping(DESIRED, [], node=NODE, enabled=False) == {}
    assert new_parent(IDLE, node=NODE, enabled=False) == ""


def test_a_container_made_before_grouping_stays_beside_the_pools_cgroup() -> None:
    """``pa-idle`` was made by an agent that did not group (Docker's default parent): it
    stays there at its own entitlement, and its pool's cgroup weighs only the member
    inside it, so the two together still weigh the pool's fair share on the host. Both
    hold their entitlement as their own weight: nothing to do, and a new entitlement is
    an update in place wherever the container is."""
    flat = _observed(IDLE, "", 512)
    inside = _observed(BUSY, parent_of(NODE, "pa"), 512)
    desired = {IDLE.id: IDLE, BUSY.id: BUSY}
    grouped = grouping(desired, [flat, inside], node=NODE, enabled=True)
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
    grouped = grouping({IDLE.id: changed}, [old], node=NODE, enabled=True)
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
    grouped = grouping(desired, [], node=NODE, enabled=True)
    assert group_weights(desired, grouped) == {parent_of(NODE, "pa"): min(MAX_SHARES, sum(shares))}


def _v1_root(tmp_path: Path) -> Path:
    for hierarchy in ("cpu", "cpuset", "memory"):
        (tmp_path / hierarchy / "docker").mkdir(parents=True)
    return tmp_path


def test_files_v1_weighted_then_removed_once_empty(tmp_path: Path) -> None:
    root = _v1_root(tmp_path)
    files = PoolCgroupFiles(root)
    parent = parent_of(NODE, "pa")
    shares_file = root / "cpu" / parent.lstrip("/") / "cpu.shares"
    assert files.apply({parent: 1536}) == []
    assert shares_file.parent.is_dir()
    assert not shares_file.exists()
    shares_file.write_text("1024\n")  # as the kernel has it
    (root / "memory" / parent.lstrip("/")).mkdir()  # as runc makes it
    assert files.apply({parent: 1536}) == []
    assert shares_file.read_text() == "1536\n"
    shares_file.unlink()  # the kernel's files go with the directory
    assert files.apply({}) == []
    assert not any(root.glob(f"*/{parent.lstrip('/')}"))


def test_files_v2_weight_and_a_cgroup_kept_while_it_holds_a_member(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    files = PoolCgroupFiles(tmp_path)
    parent = parent_of(NODE, "pb")
    weight = tmp_path / parent.lstrip("/") / "cpu.weight"
    files.apply({parent: 2048})
    weight.write_text("100\n")
    files.apply({parent: 2048})
    assert weight.read_text() == "79\n"  # runc 1.1.5's line: 2048 shares
    (weight.parent / "member").mkdir()  # still holds a member: not removed
    assert files.apply({}) == []
    assert weight.parent.is_dir()


def test_a_weight_that_cannot_be_written_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "docker").write_text("")  # no directory can be made below it
    problems = PoolCgroupFiles(tmp_path).apply({parent_of(NODE, "pa"): 1024})
    assert len(problems) == 1
    assert "cannot set its weight 1024" in problems[0]
