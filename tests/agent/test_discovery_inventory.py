"""What discovery sends is never refused: the recorded hosts, this machine and hosts with
odd sysfs trees all give inventories the coordinator takes (``inventory_refusal``), and one
that would be refused gives way to a generic view, offered degraded with the reason."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.discovery.cpu import HostTotals
from agent.discovery.gpu import NvmlApi
from agent.discovery.inventory import discover
from shared.cpuset import CpuSet
from shared.inventory import Inventory
from shared.protocol import inventory_refusal
from tests.agent.test_discovery_cpu import RECORDED, meminfo, small_host
from tests.fakes.nvml import (
    GIB,
    FakeNvml,
    eight_whole_gpus,
    no_library,
    no_permission,
    two_gpus_mig_mixed,
)
from tests.fixtures.sysfs import load_fixture, materialize

SMALL_TOTALS = HostTotals(logical_cpus=8, memory=2 * GIB)  # small_host() has 1 GiB per node
NVML_HOSTS: dict[str, Callable[[], FakeNvml]] = {
    "no-nvidia": no_library,
    "eight-h100": eight_whole_gpus,
    "two-a100-mig": two_gpus_mig_mixed,
    "no-permission": no_permission,
}


def discovered(
    root: Path,
    totals: HostTotals,
    nvml: NvmlApi,
    reserved: CpuSet | None = None,
    extended: dict[str, int] | None = None,
) -> Inventory:
    return discover(
        sysfs_root=root,
        reserved=reserved or CpuSet(),
        hostname="host-a",
        nvml=nvml,
        totals=totals,
        extended=extended,
    )


def write_sys(tree: dict[str, str], root: Path) -> None:
    materialize({f"sys/{rel}": content for rel, content in tree.items()}, root)


@pytest.mark.parametrize("nvml", list(NVML_HOSTS.values()), ids=list(NVML_HOSTS))
@pytest.mark.parametrize("name", list(RECORDED))
def test_every_recorded_host_is_taken_as_discovered(
    tmp_path: Path, name: str, nvml: Callable[[], FakeNvml]
) -> None:
    recorded = RECORDED[name]
    materialize(load_fixture(name), tmp_path)
    totals = HostTotals(logical_cpus=recorded.cpus, memory=recorded.memory)
    inventory = discovered(tmp_path, totals, nvml(), CpuSet([0]), extended={"example.com/fpga": 2})
    assert inventory_refusal(inventory) is None
    assert len(inventory.numa_nodes) == len(recorded.nodes)  # not the generic view
    assert all(not problem.startswith("discovery found") for problem in inventory.problems)


def test_this_machine_is_taken_as_discovered() -> None:
    inventory = discover(sysfs_root=Path("/"), reserved=CpuSet(), hostname="this-host")
    assert inventory_refusal(inventory) is None


def test_an_isolated_cpu_that_is_offline_is_left_out(tmp_path: Path) -> None:
    tree = small_host() | {"devices/system/cpu/isolated": "2-3,12\n"}
    tree["devices/system/cpu/online"] = "0-2,4-7\n"
    write_sys(tree, tmp_path)
    inventory = discovered(tmp_path, SMALL_TOTALS, no_library())
    assert inventory.isolated == CpuSet([2])
    assert inventory_refusal(inventory) is None


def test_a_node_with_more_memory_than_the_host_offers_the_hosts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in a container under LXCFS: /proc/meminfo (psutil) says less than /sys."""
    monkeypatch.setattr(logging.getLogger("allot"), "propagate", True)
    caplog.set_level(logging.INFO, logger="allot.agent.discovery")
    write_sys(small_host(), tmp_path)
    inventory = discovered(tmp_path, HostTotals(logical_cpus=8, memory=GIB // 2), no_library())
    assert [node.memory for node in inventory.numa_nodes] == [GIB // 2, GIB // 2]
    assert inventory_refusal(inventory) is None
    assert "NUMA node memory above the host total, offering the total" in caplog.messages


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            {"devices/system/node/node0/distance": "5 20\n"},
            "inventory.numa_nodes[0].distances[...]: Expected `int` >= 10",
        ),
        (
            {"devices/system/cpu/cpu5/topology/core_cpus_list": "3-5\n"},
            "inventory.cpus[5].core = 3: names CPU 3, whose own core is 2",
        ),
    ],
    ids=["distance-below-local", "asymmetric-siblings"],
)
def test_what_would_be_refused_gives_way_to_a_generic_degraded_view(
    tmp_path: Path, edit: dict[str, str], problem: str
) -> None:
    write_sys(small_host() | edit, tmp_path)
    inventory = discovered(tmp_path, SMALL_TOTALS, eight_whole_gpus(), CpuSet([1]))
    assert inventory_refusal(inventory) is None
    assert inventory.problems == [f"discovery found what the coordinator would refuse: {problem}"]
    assert len(inventory.numa_nodes) == 1
    assert inventory.gpus == []
    assert inventory.reserved == CpuSet([1])
    assert inventory.online == CpuSet(range(8))


def test_a_gpu_without_memory_gives_way_to_a_generic_view(tmp_path: Path) -> None:
    nvml = eight_whole_gpus()
    nvml.gpus[3].memory = 0
    write_sys(small_host(), tmp_path)
    inventory = discovered(tmp_path, SMALL_TOTALS, nvml)
    assert inventory_refusal(inventory) is None
    assert inventory.gpus == []
    assert "inventory.gpus[3].memory = 0" in inventory.problems[0]


# --- any sysfs tree ------------------------------------------------------------------------

cpu_lists = st.one_of(
    st.sampled_from(["0-7", "0-3", "4-7", "0,2,4,6", "1-3,5", "", "0-9", "7"]),
    st.text(alphabet="0123456789-, x", max_size=8),
)
numbers = st.one_of(st.integers(min_value=-5, max_value=300).map(str), st.just("x"))
distance_rows = st.lists(st.integers(min_value=0, max_value=300).map(str), max_size=3).map(" ".join)


@st.composite
def odd_hosts(draw: st.DrawFn) -> dict[str, str]:
    """small_host() with some of its files holding odd values, or garbage."""
    tree = small_host()

    def maybe(rel: str, values: st.SearchStrategy[str]) -> None:
        if draw(st.booleans()):
            tree[rel] = draw(values) + "\n"

    for node in (0, 1):
        base = f"devices/system/node/node{node}"
        maybe(f"{base}/cpulist", cpu_lists)
        maybe(f"{base}/distance", distance_rows)
        kib = st.integers(min_value=0, max_value=4 * 1024 * 1024)
        if draw(st.booleans()):
            tree[f"{base}/meminfo"] = meminfo(node, draw(kib))
    maybe("devices/system/cpu/online", cpu_lists)
    maybe("devices/system/cpu/isolated", cpu_lists)
    for cpu in draw(st.lists(st.integers(min_value=0, max_value=7), max_size=3)):
        maybe(f"devices/system/cpu/cpu{cpu}/topology/core_cpus_list", cpu_lists)
        maybe(f"devices/system/cpu/cpu{cpu}/topology/physical_package_id", numbers)
    return tree


@settings(
    max_examples=100,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(odd_hosts(), st.sampled_from(sorted(NVML_HOSTS)))
def test_whatever_sysfs_says_discovery_sends_what_is_taken(tree: dict[str, str], nvml: str) -> None:
    with tempfile.TemporaryDirectory() as root:
        write_sys(tree, Path(root))
        inventory = discovered(Path(root), SMALL_TOTALS, NVML_HOSTS[nvml]())
    assert inventory_refusal(inventory) is None
