"""Removals on the real engine, by an in-process runtime: side by side, each container
waiting out its own stop timeout, and a bound container started only once the container
leaving its CPU is gone. Docker's own events are the witness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker
import pytest

from shared.protocol import Limits
from tests.docker.engine_events import engine_events
from tests.docker.runtimes import applied, container, cpus, managed, running_runtime, status_of
from tests.polling import eventually

pytestmark = pytest.mark.docker

DEAF_TO_SIGTERM = ["sh", "-c", 'trap "" TERM; sleep 3600']
SLOW = 3  # seconds of stop timeout of the slow containers


def times(seen: list[dict[str, Any]], action: str) -> dict[str, float]:
    """Each container's (allot id's) last ``action`` event, in seconds."""
    return {
        event["Actor"]["Attributes"]["allot.id"]: event["timeNano"] / 1e9
        for event in seen
        if event["Action"] == action
    }


def first_times(seen: list[dict[str, Any]], action: str) -> dict[str, float]:
    """Each container's first ``action`` event, in seconds."""
    return times(list(reversed(seen)), action)


async def test_removals_run_side_by_side_each_with_its_own_stop_timeout(
    node: str, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    slow = [f"slow-{i}" for i in range(4)]
    deaf = [container(c, command=DEAF_TO_SIGTERM, stop_timeout_seconds=SLOW) for c in slow]
    quick = container("quick", command=DEAF_TO_SIGTERM, stop_timeout_seconds=0)
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [*deaf, quick], full=True)
        await applied(runtime, 1)
        made = managed(docker_client, node)
        assert {made[c]["Config"]["StopTimeout"] for c in slow} == {SLOW}  # kept by Docker
        with engine_events(node, actions=("kill", "die", "destroy")) as seen:
            runtime.set_desired(2, [], full=True)
            await applied(runtime, 2)
            await eventually(lambda: len(times(seen, "destroy")) == 5)
    # Docker's stop signals SIGTERM, then SIGKILL once the container's timeout passed.
    term, kill, died = first_times(seen, "kill"), times(seen, "kill"), times(seen, "die")
    assert kill["quick"] - term["quick"] < SLOW - 1
    for name in slow:
        assert kill[name] - term[name] >= SLOW - 0.5
    assert died["quick"] < min(died[c] for c in slow)
    # Side by side: one after another, the four slow ones would die SLOW s apart.
    assert max(died[c] for c in slow) - min(died[c] for c in slow) < SLOW * 1.5


async def test_a_bound_container_starts_only_once_the_one_leaving_its_cpu_is_gone(
    node: str, tmp_path: Path
) -> None:
    bound: dict[str, Any] = {
        "command": DEAF_TO_SIGTERM,
        "stop_timeout_seconds": 2,
        "limits": Limits(cpuset_cpus=str(cpus()[-1])),
    }
    old, new = container("old", **bound), container("new", **bound)
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [old], full=True)
        await applied(runtime, 1)
        with engine_events(node, actions=("start", "die")) as seen:
            runtime.set_desired(2, [new], full=True)
            await eventually(lambda: status_of(runtime, "new").state == "waiting", within=2)
            assert "waiting for old to leave CPUs" in status_of(runtime, "new").error
            await applied(runtime, 2)
    assert times(seen, "die")["old"] < times(seen, "start")["new"]
