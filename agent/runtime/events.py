"""The engine's event stream, read on a thread of its own (the SDK's stream blocks), with
each event handed to the event loop as a wake-up call.

    await follow_events(client, node, wake)    # until the stream ends or is cancelled
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import docker
import requests
from docker.errors import DockerException

from agent.runtime import labels
from agent.runtime.docker_engine import EngineUnavailable


async def follow_events(client: docker.DockerClient, node: str, wake: Callable[[], None]) -> None:
    """Call ``wake`` (on the loop) once the stream is open, since events may have been
    missed before it was, then for each event of this node's containers. Returns when the
    engine ends the stream; raises ``EngineUnavailable`` if it cannot be opened."""
    loop = asyncio.get_running_loop()
    # Not the runtime's bounded pool: this thread blocks for as long as the stream lasts.
    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="docker-events")
    try:
        try:
            stream = await loop.run_in_executor(reader, _open, client, node)
        except (DockerException, requests.RequestException) as error:
            raise EngineUnavailable(f"cannot read Docker events: {error}") from error
        wake()
        try:
            await loop.run_in_executor(reader, _pump, stream, loop, wake)
        finally:
            stream.close()  # ends a read still blocked in the thread
    finally:
        reader.shutdown(wait=False)  # never wait on the loop for a thread to notice


def _open(client: docker.DockerClient, node: str) -> Any:
    filters = {"type": ["container"], **labels.node_filter(node)}
    return client.api.events(filters=filters, decode=True)


def _pump(stream: Iterator[Any], loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
    try:
        for _event in stream:
            loop.call_soon_threadsafe(wake)
    except Exception:
        return
