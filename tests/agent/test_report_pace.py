"""Which reports the agent sends: a change beyond the measurements at once, the
measurements with the whole report when it is due."""

from __future__ import annotations

import msgspec
import pytest

from agent.report_pace import ReportPace
from shared.protocol import ContainerStatus, CpuPressure, Status


def report(state: str = "running", cpu: float | None = 0.5, avg10: float = 1.0) -> Status:
    container = ContainerStatus(id="c1", state=state, cpu_usage=cpu, memory_usage=4096)
    return Status(
        applied_revision=3,
        containers=[container],
        pressure=CpuPressure(source="psi", avg10=avg10),
    )


def test_the_first_report_goes_at_once() -> None:
    assert ReportPace(full_every=60.0).due(report(), now=0.0)


def test_new_measurements_wait_for_the_full_report() -> None:
    pace = ReportPace(full_every=60.0)
    pace.sent(report(), now=100.0)
    assert not pace.due(report(cpu=1.5, avg10=4.5), now=159.0)
    assert pace.wait(now=159.0) == pytest.approx(1.0)
    assert pace.due(report(cpu=1.5, avg10=4.5), now=160.0)
    assert pace.wait(now=161.0) == 0.0


@pytest.mark.parametrize(
    "changed",
    [
        report(state="exited"),
        msgspec.structs.replace(report(), problems=["disk full"]),
        msgspec.structs.replace(report(), applied_revision=4),
        Status(applied_revision=3),
    ],
    ids=["container-state", "problem", "revision", "container-gone"],
)
def test_any_other_change_goes_at_once(changed: Status) -> None:
    pace = ReportPace(full_every=60.0)
    pace.sent(report(), now=100.0)
    assert pace.due(changed, now=100.5)


@pytest.mark.parametrize(
    ("before", "now", "moved"),
    [
        (CpuPressure(source="psi", avg10=1.0), CpuPressure(source="psi", avg10=5.9), False),
        (CpuPressure(source="psi", avg10=1.0), CpuPressure(source="psi", avg10=6.0), True),
        (CpuPressure(source="psi", avg10=80.0), CpuPressure(source="psi", avg10=20.0), True),
        (CpuPressure(source="psi", avg10=1.0), CpuPressure(source="throttling", avg10=1.0), True),
        (None, CpuPressure(source="psi", avg10=0.0), True),
        (CpuPressure(source="psi", avg10=0.0), None, True),
        (None, None, False),
    ],
    ids=["wander", "step", "relief", "source", "appears", "vanishes", "never"],
)
def test_a_pressure_move_of_a_step_goes_at_once(
    before: CpuPressure | None, now: CpuPressure | None, moved: bool
) -> None:
    pace = ReportPace(full_every=60.0)
    pace.sent(msgspec.structs.replace(report(), pressure=before), now=100.0)
    assert pace.due(msgspec.structs.replace(report(), pressure=now), now=100.5) == moved


def test_a_full_report_period_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match=r"full_report_seconds \(0\) must be above 0"):
        ReportPace(full_every=0.0)
