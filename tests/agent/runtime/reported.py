"""What ``docker inspect`` shows for a container given some settings, for tests of the
planner that need an observed container already as desired."""

from __future__ import annotations

from agent.runtime.settings import Settings
from shared.cpuset import docker_cpuset
from shared.protocol import Limits


def limits_of(target: Settings) -> Limits:
    """The limits Docker reports for a container set to ``target``."""
    return Limits(
        cpuset_cpus=docker_cpuset(target.cpuset_cpus),
        cpuset_mems=docker_cpuset(target.cpuset_mems),
        cpu_shares=target.cpu_shares,
        cpu_quota=target.cpu_quota,
        cpu_period=target.cpu_period,
        mem_limit=target.mem_limit,
        memswap_limit=target.memswap_limit,
        mem_reservation=target.mem_reservation,
    )
