"""The desired container names its pool to its agent (``translate.desired_container``):
an unbound container its leaf pool, for the pool's cgroup on the host
(``shared.pool_cgroups``); a bound one none, since it stays where Docker puts it."""

from __future__ import annotations

import msgspec

from coordinator.deployments.translate import desired_container
from shared.protocol import Desired, decode_from_coordinator, encode
from tests.coordinator.deployments.test_container_state import RECORD


def test_an_unbound_container_names_its_pool_and_a_bound_one_none() -> None:
    assert desired_container(RECORD).pool == "team-a"
    bound = msgspec.structs.replace(RECORD, cpu_bind=True)
    assert desired_container(bound).pool == ""


def test_any_pool_name_crosses_the_wire() -> None:
    """Pool names are any non-empty string (``coordinator.pools.config``), long ones too."""
    named = msgspec.structs.replace(RECORD, pool="a/very long pool name " * 20)
    frame = Desired(revision=1, full=True, containers=[desired_container(named)])
    decoded = decode_from_coordinator(encode(frame))
    assert isinstance(decoded, Desired)
    assert decoded.containers[0].pool == named.pool
