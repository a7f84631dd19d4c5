"""pools.access: which pools a namespace's deployments may name."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.pools.access import pool_access

# team-a/{batch/{nightly}}, team-b, shared (opened to team-a)/{gpu}, ops ("<root>" parent)
POOLS: dict[str, dict[str, Any]] = {
    "team-a": {},
    "batch": {"parent": "team-a"},
    "nightly": {"parent": "batch"},
    "team-b": {"namespaces": []},
    "shared": {"namespaces": ["team-a", "team-c"]},
    "gpu": {"parent": "shared"},
    "ops": {"parent": "<root>"},
}


@pytest.mark.parametrize(
    ("namespace", "pool", "code"),
    [
        ("team-a", "team-a", None),
        ("team-a", "batch", None),
        ("team-a", "nightly", None),
        ("team-a", "shared", None),
        ("team-a", "gpu", None),
        ("team-c", "gpu", None),
        ("team-x", "team-x", None),  # its own pool, not configured: limits nothing
        ("team-a", "team-b", "pool_forbidden"),
        ("team-b", "batch", "pool_forbidden"),
        ("team-b", "gpu", "pool_forbidden"),
        ("team-a", "ops", "pool_forbidden"),
        ("team-a", "nowhere", "unknown_pool"),
        ("team-a", "<root>", "unknown_pool"),
    ],
)
def test_pool_access(namespace: str, pool: str, code: str | None) -> None:
    refused = pool_access(POOLS, namespace, pool)
    assert (refused.code if refused else None) == code
    if refused is not None:
        assert repr(pool) in refused.message


names = st.sampled_from(["a", "b", "c", "d", "e"])


@st.composite
def trees(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """A forest over a-e, each pool's parent an earlier one or none, some opened."""
    pools: dict[str, dict[str, Any]] = {}
    for name in draw(st.lists(names, unique=True)):
        fields: dict[str, Any] = {"namespaces": draw(st.lists(names, max_size=2))}
        parent = draw(st.sampled_from([None, *pools]))
        pools[name] = fields | ({"parent": parent} if parent else {})
    return pools


@given(pools=trees(), namespace=names, pool=names)
def test_access_is_exactly_a_path_through_the_namespace_or_an_opening(
    pools: dict[str, dict[str, Any]], namespace: str, pool: str
) -> None:
    path, at = [], pool if pool in pools else None
    while at is not None:
        path.append(at)
        at = pools[at].get("parent")
    allowed = pool == namespace or any(
        name == namespace or namespace in pools[name]["namespaces"] for name in path
    )
    assert (pool_access(pools, namespace, pool) is None) == allowed
