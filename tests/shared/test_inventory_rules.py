"""shared.inventory_rules: each rule between an inventory's fields, on a named topology,
and properties over any consistent inventory and any way to break one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.cpuset import CpuSet
from shared.inventory import Cpu, Gpu, Inventory, MigDevice, NumaNode
from shared.inventory_rules import Violation, inventory_violations
from shared.protocol import Hello, InvalidInventory, decode_from_agent, encode
from tests.inventories import MAX_TEST_CPU_ID, MAX_TEST_NUMA_ID, inventories

GiB = 2**30
replace = msgspec.structs.replace


def two_numa_smt() -> Inventory:
    """8 CPUs, SMT siblings n and n+4; NUMA 0 holds cores 0 and 1, NUMA 1 cores 2 and 3;
    one whole GPU and one in MIG mode with one device."""
    cpus = [Cpu(cpu, cpu % 4, 0, cpu % 4 // 2) for cpu in range(8)]
    a100 = Gpu(
        index=1,
        uuid="GPU-b",
        name="NVIDIA A100-SXM4-80GB",
        memory=80 * GiB,
        pci_bus_id="0000:3b:00.0",
        numa=1,
        mig_enabled=True,
        mig_devices=[MigDevice("MIG-b1", "1g.10gb", 9, 0, 10 * GiB)],
    )
    h100 = replace(a100, index=0, uuid="GPU-a", mig_enabled=False, mig_devices=[])
    return Inventory(
        hostname="host-a",
        cpus=cpus,
        online=CpuSet(range(8)),
        isolated=CpuSet([3]),
        reserved=CpuSet([0, 4]),
        numa_nodes=[
            NumaNode(0, CpuSet([0, 1, 4, 5]), 32 * GiB, {0: 10, 1: 21}),
            NumaNode(1, CpuSet([2, 3, 6, 7]), 32 * GiB, {0: 21, 1: 10}),
        ],
        memory=64 * GiB,
        gpus=[h100, a100],
        extended={"example.com/fpga": 2},
    )


TOPOLOGY = two_numa_smt()


def with_cpu(index: int, **changes: Any) -> Inventory:
    cpus = list(TOPOLOGY.cpus)
    cpus[index] = replace(cpus[index], **changes)
    return replace(TOPOLOGY, cpus=cpus)


def with_node(index: int, **changes: Any) -> Inventory:
    nodes = list(TOPOLOGY.numa_nodes)
    nodes[index] = replace(nodes[index], **changes)
    return replace(TOPOLOGY, numa_nodes=nodes)


def with_gpu(position: int, **changes: Any) -> Inventory:
    found = list(TOPOLOGY.gpus)
    found[position] = replace(found[position], **changes)
    return replace(TOPOLOGY, gpus=found)


def with_mig(**changes: Any) -> Inventory:
    (device,) = TOPOLOGY.gpus[1].mig_devices
    return with_gpu(1, mig_devices=[replace(device, **changes)])


RULES: list[tuple[str, Inventory, list[str]]] = [
    ("consistent", TOPOLOGY, []),
    (
        "1-cpu-twice",
        replace(TOPOLOGY, cpus=[*TOPOLOGY.cpus, TOPOLOGY.cpus[2]]),
        ["cpus[8].id = 2: repeats cpus[2]"],
    ),
    (
        "2-online",
        replace(TOPOLOGY, online=CpuSet(range(10))),
        ["online = '0-9': names CPUs 8-9 that are not in cpus"],
    ),
    (
        "2-isolated",
        replace(TOPOLOGY, isolated=CpuSet([3, 12])),
        ["isolated = '3,12': names CPUs 12 that are not in cpus"],
    ),
    (
        "2-reserved",
        replace(TOPOLOGY, reserved=CpuSet([40])),
        ["reserved = '40': names CPUs 40 that are not in cpus"],
    ),
    (
        "3-numa",
        with_cpu(6, numa=2),
        [
            "cpus[6].numa = 2: names no NUMA node of numa_nodes (0-1)",
            "numa_nodes[1].cpus = '2-3,6-7': differs from the CPUs that name NUMA node 1 (2-3,7)",
        ],
    ),
    (
        "4-core-unknown",
        with_cpu(5, core=9),
        ["cpus[5].core = 9: names no CPU of cpus (a core is named by its lowest SMT sibling)"],
    ),
    (
        "4-core-above",
        with_cpu(1, core=5),
        [
            "cpus[1].core = 5: is above the CPU's own id 1 (a core is named by its lowest sibling)",
            "cpus[5].core = 1: names CPU 1, whose own core is 5",
        ],
    ),
    (
        "4-core-not-its-own",
        with_cpu(6, core=5),
        ["cpus[6].core = 5: names CPU 5, whose own core is 1"],
    ),
    (
        "5-node-twice",
        replace(TOPOLOGY, numa_nodes=[*TOPOLOGY.numa_nodes, TOPOLOGY.numa_nodes[0]]),
        ["numa_nodes[2].id = 0: repeats numa_nodes[0]"],
    ),
    (
        "6-node-cpus",
        with_node(0, cpus=CpuSet([0, 1, 4])),
        ["numa_nodes[0].cpus = '0-1,4': differs from the CPUs that name NUMA node 0 (0-1,4-5)"],
    ),
    (
        "6-cpu-less-node-with-cpus",
        replace(
            TOPOLOGY,
            numa_nodes=[*TOPOLOGY.numa_nodes, NumaNode(3, CpuSet([7]), GiB, {3: 10})],
        ),
        ["numa_nodes[2].cpus = '7': differs from the CPUs that name NUMA node 3 (none)"],
    ),
    (
        "7-distance",
        with_node(1, distances={0: 21, 1: 10, 4: 30, 2: 40}),
        [
            "numa_nodes[1].distances = {0: 21, 1: 10, 4: 30, 2: 40}: names NUMA nodes"
            " [2, 4] that are not in numa_nodes"
        ],
    ),
    (
        "8-node-memory",
        with_node(0, memory=64 * GiB + 1),
        [f"numa_nodes[0].memory = {64 * GiB + 1}: is above the host's memory ({64 * GiB})"],
    ),
    (
        "9-gpu-index",
        with_gpu(1, index=0),
        ["gpus[1].index = 0: repeats gpus[0]"],
    ),
    (
        "9-gpu-uuid",
        with_gpu(1, uuid="GPU-a"),
        ["gpus[1].uuid = 'GPU-a': repeats gpus[0].uuid"],
    ),
    (
        "9-mig-uuid-of-a-gpu",
        with_mig(uuid="GPU-a"),
        ["gpus[1].mig_devices[0].uuid = 'GPU-a': repeats gpus[0].uuid"],
    ),
    (
        "10-mig-off",
        with_gpu(1, mig_enabled=False),
        ["gpus[1].mig_devices = 1: a GPU that is not in MIG mode has no MIG devices"],
    ),
    (
        "10-mig-memory",
        with_mig(memory=80 * GiB + 1),
        [f"gpus[1].mig_devices[0].memory = {80 * GiB + 1}: is above its GPU's memory ({80 * GiB})"],
    ),
    (
        "11-extended",
        replace(TOPOLOGY, extended={"nvidia.com/gpu": 1, "fpga": 1, "example.com/fpga": 1}),
        [
            "extended = 'fpga': is not <domain>/<name> (a lower-case DNS subdomain, then a"
            " name of A-Z, a-z, 0-9, '-', '_', '.' of at most 63 characters)",
            "extended = 'nvidia.com/gpu': is discovered on the host, not an extended resource"
            " (ask for gpus or mig)",
        ],
    ),
]


@pytest.mark.parametrize(
    ("inventory", "expected"),
    [pytest.param(inventory, expected, id=name) for name, inventory, expected in RULES],
)
def test_each_rule_names_field_value_and_rule(inventory: Inventory, expected: list[str]) -> None:
    assert [str(v) for v in inventory_violations(inventory)] == expected


def test_a_hello_breaking_a_rule_is_refused_with_the_first_violation() -> None:
    hello = Hello(node="n", token="t", protocol=1, inventory=with_cpu(6, numa=2))
    with pytest.raises(InvalidInventory) as refused:
        decode_from_agent(encode(hello))
    assert refused.value.code == "invalid_inventory"
    assert refused.value.message == (
        "inventory.cpus[6].numa = 2: names no NUMA node of numa_nodes (0-1) (and 1 more)"
    )
    assert refused.value.sender.node == "n"


def test_a_long_value_is_cut_in_the_message() -> None:
    violation = Violation("hostname", "h" * 500, "rule")
    assert str(violation) == f"hostname = '{'h' * 76}...: rule"


# --- properties ----------------------------------------------------------------------------

FAST = settings(max_examples=100, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(inventories())
def test_a_consistent_inventory_breaks_no_rule_and_is_taken(inventory: Inventory) -> None:
    assert inventory_violations(inventory) == []
    hello = Hello(node="n", token="t", protocol=1, inventory=inventory)
    assert decode_from_agent(encode(hello)) == hello


Draw = Callable[[st.SearchStrategy[Any]], Any]  # hypothesis's data.draw
Breaker = Callable[[Inventory, Draw], tuple[Inventory, str] | None]


def _cpu_index(inventory: Inventory, draw: Draw) -> int:
    index: int = draw(st.integers(min_value=0, max_value=len(inventory.cpus) - 1))
    return index


def _node_index(inventory: Inventory, draw: Draw) -> int:
    index: int = draw(st.integers(min_value=0, max_value=len(inventory.numa_nodes) - 1))
    return index


def _repeat_cpu(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    cpu = inventory.cpus[_cpu_index(inventory, draw)]
    return replace(inventory, cpus=[*inventory.cpus, cpu]), f"cpus[{len(inventory.cpus)}].id"


def _stray_cpu(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    name = draw(st.sampled_from(["online", "isolated", "reserved"]))
    stray = CpuSet([MAX_TEST_CPU_ID + 1])
    return replace(inventory, **{name: getattr(inventory, name) | stray}), name


def _numa_of_no_node(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    index = _cpu_index(inventory, draw)
    cpus = list(inventory.cpus)
    cpus[index] = replace(cpus[index], numa=MAX_TEST_NUMA_ID + 1)
    return replace(inventory, cpus=cpus), f"cpus[{index}].numa"


def _core_of_no_cpu(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    index = _cpu_index(inventory, draw)
    cpus = list(inventory.cpus)
    cpus[index] = replace(cpus[index], core=MAX_TEST_CPU_ID + 1)
    return replace(inventory, cpus=cpus), f"cpus[{index}].core"


def _repeat_node(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    node = inventory.numa_nodes[_node_index(inventory, draw)]
    nodes = [*inventory.numa_nodes, node]
    return replace(inventory, numa_nodes=nodes), f"numa_nodes[{len(nodes) - 1}].id"


def _node_changed(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    index = _node_index(inventory, draw)
    node = inventory.numa_nodes[index]
    field, value = draw(
        st.sampled_from(
            [
                ("cpus", node.cpus | CpuSet([MAX_TEST_CPU_ID + 1])),
                ("distances", node.distances | {MAX_TEST_NUMA_ID + 1: 20}),
                ("memory", inventory.memory + 1),
            ]
        )
    )
    nodes = list(inventory.numa_nodes)
    nodes[index] = replace(node, **{field: value})
    return replace(inventory, numa_nodes=nodes), f"numa_nodes[{index}].{field}"


def _gpu_repeated(inventory: Inventory, draw: Draw) -> tuple[Inventory, str] | None:
    if not inventory.gpus:
        return None
    gpu = draw(st.sampled_from(inventory.gpus))
    field = draw(st.sampled_from(["index", "uuid"]))
    other = {"uuid": "GPU-other"} if field == "index" else {"index": 256 - 1}
    if field == "uuid" and any(g.index == 255 for g in inventory.gpus):
        return None
    copy = replace(gpu, mig_devices=[], **other)
    return replace(inventory, gpus=[*inventory.gpus, copy]), f"gpus[{len(inventory.gpus)}].{field}"


def _mig_broken(inventory: Inventory, draw: Draw) -> tuple[Inventory, str] | None:
    with_mig = [i for i, gpu in enumerate(inventory.gpus) if gpu.mig_devices]
    if not with_mig:
        return None
    index = draw(st.sampled_from(with_mig))
    gpu = inventory.gpus[index]
    found = list(inventory.gpus)
    if draw(st.booleans()):
        found[index] = replace(gpu, mig_enabled=False)
        return replace(inventory, gpus=found), f"gpus[{index}].mig_devices"
    smaller = replace(gpu, memory=min(d.memory for d in gpu.mig_devices) - 1)
    if smaller.memory < 1:
        return None
    found[index] = smaller
    return replace(inventory, gpus=found), f"gpus[{index}].mig_devices["


def _extended_gpu(inventory: Inventory, draw: Draw) -> tuple[Inventory, str]:
    name = draw(st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "fpga", "memory"]))
    return replace(inventory, extended=inventory.extended | {name: 1}), "extended"


BREAKERS: list[Breaker] = [
    _repeat_cpu,
    _stray_cpu,
    _numa_of_no_node,
    _core_of_no_cpu,
    _repeat_node,
    _node_changed,
    _gpu_repeated,
    _mig_broken,
    _extended_gpu,
]


@FAST
@given(inventories(), st.sampled_from(BREAKERS), st.data())
def test_any_broken_rule_is_found_named_and_refused(
    inventory: Inventory, breaker: Breaker, data: st.DataObject
) -> None:
    broken = breaker(inventory, data.draw)
    if broken is None:
        return
    changed, field = broken
    violations = inventory_violations(changed)
    assert any(v.field.startswith(field) for v in violations), (field, violations)
    with pytest.raises(InvalidInventory) as refused:
        decode_from_agent(encode(Hello(node="n", token="t", protocol=1, inventory=changed)))
    assert refused.value.message.startswith(f"inventory.{violations[0]}")


@FAST
@given(inventories(), st.sampled_from(BREAKERS), st.data())
def test_a_violation_quotes_the_value_at_its_field(
    inventory: Inventory, breaker: Breaker, data: st.DataObject
) -> None:
    broken = breaker(inventory, data.draw)
    if broken is None:
        return
    for violation in inventory_violations(broken[0]):
        found = _at(broken[0], violation.field)
        if violation.field == "extended":  # the name that breaks the rule
            assert violation.value in found
        elif violation.field.endswith("mig_devices"):  # how many there are
            assert violation.value == len(found)
        else:
            assert violation.value == (str(found) if isinstance(found, CpuSet) else found)


def _at(value: Any, field: str) -> Any:
    """The value at a path like "gpus[1].mig_devices[0].memory"."""
    for part in field.replace("[", ".").replace("]", "").split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return value
