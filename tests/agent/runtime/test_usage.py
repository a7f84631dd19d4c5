"""Usage from cgroup files, over fake /proc and /sys/fs/cgroup trees of both versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.runtime.usage import Sample, cgroup_dir, cpu_cores, sample

PID = 4242
V1_CGROUP = (
    "12:memory:/docker/abc\n"
    "4:cpu,cpuacct:/docker/abc\n"
    "3:cpuset:/docker/abc\n"
    "0::/docker/abc\n"  # the hybrid layout's empty unified tree
)
V2_CGROUP = "0::/system.slice/docker-abc.scope\n"


def tree(tmp_path: Path, proc_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / str(PID)).mkdir(parents=True)
    (proc / str(PID) / "cgroup").write_text(proc_cgroup)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return proc, root


def test_v1_reads_cpuacct_and_memory_less_inactive_file_cache(tmp_path: Path) -> None:
    proc, root = tree(
        tmp_path,
        V1_CGROUP,
        {
            "cpuacct/docker/abc/cpuacct.usage": "2500000000\n",
            "memory/docker/abc/memory.usage_in_bytes": "10485760\n",
            "memory/docker/abc/memory.stat": "cache 4096\ntotal_inactive_file 2097152\n",
        },
    )
    assert cgroup_dir(PID, "cpuacct", proc=proc, root=root) == root / "cpuacct/docker/abc"
    got = sample(PID, at=7.0, proc=proc, root=root)
    assert got == Sample(at=7.0, cpu_ns=2_500_000_000, memory=8 * 1024 * 1024)


def test_v2_reads_cpu_stat_and_memory_current(tmp_path: Path) -> None:
    scope = "system.slice/docker-abc.scope"
    proc, root = tree(
        tmp_path,
        V2_CGROUP,
        {
            f"{scope}/cpu.stat": "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
            f"{scope}/memory.current": "3145728\n",
            f"{scope}/memory.stat": "anon 1048576\ninactive_file 1048576\n",
        },
    )
    got = sample(PID, at=1.0, proc=proc, root=root)
    assert got == Sample(at=1.0, cpu_ns=1_500_000_000, memory=2 * 1024 * 1024)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, Sample(at=0.0, cpu_ns=None, memory=None)),
        (
            {
                "cpuacct/docker/abc/cpuacct.usage": "lots\n",
                "memory/docker/abc/memory.usage_in_bytes": "100\n",
                "memory/docker/abc/memory.stat": "total_inactive_file\n",  # no value
            },
            Sample(at=0.0, cpu_ns=None, memory=100),
        ),
        (
            {
                "memory/docker/abc/memory.usage_in_bytes": "100\n",
                "memory/docker/abc/memory.stat": "total_inactive_file 4096\n",
            },
            Sample(at=0.0, cpu_ns=None, memory=0),  # never below 0
        ),
    ],
    ids=["no files", "garbage", "cache above usage"],
)
def test_missing_or_garbage_files_give_none_never_an_error(
    tmp_path: Path, files: dict[str, str], expected: Sample
) -> None:
    proc, root = tree(tmp_path, V1_CGROUP, files)
    assert sample(PID, at=0.0, proc=proc, root=root) == expected


def test_a_process_that_has_gone_gives_an_empty_sample(tmp_path: Path) -> None:
    got = sample(PID, at=3.0, proc=tmp_path / "proc", root=tmp_path / "cgroup")
    assert got == Sample(at=3.0, cpu_ns=None, memory=None)


def test_cpu_cores_is_cpu_time_over_wall_time() -> None:
    first = Sample(at=10.0, cpu_ns=1_000_000_000, memory=None)
    assert cpu_cores(first, Sample(at=12.0, cpu_ns=2_000_000_000, memory=None)) == 0.5
    assert cpu_cores(None, first) is None
    assert cpu_cores(first, Sample(at=10.0, cpu_ns=2_000_000_000, memory=None)) is None
    assert cpu_cores(first, Sample(at=11.0, cpu_ns=None, memory=None)) is None
    # a restarted container's counter starts again: never a negative rate
    assert cpu_cores(first, Sample(at=11.0, cpu_ns=0, memory=None)) == 0.0
