"""Deployments that need GPUs: whole GPUs and MIG devices handed out by UUID, never
twice, on the nodes that have them; counted against quotas as GPU memory."""

from __future__ import annotations

from typing import Any

import msgspec

from agent.discovery.gpu import probe_gpus
from shared.codec import to_builtins
from tests.builders import make_inventory
from tests.coordinator.conftest import (
    API_TOKEN,
    Coordinator,
    hello,
    receive_frame,
)
from tests.fakes.nvml import eight_whole_gpus, two_gpus_mig_mixed

DEPLOYMENTS = "/v1/namespaces/team-a/deployments"


def gpu_inventory() -> dict[str, Any]:
    """The two-CPU test host with two whole H100s and one A100 in MIG mode."""
    whole = probe_gpus(eight_whole_gpus(), lambda _: None).gpus[:2]
    (a100, *_) = probe_gpus(two_gpus_mig_mixed(), lambda _: None).gpus
    mig = msgspec.structs.replace(a100, index=len(whole))  # GPU indices are distinct
    inventory = msgspec.structs.replace(make_inventory(), gpus=[*whole, mig])
    wire: dict[str, Any] = to_builtins(inventory)
    return wire


async def register_gpu_node(coordinator: Coordinator, node: str = "gpu-a") -> Any:
    ws = await coordinator.connect()
    await ws.send_bytes(hello(node, inventory=gpu_inventory()))
    assert (await receive_frame(ws))["type"] == "welcome"
    return ws


async def post(coordinator: Coordinator, body: dict[str, Any]) -> tuple[int, Any]:
    response = await coordinator.http.post(
        coordinator.url + DEPLOYMENTS, json=body, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    return response.status, await response.json()


def spec(name: str, count: int, **resources: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "cuda",
        "count": count,
        "resources": {"cpu": "0.1", "memory": "64Mi", **resources},
    }


async def test_whole_gpus_go_to_one_container_each_until_none_is_left(
    cluster: Coordinator,
) -> None:
    ws = await register_gpu_node(cluster)
    inventory = gpu_inventory()
    whole = [gpu["uuid"] for gpu in inventory["gpus"] if not gpu["mig_enabled"]]
    status, answer = await post(cluster, spec("train", 2, gpus=1))
    assert status == 201, answer
    given = [view["record"]["gpus"] for view in answer["containers"]]
    assert sorted(given) == sorted([[uuid] for uuid in whole])
    while (frame := await receive_frame(ws))["type"] != "desired":
        pass
    assert sorted(c["gpus"] for c in frame["containers"]) == sorted(given)
    status, refused = await post(cluster, spec("more", 1, gpus=1))
    assert (status, refused["error"]["code"]) == (409, "insufficient_devices"), refused
    await ws.close()


async def test_mig_devices_go_by_profile(cluster: Coordinator) -> None:
    ws = await register_gpu_node(cluster)
    a100 = next(gpu for gpu in gpu_inventory()["gpus"] if gpu["mig_enabled"])
    small = sorted(d["uuid"] for d in a100["mig_devices"] if d["profile"] == "1g.10gb")
    status, answer = await post(cluster, spec("infer", len(small), mig={"1g.10gb": 1}))
    assert status == 201, answer
    assert sorted(uuid for v in answer["containers"] for uuid in v["record"]["gpus"]) == small
    status, refused = await post(cluster, spec("more", 1, mig={"1g.10gb": 1}))
    assert status == 409, refused
    status, bad = await post(cluster, spec("bad", 1, mig={"3G.40GB": 1}))
    assert (status, bad["error"]["code"]) == (400, "invalid_request"), bad
    await ws.close()


async def test_gpu_memory_in_a_quota_limits_gpu_deployments(cluster: Coordinator) -> None:
    ws = await register_gpu_node(cluster)
    quota = {"namespace": "team-a", "min": {"gpu-memory": 16}, "max": {"gpu-memory": 26}}
    response = await cluster.http.put(
        cluster.url + "/v1/elasticquotas/team-a",
        json=quota,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert response.status == 200, await response.text()
    # a whole GPU counts 16 GB (the default), a 1g.10gb MIG device 10: 16 + 10 <= 26
    assert (await post(cluster, spec("train", 1, gpus=1)))[0] == 201
    assert (await post(cluster, spec("infer", 1, mig={"1g.10gb": 1})))[0] == 201
    status, refused = await post(cluster, spec("more", 1, mig={"1g.10gb": 1}))
    assert (status, refused["error"]["code"]) == (403, "quota_max_exceeded"), refused
    await ws.close()
