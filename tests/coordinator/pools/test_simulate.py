"""Simulation (spec section 8): the timeline's shapes, substeps, warnings, the output's
JSON shape, errors before anything runs, and equality with plain updates."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from coordinator.pools import PoolConfigError, PoolInputError, PoolTree, simulate
from tests.coordinator.pools.trees import burst, pool, relaxed, tree_config, volumes

CONFIG = tree_config(
    {"prod": burst(100, 300), "research": relaxed(100), "batch": pool(weight=2)},
    smooth_period=60,
)
TOTAL = {"cpu": 1000}
BUSY = {"prod": {"cpu": 300}, "research": {"cpu": 500}, "batch": {"cpu": 1000}}

POOL_KEYS = {
    "integral_guarantee_type",
    "strong",
    "integral",
    "weight_proportional",
    "total",
    "demand",
    "usage",
    "demand_resources",
    "usage_resources",
    "volume",
    "accumulated_resource_volume",
    "integral_pool_capacity",
    "estimated_burst_usage_duration_seconds",
}


def test_output_shape_is_plain_json() -> None:
    steps = simulate(CONFIG, TOTAL, [{"dt": 120, "demands": BUSY}], substep=60)
    assert [s["time"] for s in steps] == [60.0, 120.0]
    step = steps[0]
    assert set(step) == {"time", "entry", "dt", "total", "alerts", "warnings", "pools"}
    assert set(step["pools"]) == {"<root>", "prod", "research", "batch"}
    for values in step["pools"].values():
        assert set(values) == POOL_KEYS
    assert step["pools"]["batch"]["volume"] is None
    assert step["pools"]["prod"]["volume"] == pytest.approx(0.1 * 60)
    assert json.loads(json.dumps(steps, allow_nan=False)) == steps


def test_usage_is_what_was_received() -> None:
    (step,) = simulate(
        CONFIG,
        {"cpu": 1000, "memory": 100},
        [{"dt": 1, "demands": {"batch": {"cpu": 2000, "memory": 10}}}],
    )
    batch = step["pools"]["batch"]
    assert batch["total"] == 1.0
    assert batch["usage_resources"] == {"cpu": 1000.0, "memory": 10.0}  # min(T * total, demand)
    assert batch["demand_resources"] == {"cpu": 2000, "memory": 10}
    assert batch["demand"] == 2.0
    assert step["pools"]["<root>"]["demand_resources"] == {"cpu": 2000, "memory": 10}


def test_given_usages_are_reported() -> None:
    (step,) = simulate(
        CONFIG, TOTAL, [{"dt": 1, "demands": BUSY, "usages": {"batch": {"cpu": 100}}}]
    )
    assert step["pools"]["batch"]["usage"] == pytest.approx(0.1)
    assert step["pools"]["batch"]["usage_resources"] == {"cpu": 100}
    assert step["pools"]["prod"]["usage"] == 0.0


@pytest.mark.parametrize(
    "timeline",
    [
        pytest.param([{"dt": 60, "demands": BUSY}, {"dt": 90, "demands": {}}], id="dt"),
        pytest.param(
            [{"duration": 60, "demands": BUSY}, {"duration": 90, "demands": {}}], id="duration"
        ),
        pytest.param([{"at": 60, "demands": BUSY}, {"at": 150, "demands": {}}], id="at"),
        pytest.param([{"at": 60, "demands": BUSY}, {"dt": 90}], id="mixed"),
    ],
)
def test_timeline_forms_agree(timeline: list[dict[str, Any]]) -> None:
    steps = simulate(CONFIG, TOTAL, timeline, substep=30)
    assert [(s["time"], s["entry"], s["dt"]) for s in steps] == [
        (30.0, 0, 30.0),
        (60.0, 0, 30.0),
        (90.0, 1, 30.0),
        (120.0, 1, 30.0),
        (150.0, 1, 30.0),
    ]
    reference = simulate(CONFIG, TOTAL, [{"dt": 60, "demands": BUSY}, {"dt": 90}], substep=30)
    assert steps == reference


def test_substeps_are_equal_and_end_on_the_entry() -> None:
    steps = simulate(CONFIG, TOTAL, [{"dt": 100, "demands": BUSY}], substep=30)
    assert [s["time"] for s in steps] == [25.0, 50.0, 75.0, 100.0]  # ceil(100 / 30) = 4


def test_a_simulation_is_a_sequence_of_updates() -> None:
    state = volumes(prod=40.0, research=10.0)
    steps = simulate(
        CONFIG, TOTAL, [{"dt": 10, "demands": BUSY}, {"dt": 20, "demands": {}}], state, start=5.0
    )
    tree = PoolTree.from_config(CONFIG, state, now=5.0)
    for step, (now, demands) in zip(steps, [(15.0, BUSY), (35.0, {})], strict=True):
        shares = tree.update(TOTAL, demands, now)
        assert step["time"] == now
        for name, share in shares.items():
            assert {k: step["pools"][name][k] for k in share._fields} == share.as_dict()
        assert step["pools"]["prod"]["volume"] == tree.volume("prod")


def test_start_defaults_to_the_states_time() -> None:
    state = {"updated_at": 100.0, "pools": {"prod": {"volume_ratio_s": 1.0}}}
    (step,) = simulate(CONFIG, TOTAL, [{"dt": 10}], state)
    assert step["time"] == 110.0
    assert step["pools"]["prod"]["volume"] == pytest.approx(1.0 + 0.1 * 10)


def test_shares_as_demands_and_a_total_per_entry() -> None:
    steps = simulate(
        CONFIG,
        TOTAL,
        [
            {"dt": 1, "demands": {"batch": 0.25}},
            {"dt": 1, "demands": {"batch": 0.25}, "total": {"cpu": 2000, "memory": 10}},
        ],
    )
    assert steps[0]["pools"]["batch"]["demand_resources"] == {"cpu": 250.0}
    assert steps[1]["pools"]["batch"]["demand_resources"] == {"cpu": 500.0, "memory": 2.5}
    assert steps[1]["total"] == {"cpu": 2000, "memory": 10}
    assert [s["pools"]["batch"]["total"] for s in steps] == [0.25, 0.25]


def test_long_steps_warn() -> None:
    steps = simulate(CONFIG, TOTAL, [{"dt": 600, "demands": BUSY}, {"dt": 60}])
    assert len(steps[0]["warnings"]) == 1
    assert "smooth_period" in steps[0]["warnings"][0]
    assert steps[1]["warnings"] == []
    substepped = simulate(CONFIG, TOTAL, [{"dt": 600, "demands": BUSY}], substep=60)
    assert all(s["warnings"] == [] for s in substepped)


def test_alerts_per_step() -> None:
    config = tree_config({"a": pool(strong=800), "b": burst(100, 400)})
    steps = simulate(config, TOTAL, [{"dt": 1}, {"dt": 1, "total": {"cpu": 2000}}])
    assert [s["alerts"] for s in steps] == [["guarantee_overcommit"], []]


def test_inputs_are_not_modified() -> None:
    config = copy.deepcopy(CONFIG)
    state = volumes(prod=5.0)
    timeline = [{"dt": 10, "demands": copy.deepcopy(BUSY)}]
    saved = copy.deepcopy((config, state, timeline))
    simulate(config, TOTAL, timeline, state, substep=1)
    assert (config, state, timeline) == saved


BAD = [
    pytest.param([{"demands": {}}], None, "invalid_timeline", id="no-timing"),
    pytest.param([{"dt": 1, "at": 1}], None, "invalid_timeline", id="two-timings"),
    pytest.param([{"dt": 0}], None, "invalid_timeline", id="zero-length"),
    pytest.param([{"dt": -5}], None, "invalid_timeline", id="negative-length"),
    pytest.param([{"dt": math.nan}], None, "invalid_timeline", id="nan-length"),
    pytest.param([{"at": 10}, {"at": 10}], None, "invalid_timeline", id="at-not-increasing"),
    pytest.param([{"dt": 1, "demand": {}}], None, "invalid_timeline", id="unknown-field"),
    pytest.param([5], None, "invalid_timeline", id="entry-not-a-map"),
    pytest.param({"dt": 1}, None, "invalid_timeline", id="timeline-not-a-list"),
    pytest.param([{"dt": 1, "demands": {"batch": -1}}], None, "invalid_timeline", id="bad-share"),
    pytest.param([{"dt": 1, "demands": [1]}], None, "invalid_timeline", id="demands-not-a-map"),
    pytest.param([{"dt": 1}], 0, "invalid_timeline", id="zero-substep"),
    pytest.param([{"dt": 1e9}], 1, "too_many_steps", id="too-many-steps"),
    pytest.param([{"dt": 1, "demands": {"nope": 0.5}}], None, "unknown_pool", id="unknown-pool"),
    pytest.param([{"dt": 1, "total": {"cpu": -1}}], None, "invalid_total", id="bad-total"),
]


@pytest.mark.parametrize(("timeline", "substep", "code"), BAD)
def test_bad_timelines(timeline: Any, substep: float | None, code: str) -> None:
    with pytest.raises(PoolInputError) as caught:
        simulate(CONFIG, TOTAL, timeline, substep=substep)
    assert caught.value.code == code


def test_bad_config_is_a_config_error() -> None:
    with pytest.raises(PoolConfigError) as caught:
        simulate({"pools": {"a": {"weight": -1}}}, TOTAL, [{"dt": 1}])
    assert (caught.value.code, caught.value.pool) == ("invalid_weight", "a")
