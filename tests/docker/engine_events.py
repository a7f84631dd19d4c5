"""Docker's own record of what it did to one node's containers, read live.

    with engine_events(node) as events:
        ...                              # the run
    for event in events:                 # the engine's event dicts, in order

The stream is read on a thread from the moment it opens: the engine keeps only its last
256 events (of every container on it) for a later ``since`` query, so a run of a few
dozen containers on a shared engine cannot be read back afterwards.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import docker

from agent.runtime.labels import node_filter


@contextlib.contextmanager
def engine_events(
    node: str, actions: tuple[str, ...] = ("create", "start")
) -> Iterator[list[dict[str, Any]]]:
    """The list fills as the engine does ``actions`` to ``node``'s containers; complete
    once the block is left."""
    client = docker.from_env()
    filters = {"type": ["container"], "event": list(actions), **node_filter(node)}
    stream = client.api.events(filters=filters, decode=True)
    seen: list[dict[str, Any]] = []

    def read() -> None:
        with contextlib.suppress(Exception):  # the stream closed under the read
            for event in stream:
                seen.append(event)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield seen
    finally:
        stream.close()
        reader.join(timeout=10)
        client.close()
