"""shared.restart_policy: which exits a policy starts again, and how the others ended."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.api.deployments import DeploymentSpec, ResourcesSpec
from shared.restart_policy import DEFAULT_RESTART_POLICY, RestartPolicy, completion, runs_again

TABLE = [
    ("always", 0, True, None),
    ("always", 1, True, None),
    ("unless-stopped", 0, True, None),
    ("on-failure", 0, False, "succeeded"),
    ("on-failure", 137, True, None),
    ("on-failure", None, True, None),
    ("no", 0, False, "succeeded"),
    ("no", 3, False, "failed"),
    ("no", None, False, "failed"),
]


@pytest.mark.parametrize(
    ("policy", "code", "again", "ended"), TABLE, ids=[f"{p}-{c}" for p, c, *_ in TABLE]
)
def test_each_policy_and_exit(
    policy: RestartPolicy, code: int | None, again: bool, ended: str | None
) -> None:
    assert runs_again(policy, code) is again
    assert completion(policy, code) == ended


@given(
    st.sampled_from(["no", "on-failure", "always", "unless-stopped"]),
    st.one_of(st.none(), st.integers(-(2**31), 2**32 - 1)),
)
def test_a_container_either_runs_again_or_has_ended(
    policy: RestartPolicy, code: int | None
) -> None:
    ended = completion(policy, code)
    assert (ended is None) is runs_again(policy, code)
    if ended == "succeeded":
        assert code == 0


def test_a_deployment_keeps_its_containers_running_by_default() -> None:
    spec = DeploymentSpec(name="web", image="busybox", resources=ResourcesSpec(cpu="1"))
    assert spec.restart_policy == DEFAULT_RESTART_POLICY == "always"
