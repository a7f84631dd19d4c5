"""What agents' hellos cost the coordinator: ``--agents`` agents say hello at once over
real websockets (new nodes), a deployment puts a container on each node (strategy
``each``), then every agent comes back at once, in a new session, with other hardware (a
CPU reserved), so that each node's capacity follows its inventory.

    .venv/bin/python bench/node_hellos.py [--agents 300]

The application is ``make_app`` on a SQLite store in a temporary directory, served on a
free loopback port; the agents are plain websocket clients in this process. Prints, for
each wave, its wall time, hellos per second and the store commits it took (the store's
revision moved by). Uses only the agent protocol and the HTTP API, so the same script
measures any version. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import msgspec

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from bench.deployments import host  # noqa: E402
from coordinator.app import make_app  # noqa: E402
from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.keys import STORE  # noqa: E402
from shared.codec import to_builtins  # noqa: E402
from shared.cpuset import CpuSet  # noqa: E402
from shared.protocol import SUBPROTOCOL  # noqa: E402

JOIN_TOKEN = "bench-hellos-join-token-0123456789"
API_TOKEN = "bench-hellos-admin-token-0123456789"


async def hello(
    http: aiohttp.ClientSession, url: str, node: str, reserved: list[int]
) -> aiohttp.ClientWebSocketResponse:
    ws = await http.ws_connect(
        url + "/v1/agent",
        protocols=(SUBPROTOCOL,),
        headers={"Authorization": f"Bearer {JOIN_TOKEN}"},
    )
    inventory = msgspec.structs.replace(host(node), reserved=CpuSet(reserved))
    frame = {
        "type": "hello",
        "node": node,
        "token": JOIN_TOKEN,
        "protocol": 1,
        "inventory": to_builtins(inventory),
        "agent_version": "bench",
    }
    await ws.send_bytes(bytes(msgpack.packb(frame)))
    message = await ws.receive(timeout=600)
    assert msgpack.unpackb(message.data)["type"] == "welcome", message
    return ws


async def wave(
    http: aiohttp.ClientSession, url: str, app: Any, names: list[str], reserved: list[int]
) -> tuple[list[aiohttp.ClientWebSocketResponse], float, int]:
    before = app[STORE].revision
    started = time.perf_counter()
    sockets = await asyncio.gather(*(hello(http, url, name, reserved) for name in names))
    took = time.perf_counter() - started
    return sockets, took, app[STORE].revision - before


async def run(agents: int, directory: Path) -> None:
    config = CoordinatorConfig(
        host="127.0.0.1",
        port=0,
        data_dir=str(directory),
        join_token=JOIN_TOKEN,
        api_tokens=[API_TOKEN],
        lease_seconds=600.0,
        heartbeat_seconds=200.0,
        hello_timeout_seconds=600.0,
    )
    app = make_app(config)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = "http://{}:{}".format(*runner.addresses[0][:2])
    names = [f"node-{i:05d}" for i in range(agents)]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        first, took, commits = await wave(http, url, app, names, [])
        report(f"{agents} new nodes' hellos at once", agents, took, commits)
        spec = {
            "name": "spread",
            "image": "busybox",
            "count": 1,  # on each node
            "resources": {"cpu": "0.1", "memory": "64Mi"},
            "strategy": "each",
        }
        response = await http.post(
            url + "/v1/namespaces/bench/deployments",
            json=spec,
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
        assert response.status == 201, await response.text()
        again, took, commits = await wave(http, url, app, names, [23])
        report(f"{agents} hellos with other hardware at once", agents, took, commits)
        for ws in [*first, *again]:
            await ws.close()
    await runner.cleanup()


def report(wave: str, agents: int, took: float, commits: int) -> None:
    print(f"{wave}: {took:.2f} s, {agents / took:.0f} hellos/s, {commits} commits")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="allot-hellos-") as directory:
        asyncio.run(run(args.agents, Path(directory)))


if __name__ == "__main__":
    main()
