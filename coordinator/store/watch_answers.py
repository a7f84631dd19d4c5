"""The answers of an etcd watch stream, noticing a member that hangs.

A watch is one long call. A member that hangs (a paused process, a link that drops
packets) keeps its connection open and silent, and the watch would wait on it for ever:
gRPC's keepalive pings did not end it (grpcio 1.85 aio, pings every 2 s: a paused
member's watch stayed open for the 40 s tried). So when the stream has been quiet for
``QUIET_SECONDS``, etcd is asked for a progress report (``WatchProgressRequest``, etcd
3.4 and later), which a live member answers at once with the revision it is at; with no
answer within ``ANSWER_SECONDS`` more the member is taken for hung:

    async for answer in answers(call):      # raises Silent when the member hangs
        ...

A progress report is an answer without events; a member still catching a watcher up
may not send one, and is then left for another like a hung one, which costs a new
watch from the same revision and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import grpc
from aetcd import rpc

QUIET_SECONDS = 2.0
ANSWER_SECONDS = 1.0


class Silent(Exception):
    """The member answered nothing, not even a progress request (it is taken for hung),
    or ended the call before it began: the watch goes on through another."""


async def answers(call: Any) -> AsyncGenerator[Any, None]:
    """Every answer of the watch ``call`` until it ends; its errors are raised as they are."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def read() -> None:
        while (answer := await call.read()) is not grpc.aio.EOF:
            queue.put_nowait(answer)

    reader = asyncio.create_task(read())
    try:
        while (answer := await _next(call, queue, reader)) is not None:
            yield answer
    finally:
        reader.cancel()


async def _next(call: Any, queue: asyncio.Queue[Any], reader: asyncio.Task[None]) -> Any:
    """The next answer, None once the stream ended."""
    asked = False
    while True:
        if not queue.empty():
            return queue.get_nowait()
        if reader.done():
            reader.result()  # the call's error, if it failed
            return None
        getter = asyncio.ensure_future(queue.get())
        wait = ANSWER_SECONDS if asked else QUIET_SECONDS
        await asyncio.wait({getter, reader}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            return getter.result()
        getter.cancel()
        if reader.done():
            continue
        if asked:
            raise Silent(f"no answer to a progress request within {ANSWER_SECONDS:g}s")
        try:
            async with asyncio.timeout(ANSWER_SECONDS):
                await call.write(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))
        except (TimeoutError, grpc.aio.AioRpcError) as error:
            # A write to a call the member just ended fails with gRPC's "Internal error
            # from Core", not the member's reason; either way, another member it is.
            raise Silent(f"a progress request could not be sent ({error!r})") from None
        asked = True
