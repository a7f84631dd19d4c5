"""Lease holders as one engine key and as store keys: every holder comes back unchanged,
and a key of the store before namespaces reads as the cluster's own client's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.services.lease_keys import (
    CLUSTER_NAMESPACE,
    HeldKey,
    held_key,
    holder_key,
    parse_held_key,
    split_holder,
)
from shared.resource_names import RFC1123_LABEL

namespaces = st.one_of(st.just(CLUSTER_NAMESPACE), st.from_regex(RFC1123_LABEL, fullmatch=True))
# Client and resource ids may hold anything, the separators "/" and "%" included.
ids = st.text(alphabet=st.sampled_from("ab/%2F:-. é"), min_size=1, max_size=12) | st.text(
    min_size=1
)


@given(namespaces, ids)
def test_a_holder_key_splits_back_into_its_namespace_and_client(
    namespace: str, client_id: str
) -> None:
    assert split_holder(holder_key(namespace, client_id)) == (namespace, client_id)


@given(ids, namespaces, ids)
def test_a_store_key_reads_back_as_the_lease_it_names(
    resource_id: str, namespace: str, client_id: str
) -> None:
    holder = holder_key(namespace, client_id)
    assert parse_held_key(held_key(resource_id, holder)) == HeldKey(
        resource_id, holder, legacy=False
    )


@given(namespaces, ids, namespaces, ids)
def test_two_holders_never_share_a_key(
    namespace: str, client_id: str, other_namespace: str, other_client_id: str
) -> None:
    if (namespace, client_id) != (other_namespace, other_client_id):
        assert holder_key(namespace, client_id) != holder_key(other_namespace, other_client_id)


@pytest.mark.parametrize(
    ("key", "resource_id", "client_id", "key_of_now"),
    [
        ("/leases/held/db.write/web-7", "db.write", "web-7", "/leases/held/db.write//web-7"),
        ("/leases/held/db.write/a%2Fb", "db.write", "a/b", "/leases/held/db.write//a%2Fb"),
        (
            "/leases/held/db%2Forders/team-a%2Fweb",
            "db/orders",
            "team-a/web",
            "/leases/held/db%2Forders//team-a%2Fweb",
        ),
    ],
    ids=["plain", "client-with-slash", "both-with-slashes"],
)
def test_a_key_of_the_store_before_namespaces_is_the_clusters_own_client(
    key: str, resource_id: str, client_id: str, key_of_now: str
) -> None:
    held = parse_held_key(key)

    assert held == HeldKey(resource_id, holder_key(CLUSTER_NAMESPACE, client_id), legacy=True)
    assert held_key(held.resource_id, held.holder) == key_of_now


@pytest.mark.parametrize(
    "key", ["/leases/held/db.write", "/leases/held/a/b/c/d", "/leases/templates", "web-7"]
)
def test_a_key_that_names_no_lease_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="not a lease key"):
        parse_held_key(key)


def test_a_namespace_with_a_slash_has_no_holder_key() -> None:
    with pytest.raises(ValueError, match="must not hold a '/'"):
        holder_key("team/a", "web-7")
