"""The fleet benchmark's figures beside issue 29's targets, a line per row of its table,
with the machine's load average when each was measured.

    print_targets(figures)   # after a run of bench/fleet.py, whatever size it had

A row the run did not measure (a step that failed, or one this benchmark has no part
for) says so, and where it is measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleet import Figures

# Measured by another benchmark: a standby needs the etcd store and a second coordinator.
STANDBY = (
    "not measured here (a standby follows etcd): bench/takeover_build.py --containers"
    " 100000 prints the standby's build and the longest hold of its loop"
)


@dataclass(frozen=True)
class Row:
    work: str
    target: str
    measured: str  # "" when not measured
    met: bool | None  # None: not measured, or not comparable
    load: float


def rows(f: Figures) -> list[Row]:
    fleet = f"{f.agents:,} agents"
    storm, idle = f.lease_deploys, f.lease_idle
    leases = (
        f"{storm.p99_ms:,.1f} ms ({idle.p99_ms:,.1f} ms idle) at {storm.asked_per_s:,.0f} req/s"
        if storm is not None and idle is not None
        else ""
    )
    return [
        Row(
            f"deploy throughput, {fleet}, 0 -> {f.containers_committed:,} containers",
            ">= 5,000 containers/s",
            _figure(
                f.committed_per_s,
                f"{f.committed_per_s:,.0f}/s committed, {f.acknowledged_per_s:,.0f}/s acknowledged",
            ),
            _at_least(f.committed_per_s, 5000),
            f.deploys_load_average,
        ),
        Row(
            f"single-container deploy on {fleet} (heterogeneous), end to end",
            "<= 20 ms",
            _figure(
                f.single_acknowledged_p50_ms,
                f"{f.single_acknowledged_p50_ms:,.1f} ms p50 to acknowledged (POST p50"
                f" {f.single_post_p50_ms:,.1f} ms)",
            ),
            _at_most(f.single_acknowledged_p50_ms, 20),
            f.deploys_load_average,
        ),
        Row(
            "lease p99 during the deploy storm (idle before it)",
            "<= 20 ms",
            leases,
            None if storm is None else _at_most(storm.p99_ms, 20),
            f.deploys_load_average,
        ),
        Row(
            f"last / first POST latency, 0 -> {f.containers_committed:,}",
            "<= 1.5x",
            _figure(
                f.post_last_over_first,
                f"{f.post_last_over_first:.2f}x (p50 {f.post_first_p50_ms:,.0f} ->"
                f" {f.post_last_p50_ms:,.0f} ms)",
            ),
            _at_most(f.post_last_over_first, 1.5),
            f.deploys_load_average,
        ),
        Row(
            f"restart to ready with {f.held_before_restart:,} containers ({f.store})",
            "<= 10 s",
            _figure(
                f.restart_ready_s,
                f"{f.restart_ready_s:.2f} s to /readyz, every agent back after"
                f" {f.restart_reconnected_s:.1f} s",
            ),
            _at_most(f.restart_ready_s, 10),
            f.restart_load_average,
        ),
        Row("a standby's build at 100K containers", "loop held <= 50 ms", STANDBY, None, math.nan),
        Row(
            f"heartbeats at {fleet}, idle",
            "<= 50/s",
            _figure(f.idle_heartbeats_per_s, f"{f.idle_heartbeats_per_s:,.1f}/s"),
            _at_most(f.idle_heartbeats_per_s, 50),
            f.idle_load_average,
        ),
    ]


def print_targets(f: Figures) -> None:
    print("issue 29's targets:")
    for row in rows(f):
        verdict = {True: "met", False: "NOT met", None: "-"}[row.met]
        load = "" if math.isnan(row.load) else f" [load {row.load:.1f}]"
        print(
            f"  {row.work}: {row.measured or 'not measured'}; target {row.target}: {verdict}{load}"
        )


def _figure(value: float, text: str) -> str:
    return "" if math.isnan(value) else text


def _at_least(value: float, bound: float) -> bool | None:
    return None if math.isnan(value) else value >= bound


def _at_most(value: float, bound: float) -> bool | None:
    return None if math.isnan(value) else value <= bound
