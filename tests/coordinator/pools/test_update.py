"""One update (spec section 3), step by step, on named trees worked out by hand; each
case is also checked against the exact reference. Volumes come from a state without a
previous time, so the update spends nothing and T_s = 60 s turns V into V / 60."""

from __future__ import annotations

import math
from typing import Any

import pytest

from coordinator.pools import PoolInputError, PoolTree
from coordinator.pools import reference as ref
from tests.coordinator.pools.trees import burst, pool, relaxed, volumes

CPU100 = {"cpu": 100}
BIG = 6000.0  # a volume whose V / T_s = 100 never binds
ALL = {"cpu": 100}  # a demand for the whole cluster

# (pools, state, total, demands, {pool: (strong, integral, weight_proportional, total)},
#  alerts)
CASES = [
    pytest.param(
        {"a": pool(strong=20), "b": pool(weight=3)},
        None,
        CPU100,
        {"a": ALL, "b": ALL},
        {"a": (0.2, 0, 0.2, 0.4), "b": (0, 0, 0.6, 0.6)},
        [],
        id="remainder-is-added-to-guarantees-by-weight",
    ),
    pytest.param(
        {"a": pool(), "b": pool()},
        None,
        CPU100,
        {"a": {"cpu": 10}, "b": ALL},
        {"a": (0, 0, 0.1, 0.1), "b": (0, 0, 0.9, 0.9)},
        [],
        id="bounded-by-demand-rest-to-others",
    ),
    pytest.param(
        {"a": pool(limit=30), "b": pool()},
        None,
        CPU100,
        {"a": ALL, "b": ALL},
        {"a": (0, 0, 0.3, 0.3), "b": (0, 0, 0.7, 0.7)},
        [],
        id="bounded-by-limit",
    ),
    pytest.param(
        {
            "p": pool(strong=50, limit=40),
            "a": pool("p", strong=40),
            "b": pool("p", strong=10, limit=5),
            "c": pool(),
        },
        None,
        CPU100,
        {"a": ALL, "b": ALL, "c": ALL},
        {
            "p": (0.4, 0, 0, 0.4),
            "a": (0.4 * 0.4 / 0.45, 0, 0, 0.4 * 0.4 / 0.45),
            "b": (0.05 * 0.4 / 0.45, 0, 0, 0.05 * 0.4 / 0.45),
            "c": (0, 0, 0.6, 0.6),
        },
        [],
        id="strong-clipped-by-limit-before-fitting-into-parent",
    ),
    pytest.param(
        {"a": pool(strong=60), "b": burst(10, 60)},
        volumes(b=BIG),
        CPU100,
        {"a": ALL, "b": ALL},
        {"a": (0.5, 0, 0, 0.5), "b": (0, 0.5, 0, 0.5)},
        ["guarantee_overcommit"],
        id="strong-plus-burst-over-one-scaled",
    ),
    pytest.param(
        {"a": pool(strong=50), "r": relaxed(60)},
        volumes(r=BIG),
        CPU100,
        {"a": ALL, "r": ALL},
        {"a": (0.5, 0, 0, 0.5), "r": (0, 0.5, 0, 0.5)},
        ["flow_overcommit"],
        id="flows-over-one-only-reported",
    ),
    pytest.param(
        {
            "p": pool(limit=30, resource_flow={"cpu": 20}, burst_guarantee_resources={"cpu": 60}),
            "b1": burst(10, 40, "p"),
            "b2": burst(10, 20, "p"),
            "c": pool(),
        },
        volumes(b1=BIG, b2=BIG),
        CPU100,
        {"b1": ALL, "b2": ALL, "c": ALL},
        {
            "b1": (0, 0.2, 0, 0.2),
            "b2": (0, 0.1, 0, 0.1),
            "p": (0, 0.3, 0, 0.3),
            "c": (0, 0, 0.7, 0.7),
        },
        [],
        id="bursts-split-a-tight-room-by-burst-ratio",
    ),
    pytest.param(
        {"b": burst(10, 20, strong=30), "c": pool()},
        volumes(b=BIG),
        CPU100,
        {"b": {"cpu": 25}, "c": ALL},
        {"b": (0.25, 0, 0, 0.25), "c": (0, 0, 0.75, 0.75)},
        [],
        id="burst-strong-first-no-volume-below-guarantee",
    ),
    pytest.param(
        {"b": burst(10, 20, strong=30), "c": pool()},
        volumes(b=BIG),
        CPU100,
        {"b": {"cpu": 40}, "c": ALL},
        {"b": (0.3, 0.1, 0, 0.4), "c": (0, 0, 0.6, 0.6)},
        [],
        id="burst-pays-only-above-strong",
    ),
    pytest.param(
        {"b": burst(10, 50), "c": pool()},
        volumes(b=12.0),
        CPU100,
        {"b": ALL, "c": ALL},
        {"b": (0, 0.2, 0.4, 0.6), "c": (0, 0, 0.4, 0.4)},
        [],
        id="burst-limited-to-volume-over-smooth-period",
    ),
    pytest.param(
        {"s": pool(strong=80), "r1": relaxed(10), "r2": relaxed(10)},
        volumes(r1=12.0, r2=6.0),
        CPU100,
        {"s": ALL, "r1": ALL, "r2": ALL},
        {
            "s": (0.8, 0, 0, 0.8),
            "r1": (0, 0.4 / 3, 0, 0.4 / 3),
            "r2": (0, 0.2 / 3, 0, 0.2 / 3),
        },
        [],
        id="relaxed-share-availability-by-volume",
    ),
    pytest.param(
        {"s": pool(strong=80), "r": relaxed(20)},
        volumes(r=600.0),
        CPU100,
        {"s": {"cpu": 10}, "r": ALL},
        {"s": (0.1, 0, 0, 0.1), "r": (0, 0.6, 0.3, 0.9)},
        [],
        id="relaxed-takes-idle-strong-capped-at-3x-flow",
    ),
    pytest.param(
        {"b": burst(10, 50), "r": relaxed(20)},
        volumes(b=BIG, r=BIG),
        CPU100,
        {"b": ALL, "r": ALL},
        {"b": (0, 0.5, 0, 0.5), "r": (0, 0.5, 0, 0.5)},
        [],
        id="relaxed-gets-what-bursts-leave",
    ),
    pytest.param(
        {
            "s": pool(strong=60),
            "p": pool(limit=20, resource_flow={"cpu": 15}),
            "r1": relaxed(15, "p"),
            "r2": relaxed(10),
        },
        volumes(r1=180.0, r2=60.0),
        CPU100,
        {"s": ALL, "r1": ALL, "r2": ALL},
        {
            "s": (0.6, 0, 0, 0.6),
            "r1": (0, 0.2, 0, 0.2),
            "p": (0, 0.2, 0, 0.2),
            "r2": (0, 0.2, 0, 0.2),
        },
        [],
        id="ancestor-limit-applied-inside-relaxed-fill",
    ),
    pytest.param(
        {"r": relaxed(10)},
        volumes(r=0.0),
        CPU100,
        {"r": ALL},
        {"r": (0, 0, 1, 1)},
        [],
        id="relaxed-without-volume-pays-nothing",
    ),
    pytest.param(
        {"b": burst(10, 30), "x": pool("b"), "y": pool("b", weight=3), "c": pool()},
        volumes(b=BIG),
        CPU100,
        {"x": ALL, "y": ALL, "c": ALL},
        {
            "b": (0, 0.3, 0.35, 0.65),
            "x": (0, 0, 0.1625, 0.1625),
            "y": (0, 0, 0.4875, 0.4875),
            "c": (0, 0, 0.35, 0.35),
        },
        [],
        id="integral-pool-with-children-spreads-by-weight",
    ),
    pytest.param(
        {"a": pool(), "b": pool()},
        None,
        {"cpu": 100, "memory": 1000},
        {"a": {"cpu": 10, "memory": 500}, "b": {"cpu": 80}},
        {"a": (0, 0, 0.5, 0.5), "b": (0, 0, 0.5, 0.5)},
        [],
        id="dominant-resource",
    ),
    pytest.param(
        {"a": {"resource_limits": {"nvidia.com/gpu": 1}}, "b": pool()},
        None,
        {"cpu": 100, "nvidia.com/gpu": 0},
        {"a": {"cpu": 30, "nvidia.com/gpu": 8}, "b": {"cpu": 10}},
        {"a": (0, 0, 0.3, 0.3), "b": (0, 0, 0.1, 0.1)},
        [],
        id="resource-with-zero-total-takes-no-part",
    ),
    pytest.param(
        {"a": pool(strong=50), "b": burst(10, 20)},
        volumes(b=BIG),
        {"cpu": 0},
        {"a": ALL, "b": ALL},
        {"a": (0, 0, 0, 0), "b": (0, 0, 0, 0)},
        [],
        id="every-total-zero",
    ),
]


@pytest.mark.parametrize(("pools", "state", "total", "demands", "expected", "alerts"), CASES)
def test_update(
    pools: dict[str, Any],
    state: dict[str, Any] | None,
    total: dict[str, float],
    demands: dict[str, dict[str, float]],
    expected: dict[str, tuple[float, ...]],
    alerts: list[str],
) -> None:
    config = {"pools": pools}
    tree = PoolTree.from_config(config, state)
    shares = tree.update(total, demands, now=1000.0)
    for name, want in expected.items():
        assert tuple(shares[name]) == pytest.approx(want, abs=1e-12), name
    assert tree.alerts == alerts
    root = tree.introspect("<root>")["fair_share"]
    assert isinstance(root, dict)
    top = [name for name, spec in pools.items() if (spec or {}).get("parent") is None]
    assert root["total"] == pytest.approx(sum(shares[t].total for t in top), abs=1e-12)
    exact = ref.update(config, state, total, demands, 1000.0)
    assert exact.alerts == alerts
    for name, share in shares.items():
        assert tuple(share) == pytest.approx([float(x) for x in exact.shares[name]], abs=1e-12)


def test_overcommit_alert_carries_the_factor() -> None:
    tree = PoolTree.from_config({"pools": {"a": pool(strong=60), "b": burst(10, 60)}})
    tree.update(CPU100, {}, now=1.0)
    (alert,) = tree.alert_details
    assert alert["code"] == "guarantee_overcommit"
    assert alert["sum"] == pytest.approx(1.2)
    assert alert["factor"] == pytest.approx(1 / 1.2)
    assert tree.introspect("b")["effective_burst_ratio"] == pytest.approx(0.5)
    assert tree.introspect("b")["specified_burst_ratio"] == pytest.approx(0.6)
    tree.update({"cpu": 200}, {}, now=2.0)  # alerts are those of the last update
    assert tree.alerts == []


def test_every_integral_pool_records_its_share_each_update() -> None:
    # YTsaurus defect 3: a relaxed pool skipped for zero volume kept its old charge.
    state = {
        "updated_at": 0.0,
        "pools": {
            "r": {"volume_ratio_s": 0.0, "last_integral_share": 0.3, "last_strong_share": 0.0}
        },
    }
    tree = PoolTree.from_config({"pools": {"r": relaxed(10)}}, state)
    tree.update(CPU100, {"r": ALL}, now=10.0)  # charged 0.3 for 10 s: volume stays at 0
    assert tree.state()["pools"] == {
        "r": {"volume_ratio_s": 0.0, "last_integral_share": 0.0, "last_strong_share": 0.0}
    }
    tree.update(CPU100, {"r": ALL}, now=20.0)  # nothing charged now: it accrues again
    assert tree.volume("r") == pytest.approx(1.0)


def test_every_total_zero_keeps_volumes() -> None:
    state = {
        "updated_at": 0.0,
        "pools": {
            "b": {"volume_ratio_s": 50.0, "last_integral_share": 0.2, "last_strong_share": 0.0}
        },
    }
    tree = PoolTree.from_config({"pools": {"b": burst(10, 20)}}, state)
    tree.update({}, {"b": ALL}, now=100.0)
    assert tree.volume("b") == 50.0
    assert tree.state()["updated_at"] == 100.0
    tree.update(CPU100, {"b": ALL}, now=110.0)  # nothing was granted, so nothing charged
    assert tree.volume("b") == pytest.approx(50.0 + 0.1 * 10)


BAD_INPUTS = [
    pytest.param({"cpu": -1}, {}, 2.0, None, "invalid_total", None, id="negative-total"),
    pytest.param({"cpu": math.nan}, {}, 2.0, None, "invalid_total", None, id="nan-total"),
    pytest.param([100], {}, 2.0, None, "invalid_total", None, id="total-not-a-map"),
    pytest.param(CPU100, {"nope": ALL}, 2.0, None, "unknown_pool", "nope", id="unknown-pool"),
    pytest.param(CPU100, {"team": ALL}, 2.0, None, "not_a_leaf", "team", id="demand-on-parent"),
    pytest.param(
        CPU100, {"a": {"cpu": -1}}, 2.0, None, "invalid_demand", "a", id="negative-demand"
    ),
    pytest.param(
        CPU100,
        {"a": {"cpu": 1, "memory": math.inf}},
        2.0,
        None,
        "invalid_demand",
        "a",
        id="infinite-demand",
    ),
    pytest.param(CPU100, {"a": {"cpu": "1"}}, 2.0, None, "invalid_demand", "a", id="string"),
    pytest.param(CPU100, {"a": 5}, 2.0, None, "invalid_demand", "a", id="demand-not-a-map"),
    pytest.param(CPU100, {}, 2.0, {"a": {"cpu": math.nan}}, "invalid_usage", "a", id="nan-usage"),
    pytest.param(CPU100, {}, math.nan, None, "invalid_time", None, id="nan-time"),
]


@pytest.mark.parametrize(("total", "demands", "now", "usages", "code", "pool_name"), BAD_INPUTS)
def test_bad_inputs_change_nothing(
    total: Any, demands: Any, now: float, usages: Any, code: str, pool_name: str | None
) -> None:
    config = {"pools": {"team": pool(), "a": pool("team"), "b": burst(10, 20)}}
    tree = PoolTree.from_config(config, volumes(b=30.0), now=0.0)
    tree.update(CPU100, {"a": ALL, "b": ALL}, now=1.0)
    before = (tree.state(), tree.shares(), tree.alerts, tree.introspect("b"))
    with pytest.raises(PoolInputError) as caught:
        tree.update(total, demands, now, usages)
    assert caught.value.code == code
    assert caught.value.pool == pool_name
    assert (tree.state(), tree.shares(), tree.alerts, tree.introspect("b")) == before


def test_ratios_follow_the_total() -> None:
    tree = PoolTree.from_config({"pools": {"r": relaxed(100, strong=50, limit=80)}})
    tree.update({"cpu": 1000}, {}, now=1.0)
    first = tree.introspect("r")
    tree.update({"cpu": 500}, {}, now=2.0)
    second = tree.introspect("r")
    assert (first["specified_resource_flow_ratio"], second["specified_resource_flow_ratio"]) == (
        0.1,
        0.2,
    )
    assert (first["strong_guarantee_share"], second["strong_guarantee_share"]) == (0.05, 0.1)
    assert (first["limit_share"], second["limit_share"]) == (0.08, 0.16)
