"""The seed's examples (spec section 10) as simulations, in cores and cpu * seconds.

Every run starts at t = 0 with the volumes of its state; a step at time t pays for the
share granted at the step before it, so a pool granted a share at t = k holds it during
[k, k + dt).
"""

from __future__ import annotations

import itertools

import pytest

from coordinator.pools import PoolTree
from tests.coordinator.pools.trees import burst, pool, relaxed, run, tree_config, volumes

HOUR, HALF_DAY, DAY = 3600.0, 43_200.0, 86_400.0


@pytest.mark.parametrize(
    ("cores", "minutes"),
    [pytest.param(100, 10, id="100-cpu-10-min"), pytest.param(50, 20, id="50-cpu-20-min")],
)
def test_example_1_volume_in_cpu_seconds(cores: int, minutes: int) -> None:
    # 60 fair_share*sec on 1000 cores; flow 0 ("ignoring inflow"); T_s = 1 s so that the
    # smooth-period tail is one step and the bucket empties exactly.
    config = tree_config({"ops": burst(0, cores)}, smooth_period=1, fair_share_update_period=1)
    steps = run(
        config,
        {"cpu": 1000},
        [{"dt": minutes * 60 + 120, "demands": {"ops": {"cpu": cores}}}],
        volumes(ops=60.0),
        substep=1,
    )
    ops = steps["ops"]
    assert ops["accumulated_resource_volume"][0] == {"cpu": pytest.approx(60_000.0)}
    assert ops["estimated_burst_usage_duration_seconds"][0] == pytest.approx(minutes * 60)
    paying = [k for k, share in enumerate(ops["integral"]) if share * 1000 > cores - 1e-6]
    assert paying == list(range(minutes * 60))  # `cores` from volume for exactly the minutes
    dts = steps["<time>"]["dt"]
    spent = sum(share * 1000 * dt for share, dt in zip(ops["integral"], dts, strict=True))
    assert spent == pytest.approx(60_000.0, abs=1e-6)
    assert ops["volume"][-1] == pytest.approx(0.0, abs=1e-9)
    assert ops["total"][-1] * 1000 == pytest.approx(cores)  # idle cores still come by weight


def test_example_1_with_the_default_smooth_period_tapers() -> None:
    # With T_s = 60 s the pool pays b while V / T_s >= b (the first 54 of 60 share*s,
    # 540 s), then V / T_s: the rest drains exponentially and the total is the same.
    config = tree_config({"ops": burst(0, 100)})
    steps = run(
        config,
        {"cpu": 1000},
        [{"dt": 3600, "demands": {"ops": {"cpu": 100}}}],
        volumes(ops=60.0),
        substep=1,
    )
    ops = steps["ops"]
    full = [k for k, share in enumerate(ops["integral"]) if share > 0.1 - 1e-12]
    assert len(full) == 541  # V = 60 - 0.1 k >= 6 for k = 0..540
    spent = sum(share * 1000 for share in ops["integral"])
    assert spent == pytest.approx(60_000.0, rel=1e-9)


def test_example_2_burst_flow_1000_burst_2000() -> None:
    # 4000 cores; a batch pool of weight 100 takes whatever the burst pool does not hold.
    config = tree_config({"prod": burst(1000, 2000), "batch": pool(weight=100)})
    steps = run(
        config,
        {"cpu": 4000},
        [
            {"dt": HALF_DAY, "demands": {"batch": {"cpu": 4000}}},
            {"dt": DAY, "demands": {"prod": {"cpu": 2000}, "batch": {"cpu": 4000}}},
        ],
        substep=60,
    )
    prod, times = steps["prod"], steps["<time>"]["time"]
    idle_end = times.index(HALF_DAY)
    # 12 idle hours store 1000 * 43,200 cpu*s, which lasts 12 h at net -1000 cpu/s.
    assert prod["accumulated_resource_volume"][idle_end] == {"cpu": pytest.approx(1000 * HALF_DAY)}
    assert prod["estimated_burst_usage_duration_seconds"][idle_end] == pytest.approx(HALF_DAY)
    assert prod["integral_pool_capacity"][idle_end] == {"cpu": pytest.approx(1000 * DAY)}
    bursting = [
        k for k in range(idle_end + 1, len(times)) if prod["integral"][k] * 4000 > 2000 - 1e-6
    ]
    assert bursting == list(range(idle_end + 1, idle_end + 1 + 720))  # 720 steps of 60 s
    assert all(prod["total"][k] * 4000 == pytest.approx(2000) for k in bursting)
    # then the integral share settles at the flow; the rest is the weight share of idle
    # capacity (3000 cores split 1:100 with batch)
    for k in range(bursting[-1] + 1, len(times)):
        assert prod["integral"][k] * 4000 == pytest.approx(1000)
        assert prod["total"][k] * 4000 == pytest.approx(1000 + 3000 / 101)
        assert prod["volume"][k] == pytest.approx(0.25 * 60)  # V -> phi * T_s


def test_example_3_production_and_research_share_2000_cores() -> None:
    config = tree_config({"prod": burst(1000, 2000), "research": relaxed(1000)})
    day = [
        {"dt": HALF_DAY, "demands": {"research": {"cpu": 2000}}},
        {"dt": HALF_DAY, "demands": {"prod": {"cpu": 2000}, "research": {"cpu": 2000}}},
    ]
    steps = run(config, {"cpu": 2000}, day * 2, substep=60)
    times = steps["<time>"]["time"]
    second_day = [k for k, t in enumerate(times) if t > DAY]
    prod_window = [k for k in second_day if times[k] > DAY + HALF_DAY]
    prod = [steps["prod"]["total"][k] * 2000 for k in second_day]
    research = [steps["research"]["total"][k] * 2000 for k in second_day]
    assert all(p + r <= 2000 + 1e-6 for p, r in zip(prod, research, strict=True))
    # production holds 2000 cores for its 12 hours; research averages its 1000 cores
    assert all(steps["prod"]["total"][k] * 2000 == pytest.approx(2000) for k in prod_window)
    assert sum(prod) / len(prod) == pytest.approx(1000)
    assert sum(research) / len(research) == pytest.approx(1000, rel=1e-3)
    # while production bursts, research accumulates 1000 * 43,200 cpu*s
    assert steps["research"]["accumulated_resource_volume"][-1] == {
        "cpu": pytest.approx(1000 * HALF_DAY)
    }
    # strong + burst = 2000/2000 and the flows sum to 1: nothing scaled, no alert
    assert all(alerts == [] for alerts in steps["<time>"]["alerts"])


def test_example_4_the_seeds_graphs() -> None:
    # burst 500, flow 100 on 1000 cores, a full bucket; 8 h of demand, then 2 idle days.
    config = tree_config({"ops": burst(100, 500), "batch": pool(weight=100)})
    steps = run(
        config,
        {"cpu": 1000},
        [
            {"dt": 8 * HOUR, "demands": {"ops": {"cpu": 1000}, "batch": {"cpu": 1000}}},
            {"dt": 2 * DAY, "demands": {"batch": {"cpu": 1000}}},
        ],
        volumes(ops=0.1 * DAY),
        substep=60,
    )
    ops, times = steps["ops"], steps["<time>"]["time"]
    assert ops["integral_pool_capacity"][0] == {"cpu": pytest.approx(100 * DAY)}
    assert ops["estimated_burst_usage_duration_seconds"][0] == pytest.approx(21_600)
    full = [k for k, share in enumerate(ops["integral"]) if share * 1000 > 500 - 1e-6]
    # 21,600 s at 500 cores, less the smooth-period tail (one 60 s step here)
    assert len(full) * 60 == 21_600 - 60
    assert full == list(range(len(full)))
    demand_end = times.index(8 * HOUR)
    assert ops["integral"][demand_end] * 1000 == pytest.approx(100)  # settled at the flow
    # the volume refills to the capacity after the jobs stop, and stays there
    refill = ops["volume"][demand_end:]
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(refill))
    assert refill[-1] == pytest.approx(0.1 * DAY)
    assert max(ops["volume"]) <= 0.1 * DAY + 1e-9


@pytest.mark.parametrize(
    ("tree_multiplier", "pool_multiplier", "volume", "granted"),
    [
        pytest.param(None, None, 6000.0, 3000, id="default-3x-flow"),
        pytest.param(None, 2, 6000.0, 2000, id="pool-multiplier-2"),
        pytest.param(10, None, 6000.0, 5000, id="tree-10x-bounded-by-demand"),
        pytest.param(None, None, 60.0 * 0.15, 1500, id="bounded-by-volume-over-smooth"),
    ],
)
def test_example_5_relaxed_cap(
    tree_multiplier: float | None, pool_multiplier: float | None, volume: float, granted: int
) -> None:
    settings = (
        {} if tree_multiplier is None else {"relaxed_share_multiplier_limit": tree_multiplier}
    )
    config = tree_config(
        {"r": relaxed(1000, multiplier=pool_multiplier), "other": pool(weight=100)}, **settings
    )
    tree = PoolTree.from_config(config, volumes(r=volume))
    shares = tree.update({"cpu": 10_000}, {"r": {"cpu": 5000}, "other": {"cpu": 10_000}}, now=1)
    assert shares["r"].integral * 10_000 == pytest.approx(granted)


def test_volume_cap_is_flow_times_saturation_period() -> None:
    config = tree_config({"r": relaxed(100)}, pool_capacity_saturation_period=3600)
    steps = run(config, {"cpu": 1000}, [{"dt": 2 * HOUR, "demands": {}}], substep=60)
    times, volume = steps["<time>"]["time"], steps["r"]["volume"]
    assert volume == [pytest.approx(min(0.1 * t, 360.0)) for t in times]
    assert steps["r"]["integral_pool_capacity"][-1] == {"cpu": pytest.approx(100 * 3600)}


def test_capacity_does_not_trim_a_larger_volume() -> None:
    # resource_flow was lowered: the old volume stays, is spent, and is never refilled
    # above the new capacity.
    config = tree_config({"r": relaxed(10)}, pool_capacity_saturation_period=100)
    tree = PoolTree.from_config(config, volumes(r=50.0), now=0.0)  # capacity 0.01 * 100 = 1
    tree.update({"cpu": 1000}, {}, now=60.0)
    assert tree.volume("r") == 50.0
    tree.update({"cpu": 1000}, {"r": {"cpu": 1000}}, now=120.0)  # grants 3 x flow = 0.03
    tree.update({"cpu": 1000}, {}, now=150.0)  # pays 30 s of it, gains 30 s of flow
    assert tree.volume("r") == pytest.approx(50.0 + (0.01 - 0.03) * 30)
    tree.update({"cpu": 1000}, {}, now=100_000.0)  # idle for a day: refills to max(V, 1)
    assert tree.volume("r") == pytest.approx(50.0 + (0.01 - 0.03) * 30)
