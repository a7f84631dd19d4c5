"""The churn case on the real Docker engine: deployments of containers that ignore SIGTERM,
each deleted and followed at once by a new one, against one real coordinator and one real
agent (both processes of this host, the agent offering every CPU this process may use).

    .venv/bin/python bench/churn.py [--rounds 10] [--count 5] [--interval 2]
                                    [--agent-stop-timeout 10] [--stop-timeout N]
                                    [--removal-ack-seconds 2]

Each round deletes the previous round's deployment and creates the next one, ``--count``
containers of ``sh -c 'trap "" TERM; sleep 3600'`` (0.1 core, 16 MiB, on the shared pool),
then waits ``--interval`` seconds; a deploy the coordinator refuses (409) because the
deleted containers still hold the room is tried again every 50 ms, and counted.
``--stop-timeout`` sets the deployments' ``stop_timeout_seconds`` (left out: the agent's
own, ``--agent-stop-timeout``). ``--removal-ack-seconds`` is the coordinator's setting:
how long a delete's answer waits for the node's agent to acknowledge it (0: the answer
does not wait, as before the start fence). Prints:

- how many of the containers were ever started (an agent that lags skips some);
- newest running: from the last API answer until the last deployment's containers run;
- catch-up: from the last API answer until Docker holds exactly the last deployment's
  containers, all running, and the agent's state file shows its desired revision applied;
- the agent's longest pass (its state file's ``last_reconcile``, polled every 50 ms) and
  the largest gap between its desired and applied revisions seen while polling;
- DELETE latency: from asking until the answer, the median and the longest;
- late starts: Docker ``start`` events (the engine's own stream, read live:
  ``tests/docker/engine_events.py``) of a container whose deployment's delete had been
  answered, how many of those containers were even created after the answer (the rest
  were starts the engine had under way), the latest, and the first few.

Not part of ``make test``; every container it made is removed at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

# Run as a script, Python puts bench/ first on the path, where agent.py would stand in for
# the ``agent`` package; the repository root goes there instead (it also holds ``tests``).
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from agent.runtime.labels import DEPLOYMENT, node_filter  # noqa: E402
from agent.runtime.state_file import read_state  # noqa: E402
from tests.docker.clusters import running_cluster  # noqa: E402
from tests.docker.engine_events import engine_events  # noqa: E402
from tests.docker.runtimes import cpus  # noqa: E402
from tests.e2e.processes import api  # noqa: E402

IMAGE = "allot/busybox:test"
DEAF_TO_SIGTERM = ["sh", "-c", 'trap "" TERM; sleep 3600']
NAMESPACE = "churn"
POLL_SECONDS = 0.05


@dataclass
class Watch:
    """What polling the agent's state file saw."""

    longest_pass_ms: float = 0.0
    largest_gap: int = 0
    passes: set[float] = field(default_factory=set)
    refusals: int = 0  # deploys answered 409 (room still held by stopping containers)
    delete_ms: list[float] = field(default_factory=list)  # each DELETE, asked to answered


def body(name: str, count: int, stop_timeout: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "image": IMAGE,
        "command": DEAF_TO_SIGTERM,
        "count": count,
        "resources": {"cpu": "0.1", "memory": "16Mi"},
    }
    if stop_timeout is not None:
        spec["stop_timeout_seconds"] = stop_timeout
    return spec


def deploy_when_room(url: str, spec: dict[str, Any]) -> int:
    """Deploy, again while the coordinator answers 409 (the deleted containers' room is
    held until their agent reports them gone); how many times it was refused."""
    refused = 0
    while True:
        try:
            api(url, f"/v1/namespaces/{NAMESPACE}/deployments", spec)
            return refused
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise
        refused += 1
        time.sleep(POLL_SECONDS)


def poll_state(path: Path, watch: Watch) -> tuple[int | None, int]:
    """The agent's desired and applied revisions, noting its pass and gap."""
    try:
        state = read_state(path)
    except (OSError, ValueError):
        return None, 0
    if state.last_reconcile is not None:
        watch.longest_pass_ms = max(watch.longest_pass_ms, state.last_reconcile.duration_ms)
        watch.passes.add(state.last_reconcile.at)
    if state.desired_revision is not None:
        watch.largest_gap = max(watch.largest_gap, state.desired_revision - state.applied_revision)
    return state.desired_revision, state.applied_revision


def runs(client: docker.DockerClient, node: str, deployment: str, count: int) -> bool:
    found = client.api.containers(filters=node_filter(node) | {"status": ["running"]})
    ours = [c for c in found if c["Labels"].get(DEPLOYMENT) == deployment]
    return len(ours) == count


def holds_only(client: docker.DockerClient, node: str, deployment: str, count: int) -> bool:
    found = client.api.containers(all=True, filters=node_filter(node))
    running = [c for c in found if c["State"] == "running"]
    ours = [c for c in running if c["Labels"].get(DEPLOYMENT) == deployment]
    return len(found) == count and len(ours) == count


def late_starts(
    seen: list[dict[str, Any]], deleted: dict[str, float]
) -> tuple[list[tuple[str, float, float]], int]:
    """Each start of a container whose deployment's delete was answered before it: its id,
    how many seconds after the answer it started, and was created (negative: before);
    and how many containers were started at all."""
    created: dict[str, float] = {}
    started: set[str] = set()
    late = []
    for event in seen:
        attributes = event["Actor"]["Attributes"]
        container_id, at = attributes.get("allot.id", "?"), event["timeNano"] / 1e9
        if event["Action"] == "create":
            created[container_id] = at
            continue
        started.add(container_id)
        answered = deleted.get(attributes.get(DEPLOYMENT, ""))
        if answered is not None and at > answered:
            made = created.get(container_id, at) - answered
            late.append((container_id, at - answered, made))
    return late, len(started)


def run(arguments: argparse.Namespace) -> None:
    client = docker.from_env(timeout=120)
    deleted: dict[str, float] = {}  # deployment -> when its delete was answered
    watch = Watch()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        flags = (f"--stop-timeout-seconds={arguments.agent_stop_timeout}",)
        toml = f"removal_ack_seconds = {arguments.removal_ack_seconds}\n"
        with running_cluster(
            tmp, client, nodes=1, cpus_each=len(cpus()), agent_args=flags, toml=toml
        ) as cluster:
            node = cluster.nodes[0]
            state = tmp / f"agent-{node}.json"
            with engine_events(node) as seen:
                answered = 0.0
                for round_ in range(arguments.rounds):
                    if round_:
                        asked = time.monotonic()
                        api(
                            cluster.url,
                            f"/v1/namespaces/{NAMESPACE}/deployments/c{round_ - 1}",
                            method="DELETE",
                        )
                        deleted[f"c{round_ - 1}"] = time.time()
                        watch.delete_ms.append((time.monotonic() - asked) * 1000)
                    spec = body(f"c{round_}", arguments.count, arguments.stop_timeout)
                    watch.refusals += deploy_when_room(cluster.url, spec)
                    answered = time.monotonic()
                    pause_until = answered + arguments.interval
                    while time.monotonic() < pause_until:
                        poll_state(state, watch)
                        time.sleep(POLL_SECONDS)
                last = f"c{arguments.rounds - 1}"
                deadline = time.monotonic() + arguments.timeout
                while not runs(client, node, last, arguments.count):
                    if time.monotonic() > deadline:
                        sys.exit(f"the last deployment not running within {arguments.timeout:g}s")
                    poll_state(state, watch)
                    time.sleep(POLL_SECONDS)
                newest = time.monotonic() - answered
                while True:
                    desired, applied = poll_state(state, watch)
                    if desired == applied and holds_only(client, node, last, arguments.count):
                        break
                    if time.monotonic() > deadline:
                        sys.exit(f"not caught up within {arguments.timeout:g}s")
                    time.sleep(POLL_SECONDS)
                catch_up = time.monotonic() - answered

    late, started = late_starts(seen, deleted)
    made = arguments.rounds * arguments.count
    timeout = arguments.stop_timeout if arguments.stop_timeout is not None else "agent's"
    print(f"rounds={arguments.rounds} count={arguments.count} containers={made}")
    print(f"containers_ever_started={started}")
    print(f"stop_timeout={timeout} agent_stop_timeout={arguments.agent_stop_timeout}")
    print(f"removal_ack_seconds={arguments.removal_ack_seconds:g}")
    print(f"newest_running_s={newest:.1f} (from the last deploy answered)")
    print(f"catch_up_s={catch_up:.1f} (from the last deploy answered)")
    print(f"longest_pass_s={watch.longest_pass_ms / 1000:.1f} passes_seen={len(watch.passes)}")
    print(f"largest_desired_minus_applied={watch.largest_gap}")
    print(f"deploys_refused_for_held_room={watch.refusals}")
    answers = sorted(watch.delete_ms)
    print(
        f"delete_answer_ms median={answers[len(answers) // 2]:.0f} max={answers[-1]:.0f}"
        f" (of {len(answers)})"
    )
    after = [one for one in late if one[2] > 0]
    print(f"late_starts={len(late)} of which created after the delete={len(after)}")
    if late:
        print(f"latest_start_after_delete_s={max(one[1] for one in late):.3f}")
    for container_id, start, made in late[:5]:
        print(f"  {container_id} started {start:.3f}s after its delete, created {made:+.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between rounds")
    parser.add_argument("--agent-stop-timeout", type=int, default=10)
    parser.add_argument("--stop-timeout", type=int, default=None)
    parser.add_argument("--removal-ack-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="catch-up deadline")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
