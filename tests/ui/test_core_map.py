"""The core map: every CPU once, by NUMA node and physical core, each with what holds it,
in boxes that do not overlap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.ui.core_map import CoreBox, Holder, core_map
from shared.cpuset import CpuSet
from shared.inventory import Cpu, Inventory, NumaNode
from tests.inventories import inventories

SHARE_BASE = 100


def holder(container_id: str) -> Holder:
    return Holder(f"team-a/web {container_id}", "web", "/ui/deployments/team-a/web", 0)


def dual_socket_smt() -> Inventory:
    """Two NUMA nodes of two physical cores, each with two SMT siblings (n and n+4);
    CPU 7 reserved for the system."""
    cpus = [Cpu(id=cpu, core=cpu % 4, package=cpu % 4 // 2, numa=cpu % 4 // 2) for cpu in range(8)]
    nodes = [
        NumaNode(id=numa, cpus=CpuSet(c.id for c in cpus if c.numa == numa), memory=2**30,
                 distances={0: 10, 1: 20})
        for numa in (0, 1)
    ]  # fmt: skip
    return Inventory(
        hostname="two-sockets",
        cpus=cpus,
        online=CpuSet(range(8)),
        isolated=CpuSet(),
        reserved=CpuSet([7]),
        numa_nodes=nodes,
        memory=2**31,
    )


def test_a_dual_socket_host_with_smt_and_each_kind_of_cpu() -> None:
    plans = {"c-whole": {1: 100, 5: 100}, "c-part": {2: 30}, "c-part-too": {2: 50}}
    groups = core_map(dual_socket_smt(), plans=plans, share_base=SHARE_BASE, holder=holder)
    layout = [[[cell.cpu for cell in box.cpus] for box in group.cores] for group in groups]
    assert [group.numa for group in groups] == [0, 1]
    assert layout == [[[0, 4], [1, 5]], [[2, 6], [3, 7]]]
    cells = {cell.cpu: cell for group in groups for box in group.cores for cell in box.cpus}
    kinds = {cpu: cell.kind for cpu, cell in cells.items()}
    assert kinds == {
        0: "shared", 4: "shared", 1: "bound", 5: "bound",
        2: "fragment", 6: "shared", 3: "shared", 7: "withheld",
    }  # fmt: skip
    assert cells[5].title == "CPU 5: bound to team-a/web c-whole"
    assert cells[2].title == "CPU 2: 80/100 pieces held by team-a/web c-part, team-a/web c-part-too"
    assert cells[7].title == "CPU 7: not offered (reserved or isolated)"
    assert cells[0].title == "CPU 0: shared pool"
    assert cells[2].used_pieces == 80


@given(inventory=inventories(), data=st.data())
def test_every_cpu_is_drawn_once_in_its_core_and_numa_node(
    inventory: Inventory, data: st.DataObject
) -> None:
    offered = sorted(inventory.offered())
    taken = data.draw(st.lists(st.sampled_from(offered), unique=True) if offered else st.just([]))
    plans = {f"c-{cpu}": {cpu: SHARE_BASE} for cpu in taken}
    groups = core_map(inventory, plans=plans, share_base=SHARE_BASE, holder=holder)
    by_id = {cpu.id: cpu for cpu in inventory.cpus}
    drawn = []
    for group in groups:
        for box in group.cores:
            assert {by_id[cell.cpu].core for cell in box.cpus} == {box.core}
            assert {by_id[cell.cpu].numa for cell in box.cpus} == {group.numa}
            assert box.x + box.width <= group.width
            assert box.y + box.height <= group.height
            for cell in box.cpus:
                assert box.x < cell.x
                assert cell.x + cell.width < box.x + box.width
                assert box.y < cell.y
                assert cell.y + cell.height < box.y + box.height
                drawn.append(cell.cpu)
                expected = (
                    "withheld" if cell.cpu not in offered
                    else "bound" if cell.cpu in taken
                    else "shared"
                )  # fmt: skip
                assert cell.kind == expected
        assert not overlapping(group.cores)
    assert sorted(drawn) == sorted(by_id)
    assert [group.numa for group in groups] == sorted({cpu.numa for cpu in inventory.cpus})


def overlapping(boxes: tuple[CoreBox, ...]) -> bool:
    return any(
        a.x < b.x + b.width
        and b.x < a.x + a.width
        and a.y < b.y + b.height
        and b.y < a.y + a.height
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )
