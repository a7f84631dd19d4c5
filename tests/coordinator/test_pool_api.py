"""The pool API and its update loop against a real coordinator and a real store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coordinator.config import PoolSettings
from coordinator.pools import PoolConfigError
from coordinator.services.pool_service import CONFIG_KEY, UPDATE_CPU_SHARE, PoolService
from coordinator.store import Store, Txn
from coordinator.store.sqlite import SqliteStore
from tests.coordinator.conftest import API_TOKEN, Coordinator

BURST = {
    "integral_guarantees": {
        "guarantee_type": "burst",
        "resource_flow": {"cpu": 1000},
        "burst_guarantee_resources": {"cpu": 2000},
    }
}
RELAXED = {"integral_guarantees": {"guarantee_type": "relaxed", "resource_flow": {"cpu": 1000}}}
INTROSPECTION = {
    "accumulated_resource_ratio_volume",
    "accumulated_resource_volume",
    "integral_pool_capacity",
    "specified_burst_ratio",
    "specified_resource_flow_ratio",
    "total_burst_ratio",
    "total_resource_flow_ratio",
    "estimated_burst_usage_duration_seconds",
}


async def send(
    coordinator: Coordinator, method: str, path: str, body: object | None = None
) -> tuple[int, Any]:
    response = await coordinator.http.request(
        method,
        coordinator.url + path,
        json=body,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    return response.status, await response.json()


async def test_pools_are_written_and_shown_with_their_introspection(
    coordinator: Coordinator,
) -> None:
    status, view = await send(coordinator, "PUT", "/v1/pools/production", BURST)
    assert status == 200, view
    assert view["name"] == "production"
    assert view["config"] == BURST
    assert set(view["introspection"]) >= INTROSPECTION
    assert view["introspection"]["integral_guarantee_type"] == "burst"
    status, _ = await send(coordinator, "PUT", "/v1/pools/research", RELAXED)
    assert status == 200
    status, listing = await send(coordinator, "GET", "/v1/pools")
    assert status == 200
    assert [pool["name"] for pool in listing["pools"]] == ["<root>", "production", "research"]
    assert "alerts" in listing
    status, root = await send(coordinator, "GET", "/v1/pools/<root>")
    assert (status, root["name"]) == (200, "<root>")


@pytest.mark.parametrize(
    ("name", "pool", "code"),
    [
        ("bad", {"weight": 0}, "invalid_weight"),
        ("bad", {"parent": "nowhere"}, "unknown_parent"),
        ("bad", {"integral_guarantees": {"guarantee_type": "sometimes"}}, "invalid_guarantee_type"),
        ("bad", {"colour": "blue"}, "invalid_config"),
    ],
    ids=["zero-weight", "unknown-parent", "unknown-guarantee-type", "unknown-field"],
)
async def test_a_pool_that_breaks_a_rule_is_422_and_changes_nothing(
    coordinator: Coordinator, name: str, pool: dict[str, Any], code: str
) -> None:
    await send(coordinator, "PUT", "/v1/pools/production", BURST)
    _, before = await send(coordinator, "GET", "/v1/pools")
    status, answer = await send(coordinator, "PUT", f"/v1/pools/{name}", pool)
    assert status == 422, answer
    assert answer["error"]["code"] == code
    assert "bad" in answer["error"]["message"]
    _, after = await send(coordinator, "GET", "/v1/pools")
    assert after == before


async def test_a_parent_with_children_cannot_be_deleted(coordinator: Coordinator) -> None:
    await send(coordinator, "PUT", "/v1/pools/org", {})
    await send(coordinator, "PUT", "/v1/pools/team", {"parent": "org"})
    status, answer = await send(coordinator, "DELETE", "/v1/pools/org")
    assert status == 422, answer
    assert (await send(coordinator, "DELETE", "/v1/pools/team"))[0] == 200
    assert (await send(coordinator, "DELETE", "/v1/pools/org"))[0] == 200
    assert (await send(coordinator, "DELETE", "/v1/pools/org"))[0] == 404
    assert (await send(coordinator, "GET", "/v1/pools/org"))[0] == 404


async def test_the_root_is_configured_in_the_file_not_the_api(coordinator: Coordinator) -> None:
    status, answer = await send(coordinator, "PUT", "/v1/pools/<root>", {})
    assert status == 400
    assert "[pools]" in answer["error"]["message"]


async def test_simulate_runs_the_seed_burst_example_and_commits_nothing(
    coordinator: Coordinator,
) -> None:
    config = {"settings": {"smooth_period": 60}, "pools": {"burst": BURST}}
    body = {
        "config": config,
        "total": {"cpu": 10000},
        # Idle for 10 minutes (volume 0.1 share x 600 s), then asking for all of it:
        # the burst (0.2) while the volume lasts, then the flow (0.1).
        "timeline": [
            {"dt": 600, "demands": {}},
            {"dt": 1800, "demands": {"burst": {"cpu": 10000}}},
        ],
        "substep": 60,
    }
    status, answer = await send(coordinator, "POST", "/v1/pools/simulate", body)
    assert status == 200, answer
    busy = [step["pools"]["burst"] for step in answer["steps"] if step["entry"] == 1]
    assert busy[0]["integral"] == pytest.approx(0.2)
    assert busy[-1]["integral"] == pytest.approx(0.1)
    assert busy[0]["usage_resources"]["cpu"] == pytest.approx(10000)  # alone: all of it
    status, listing = await send(coordinator, "GET", "/v1/pools")
    assert [pool["name"] for pool in listing["pools"]] == ["<root>"]  # nothing was stored


async def test_simulate_refuses_a_bad_timeline(coordinator: Coordinator) -> None:
    body = {"total": {"cpu": 100}, "timeline": "soon"}
    status, answer = await send(coordinator, "POST", "/v1/pools/simulate", body)
    assert status == 400
    assert answer["error"]["code"] == "invalid_request"


async def committed(
    service: PoolService,
    store: Store,
    changes: dict[str, dict[str, Any] | None] | None = None,
    *,
    state: bool = False,
) -> None:
    """What the sequencer does with a batch's pool writes: staged, committed, confirmed."""
    staged = service.staged(changes or {}, state=state)
    await store.commit(Txn(puts=staged.puts))
    service.confirm(staged)


async def test_volumes_survive_a_restart_and_the_gap_is_credited(tmp_path: Path) -> None:
    clock = [1_000_000.0]
    settings = PoolSettings(fair_share_update_period=1.0)
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await PoolService.load(store, settings, wall_clock=lambda: clock[0])
    await committed(service, store, {"research": RELAXED})
    total = {"cpu": 10000.0, "memory": 2.0**40}
    service.update(total)  # the first update: no previous time, no volume yet
    clock[0] += 100
    service.update(total)
    volume = service.view("research").introspection["accumulated_resource_ratio_volume"]  # type: ignore[union-attr]
    assert volume == pytest.approx(0.1 * 100)  # flow 1000 of 10000 cores for 100 s
    assert service.state_due()  # stored with the config, 100 s ago
    await committed(service, store, state=True)
    assert not service.state_due()
    await store.close()

    clock[0] += 50  # the coordinator was down for 50 s
    store = await SqliteStore.open(tmp_path / "allot.db")
    restarted = await PoolService.load(store, settings, wall_clock=lambda: clock[0])
    restarted.update(total)
    after = restarted.view("research").introspection["accumulated_resource_ratio_volume"]  # type: ignore[union-attr]
    assert after == pytest.approx(0.1 * 150)  # the outage is credited
    await store.close()


async def test_an_update_costlier_than_its_share_of_a_core_waits_longer(tmp_path: Path) -> None:
    """At most ``UPDATE_CPU_SHARE`` of a core; volumes accrue by the clock meanwhile
    (the test above: 100 s between two updates gave 100 s of volume)."""
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await PoolService.load(store, PoolSettings(fair_share_update_period=2.0))
    assert service.pause_after(0.0) == 2.0
    assert service.pause_after(0.05) == 2.0  # 2.5 % of the period
    assert service.pause_after(0.24) == pytest.approx(0.24 / UPDATE_CPU_SHARE)  # 4.8 s
    await store.close()


async def test_a_pool_with_containers_and_no_configuration_joins_the_tree_on_demand(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await PoolService.load(store, PoolSettings())
    await committed(service, store, {"prod": {"weight": 2.0}})
    total = {"cpu": 3.0, "memory": 2.0**40}
    shares = service.update(total, {"prod": {"cpu": 3.0}, "team-c": {"cpu": 3.0}})
    # team-c is top level with weight 1: a third of the cluster against prod's weight 2
    assert shares["team-c"].total == pytest.approx(1 / 3)
    assert service.names() == ["prod", "team-c"]
    shown = service.view("team-c")
    assert shown is not None
    assert shown.config == {}
    assert service.config()["pools"]["team-c"] == {}

    # nothing may sit below a pool that exists only on demand
    with pytest.raises(PoolConfigError) as refused:
        service.check({**service.configured(), "batch": {"parent": "team-c"}})
    assert refused.value.code == "unknown_parent"

    # written, it is configured (and stored); its last container gone, an on-demand pool goes
    await committed(service, store, {"team-c": {"weight": 3.0}})
    service.update(total, {"prod": {"cpu": 3.0}, "team-d": {"cpu": 1.0}})
    assert service.names() == ["prod", "team-c", "team-d"]
    (stored,) = [entry.value for entry in await store.range("/pools/") if entry.key == CONFIG_KEY]
    assert sorted(json.loads(stored)) == ["prod", "team-c"]  # pools on demand are not stored
    service.update(total, {"prod": {"cpu": 3.0}})
    assert service.names() == ["prod", "team-c"]
    assert service.view("team-d") is None
    await store.close()
