"""How often each agent heartbeats, so that the whole fleet stays under a ceiling of
heartbeats per second (Nomad's ``max_heartbeats_per_second``), and how long its node's
lease is then.

    pacer = Pacer(heartbeat_seconds=5.0, lease_seconds=15.0, max_per_second=50.0)
    pace, grew = pacer.pace_for(agents=1_000)   # Pace(25.0, 75.0), True: tell the others

The rule: interval = max(heartbeat_seconds, planned / max_per_second), where ``planned``
is the fleet size the pace was set for; a node's lease is the interval times the
configured lease_seconds / heartbeat_seconds (3 by default), so a node is never lost
sooner than that many of its own intervals. ``planned`` is the connected fleet plus
``HEADROOM``: the pace changes, and every connected agent has to be told, only when the
fleet outgrows it, which happens a logarithmic number of times as a fleet connects
(with the defaults: 7 times up to 1,000 agents, 17 up to 10,000), not once per agent. While every
agent holds a pace set for a fleet at least as large as the one connected, the fleet
sends at most ``max_per_second`` heartbeats a second.

The pace never shrinks: an agent keeps the interval it was given until it reconnects,
and ``planned`` stays at the largest fleet seen. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The share by which a new pace over-provisions the fleet it is set for. Larger: fewer
# re-paces as a fleet connects (each a small frame to every agent), intervals up to that
# much longer than the ceiling needs. 1.25: 40,379 small frames in all (4 per agent) as
# 10,000 agents connect one by one, intervals at most 25 % longer than needed.
HEADROOM = 1.25


@dataclass(frozen=True, order=True)
class Pace:
    heartbeat_seconds: float
    lease_seconds: float


def pace_of(
    agents: int, *, heartbeat_seconds: float, lease_seconds: float, max_per_second: float
) -> Pace:
    """The pace for a fleet of ``agents``: ``agents / interval <= max_per_second`` and
    ``interval >= heartbeat_seconds``; the lease keeps the configured ratio to the interval.
    O(1)."""
    interval = max(heartbeat_seconds, agents / max_per_second)
    return Pace(interval, interval * (lease_seconds / heartbeat_seconds))


class Pacer:
    """The pace agents are given now, raised as the connected fleet outgrows it."""

    def __init__(
        self, *, heartbeat_seconds: float, lease_seconds: float, max_per_second: float
    ) -> None:
        if not 0 < heartbeat_seconds < lease_seconds:
            raise ValueError(
                f"heartbeat_seconds ({heartbeat_seconds:g}) must be above 0 and shorter than"
                f" lease_seconds ({lease_seconds:g})"
            )
        if not max_per_second > 0:
            raise ValueError(f"max_heartbeats_per_second ({max_per_second:g}) must be above 0")
        self._heartbeat_seconds = heartbeat_seconds
        self._lease_seconds = lease_seconds
        self._max_per_second = max_per_second
        self.planned = 0  # the fleet size the current pace is set for
        self.pace = Pace(heartbeat_seconds, lease_seconds)

    def pace_for(self, *, agents: int) -> tuple[Pace, bool]:
        """The pace for a fleet of ``agents`` connected, and whether it is longer than the
        one given before (then every connected agent is to be told). O(1)."""
        if agents <= self.planned:
            return self.pace, False
        self.planned = math.ceil(agents * HEADROOM)
        pace = pace_of(
            self.planned,
            heartbeat_seconds=self._heartbeat_seconds,
            lease_seconds=self._lease_seconds,
            max_per_second=self._max_per_second,
        )
        grew = pace > self.pace
        self.pace = pace
        return pace, grew
