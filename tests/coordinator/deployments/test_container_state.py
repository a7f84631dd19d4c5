"""coordinator.deployments.container_state: the state and reason the API shows for a
container, from its record and its agent's last report; by example, then by property."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.deployments.container_state import container_state
from shared.api.containers import ContainerRecord
from shared.protocol import ContainerStatus, Limits
from shared.restart_policy import RestartPolicy

RECORD = ContainerRecord(
    id="team-a-web-1",
    namespace="team-a",
    deployment="web",
    node="n1",
    image="busybox",
    command=[],
    env={},
    labels={},
    restart_policy="always",
    cpu_bind=False,
    requests={"cpu": "0.5", "memory": 0},
    priority=0,
    pool="team-a",
    created=0.0,
    capacity="",
    limits=Limits(),
)
NO_IMAGE = "create failed: No such image: x (try 2 in a row; the next 2s after it)"


def record(**fields: Any) -> ContainerRecord:
    return msgspec.structs.replace(RECORD, **fields)


def seen(state: str, **fields: Any) -> ContainerStatus:
    return ContainerStatus(id=RECORD.id, state=state, **fields)


CASES = [
    ("unplaced", record(node=""), None, ("pending", "not placed on a node")),
    ("unreported", RECORD, None, ("starting", "not reported by node n1 yet")),
    ("missing", RECORD, seen("missing"), ("starting", "being created")),
    ("created", RECORD, seen("created"), ("starting", "created, being started")),
    ("restarting", RECORD, seen("restarting"), ("starting", "being started again")),
    ("running", RECORD, seen("running"), ("running", "")),
    ("create-failed", RECORD, seen("failed", error=NO_IMAGE), ("failed", NO_IMAGE)),
    (
        "older-agent",
        RECORD,
        seen("missing", error="create failed: x"),
        ("failed", "create failed: x"),
    ),
    ("refused", RECORD, seen("refused", error="refused: GPU"), ("failed", "refused: GPU")),
    (
        "crash-loop",
        RECORD,
        seen(
            "exited", exit_code=1, error="exited with code 1 (try 3 in a row; the next 4s after it)"
        ),
        ("failed", "exited with code 1 (try 3 in a row; the next 4s after it)"),
    ),
    ("run-again-unsaid", RECORD, seen("exited", exit_code=137), ("failed", "exited with code 137")),
    (
        "done",
        record(restart_policy="no"),
        seen("exited", exit_code=0),
        ("succeeded", "exited with code 0"),
    ),
    (
        "broke",
        record(restart_policy="no"),
        seen("exited", exit_code=3),
        ("failed", "exited with code 3"),
    ),
    ("died", record(restart_policy="no"), seen("dead"), ("failed", "died")),
    (
        "on-failure-done",
        record(restart_policy="on-failure"),
        seen("exited", exit_code=0),
        ("succeeded", "exited with code 0"),
    ),
    ("paused", RECORD, seen("paused"), ("failed", "paused outside allot")),
    (
        "waiting-for-cores",
        RECORD,
        seen("waiting", error="waiting for c0 to leave CPUs 3"),
        ("starting", "waiting for its CPUs: another container is still leaving them"),
    ),
    (
        "replaced",
        record(replaced_by="team-a-web-2"),
        seen("exited", exit_code=0),
        ("replaced", "being replaced by team-a-web-2"),
    ),
]


@pytest.mark.parametrize(("case", "held", "report", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_state_and_its_reason(
    case: str, held: ContainerRecord, report: ContainerStatus | None, expected: tuple[str, str]
) -> None:
    assert container_state(held, report) == expected


DOCKER_STATES = ("created", "running", "paused", "restarting", "removing", "exited", "dead")
AGENT_STATES = ("missing", "refused", "failed", "waiting")


@given(
    st.sampled_from(["no", "on-failure", "always", "unless-stopped"]),
    st.sampled_from(DOCKER_STATES + AGENT_STATES + ("something-new",)),
    st.one_of(st.none(), st.integers(0, 255)),
    st.sampled_from(["", "some problem"]),
    st.booleans(),
)
def test_a_placed_container_of_a_deployment_is_in_one_counted_state(
    policy: RestartPolicy, state: str, code: int | None, error: str, reported: bool
) -> None:
    report = seen(state, exit_code=code, error=error) if reported else None
    word, reason = container_state(record(restart_policy=policy), report)
    assert word in ("starting", "running", "succeeded", "failed")
    if word == "succeeded":
        # Ended with code 0: exited, or dead (Docker could not remove what had ended).
        assert state in ("exited", "dead")
        assert code == 0
        assert policy in ("no", "on-failure")
    if word != "running":
        assert reason  # every state but running says why
