"""Agents are untrusted input. A hello whose inventory breaks a rule, or a frame whose
values are out of range, is refused with a reason, changes nothing, and harms nobody else:
above all, no request about the whole cluster (deploy, plan) or about another node fails
because of it."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

import aiohttp
import msgpack
import pytest

from coordinator.keys import REGISTRY
from shared.bounds import MAX_MESSAGE
from tests.coordinator.conftest import (
    NAMESPACE,
    Coordinator,
    frame,
    hello,
    inventory,
    receive_close,
    receive_frame,
    register,
)

GiB = 2**30
DEPLOYMENTS = f"/v1/namespaces/{NAMESPACE}/deployments"
PLAN = {"request": {"cpu": "0.5", "memory": "64Mi"}, "count": 1}
POLICY_VIOLATION = aiohttp.WSCloseCode.POLICY_VIOLATION
INVALID_FRAME = aiohttp.WSCloseCode.INVALID_TEXT


def deployment(name: str) -> dict[str, Any]:
    resources = {"cpu": "0.5", "memory": "64Mi"}
    return {"name": name, "image": "busybox", "count": 1, "resources": resources}


def gpu(index: int, uuid: str, **fields: Any) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": uuid,
        "name": "NVIDIA H100 80GB HBM3",
        "memory": 80 * GiB,
        "pci_bus_id": f"0000:{index + 16:02x}:00.0",
        "numa": 0,
        "mig_enabled": False,
        "mig_devices": [],
    } | fields


def mig(uuid: str, memory: int = 10 * GiB) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "profile": "1g.10gb",
        "gpu_instance_id": 9,
        "compute_instance_id": 0,
        "memory": memory,
    }


def changed(edit: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    """The test host's inventory with ``edit`` applied to it."""
    wire = inventory()
    edit(wire)
    return wire


def cpu(index: int, **fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda wire: wire["cpus"][index].update(fields)


def numa(**fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda wire: wire["numa_nodes"][0].update(fields)


def fields(**values: Any) -> Callable[[dict[str, Any]], object]:
    return lambda wire: wire.update(values)


# (what is wrong, the inventory, how the refusal's message starts)
BAD_INVENTORIES = [
    ("negative-memory", fields(memory=-5), "inventory.memory = -5: Expected `int` >= 1"),
    ("no-memory", fields(memory=0), "inventory.memory = 0: Expected `int` >= 1"),
    ("petabytes", fields(memory=2**60), f"inventory.memory = {2**60}: Expected `int` <= {2**50}"),
    ("memory-as-float", fields(memory=math.nan), "inventory.memory = nan: Expected `int`"),
    ("negative-cpu", cpu(0, id=-1), "inventory.cpus[0].id = -1: Expected `int` >= 0"),
    ("cpus-not-a-list", fields(cpus="all"), "inventory.cpus = 'all': Expected `array`"),
    ("long-hostname", fields(hostname="h" * 300), "inventory.hostname = 'hhhhh"),
    ("cpu-on-no-node", cpu(1, numa=7), "inventory.cpus[1].numa = 7: names no NUMA node"),
    ("core-above-cpu", cpu(0, core=1), "inventory.cpus[0].core = 1: is above the CPU's own"),
    ("offline-core", cpu(1, core=5), "inventory.cpus[1].core = 5: names no CPU of cpus"),
    ("online-unknown", fields(online="0-3"), "inventory.online = '0-3': names CPUs 2-3"),
    ("reserved-unknown", fields(reserved="9"), "inventory.reserved = '9': names CPUs 9"),
    ("node-cpus-differ", numa(cpus="0"), "inventory.numa_nodes[0].cpus = '0': differs"),
    (
        "node-memory-above-host",
        numa(memory=2 * GiB),
        f"inventory.numa_nodes[0].memory = {2 * GiB}: is above the host's memory",
    ),
    (
        "distance-to-no-node",
        numa(distances={0: 10, 3: 20}),
        "inventory.numa_nodes[0].distances = {0: 10, 3: 20}: names NUMA nodes [3]",
    ),
    (
        "distance-below-local",
        numa(distances={0: 5}),
        "inventory.numa_nodes[0].distances[...]: Expected `int` >= 10",
    ),
    (
        "gpu-without-memory",
        fields(gpus=[gpu(0, "GPU-a", memory=0)]),
        "inventory.gpus[0].memory = 0: Expected `int` >= 1",
    ),
    (
        "gpu-without-uuid",
        fields(gpus=[gpu(0, "")]),
        "inventory.gpus[0].uuid = '': Expected `str` of length >= 1",
    ),
    (
        "same-uuid-twice",
        fields(gpus=[gpu(0, "GPU-a"), gpu(1, "GPU-a")]),
        "inventory.gpus[1].uuid = 'GPU-a': repeats gpus[0].uuid",
    ),
    (
        "mig-on-a-whole-gpu",
        fields(gpus=[gpu(0, "GPU-a", mig_devices=[mig("MIG-a")])]),
        "inventory.gpus[0].mig_devices = 1: a GPU that is not in MIG mode",
    ),
    (
        "mig-larger-than-its-gpu",
        fields(gpus=[gpu(0, "GPU-a", mig_enabled=True, mig_devices=[mig("MIG-a", 90 * GiB)])]),
        f"inventory.gpus[0].mig_devices[0].memory = {90 * GiB}: is above its GPU's memory",
    ),
    (
        "extended-gpu",
        fields(extended={"nvidia.com/gpu": 1}),
        "inventory.extended = 'nvidia.com/gpu': is discovered on the host",
    ),
    (
        "extended-negative",
        fields(extended={"example.com/fpga": -1}),
        "inventory.extended[...]: Expected `int` >= 0",
    ),
    (
        "too-many-problems",
        fields(problems=["p"] * 65),
        "inventory.problems = ['p', 'p'",
    ),
]


async def refusal(ws: aiohttp.ClientWebSocketResponse) -> tuple[str, str, int | None]:
    """The code and message of the error frame the coordinator sent, and its close code."""
    error = await receive_frame(ws)
    assert error["type"] == "error", error
    return error["code"], error["message"], await receive_close(ws)


async def say_hello(coordinator: Coordinator, data: bytes) -> tuple[str, str, int | None]:
    """Connect, send ``data`` as the first frame, and read what came back."""
    ws = await coordinator.connect()
    await ws.send_bytes(data)
    return await refusal(ws)


@pytest.mark.parametrize(
    ("wire", "message"),
    [pytest.param(changed(edit), message, id=name) for name, edit, message in BAD_INVENTORIES],
)
async def test_a_hello_with_a_bad_inventory_is_refused_naming_field_and_value(
    coordinator: Coordinator, wire: dict[str, Any], message: str
) -> None:
    code, said, close = await say_hello(coordinator, hello("node-a", inventory=wire))
    assert (code, close) == ("invalid_inventory", POLICY_VIOLATION)
    assert said.startswith(message), said
    assert (await coordinator.get_json("/v1/nodes"))["nodes"] == []
    assert await coordinator.stored_nodes() == []


async def test_one_bad_agent_does_not_break_placement_anywhere(cluster: Coordinator) -> None:
    """As seen: a node with memory -5 was registered, and while it was ready every
    deploy and plan in the cluster, and every admin lever on it, answered 500."""
    good = await register(cluster, "node-a")
    bad = await cluster.connect()
    await bad.send_bytes(hello("node-bad", inventory=inventory() | {"memory": -5}))
    answer = await receive_frame(bad)
    requests = [
        ("POST", DEPLOYMENTS, deployment("web")),
        ("POST", "/v1/plans", PLAN),
        ("GET", "/v1/nodes/node-a/allocation", None),
        ("GET", "/v1/nodes", None),
        ("GET", "/v1/nodes/node-bad/allocation", None),
        ("POST", "/v1/nodes/node-bad/cordon", None),
    ]
    answers = await asyncio.gather(*(cluster.call(*request) for request in requests))
    assert [status for status, _ in answers] == [201, 200, 200, 200, 404, 404], answers
    assert [n["name"] for n in answers[3][1]["nodes"]] == ["node-a"]
    assert (answer["code"], answer["message"]) == (
        "invalid_inventory",
        "inventory.memory = -5: Expected `int` >= 1",
    )
    assert await receive_close(bad) == POLICY_VIOLATION
    for lever in ("cordon", "uncordon", "drain"):
        status, body = await cluster.call("POST", f"/v1/nodes/node-a/{lever}")
        assert status == 200, body
    await cluster.assert_nodes_match_store()
    await good.close()


async def test_a_refused_hello_is_an_event_a_metric_and_a_warning(
    coordinator: Coordinator, allot_logs: pytest.LogCaptureFixture
) -> None:
    await say_hello(coordinator, hello("node-bad", inventory=inventory() | {"memory": -5}))
    events = await coordinator.get_json("/v1/events?kind=refused")
    assert [(e["node"], e["reason"]) for e in events["events"]] == [
        ("node-bad", "invalid_inventory: inventory.memory = -5: Expected `int` >= 1")
    ]
    metrics = await (await coordinator.get("/metrics", token=None)).text()
    assert 'allot_agent_protocol_errors_total{code="invalid_inventory"} 1.0' in metrics
    warnings = [
        r for r in allot_logs.records if r.levelno == logging.WARNING and "refused" in r.message
    ]
    assert len(warnings) == 1
    assert "inventory.memory = -5" in str(warnings[0].__dict__["allot_fields"]["reason"])


async def test_a_refused_hello_leaves_the_node_and_its_session_as_they_were(
    cluster: Coordinator,
) -> None:
    first = await register(cluster, "node-a")
    before = await cluster.get_json("/v1/nodes/node-a")
    answers = await asyncio.gather(
        *(
            say_hello(cluster, hello("node-a", inventory=wire))
            for wire in (inventory() | {"memory": -5}, changed(cpu(1, numa=7)))
        )
    )
    assert [code for code, _, _ in answers] == ["invalid_inventory"] * 2
    assert await cluster.get_json("/v1/nodes/node-a") == before
    await first.send_bytes(frame("heartbeat"))
    await first.send_bytes(frame("status", applied_revision=0, problems=["disk slow"]))
    for _ in range(50):
        if (await cluster.get_json("/v1/nodes/node-a"))["state"] == "degraded":
            break
        await asyncio.sleep(0.02)
    assert (await cluster.get_json("/v1/nodes/node-a"))["reason"] == "disk slow"
    assert not first.closed
    await cluster.assert_nodes_match_store()
    await first.close()


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"token": "not-the-join-token-0123"}, "unauthorized"),
        ({"protocol": 2}, "protocol_version"),
        ({"node": "Node_A"}, "invalid_node_name"),
    ],
    ids=["token", "protocol", "name"],
)
async def test_who_says_hello_is_checked_before_the_inventory(
    coordinator: Coordinator, overrides: dict[str, Any], code: str
) -> None:
    data = hello(**({"node": "node-a", "inventory": inventory() | {"memory": -5}} | overrides))
    assert (await say_hello(coordinator, data))[0] == code
    assert (await coordinator.get_json("/v1/events?kind=refused"))["events"] == []


def status(**container: Any) -> bytes:
    """A status frame reporting one container, with ``container``'s fields."""
    return frame(
        "status", applied_revision=0, containers=[{"id": "c", "state": "running"} | container]
    )


BAD_STATUSES = {
    "cpu-nan": status(cpu_usage=math.nan),
    "cpu-inf": status(cpu_usage=math.inf),
    "cpu-negative": status(cpu_usage=-0.5),
    "cpu-huge": status(cpu_usage=1e300),
    "memory-negative": status(memory_usage=-1),
    "memory-huge": status(memory_usage=2**63),
    "exit-code-huge": status(exit_code=2**40),
    "revision-negative": status(revision=-1),
    "limits-below-minus-one": status(limits={"cpu_quota": -7}),
    "swap-unknown": status(replacing="maybe"),
    "long-error": status(error="e" * 5000),
    "long-id": status(id="c" * 300),
    "many-drift-notes": status(drift=["cpu_shares 2 -> 717"] * 65),
    "drift-time-nan": status(drift=["cpu_shares 2 -> 717"], drift_at=math.nan),
    "drift-time-far": status(drift=["cpu_shares 2 -> 717"], drift_at=1e300),
    "drift-time-negative": status(drift=["cpu_shares 2 -> 717"], drift_at=-1.0),
    "long-problem": frame("status", applied_revision=0, problems=["p" * 5000]),
    "many-problems": frame("status", applied_revision=0, problems=["p"] * 65),
    "revision-negative-heartbeat": frame("heartbeat", applied_revision=-1),
    "long-error-frame": frame("error", code="x", message="m" * 5000),
}


@pytest.mark.parametrize("data", list(BAD_STATUSES.values()), ids=list(BAD_STATUSES))
async def test_a_frame_out_of_range_ends_only_its_session_and_changes_nothing(
    cluster: Coordinator, data: bytes
) -> None:
    bystander = await register(cluster, "node-b")
    ws = await register(cluster, "node-a")
    before = await cluster.get_json("/v1/nodes/node-a")
    await ws.send_bytes(data)
    code, message, close = await refusal(ws)
    assert (code, close) == ("invalid_frame", INVALID_FRAME)
    assert message.startswith("invalid frame: ")
    events = (await cluster.get_json("/v1/events?kind=refused&node=node-a"))["events"]
    assert [e["reason"] for e in events] == [f"invalid_frame: {message}"]
    assert await cluster.get_json("/v1/nodes/node-a") == before
    await bystander.send_bytes(frame("heartbeat"))
    assert (await cluster.call("POST", DEPLOYMENTS, deployment("web")))[0] == 201
    assert not bystander.closed
    await cluster.assert_nodes_match_store()
    await bystander.close()


async def test_good_and_bad_agents_at_once_leave_memory_as_the_store_has_it(
    cluster: Coordinator,
) -> None:
    """Agents registering, refused and reporting, all at once beside deploys and plans:
    no request fails, each agent gets its own answer, and memory equals the store."""
    veterans = [await register(cluster, f"old-{i}") for i in range(3)]

    async def good(name: str) -> str:
        ws = await register(cluster, name)
        await ws.send_bytes(frame("status", applied_revision=0, problems=[]))
        await ws.send_bytes(frame("heartbeat"))
        return "welcome"

    async def bad(name: str, wire: dict[str, Any]) -> str:
        return (await say_hello(cluster, hello(name, inventory=wire)))[0]

    async def bad_status(ws: aiohttp.ClientWebSocketResponse) -> str:
        await ws.send_bytes(status(memory_usage=-1))
        return (await refusal(ws))[0]

    async def api(method: str, path: str, body: object = None) -> str:
        return str((await cluster.call(method, path, body))[0])

    broken = [changed(edit) for _, edit, _ in BAD_INVENTORIES[:6]]
    answers = await asyncio.gather(
        *(good(f"new-{i}") for i in range(4)),
        *(bad(f"bad-{i}", wire) for i, wire in enumerate(broken)),
        bad("old-0", broken[0]),  # a registered node keeps its record
        bad_status(veterans[1]),
        *(api("POST", DEPLOYMENTS, deployment(f"web-{i}")) for i in range(3)),
        *(api("POST", "/v1/plans", PLAN) for _ in range(3)),
        api("GET", "/v1/nodes"),
    )
    assert (
        answers
        == ["welcome"] * 4
        + ["invalid_inventory"] * 7
        + ["invalid_frame"]
        + ["201"] * 3
        + ["200"] * 4
    )
    names = [record.name for record in cluster.app[REGISTRY].all()]
    assert names == [*(f"new-{i}" for i in range(4)), "old-0", "old-1", "old-2"]
    await cluster.assert_nodes_match_store()
    assert not veterans[0].closed


async def test_sessions_of_one_node_racing_leave_the_record_of_the_one_kept(
    cluster: Coordinator,
) -> None:
    """Several agents say hello as the same node at once, each then reporting a problem
    of its own: the record ends up as the session the coordinator kept says, whatever
    the replaced ones were still saying, and memory equals the store."""

    async def claim(number: int) -> tuple[int, aiohttp.ClientWebSocketResponse]:
        ws = await cluster.connect()
        await ws.send_bytes(hello("node-x", inventory=inventory() | {"hostname": f"h{number}"}))
        await ws.send_bytes(frame("status", applied_revision=0, problems=[f"from h{number}"]))
        await ws.send_bytes(frame("probe"))  # answered once the status was acted on
        while (message := await ws.receive(timeout=5)).type == aiohttp.WSMsgType.BINARY:
            if msgpack.unpackb(message.data)["type"] == "error":
                break
        return number, ws

    claims = await asyncio.gather(*(claim(number) for number in range(6)))
    await asyncio.sleep(0.1)  # the replaced ones' close frames arrive
    kept = [number for number, ws in claims if not ws.closed]
    assert len(kept) == 1, kept
    record = await cluster.get_json("/v1/nodes/node-x")
    assert record["inventory"]["hostname"] == f"h{kept[0]}"
    assert (record["state"], record["reason"]) == ("degraded", f"from h{kept[0]}")
    for _, ws in claims:
        await ws.close()
    await cluster.settled()
    await cluster.assert_nodes_match_store()


async def test_a_long_drift_report_is_one_event_of_bounded_length(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    notes = [f"{i}:" + "x" * (MAX_MESSAGE - 8) for i in range(4)]  # each within bounds
    await ws.send_bytes(status(drift=notes, drift_at=1_800_000_000.0))
    await ws.send_bytes(frame("probe"))  # answered once the status was acted on
    assert (await receive_frame(ws))["code"] == "unknown_type"
    (drift,) = (await cluster.get_json("/v1/events?kind=drift"))["events"]
    assert len(drift["reason"]) == MAX_MESSAGE
    assert drift["reason"].startswith("corrected: 0:xxx")
    assert drift["at"] == 1_800_000_000.0
    await ws.close()
