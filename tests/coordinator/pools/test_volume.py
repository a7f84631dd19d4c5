"""Volumes (spec section 5): the state round trip, the restart credit, configuration
changes, and charging by usage."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from coordinator.pools import PoolTree
from tests.coordinator.pools.trees import burst, pool, relaxed, tree_config

CPU1000 = {"cpu": 1000}


def mixed_tree(**settings: Any) -> dict[str, Any]:
    return tree_config(
        {
            "prod": burst(200, 500, strong=100),
            "team": pool(resource_flow={"cpu": 300}, weight=2),
            "research": relaxed(200, "team"),
            "ml": relaxed(100, "team", multiplier=5),
            "batch": pool(weight=3),
        },
        smooth_period=30,
        **settings,
    )


def inputs(seed: int, steps: int) -> list[tuple[float, dict[str, Any], dict[str, Any]]]:
    """(now, demands, usages) per step: random demands, usages a bit below them."""
    rng = random.Random(seed)
    now = 0.0
    out = []
    for _ in range(steps):
        now += rng.choice((1.0, 7.5, 60.0, 600.0))
        demands = {
            p: {"cpu": rng.choice((0.0, 50.0, 400.0, 1200.0))}
            for p in ("prod", "research", "ml", "batch")
        }
        usages = {p: {"cpu": d["cpu"] * rng.uniform(0.5, 1.0)} for p, d in demands.items()}
        out.append((now, demands, usages))
    return out


@pytest.mark.parametrize(
    "via_json", [pytest.param(False, id="dict"), pytest.param(True, id="json")]
)
@pytest.mark.parametrize(
    "by_usage", [pytest.param(False, id="by-grant"), pytest.param(True, id="by-usage")]
)
@pytest.mark.parametrize("split", [1, 5, 17])
def test_state_round_trip_continues_exactly(via_json: bool, by_usage: bool, split: int) -> None:
    config = mixed_tree(charge_volume_by_usage=by_usage)
    plan = inputs(seed=split, steps=25)
    original = PoolTree.from_config(config, now=0.0)
    for now, demands, usages in plan[:split]:
        original.update(CPU1000, demands, now, usages)
    state = original.state()
    if via_json:
        state = json.loads(json.dumps(state))
    restarted = PoolTree.from_config(config, state)
    assert restarted.state() == original.state()
    for now, demands, usages in plan[split:]:
        assert restarted.update(CPU1000, demands, now, usages) == original.update(
            CPU1000, demands, now, usages
        )
        assert restarted.state() == original.state()
        assert restarted.introspect("prod") == original.introspect("prod")


# (volume before, last integral share, outage in s, saturation period, volume after);
# flow phi = 0.1 (100 of 1000 cores), every amount in share * s.
RESTARTS = [
    pytest.param(5.0, 0.0, 1000.0, 86_400.0, 105.0, id="outage-credited-at-flow"),
    pytest.param(5.0, 0.05, 1000.0, 86_400.0, 55.0, id="persisted-share-charged-too"),
    pytest.param(5.0, 0.3, 1000.0, 86_400.0, 0.0, id="charge-stops-at-zero"),
    pytest.param(5.0, 0.05, 10_000.0, 3600.0, 185.0, id="outage-counted-up-to-one-period"),
    pytest.param(5.0, 0.0, 10_000.0, 3600.0, 360.0, id="credit-stops-at-capacity"),
    pytest.param(500.0, 0.0, 10_000.0, 3600.0, 500.0, id="above-capacity-kept-not-grown"),
    pytest.param(5.0, 0.05, -50.0, 86_400.0, 5.0, id="clock-went-back-nothing-moves"),
]


@pytest.mark.parametrize(("before", "charged", "outage", "period", "after"), RESTARTS)
def test_first_update_after_restart_credits_the_outage(
    before: float, charged: float, outage: float, period: float, after: float
) -> None:
    config = tree_config({"r": relaxed(100)}, pool_capacity_saturation_period=period)
    state = {
        "updated_at": 1000.0,
        "pools": {
            "r": {
                "volume_ratio_s": before,
                "last_integral_share": charged,
                "last_strong_share": 0.0,
            }
        },
    }
    tree = PoolTree.from_config(config, state)
    tree.update(CPU1000, {}, now=1000.0 + outage)
    assert tree.volume("r") == pytest.approx(after)
    assert tree.introspect("r")["accumulated_resource_volume"] == {
        "cpu": pytest.approx(after * 1000)
    }


def test_now_given_to_from_config_overrides_updated_at() -> None:
    config = tree_config({"r": relaxed(100)})
    state = {"updated_at": 0.0, "pools": {"r": {"volume_ratio_s": 0.0}}}
    tree = PoolTree.from_config(config, state, now=900.0)
    assert tree.updated_at == 900.0
    tree.update(CPU1000, {}, now=1000.0)
    assert tree.volume("r") == pytest.approx(10.0)


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(None, id="no-state"),
        pytest.param(
            {
                "updated_at": None,
                "pools": {"r": {"volume_ratio_s": 7.0, "last_integral_share": 0.5}},
            },
            id="state-without-time",
        ),
    ],
)
def test_without_a_previous_time_the_first_update_moves_no_volume(
    state: dict[str, Any] | None,
) -> None:
    tree = PoolTree.from_config(tree_config({"r": relaxed(100)}), state)
    before = tree.volume("r")
    tree.update(CPU1000, {"r": CPU1000}, now=5000.0)
    assert tree.volume("r") == before
    tree.update(CPU1000, {"r": CPU1000}, now=5010.0)  # from now on time counts
    assert tree.volume("r") != before


def test_configuration_changes_keep_or_drop_volumes() -> None:
    old = tree_config(
        {"a": burst(100, 200), "b": relaxed(100), "c": relaxed(100), "d": relaxed(100)}
    )
    tree = PoolTree.from_config(old, now=0.0)
    tree.update(CPU1000, {}, now=100.0)  # 0.1 * 100 s
    assert tree.volume("a") == tree.volume("b") == pytest.approx(10.0)
    new = tree_config(
        {
            "a": relaxed(100),  # burst -> relaxed: keeps its volume
            "b": burst(100, 200),  # relaxed -> burst: keeps its volume
            "c": pool(),  # -> none: dropped
            # d deleted: dropped
            "e": relaxed(100),  # new: starts at 0
        }
    )
    changed = PoolTree.from_config(new, tree.state())
    assert changed.state()["pools"] == {
        "a": {"volume_ratio_s": 10.0, "last_integral_share": 0.0, "last_strong_share": 0.0},
        "b": {"volume_ratio_s": 10.0, "last_integral_share": 0.0, "last_strong_share": 0.0},
        "e": {"volume_ratio_s": 0.0, "last_integral_share": 0.0, "last_strong_share": 0.0},
    }
    assert changed.volume("c") is None
    back = PoolTree.from_config(old, changed.state())
    assert back.volume("c") == back.volume("d") == 0.0


# Burst pool with strong 100 of 1000 cores (SG 0.1), charged 0.2 at the last update,
# V = 100, flow 0; the next update comes 10 s later. (setting, usages, charged share)
CHARGES = [
    pytest.param(False, {"b": {"cpu": 150}}, 0.2, id="off-usage-ignored"),
    pytest.param(True, None, 0.2, id="on-without-usages-charges-grant"),
    pytest.param(True, {"b": {"cpu": 150}}, 0.05, id="on-charges-usage-above-strong"),
    pytest.param(True, {"b": {"cpu": 50}}, 0.0, id="on-usage-below-strong-free"),
    pytest.param(True, {"b": {"cpu": 500}}, 0.2, id="on-at-most-the-grant"),
    pytest.param(True, {}, 0.0, id="on-no-measured-usage-free"),
]


@pytest.mark.parametrize(("by_usage", "usages", "charged"), CHARGES)
def test_charge_volume_by_usage(
    by_usage: bool, usages: dict[str, Any] | None, charged: float
) -> None:
    config = tree_config({"b": burst(0, 300, strong=100)}, charge_volume_by_usage=by_usage)
    state = {
        "updated_at": 0.0,
        "pools": {
            "b": {"volume_ratio_s": 100.0, "last_integral_share": 0.2, "last_strong_share": 0.1}
        },
    }
    tree = PoolTree.from_config(config, state)
    tree.update(CPU1000, {}, now=10.0, usages=usages)
    assert tree.volume("b") == pytest.approx(100.0 - charged * 10)


def test_usage_of_an_integral_pool_sums_its_children() -> None:
    config = tree_config(
        {"b": burst(0, 300), "x": pool("b"), "y": pool("b")}, charge_volume_by_usage=True
    )
    state = {
        "updated_at": 0.0,
        "pools": {"b": {"volume_ratio_s": 100.0, "last_integral_share": 0.2}},
    }
    tree = PoolTree.from_config(config, state)
    tree.update(CPU1000, {}, now=10.0, usages={"x": {"cpu": 100}, "y": {"cpu": 50}})
    assert tree.volume("b") == pytest.approx(100.0 - 0.15 * 10)
    assert tree.introspect("b")["usage_share"] == pytest.approx(0.15)
