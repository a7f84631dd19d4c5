"""CPU topology and NUMA discovery, over recorded sysfs trees, hand-made edge cases and /sys."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from agent.discovery.cpu import CpuTopology, HostTotals, probe_cpus
from agent.discovery.sysfs import Sysfs, SysfsError
from shared.cpuset import CpuSet
from shared.inventory import NumaNode
from tests.fixtures.sysfs import load_fixture, materialize
from tests.fixtures.sysfs.record import record

KiB = 1024
GiB = 1024**3
SMALL_TOTALS = HostTotals(logical_cpus=8, memory=16 * GiB)  # psutil's view of small_host()


@dataclass(frozen=True)
class Recorded:
    """What a recorded host must probe as; node memory is MemTotal in bytes."""

    cpus: int
    cores: int
    packages: int
    isolated: str
    nodes: dict[int, tuple[str, int]]  # node id -> (cpus, memory)
    distances: dict[int, dict[int, int]]
    memory: int


RECORDED = {
    "dual_socket_ht": Recorded(
        cpus=32,
        cores=16,
        packages=2,
        isolated="",
        nodes={0: ("0-7,16-23", 64 * GiB), 1: ("8-15,24-31", 64 * GiB)},
        distances={0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}},
        memory=128 * GiB,
    ),
    "quad_numa_cxl": Recorded(
        cpus=24,
        cores=24,
        packages=1,
        isolated="",
        nodes={
            0: ("0-7", 131_611_268 * KiB),
            1: ("8-15", 132_086_656 * KiB),
            2: ("16-23", 132_086_656 * KiB),
            3: ("", 128 * GiB),
        },
        distances={
            0: {0: 10, 1: 12, 2: 12, 3: 14},
            1: {0: 12, 1: 10, 2: 12, 3: 14},
            2: {0: 12, 1: 12, 2: 10, 3: 14},
            3: {0: 14, 1: 14, 2: 14, 3: 10},
        },
        memory=530_002_308 * KiB,
    ),
    "isolcpus": Recorded(
        cpus=16,
        cores=8,
        packages=1,
        isolated="2-3,10-11",
        nodes={0: ("0-15", 32_718_580 * KiB)},
        distances={0: {0: 10}},
        memory=32_718_580 * KiB,
    ),
    "this_host": Recorded(
        cpus=2,
        cores=2,
        packages=1,
        isolated="",
        nodes={0: ("0-1", 4_810_964 * KiB)},
        distances={0: {0: 10}},
        memory=4_810_964 * KiB,
    ),
}
recorded_hosts = pytest.mark.parametrize(
    ("name", "expected"), list(RECORDED.items()), ids=list(RECORDED)
)


def probe_fixture(name: str, root: Path) -> CpuTopology:
    """The recorded host, with psutil's view of it as it was recorded."""
    materialize(load_fixture(name), root)
    recorded = RECORDED[name]
    return probe_cpus(Sysfs(root), HostTotals(logical_cpus=recorded.cpus, memory=recorded.memory))


def probe_tree(tree: dict[str, str], root: Path) -> CpuTopology:
    """Probe a tree whose paths are relative to /sys, as the probe names them."""
    materialize({f"sys/{rel}": content for rel, content in tree.items()}, root)
    return probe_cpus(Sysfs(root), SMALL_TOTALS)


def meminfo(node: int, kib: int) -> str:
    """The first lines of a node's meminfo, laid out as the kernel prints them."""
    rows = [("MemTotal", kib), ("MemFree", kib // 2)]
    return "".join(f"Node {node} {name + ':':<16}{value:>8} kB\n" for name, value in rows)


def small_host() -> dict[str, str]:
    """2 packages x 2 cores x 2 threads with adjacent siblings; one NUMA node per package."""
    tree = {
        "devices/system/cpu/online": "0-7\n",
        "devices/system/cpu/isolated": "\n",
        "devices/system/node/online": "0-1\n",
        "devices/system/node/possible": "0-1\n",
        "devices/system/node/has_cpu": "0-1\n",
    }
    for cpu in range(8):
        topology = f"devices/system/cpu/cpu{cpu}/topology"
        tree[f"{topology}/core_cpus_list"] = f"{cpu & ~1}-{cpu | 1}\n"
        tree[f"{topology}/physical_package_id"] = f"{cpu // 4}\n"
    for node, cpus, distance in ((0, "0-3", "10 20"), (1, "4-7", "20 10")):
        tree[f"devices/system/node/node{node}/cpulist"] = f"{cpus}\n"
        tree[f"devices/system/node/node{node}/meminfo"] = meminfo(node, 1024 * 1024)
        tree[f"devices/system/node/node{node}/distance"] = f"{distance}\n"
    return tree


def without(tree: dict[str, str], fragment: str) -> dict[str, str]:
    return {rel: content for rel, content in tree.items() if fragment not in rel}


@pytest.fixture
def discovery_log(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery's info lines reach caplog, even after another test ran logs.configure()."""
    monkeypatch.setattr(logging.getLogger("allot"), "propagate", True)
    caplog.set_level(logging.INFO, logger="allot.agent.discovery")


# Recorded hosts


@recorded_hosts
def test_recorded_host_counts(tmp_path: Path, name: str, expected: Recorded) -> None:
    topology = probe_fixture(name, tmp_path)
    assert len(topology.cpus) == expected.cpus
    assert topology.online == CpuSet(range(expected.cpus))
    assert [cpu.id for cpu in topology.cpus] == list(range(expected.cpus))
    assert len({cpu.core for cpu in topology.cpus}) == expected.cores
    assert len({cpu.package for cpu in topology.cpus}) == expected.packages
    assert str(topology.isolated) == expected.isolated


@recorded_hosts
def test_recorded_host_numa_nodes(tmp_path: Path, name: str, expected: Recorded) -> None:
    topology = probe_fixture(name, tmp_path)
    nodes = {node.id: (str(node.cpus), node.memory) for node in topology.numa_nodes}
    assert nodes == expected.nodes
    assert [node.id for node in topology.numa_nodes] == sorted(expected.nodes)
    assert {node.id: node.distances for node in topology.numa_nodes} == expected.distances
    assert sum(node.memory for node in topology.numa_nodes) == expected.memory
    assert topology.problems == []


@recorded_hosts
def test_recorded_host_cpus_name_their_numa_node(
    tmp_path: Path, name: str, expected: Recorded
) -> None:
    topology = probe_fixture(name, tmp_path)
    for cpu in topology.cpus:
        assert cpu.id in CpuSet.parse(expected.nodes[cpu.numa][0])


@pytest.mark.parametrize(
    ("cpu", "core", "package", "numa"),
    [(0, 0, 0, 0), (7, 7, 0, 0), (16, 0, 0, 0), (23, 7, 0, 0), (8, 8, 1, 1), (24, 8, 1, 1)],
    ids=["cpu0", "cpu7", "cpu16-sibling-of-0", "cpu23", "cpu8-core_id-0", "cpu24-sibling-of-8"],
)
def test_dual_socket_core_is_lowest_sibling_not_core_id(
    tmp_path: Path, cpu: int, core: int, package: int, numa: int
) -> None:
    tree = load_fixture("dual_socket_ht")
    # The kernel's core_id restarts on each socket; the probe's core must not.
    assert tree[f"sys/devices/system/cpu/cpu{cpu}/topology/core_id"] == f"{core % 8}\n"
    found = probe_fixture("dual_socket_ht", tmp_path).cpus[cpu]
    assert (found.id, found.core, found.package, found.numa) == (cpu, core, package, numa)


def test_cpu_less_cxl_node_is_kept_with_its_memory(tmp_path: Path) -> None:
    topology = probe_fixture("quad_numa_cxl", tmp_path)
    cxl = topology.numa_nodes[3]
    assert cxl == NumaNode(3, CpuSet(), 128 * GiB, {0: 14, 1: 14, 2: 14, 3: 10})
    assert {cpu.numa for cpu in topology.cpus} == {0, 1, 2}


def test_isolated_cpus_stay_online_and_listed(tmp_path: Path) -> None:
    topology = probe_fixture("isolcpus", tmp_path)
    assert topology.isolated == CpuSet.parse("2-3,10-11")
    assert topology.isolated.issubset(topology.online)
    assert {cpu.core for cpu in topology.cpus if cpu.id in topology.isolated} == {2, 3}


@pytest.mark.parametrize("name", list(RECORDED))
def test_recorder_reproduces_the_recorded_files(tmp_path: Path, name: str) -> None:
    tree = load_fixture(name)
    materialize(tree | {"sys/devices/system/cpu/cpu0/cache/index0/size": "48K\n"}, tmp_path)
    assert record(tmp_path) == tree  # files the probe does not read are not recorded


# Hand-made trees: fallbacks and inconsistencies


def test_small_host_probes_as_written(tmp_path: Path) -> None:
    topology = probe_tree(small_host(), tmp_path)
    assert [(cpu.core, cpu.package, cpu.numa) for cpu in topology.cpus] == [
        (0, 0, 0), (0, 0, 0), (2, 0, 0), (2, 0, 0), (4, 1, 1), (4, 1, 1), (6, 1, 1), (6, 1, 1)
    ]  # fmt: skip
    assert topology.numa_nodes == [
        NumaNode(0, CpuSet.parse("0-3"), GiB, {0: 10, 1: 20}),
        NumaNode(1, CpuSet.parse("4-7"), GiB, {0: 20, 1: 10}),
    ]
    assert (topology.memory, topology.problems) == (16 * GiB, [])  # the host's, from psutil


@pytest.mark.usefixtures("discovery_log")
def test_without_numa_in_sysfs_one_node_gets_psutil_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topology = probe_tree(without(small_host(), "devices/system/node/"), tmp_path)
    assert topology.numa_nodes == [NumaNode(0, CpuSet.parse("0-7"), 16 * GiB, {0: 10})]
    assert {cpu.numa for cpu in topology.cpus} == {0}
    assert (topology.memory, topology.problems) == (16 * GiB, [])
    assert "sysfs has no NUMA nodes" in caplog.text


@pytest.mark.usefixtures("discovery_log")
def test_without_online_list_psutil_count_is_online(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topology = probe_tree(without(small_host(), "cpu/online"), tmp_path)
    assert topology.online == CpuSet.parse("0-7")
    assert len(topology.cpus) == 8
    assert "sysfs has no online CPU list" in caplog.text


@pytest.mark.parametrize(
    ("sibling_file", "cores"),
    [
        ("core_cpus_list", [0, 0, 2, 2, 4, 4, 6, 6]),
        ("thread_siblings_list", [0, 0, 2, 2, 4, 4, 6, 6]),
        (None, [0, 1, 2, 3, 4, 5, 6, 7]),
    ],
    ids=["core_cpus_list", "thread_siblings_list-on-older-kernels", "neither-so-own-core"],
)
def test_core_comes_from_the_sibling_list_there_is(
    tmp_path: Path, sibling_file: str | None, cores: list[int]
) -> None:
    tree = without(small_host(), "core_cpus_list")
    if sibling_file is not None:
        for cpu in range(8):
            tree[f"devices/system/cpu/cpu{cpu}/topology/{sibling_file}"] = f"{cpu & ~1}-{cpu | 1}\n"
    assert [cpu.core for cpu in probe_tree(tree, tmp_path).cpus] == cores


@pytest.mark.parametrize(
    ("online", "cores", "node_cpus"),
    [
        ("0-2,4", {0: 0, 1: 0, 2: 2, 4: 4}, ["0-2", "4"]),
        ("1-3,5-7", {1: 1, 2: 2, 3: 2, 5: 5, 6: 6, 7: 6}, ["1-3", "5-7"]),
    ],
    ids=["cpu3-5-6-7-offline", "lowest-siblings-offline"],
)
def test_offline_cpus_are_left_out(
    tmp_path: Path, online: str, cores: dict[int, int], node_cpus: list[str]
) -> None:
    topology = probe_tree(small_host() | {"devices/system/cpu/online": f"{online}\n"}, tmp_path)
    assert str(topology.online) == online
    assert {cpu.id: cpu.core for cpu in topology.cpus} == cores
    assert [str(node.cpus) for node in topology.numa_nodes] == node_cpus
    assert topology.problems == []


@pytest.mark.parametrize(
    ("content", "package"),
    [(None, 0), ("-1\n", 0), ("1\n", 1)],
    ids=["missing", "negative", "present"],
)
def test_package_id_defaults_to_zero(tmp_path: Path, content: str | None, package: int) -> None:
    rel = "devices/system/cpu/cpu0/topology/physical_package_id"
    tree = without(small_host(), rel) | ({rel: content} if content is not None else {})
    assert probe_tree(tree, tmp_path).cpus[0].package == package


@pytest.mark.parametrize(
    ("rel", "garbage"),
    [
        ("devices/system/cpu/cpu5/topology/physical_package_id", "zero\n"),
        ("devices/system/cpu/cpu2/topology/core_cpus_list", "2-\n"),
        ("devices/system/cpu/isolated", "isolcpus=2\n"),
        ("devices/system/node/node1/cpulist", "4..7\n"),
        ("devices/system/node/node0/distance", "10 far\n"),
    ],
    ids=["physical_package_id", "core_cpus_list", "isolated", "cpulist", "distance"],
)
def test_garbage_names_the_file_and_value(tmp_path: Path, rel: str, garbage: str) -> None:
    message = f"{tmp_path}/sys/{rel} holds {garbage.strip()!r}"
    with pytest.raises(SysfsError, match=re.escape(message)):
        probe_tree(small_host() | {rel: garbage}, tmp_path)


@pytest.mark.parametrize("content", ["", "Node 0 MemFree:  1024 kB\n"], ids=["empty", "no-total"])
def test_meminfo_without_mem_total_names_the_file(tmp_path: Path, content: str) -> None:
    rel = "devices/system/node/node0/meminfo"
    with pytest.raises(SysfsError, match=re.escape(f"{tmp_path}/sys/{rel} has no")):
        probe_tree(small_host() | {rel: content}, tmp_path)


@pytest.mark.parametrize(
    ("cpulists", "problems"),
    [
        (
            ("0-3", "4-5"),
            [
                "check 'every online CPU in a node' failed: "
                "CPUs 6-7 in no node (node0=0-3, node1=4-5)"
            ],
        ),
        (("0-4", "4-7"), ["check 'no CPU in two nodes' failed: CPU 4 in nodes [0, 1]"]),
        (
            ("0-4", "4-6"),
            [
                "check 'every online CPU in a node' failed: "
                "CPUs 7 in no node (node0=0-4, node1=4-6)",
                "check 'no CPU in two nodes' failed: CPU 4 in nodes [0, 1]",
            ],
        ),
    ],
    ids=["cpus-in-no-node", "cpu-in-two-nodes", "both-in-check-order"],
)
@pytest.mark.usefixtures("discovery_log")
def test_numa_cpulists_that_do_not_partition_online_cpus_fall_back(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    cpulists: tuple[str, str],
    problems: list[str],
) -> None:
    tree = small_host()
    for node, cpus in enumerate(cpulists):
        tree[f"devices/system/node/node{node}/cpulist"] = f"{cpus}\n"
    topology = probe_tree(tree, tmp_path)
    fallback = "; assuming one NUMA node 0 with every online CPU"
    assert topology.problems == [problem + fallback for problem in problems]
    assert topology.numa_nodes == [NumaNode(0, CpuSet.parse("0-7"), 16 * GiB, {0: 10})]
    assert topology.memory == 16 * GiB  # the host's total, from psutil
    assert {cpu.numa for cpu in topology.cpus} == {0}
    assert [r.levelname for r in caplog.records if "inconsistent" in r.getMessage()] == [
        "WARNING"
    ] * len(problems)


def test_distance_row_of_the_wrong_length_is_a_problem(tmp_path: Path) -> None:
    tree = small_host() | {"devices/system/node/node0/distance": "10\n"}
    topology = probe_tree(tree, tmp_path)
    assert topology.problems == [
        "NUMA node 0: distance does not have one value per online node [0, 1], "
        "so its distances are unknown"
    ]
    assert [node.distances for node in topology.numa_nodes] == [{}, {0: 20, 1: 10}]
    assert [str(node.cpus) for node in topology.numa_nodes] == ["0-3", "4-7"]


@pytest.mark.parametrize(
    "node_online", ["0,2\n", None], ids=["node-online-list", "node-directories"]
)
def test_distances_are_keyed_by_sparse_node_ids(tmp_path: Path, node_online: str | None) -> None:
    tree = {
        rel.replace("node1/", "node2/"): content
        for rel, content in without(small_host(), "node/online").items()
    }
    if node_online is not None:
        tree["devices/system/node/online"] = node_online
    topology = probe_tree(tree, tmp_path)
    assert {node.id: node.distances for node in topology.numa_nodes} == {
        0: {0: 10, 2: 20},
        2: {0: 20, 2: 10},
    }
    assert {cpu.numa for cpu in topology.cpus} == {0, 2}


# The Sysfs reader


@pytest.fixture
def sysfs(tmp_path: Path) -> Sysfs:
    materialize(
        {
            "sys/a/number": "42\n",
            "sys/a/negative": "-1\n",
            "sys/a/row": "10 21\n",
            "sys/a/cpus": "0-3,8\n",
            "sys/a/blank": "\n",
            "sys/a/words": "  spaced out \n",
            "sys/a/descending": "3-1\n",
            "sys/dir/online": "0\n",
            "sys/dir/node2/cpulist": "\n",
            "sys/dir/node10/cpulist": "\n",
        },
        tmp_path,
    )
    (tmp_path / "sys/a/binary").write_bytes(b"\xff\xfe\n")
    return Sysfs(tmp_path)


def test_sysfs_reads_values(sysfs: Sysfs) -> None:
    assert sysfs.text("a/words") == "spaced out"
    assert sysfs.integer("a/number") == 42
    assert sysfs.integer("a/negative") == -1
    assert sysfs.integers("a/row") == [10, 21]
    assert sysfs.cpuset("a/cpus") == CpuSet([0, 1, 2, 3, 8])
    assert sysfs.cpuset("a/blank") == CpuSet()
    assert sysfs.entries("dir") == ["node10", "node2", "online"]


def test_sysfs_missing_or_unreadable_is_none(sysfs: Sysfs) -> None:
    assert sysfs.text("a/absent") is None
    assert sysfs.text("a") is None  # a directory cannot be read as a file
    assert sysfs.integer("a/absent") is None
    assert sysfs.integers("a/absent") is None
    assert sysfs.cpuset("a/absent") is None
    assert sysfs.entries("absent") == []


@pytest.mark.parametrize(
    ("method", "rel"),
    [
        ("integer", "a/words"),
        ("integer", "a/blank"),
        ("integer", "a/binary"),
        ("integers", "a/words"),
        ("cpuset", "a/words"),
        ("cpuset", "a/descending"),
    ],
    ids=["integer-words", "integer-blank", "integer-binary", "integers", "cpuset", "cpuset-range"],
)
def test_sysfs_garbage_raises_with_the_path(
    sysfs: Sysfs, tmp_path: Path, method: str, rel: str
) -> None:
    with pytest.raises(SysfsError, match=re.escape(f"{tmp_path}/sys/{rel} holds")):
        getattr(sysfs, method)(rel)


# This machine


def test_this_machine_cpus_agree_with_the_scheduler() -> None:
    topology = probe_cpus(Sysfs(Path("/")), HostTotals.from_psutil())
    assert len(topology.online) == psutil.cpu_count(logical=True)
    assert set(os.sched_getaffinity(0)) <= set(topology.online)
    assert [cpu.id for cpu in topology.cpus] == list(topology.online)
    for cpu in topology.cpus:
        assert [node.id for node in topology.numa_nodes if cpu.id in node.cpus] == [cpu.numa]


def test_this_machine_memory_is_the_kernels_total_and_nodes_fit_in_it() -> None:
    topology = probe_cpus(Sysfs(Path("/")), HostTotals.from_psutil())
    total = psutil.virtual_memory().total
    assert topology.memory == total
    # A kernel that initialises memory lazily (deferred_init=lazy, as in Firecracker
    # guests) reports less per node than in total; it never reports more.
    assert 0 < sum(node.memory for node in topology.numa_nodes) <= total * 1.01
