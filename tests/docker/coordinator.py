"""A coordinator of the test's own for a real agent process: it welcomes the agent with
the desired state the test sets, pushes changes, and keeps every frame the agent sends.
It speaks the protocol with plain ``msgpack``, as any standard peer could."""

from __future__ import annotations

from typing import Any

import msgpack
import msgspec
from aiohttp import WSMsgType, web

from shared.protocol import DesiredContainer

LEASE_SECONDS = 10.0
HEARTBEAT_SECONDS = 0.5


class ScriptedCoordinator:
    def __init__(self) -> None:
        self.revision = 0
        self.containers: list[dict[str, Any]] = []
        self.hellos: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self._sockets: set[web.WebSocketResponse] = set()

    def want(self, revision: int, containers: list[DesiredContainer]) -> None:
        """The desired state sent in every welcome from now on."""
        self.revision = revision
        self.containers = [msgspec.to_builtins(c) for c in containers]

    async def push(self, revision: int, containers: list[DesiredContainer]) -> None:
        """Change the desired state and send it, whole, to the connected agent."""
        self.want(revision, containers)
        frame = {
            "type": "desired",
            "revision": revision,
            "full": True,
            "containers": self.containers,
        }
        for ws in list(self._sockets):
            await ws.send_bytes(msgpack.packb(frame))

    def last_status(self) -> dict[str, Any]:
        return self.statuses[-1] if self.statuses else {}

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("allot.v1",))
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            async for message in ws:
                if message.type != WSMsgType.BINARY:
                    break
                frame = msgpack.unpackb(message.data, strict_map_key=False)
                if frame["type"] == "hello":
                    self.hellos.append(frame)
                    await ws.send_bytes(msgpack.packb(self._welcome(frame["node"])))
                elif frame["type"] == "status":
                    self.statuses.append(frame)
        finally:
            self._sockets.discard(ws)
        return ws

    def _welcome(self, node: str) -> dict[str, Any]:
        return {
            "type": "welcome",
            "node": node,
            "lease_seconds": LEASE_SECONDS,
            "heartbeat_seconds": HEARTBEAT_SECONDS,
            "revision": self.revision,
            "containers": self.containers,
        }


def app_for(coordinator: ScriptedCoordinator) -> web.Application:
    app = web.Application()
    app.router.add_get("/v1/agent", coordinator.handle)
    return app
