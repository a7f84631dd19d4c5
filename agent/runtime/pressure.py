"""How much this node and its containers wait for CPU, for the status report.

    gauge = PressureGauge(Path("/proc/pressure/cpu"))
    gauge.node(samples)                   -> CpuPressure(source="psi", avg10=39.65, avg60=38.82)
    container_pressure(previous, current) -> 12.5 (percent)

The node's figure is the kernel's PSI where it has it (``psi_file``, the agent setting
``cpu_pressure_file``): the share of wall time in which some task waited for a CPU.
Where the file is missing (a kernel without PSI) or unreadable, it is the throttling of the
containers' CFS quotas instead: of the CFS periods they ran in since their previous
samples, the share in which they were throttled. A container's own figure is its cgroup's
PSI under v2 (``cpu.pressure``), else its own throttled share of its periods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from agent.runtime.psi import psi_averages
from agent.runtime.usage import Sample
from shared.logs import get_logger
from shared.protocol import CpuPressure

log = get_logger("allot.agent.runtime")

DEFAULT_PSI_FILE = Path("/proc/pressure/cpu")

# (the previous sample, or None for a container seen for the first time; the new one)
SamplePair = tuple[Sample | None, Sample]


def container_pressure(previous: Sample | None, current: Sample) -> float | None:
    """The container's CPU pressure in percent: its v2 PSI "some avg10", else the share of
    its CFS periods between the two samples in which it was throttled (0 when it ran in no
    period: no quota, or idle). None when neither can be read."""
    if current.psi_avg10 is not None:
        return current.psi_avg10
    counted = _periods(previous, current)
    if counted is None:
        return None
    periods, throttled = counted
    return _percent(throttled, periods)


class PressureGauge:
    """Reads the node's CPU pressure; says once in the log when it falls back from PSI
    to throttling, and once when PSI can be read again."""

    def __init__(
        self, psi_file: Path | None, *, read: Callable[[Path], str] = Path.read_text
    ) -> None:
        self.psi_file = psi_file
        self._read = read
        self._on_psi: bool | None = None  # what the last reading came from; None before
        self._why = ""  # why PSI could not be read, the last time it could not

    def node(self, samples: Iterable[SamplePair]) -> CpuPressure | None:
        """PSI from ``psi_file``, else the throttling summed over ``samples`` (the
        containers sampled now, each with its previous sample). None when neither can be
        read: no PSI file and no container with CFS figures."""
        psi = self._psi()
        self._say(psi is not None)
        if psi is not None:
            return psi
        periods = throttled = 0
        counted = False
        for previous, current in samples:
            pair = _periods(previous, current)
            if pair is not None:
                counted = True
                periods, throttled = periods + pair[0], throttled + pair[1]
        if not counted:
            return None
        return CpuPressure(source="throttling", avg10=_percent(throttled, periods))

    def _psi(self) -> CpuPressure | None:
        if self.psi_file is None:
            return None
        try:
            avg10, avg60 = psi_averages(self._read(self.psi_file))
        except (OSError, ValueError) as error:
            self._why = str(error)
            return None
        return CpuPressure(source="psi", avg10=avg10, avg60=avg60)

    def _say(self, on_psi: bool) -> None:
        if on_psi == self._on_psi or self.psi_file is None:
            self._on_psi = on_psi
            return
        if on_psi:
            log.info("cpu pressure read from PSI", file=self.psi_file)
        else:
            log.warning(
                "cpu pressure read from throttling: no PSI",
                file=self.psi_file,
                reason=self._why,
            )
        self._on_psi = on_psi


def _periods(previous: Sample | None, current: Sample) -> tuple[int, int] | None:
    """(periods, throttled periods) between the two samples; None without both figures
    in both (or when a counter went back: a new cgroup under the same id)."""
    if previous is None:
        return None
    before, before_throttled = previous.periods, previous.throttled
    now, now_throttled = current.periods, current.throttled
    if before is None or before_throttled is None or now is None or now_throttled is None:
        return None
    periods, throttled = now - before, now_throttled - before_throttled
    if periods < 0 or throttled < 0:
        return None
    return periods, throttled


def _percent(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else round(min(100.0, 100.0 * part / whole), 2)
