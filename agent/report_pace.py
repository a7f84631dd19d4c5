"""Which of the runtime's reports the agent sends: each one that changed in more than its
measurements, or whose node CPU pressure moved by ``PRESSURE_STEP`` points or more, and
the whole report, measurements too, at least every ``full_report_seconds``.

    pace = ReportPace(full_every=60.0)
    if pace.due(report, now=time.monotonic()):
        send(report); pace.sent(report, now=time.monotonic())
    wait_at_most = pace.wait(now=time.monotonic())     # until the next full report is due

Why: a container's CPU and memory usage and the CPU pressure (its own and the node's)
move at every sample, so a report that carries them changes at every pass of the
reconcile loop (every ``resync_seconds``, 10 s by default) on an idle node: 1,000 status
frames a second from 10,000 idle agents. A state, a drift, an error, a revision or a
problem still goes at once, and so does a move of the node's pressure large enough to
matter to the coordinator's pressure events (which enter at 60 % and leave at 30 % by
default): such an event is late by at most ``PRESSURE_STEP`` points, not by a period.
The coordinator sees the usage figures up to ``full_report_seconds`` late. Pure: the
clock is passed in.

To a coordinator that takes them (its welcome's ``partial_statuses``), a report sent
between two full ones is partial: only the containers that changed beyond their
measurements since the report last sent, or are new, and the ids of those that went
(``shared.status_delta.partial_report``). Why: every status used to list the whole
node, so a deployment touching a container on each of 1,000 nodes made the coordinator
read every container of those nodes; now it reads what changed. The agent's own cost
stays O(its containers) per report, as before.

    frame = pace.frame(report, now=time.monotonic())    # whole or partial
    send(frame); pace.sent(report, now=time.monotonic(), partial=frame.partial)
"""

from __future__ import annotations

import msgspec

from shared.protocol import CpuPressure, Status
from shared.status_delta import bare, partial_report

# Percentage points the node's CPU pressure (avg10) must move, since the report last sent,
# to be sent at once. An idle host's PSI wanders by a point or two between samples.
PRESSURE_STEP = 5.0


def without_measurements(status: Status) -> Status:
    """``status`` with its usage and pressure figures left out: what makes it news.
    O(its containers)."""
    containers = [bare(c) for c in status.containers]
    return msgspec.structs.replace(status, containers=containers, pressure=None)


def pressure_moved(before: CpuPressure | None, now: CpuPressure | None) -> bool:
    """True when ``now`` is news against ``before``: one of them is None and the other not,
    the source changed, or avg10 moved by ``PRESSURE_STEP`` points or more."""
    if before is None or now is None:
        return before is not now
    return before.source != now.source or abs(now.avg10 - before.avg10) >= PRESSURE_STEP


class ReportPace:
    """When to send the runtime's report, and as what: whole, or (``partial``: the
    coordinator takes them) only what changed since the report last sent. One per
    session, so each session's first report is whole."""

    def __init__(self, *, full_every: float, partial: bool = False) -> None:
        if not full_every > 0:
            raise ValueError(f"full_report_seconds ({full_every:g}) must be above 0")
        self._full_every = full_every
        self._partial = partial
        self._last: Status | None = None  # the last report sent, without its measurements
        self._pressure: CpuPressure | None = None  # the node's, in the last report sent
        self._full_due = 0.0

    def due(self, report: Status, *, now: float) -> bool:
        """True: send ``report`` (the first, a change beyond measurements, a move of the
        node's pressure, or the full report's time has come)."""
        return (
            self._last is None
            or now >= self._full_due
            or pressure_moved(self._pressure, report.pressure)
            or without_measurements(report) != self._last
        )

    def frame(self, report: Status, *, now: float) -> Status:
        """What to send of ``report``, which is due: the whole of it when it is the
        session's first, the full report's time has come or the coordinator takes no
        partial ones; else ``partial_report`` against the report last sent."""
        if not self._partial or self._last is None or now >= self._full_due:
            return report
        return partial_report(self._last, report)

    def sent(self, report: Status, *, now: float, partial: bool = False) -> None:
        """``report`` went, whole or (``partial``) as ``frame`` made it: the next partial
        one is counted from it; only a whole one puts off the next full report."""
        self._last = without_measurements(report)
        self._pressure = report.pressure
        if not partial:
            self._full_due = now + self._full_every

    def wait(self, *, now: float) -> float:
        """Seconds until the next full report is due (0: it is)."""
        return max(0.0, self._full_due - now)
