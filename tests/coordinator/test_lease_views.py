"""What a token sees of a resource's leases, from the engine's leases down."""

from __future__ import annotations

from coordinator.leases import LeaseState
from coordinator.services.lease_keys import holder_key
from coordinator.services.lease_views import client_lease, leases_seen
from shared.api.leases import ClientLease, OtherLeases


def lease(namespace: str, client_id: str, has: float, wants: float) -> ClientLease:
    state = LeaseState(holder_key(namespace, client_id), has, wants, 1, 0, 100.0)
    return client_lease(state)


LEASES = [
    lease("team-a-b", "x", 1, 2),
    lease("team-a", "web/7", 0.1, 0.3),
    lease("", "batch", 0.2, 0.3),
    lease("team-a", "web", 4, 4),
]


def test_an_engine_lease_keeps_its_client_id_whole_and_gains_its_namespace() -> None:
    assert lease("team-a", "web/7", 0.1, 0.3) == ClientLease(
        namespace="team-a",
        client_id="web/7",
        has=0.1,
        wants=0.3,
        subclients=1,
        priority=0,
        expiry_time=100.0,
    )


def test_a_namespace_token_sees_its_own_by_name_and_the_rest_as_exact_totals() -> None:
    view = leases_seen("db", LEASES, {"team-a"}.__contains__)

    assert [(le.namespace, le.client_id) for le in view.leases] == [
        ("team-a", "web"),
        ("team-a", "web/7"),
    ]
    assert view.others == OtherLeases(clients=2, has=1.2, wants=2.3)


def test_an_admin_sees_every_lease_by_namespace_then_client_and_no_others() -> None:
    view = leases_seen("db", LEASES, lambda namespace: True)

    assert [(le.namespace, le.client_id) for le in view.leases] == [
        ("", "batch"),
        ("team-a", "web"),
        ("team-a", "web/7"),
        ("team-a-b", "x"),
    ]
    assert view.others == OtherLeases(clients=0, has=0.0, wants=0.0)
