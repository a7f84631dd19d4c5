"""Validation (spec section 7): every rule by its code, with the pool, field and resource
named; configurations that look wrong but are allowed; and nothing built on failure."""

from __future__ import annotations

import math
from typing import Any

import pytest

from coordinator.pools import PoolConfigError, PoolTree, parse_config
from tests.coordinator.pools.trees import burst, pool, relaxed, tree_config

FLOW = {"cpu": 10}
BURST = {"cpu": 20}


def integral(kind: str, **fields: Any) -> dict[str, Any]:
    return {"integral_guarantees": {"guarantee_type": kind, **fields}}


# (config, code, pool named, field named or None)
REFUSED = [
    # the document's shape (allot extension: invalid_config)
    pytest.param([], "invalid_config", None, None, id="config-not-a-map"),
    pytest.param({"pools": {}, "extra": 1}, "invalid_config", None, "extra", id="unknown-top"),
    pytest.param({"pools": []}, "invalid_config", None, None, id="pools-not-a-map"),
    pytest.param({"pools": {"a": 5}}, "invalid_config", "a", None, id="pool-not-a-map"),
    pytest.param(
        {"pools": {"a": {"wieght": 2}}}, "invalid_config", "a", "wieght", id="unknown-pool-field"
    ),
    pytest.param(
        {"pools": {"a": {"integral_guarantees": {"flow": {}}}}},
        "invalid_config",
        "a",
        "integral_guarantees.flow",
        id="unknown-integral-field",
    ),
    # settings
    *(
        pytest.param(
            {"settings": {name: value}},
            "invalid_setting",
            None,
            f"settings.{name}",
            id=f"{name}={value}",
        )
        for name, value in [
            ("fair_share_update_period", 0),
            ("fair_share_update_period", 0.001),
            ("fair_share_update_period", 61),
            ("smooth_period", 0),
            ("smooth_period", -60),
            ("smooth_period", math.inf),
            ("pool_capacity_saturation_period", 0),
            ("pool_capacity_saturation_period", "1d"),
            ("relaxed_share_multiplier_limit", 0.5),
            ("relaxed_share_multiplier_limit", 11),
            ("relaxed_share_multiplier_limit", math.nan),
            ("charge_volume_by_usage", "yes"),
            ("smooth_periods", 60),
        ]
    ),
    # names (allot extension: invalid_pool_name)
    pytest.param({"pools": {"<root>": {}}}, "invalid_pool_name", None, None, id="name-root"),
    pytest.param({"pools": {"": {}}}, "invalid_pool_name", None, None, id="name-empty"),
    # weight
    *(
        pytest.param(
            {"pools": {"a": {"weight": w}}}, "invalid_weight", "a", "weight", id=f"weight-{w!r}"
        )
        for w in [0, -1, math.nan, math.inf, "2", True]
    ),
    # the namespaces a pool is opened to (allot extension: invalid_namespaces)
    *(
        pytest.param(
            {"pools": {"a": {"namespaces": value}}},
            "invalid_namespaces",
            "a",
            "namespaces",
            id=f"namespaces-{value!r}",
        )
        for value in ("team-a", ["Team A"], [1], ["-a"], {"team-a": True})
    ),
    # resources, in every map
    *(
        pytest.param(
            {"pools": {"a": {field: {"cpu": value}}}},
            "invalid_resource",
            "a",
            field,
            id=f"{field}-{value!r}",
        )
        for field in ("strong_guarantee_resources", "resource_limits")
        for value in (-1, math.nan, math.inf, "500m", True, None)
    ),
    pytest.param(
        {"pools": {"a": {"strong_guarantee_resources": {"gpu_memory": 1}}}},
        "invalid_resource",
        "a",
        "strong_guarantee_resources",
        id="unknown-resource-name",
    ),
    pytest.param(
        {"pools": {"a": {"resource_limits": {"nvidia.com/mig-3G.40GB": 1}}}},
        "invalid_resource",
        "a",
        "resource_limits",
        id="malformed-mig-name",
    ),
    pytest.param(
        {"pools": {"a": {"resource_limits": [1, 2]}}},
        "invalid_resource",
        "a",
        "resource_limits",
        id="resources-not-a-map",
    ),
    pytest.param(
        {"pools": {"a": integral("relaxed", resource_flow={"cpu": -5})}},
        "invalid_resource",
        "a",
        "integral_guarantees.resource_flow",
        id="negative-flow",
    ),
    pytest.param(
        {"pools": {"a": integral("burst", resource_flow=FLOW, burst_guarantee_resources={"x": 1})}},
        "invalid_resource",
        "a",
        "integral_guarantees.burst_guarantee_resources",
        id="bad-burst-resource",
    ),
    # guarantee type and its fields
    pytest.param(
        {"pools": {"a": integral("strong")}},
        "invalid_guarantee_type",
        "a",
        "integral_guarantees.guarantee_type",
        id="type-strong",
    ),
    pytest.param(
        {"pools": {"a": integral("Burst")}},
        "invalid_guarantee_type",
        "a",
        "integral_guarantees.guarantee_type",
        id="type-capitalised",
    ),
    pytest.param(
        {"pools": {"a": integral("burst", burst_guarantee_resources=BURST)}},
        "missing_resource_flow",
        "a",
        "integral_guarantees.resource_flow",
        id="burst-without-flow",
    ),
    pytest.param(
        {"pools": {"a": integral("relaxed", resource_flow={})}},
        "missing_resource_flow",
        "a",
        "integral_guarantees.resource_flow",
        id="relaxed-empty-flow",
    ),
    pytest.param(
        {"pools": {"a": integral("burst", resource_flow=FLOW)}},
        "missing_burst_guarantee",
        "a",
        "integral_guarantees.burst_guarantee_resources",
        id="burst-without-burst",
    ),
    pytest.param(
        {"pools": {"a": integral("relaxed", resource_flow=FLOW, burst_guarantee_resources=BURST)}},
        "burst_guarantee_on_relaxed_pool",
        "a",
        "integral_guarantees.burst_guarantee_resources",
        id="burst-on-relaxed",
    ),
    *(
        pytest.param(
            {"pools": {"a": integral("relaxed", resource_flow=FLOW, **{m: value})}},
            "invalid_multiplier",
            "a",
            f"integral_guarantees.{m}",
            id=f"multiplier-{value!r}",
        )
        for m in ["relaxed_share_multiplier_limit"]
        for value in (0.99, 10.5, "3", math.nan)
    ),
    pytest.param(
        {
            "pools": {
                "a": integral(
                    "burst",
                    resource_flow=FLOW,
                    burst_guarantee_resources=BURST,
                    relaxed_share_multiplier_limit=2,
                )
            }
        },
        "invalid_multiplier",
        "a",
        "integral_guarantees.relaxed_share_multiplier_limit",
        id="multiplier-on-burst",
    ),
    pytest.param(
        {"pools": {"a": integral("none", relaxed_share_multiplier_limit=2)}},
        "invalid_multiplier",
        "a",
        "integral_guarantees.relaxed_share_multiplier_limit",
        id="multiplier-on-none",
    ),
    # the tree
    pytest.param(
        {"pools": {"a": pool("nope")}}, "unknown_parent", "a", "parent", id="unknown-parent"
    ),
    pytest.param({"pools": {"a": {"parent": 7}}}, "unknown_parent", "a", "parent", id="parent-7"),
    pytest.param({"pools": {"a": pool("a")}}, "pool_cycle", "a", "parent", id="self-parent"),
    pytest.param(
        {"pools": {"x": pool(), "a": pool("c"), "b": pool("a"), "c": pool("b")}},
        "pool_cycle",
        "a",
        "parent",
        id="three-cycle",
    ),
    pytest.param(
        {"pools": {"r": relaxed(10), "b": burst(0, 0, "r")}},
        "nested_integral_pool",
        "b",
        "parent",
        id="burst-under-relaxed",
    ),
    pytest.param(
        {"pools": {"b": burst(10, 20), "r": relaxed(0, "b")}},
        "nested_integral_pool",
        "r",
        "parent",
        id="relaxed-under-burst",
    ),
    pytest.param(
        {
            "pools": {
                "b": burst(10, 20),
                "mid": pool("b"),
                "leaf": pool("mid", resource_flow={"cpu": 1}),
            }
        },
        "nested_integral_pool",
        "leaf",
        "parent",
        id="flow-ceiling-two-levels-below-burst",
    ),
    pytest.param(
        {"pools": {"r": relaxed(10), "n": pool("r", burst_guarantee_resources={"cpu": 1})}},
        "nested_integral_pool",
        "n",
        "parent",
        id="burst-ceiling-under-relaxed",
    ),
    pytest.param(
        {"pools": {"p": pool(strong=10), "a": pool("p", strong=6), "b": pool("p", strong=5)}},
        "children_exceed_parent",
        "p",
        "strong_guarantee_resources",
        id="strong-sum",
    ),
    pytest.param(
        {"pools": {"p": pool(), "a": pool("p", strong=1)}},
        "children_exceed_parent",
        "p",
        "strong_guarantee_resources",
        id="strong-parent-missing-is-zero",
    ),
    pytest.param(
        {
            "pools": {
                "p": pool(resource_flow={"cpu": 15}),
                "a": relaxed(10, "p"),
                "b": relaxed(6, "p"),
            }
        },
        "children_exceed_parent",
        "p",
        "integral_guarantees.resource_flow",
        id="flow-sum",
    ),
    pytest.param(
        {"pools": {"p": pool(), "a": relaxed(10, "p")}},
        "children_exceed_parent",
        "p",
        "integral_guarantees.resource_flow",
        id="relaxed-under-plain-parent",
    ),
    pytest.param(
        {
            "pools": {
                "p": pool(resource_flow={"cpu": 20}, burst_guarantee_resources={"cpu": 30}),
                "a": burst(10, 20, "p"),
                "b": burst(10, 20, "p"),
            }
        },
        "children_exceed_parent",
        "p",
        "integral_guarantees.burst_guarantee_resources",
        id="burst-sum",
    ),
]


@pytest.mark.parametrize(("config", "code", "pool_name", "field"), REFUSED)
def test_refused(config: Any, code: str, pool_name: str | None, field: str | None) -> None:
    with pytest.raises(PoolConfigError) as caught:
        PoolTree.from_config(config)
    error = caught.value
    assert error.code == code
    assert error.pool == pool_name
    assert error.details["pool"] == pool_name
    if pool_name is not None:
        assert repr(pool_name) in error.message  # the message names the pool
    if field is not None:
        assert error.details.get("field") == field
    assert str(error) == error.message


def test_children_exceed_parent_names_the_resource_and_the_children() -> None:
    config = {"pools": {"p": pool(strong=10), "a": pool("p", strong=6), "b": pool("p", strong=5)}}
    with pytest.raises(PoolConfigError) as caught:
        parse_config(config)
    assert caught.value.details == {
        "pool": "p",
        "field": "strong_guarantee_resources",
        "resource": "cpu",
        "children_sum": 11.0,
        "parent_amount": 10.0,
        "children": ["a", "b"],
    }
    assert "cpu" in caught.value.message
    assert "11" in caught.value.message


def test_cycle_lists_the_loop() -> None:
    with pytest.raises(PoolConfigError) as caught:
        parse_config({"pools": {"a": pool("b"), "b": pool("a")}})
    assert caught.value.details["cycle"] == ["a", "b"]
    assert "a -> b -> a" in caught.value.message


ACCEPTED = [
    pytest.param({}, id="empty"),
    pytest.param({"pools": None, "settings": None}, id="nulls"),
    pytest.param({"pools": {"a": None}}, id="pool-with-defaults"),
    pytest.param({"pools": {"a": {"weight": None, "parent": None}}}, id="null-fields-default"),
    pytest.param({"pools": {"a": pool("<root>")}}, id="parent-root-is-top-level"),
    pytest.param({"pools": {"b": burst(0, 0)}}, id="burst-zero-amounts"),
    pytest.param({"pools": {"r": relaxed(0)}}, id="relaxed-zero-flow"),
    pytest.param(
        {"pools": {"n": pool(resource_flow={"cpu": 5}, burst_guarantee_resources={"cpu": 9})}},
        id="none-pool-with-ceilings",
    ),
    pytest.param(
        {
            "pools": {
                "team": pool(strong=0.3, resource_flow={"cpu": 0.3}),
                "a": relaxed(0.1, "team", strong=0.1),
                "b": relaxed(0.2, "team", strong=0.2),
            }
        },
        id="float-sums-within-tolerance",
    ),
    pytest.param(
        {"pools": {"b": burst(1, 2), "child": pool("b", strong=0, weight=2)}},
        id="plain-pool-below-burst",
    ),
    pytest.param(
        {"pools": {"a": {"resource_limits": {"nvidia.com/gpu": 2, "gpu-memory": 80, "memory": 1}}}},
        id="known-resource-names",
    ),
    pytest.param(
        {
            "settings": {
                "fair_share_update_period": 0.01,
                "smooth_period": 0.5,
                "pool_capacity_saturation_period": 1,
                "relaxed_share_multiplier_limit": 10,
                "charge_volume_by_usage": True,
            },
            "pools": {"r": relaxed(1, multiplier=1)},
        },
        id="settings-at-their-bounds",
    ),
]


@pytest.mark.parametrize("config", ACCEPTED)
def test_accepted(config: Any) -> None:
    PoolTree.from_config(config)


def test_a_pool_opened_to_namespaces_keeps_each_once_in_order() -> None:
    parsed = parse_config({"pools": {"a": {"namespaces": ["team-b", "team-a", "team-b"]}}})
    assert parsed.pools["a"].namespaces == ("team-b", "team-a")
    assert parse_config({"pools": {"a": {"namespaces": None}}}).pools["a"].namespaces == ()


def test_parsed_order_is_parents_first_then_config_order() -> None:
    parsed = parse_config(
        {"pools": {"leaf": pool("mid"), "b": pool(), "mid": pool("a"), "a": pool()}}
    )
    assert list(parsed.pools) == ["b", "a", "mid", "leaf"]


def test_multiplier_defaults_to_the_tree_setting() -> None:
    parsed = parse_config(
        tree_config(
            {"r": relaxed(1), "s": relaxed(1, multiplier=2)}, relaxed_share_multiplier_limit=5
        )
    )
    assert parsed.pools["r"].multiplier == 5.0
    assert parsed.pools["s"].multiplier == 2.0
    assert parsed.settings.relaxed_share_multiplier_limit == 5.0


@pytest.mark.parametrize(
    ("state", "field"),
    [
        pytest.param([], None, id="not-a-map"),
        pytest.param({"updated_at": "yesterday"}, None, id="bad-time"),
        pytest.param({"pools": {"r": {"volume_ratio_s": -1}}}, "volume_ratio_s", id="negative"),
        pytest.param(
            {"pools": {"r": {"last_integral_share": math.nan}}}, "last_integral_share", id="nan"
        ),
        pytest.param({"pools": {"r": 3}}, None, id="pool-not-a-map"),
    ],
)
def test_bad_state_is_refused(state: Any, field: str | None) -> None:
    with pytest.raises(PoolConfigError) as caught:
        PoolTree.from_config({"pools": {"r": relaxed(1)}}, state)
    assert caught.value.code == "invalid_state"
    if field is not None:
        assert caught.value.details["field"] == field
        assert caught.value.pool == "r"
