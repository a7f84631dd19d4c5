"""schemathesis runs ``/v1/openapi.json`` against a live coordinator: every operation,
with an admin token and then with a namespace token, checking that no answer is a server
error, that every status is one the document declares for the operation, and that every
body and content type match the document.

The coordinator is the real aiohttp app on a loopback port with its SQLite store. Three
nodes are websocket clients that said hello with what an agent discovers on a two-CPU
host, on a recorded four-NUMA host, and on a host with whole GPUs and MIG devices.
Quotas, pools, a lease template and a lease, deployments and a container in the middle
of a swap exist before the run, and their names are given to schemathesis as
dictionaries it draws path parameters from half the time, so that it reaches past 404.

The run is schemathesis's own command line (every phase: examples, coverage, fuzzing,
stateful), with a fixed seed and a bounded number of examples per operation:
``ALLOT_FUZZ_EXAMPLES``, 25 unless set, which keeps the test near two minutes on two
cores; ``ALLOT_FUZZ_EXAMPLES=100`` is the issue's figure. Requests go one at a time, so
that afterwards what the API answers from memory can be compared with the store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.discovery.cpu import HostTotals
from agent.discovery.inventory import discover
from coordinator.auth_failures import FailureBook
from coordinator.keys import DEPLOYMENTS, STORE
from shared.codec import to_builtins
from shared.cpuset import CpuSet
from tests.coordinator.conftest import (
    API_TOKEN,
    NAMESPACE_TOKEN,
    Coordinator,
    config_for,
    hello,
    inventory,
    receive_frame,
    start,
)
from tests.coordinator.test_deployment_api import call
from tests.coordinator.test_gpu_deployments import gpu_inventory
from tests.fakes.nvml import no_library
from tests.fixtures.sysfs import load_fixture, materialize

SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
EXAMPLES = int(os.environ.get("ALLOT_FUZZ_EXAMPLES", "25"))
SEED = 15
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "response_schema_conformance",
    "content_type_conformance",
)
# operation path (a regex) -> {path parameter: the dictionary its values come from}
BINDINGS = {
    r"^/v1/nodes/\{name\}": {"name": "nodes"},
    r"^/v1/namespaces/": {"namespace": "namespaces", "name": "deployments"},
    r"^/v1/containers/\{id\}": {"id": "containers"},
    r"^/v1/pools/\{name\}": {"name": "pools"},
    r"^/v1/resources/\{id\}": {"id": "resources"},
    r"^/v1/(composite)?elasticquotas/": {"name": "quotas"},
}


def numa_inventory(root: Path) -> dict[str, Any]:
    """What the agent discovers on the recorded four-NUMA host with CXL memory."""
    materialize(load_fixture("quad_numa_cxl"), root)
    totals = HostTotals(logical_cpus=1, memory=256 * 1024**3)
    found = discover(
        sysfs_root=root, reserved=CpuSet(), hostname="big", nvml=no_library(), totals=totals
    )
    wire: dict[str, Any] = to_builtins(found)
    return wire


async def join(coordinator: Coordinator, node: str, wire: dict[str, Any]) -> Any:
    ws = await coordinator.connect()
    await ws.send_bytes(hello(node, inventory=wire))
    assert (await receive_frame(ws))["type"] == "welcome"
    return ws


async def ok(coordinator: Coordinator, method: str, path: str, body: object = None) -> Any:
    status, answer = await call(coordinator, method, path, body)
    assert status < 300, (method, path, answer)
    return answer


def deployment(name: str, count: int, **fields: Any) -> dict[str, Any]:
    body = {"name": name, "image": "busybox", "count": count, "command": ["sleep", "3600"]}
    return body | {"resources": {"cpu": "0.5", "memory": "64Mi"}} | fields


async def populate(coordinator: Coordinator, sysfs: Path) -> dict[str, list[str]]:
    """Something of every kind; the names of what the cluster holds, by kind."""
    for team, maximum in (("team-a", {"max": {"cpu": "40"}}), ("team-b", {})):
        quota = {"namespace": team, "min": {"cpu": "1"}} | maximum
        await ok(coordinator, "PUT", f"/v1/elasticquotas/{team}", quota)
    pools = {"team-a": {"weight": 2}, "team-a-batch": {"parent": "team-a"}, "team-b": {}}
    pools["shared"] = {"namespaces": ["team-a"]}
    for name, fields in pools.items():
        await ok(coordinator, "PUT", f"/v1/pools/{name}", fields)
    algorithm = {"kind": "FAIR_SHARE", "lease_length": 600, "refresh_interval": 60}
    await ok(
        coordinator, "PUT", "/v1/resources/db.write", {"capacity": 100, "algorithm": algorithm}
    )
    wants = {"client_id": "web-7", "resources": [{"resource_id": "db.write", "wants": 10}]}
    await ok(coordinator, "POST", "/v1/capacity", wants)
    team_a, team_b = "/v1/namespaces/team-a/deployments", "/v1/namespaces/team-b/deployments"
    await ok(coordinator, "POST", team_a, deployment("web", 2, cpu_bind=True))
    await ok(coordinator, "POST", team_a, deployment("batch", 2, pool="team-a-batch"))
    gpu = {"cpu": "0.5", "memory": "64Mi", "gpus": 1}
    await ok(coordinator, "POST", team_a, deployment("train", 1, resources=gpu))
    await ok(coordinator, "POST", team_b, deployment("web", 1))
    listed = await ok(coordinator, "GET", "/v1/containers?namespace=team-a&deployment=web")
    old = listed["containers"][0]["record"]["id"]
    await ok(coordinator, "POST", f"/v1/containers/{old}/replace", {"image": "busybox:2"})
    listed = await ok(coordinator, "GET", "/v1/containers")
    return {
        "nodes": ["node-a", "node-big", "node-gpu"],
        "namespaces": ["team-a", "team-b"],
        "deployments": ["web", "batch", "train"],
        "containers": sorted({old, *(view["record"]["id"] for view in listed["containers"])}),
        "pools": [*pools, "<root>"],
        "resources": ["db.write"],
        "quotas": ["team-a", "team-b"],
    }


def config_file(path: Path, names: dict[str, list[str]]) -> Path:
    """schemathesis.toml: the dictionaries, and which path parameters draw from them. No
    cache: a run must not replay what an earlier one found, nor leave files behind."""
    lines = ["cache = { enabled = false }", ""]
    for kind, values in names.items():
        lines += [f"[dictionaries.{kind}]", f"values = {json.dumps(values)}", ""]
    for regex, parameters in BINDINGS.items():
        bound = ", ".join(
            f'"path.{name}" = {{ dictionary = "{kind}", probability = 0.5 }}'
            for name, kind in parameters.items()
        )
        lines += ["[[operations]]", f"include-path-regex = {json.dumps(regex)}"]
        lines += [f"parameters = {{ {bound} }}", ""]
    path.write_text("\n".join(lines))
    return path


async def run_schemathesis(url: str, token: str, config: Path, reports: Path) -> tuple[str, str]:
    """One whole run with ``token``: how many cases it sent ("2113 generated, 2113
    passed"), and "" when it found nothing, else what failed. The JUnit report goes to
    ``reports``."""
    command = [
        SCHEMATHESIS,
        f"--config-file={config}",
        "run",
        f"{url}/v1/openapi.json",
        f"--header=Authorization: Bearer {token}",
        f"--checks={','.join(CHECKS)}",
        f"--max-examples={EXAMPLES}",
        f"--seed={SEED}",
        "--workers=1",
        "--generation-database=none",
        "--suppress-health-check=all",
        "--continue-on-failure",
        "--no-color",
        "--report=junit",
        f"--report-dir={reports}",
        "--exclude-path=/v1/agent",  # the websocket: tests/coordinator/test_agent_fuzz.py
    ]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await process.communicate()
    text = output.decode(errors="replace")
    counted = re.search(r"Test cases:\s*\n\s*(.+)", text)
    summary = counted.group(1).strip() if counted else "no count printed"
    if process.returncode == 0:
        return summary, ""
    return summary, _failures(reports) or text[-20_000:]


def _failures(reports: Path) -> str:
    """The failed operations and their messages, from the JUnit report."""
    found = []
    for report in reports.glob("*.xml"):
        for case in ElementTree.parse(report).iter("testcase"):
            for failure in [*case.iter("failure"), *case.iter("error")]:
                found.append(f"{case.get('name')}: {failure.get('message') or failure.text}")
    return "\n".join(found)


@pytest.fixture
async def live(tmp_path: Path) -> Any:
    config = config_for(tmp_path / "data", lease_seconds=3600.0, heartbeat_seconds=600.0)
    # schemathesis sends requests without a token on purpose, one after the other: none
    # is held back (they were, 2 s each, the run taking 160 s instead of 51 s).
    runner, url = await start(config, failures=FailureBook(base_delay_s=0.0, max_delay_s=0.0))
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


async def test_schemathesis_finds_nothing_with_either_kind_of_token(
    live: Coordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sockets = [
        await join(live, "node-a", inventory()),
        await join(live, "node-big", numa_inventory(tmp_path / "sysfs")),
        await join(live, "node-gpu", gpu_inventory()),
    ]
    config = config_file(tmp_path / "schemathesis.toml", await populate(live, tmp_path))
    caplog.set_level(logging.ERROR)
    found = {}
    for role, token in (("admin", API_TOKEN), ("namespace", NAMESPACE_TOKEN)):
        summary, found[role] = await run_schemathesis(live.url, token, config, tmp_path / role)
        print(f"schemathesis with the {role} token, {EXAMPLES} examples: {summary}")
    assert found == {"admin": "", "namespace": ""}, "\n\n".join(found.values())
    # Ours only: aiohttp's parser logs the requests it cannot parse (a NUL in a header),
    # and answers them 400 itself.
    ours = [r for r in caplog.records if r.name.startswith("allot.")]
    assert [r.getMessage() for r in ours if r.levelno >= logging.ERROR] == []
    await matches_the_store(live)
    for ws in sockets:
        await ws.close()


async def matches_the_store(coordinator: Coordinator) -> None:
    """Every deployment, container and node the API shows from memory is the store's.
    The containers are compared at one store revision with no decision under way: a
    scheduler pass (stand-ins wait for stopping containers) or a request the fuzzer gave
    up on may still commit after the run."""
    store = coordinator.app[STORE]
    while True:
        await coordinator.app[DEPLOYMENTS].quiet()
        revision = store.revision
        _, containers = await call(coordinator, "GET", "/v1/containers")
        stored = await coordinator.stored("/containers/")
        if store.revision == revision:
            break
    shown = {view["record"]["id"]: view["record"] for view in containers["containers"]}
    live = {value["id"]: value for value in stored.values() if not value.get("replaced_by")}
    assert shown == live
    _, nodes = await call(coordinator, "GET", "/v1/nodes")
    stored_nodes = await coordinator.stored("/nodes/")
    cordoned = {key.removeprefix("/cordoned/") for key in await coordinator.stored("/cordoned/")}
    shown_nodes = {node["name"]: dict(node) for node in nodes["nodes"]}
    assert {name: node.pop("cordoned") for name, node in shown_nodes.items()} == {
        name: name in cordoned for name in shown_nodes
    }
    # CPU pressure is a reading the agents report, kept in memory and never stored.
    for node in shown_nodes.values():
        node.pop("pressure")
    assert shown_nodes == {value["name"]: value for value in stored_nodes.values()}
    for namespace in {record["namespace"] for record in shown.values()}:
        _, listed = await call(coordinator, "GET", f"/v1/namespaces/{namespace}/deployments")
        in_memory = {
            d["deployment"]["spec"]["name"]: d["deployment"] for d in listed["deployments"]
        }
        kept = await coordinator.stored(f"/deployments/{namespace}/")
        assert {value["spec"]["name"]: value for value in kept.values()} == in_memory
