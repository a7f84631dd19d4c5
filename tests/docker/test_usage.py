"""Measured usage on the real engine: a container spinning under a CFS quota of half a core
is reported near 0.5 cores, a sleeping one near 0, both with the memory they use."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.protocol import ContainerStatus
from tests.docker.runtimes import applied, container, memory_limits, running_runtime, status_of
from tests.polling import eventually

pytestmark = pytest.mark.docker


async def test_cpu_and_memory_usage_are_measured_from_the_cgroups(
    node: str, tmp_path: Path
) -> None:
    half_core = memory_limits(mib=32, cpu_quota=50_000)
    busy = container(
        "busy", shared_pool=True, limits=half_core, command=["sh", "-c", "while :; do :; done"]
    )
    idle = container("idle", shared_pool=True, limits=memory_limits(mib=32))
    async with running_runtime(node, tmp_path, resync_seconds=0.3) as runtime:
        runtime.set_desired(1, [busy, idle], full=True)
        await applied(runtime, 1)

        def measured(container_id: str) -> ContainerStatus:
            return status_of(runtime, container_id)

        # The first sample has no earlier one to compare with; the next ones do.
        await eventually(lambda: (measured("busy").cpu_usage or 0) >= 0.2, within=15)
        await eventually(lambda: measured("idle").cpu_usage is not None, within=15)
        busy_cores = measured("busy").cpu_usage or 0.0
        assert 0.2 <= busy_cores <= 0.7, busy_cores  # the quota holds it near half a core
        assert (measured("idle").cpu_usage or 0.0) < 0.05, measured("idle")
        for container_id in ("busy", "idle"):
            memory = measured(container_id).memory_usage or 0
            assert 0 < memory < 32 * 1024 * 1024, memory
