"""CPU pressure: the PSI format, a container's figure from its samples, and the node's
from a PSI file in that format or, without one, from the containers' throttling."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.runtime.pressure import PressureGauge, container_pressure
from agent.runtime.psi import psi_averages
from agent.runtime.usage import Sample, sample
from shared.protocol import CpuPressure

HOST_PSI = (
    "some avg10=39.65 avg60=38.82 avg300=27.82 total=3460158711\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)


def test_psi_gives_the_some_line_averages() -> None:
    assert psi_averages(HOST_PSI) == (39.65, 38.82)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no 'some' line"),
        ("full avg10=1.00 avg60=1.00 avg300=0.00 total=0\n", "no 'some' line"),
        ("some avg60=1.00 avg300=0.00 total=0\n", "without 'avg10'"),
        ("some avg10=x avg60=1.00\n", "could not convert"),
        ("some avg10=101.00 avg60=1.00\n", "out of 0..100"),
        ("some avg10=nan avg60=1.00\n", "out of 0..100"),
    ],
    ids=["empty", "full-only", "no-avg10", "not-a-number", "above-100", "nan"],
)
def test_a_malformed_psi_text_is_a_value_error(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        psi_averages(text)


@given(st.floats(0, 100), st.floats(0, 100))
def test_psi_reads_back_what_the_kernel_prints(avg10: float, avg60: float) -> None:
    text = f"some avg10={avg10:.2f} avg60={avg60:.2f} avg300=0.00 total=12\n"
    assert psi_averages(text) == (float(f"{avg10:.2f}"), float(f"{avg60:.2f}"))


def at(t: float, periods: int | None, throttled: int | None, psi: float | None = None) -> Sample:
    return Sample(at=t, cpu_ns=0, memory=0, periods=periods, throttled=throttled, psi_avg10=psi)


def test_a_container_under_v2_reports_its_own_psi() -> None:
    assert container_pressure(at(0, 10, 0), at(1, 20, 0, psi=17.5)) == 17.5


def test_a_container_without_psi_reports_its_throttled_share() -> None:
    assert container_pressure(at(0, 100, 10), at(1, 110, 14)) == 40.0
    assert container_pressure(at(0, 100, 10), at(1, 100, 10)) == 0.0  # no period: no quota
    assert container_pressure(None, at(1, 110, 14)) is None  # nothing to compare with
    assert container_pressure(at(0, None, None), at(1, None, None)) is None
    assert container_pressure(at(0, 100, 10), at(1, 5, 0)) is None  # counters went back


def test_the_node_reads_the_psi_file(tmp_path: Path) -> None:
    psi = tmp_path / "cpu"
    psi.write_text(HOST_PSI)
    assert PressureGauge(psi).node([]) == CpuPressure(source="psi", avg10=39.65, avg60=38.82)


@pytest.mark.parametrize("content", [None, "garbage\n"], ids=["missing", "malformed"])
def test_without_psi_the_node_sums_the_containers_throttling(
    tmp_path: Path, content: str | None
) -> None:
    psi = tmp_path / "cpu"
    if content is not None:
        psi.write_text(content)
    gauge = PressureGauge(psi)
    pairs = [(at(0, 100, 0), at(1, 110, 5)), (at(0, 0, 0), at(1, 10, 0)), (None, at(1, 3, 3))]
    assert gauge.node(pairs) == CpuPressure(source="throttling", avg10=25.0)
    assert gauge.node([]) is None  # no container to tell from
    psi.write_text(HOST_PSI)  # PSI appears: it wins again
    assert gauge.node(pairs) == CpuPressure(source="psi", avg10=39.65, avg60=38.82)


def test_no_psi_file_set_means_throttling_only(tmp_path: Path) -> None:
    pairs = [(at(0, 0, 0), at(1, 4, 1))]
    assert PressureGauge(None).node(pairs) == CpuPressure(source="throttling", avg10=25.0)


def test_samples_carry_cpu_stat_periods_and_v2_psi(tmp_path: Path) -> None:
    pid, scope = 77, "system.slice/docker-abc.scope"
    (tmp_path / "proc" / str(pid)).mkdir(parents=True)
    (tmp_path / "proc" / str(pid) / "cgroup").write_text(f"0::/{scope}\n")
    group = tmp_path / "cgroup" / scope
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("usage_usec 10\nnr_periods 40\nnr_throttled 9\n")
    (group / "cpu.pressure").write_text(HOST_PSI)
    got = sample(pid, at=1.0, proc=tmp_path / "proc", root=tmp_path / "cgroup")
    assert (got.periods, got.throttled, got.psi_avg10) == (40, 9, 39.65)
