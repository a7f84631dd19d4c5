"""``allot-coordinator``: serve the API and the agent socket until told to stop."""

from __future__ import annotations

import argparse
import asyncio
import gc

from aiohttp import web

from coordinator.app import make_app
from coordinator.config import ENV_PREFIX, CoordinatorConfig
from coordinator.store import StoreError
from shared.logs import configure, get_logger
from shared.sdnotify import notify
from shared.service import (
    add_config_arguments,
    load_config_or_exit,
    stop_signal,
    systemd_watchdog,
)

log = get_logger("allot.coordinator")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="allot-coordinator",
        description="Run the allot coordinator: the HTTP API, the agent socket and the store."
        f" Every setting can also be given as {ENV_PREFIX}<NAME> in the environment.",
    )
    add_config_arguments(parser, CoordinatorConfig)
    args = parser.parse_args(argv)
    config = load_config_or_exit(
        "allot-coordinator", CoordinatorConfig, args, env_prefix=ENV_PREFIX
    )
    configure(config.log_level)
    try:
        asyncio.run(serve(config))
    except StoreError as error:
        log.error("cannot open the store", reason=error)
        return 1
    except ListenError as error:
        log.error("cannot listen", host=config.host, port=config.port, reason=error)
        return 1
    return 0


class ListenError(Exception):
    """The address cannot be bound (in use, not local, no permission)."""


# The coordinator's heap is mostly what start-up loads from the store (every node,
# container, deployment and event: 100,000 containers are 766,000 objects the collector
# tracks) and lives as long as the process, yet every full collection rescans all of it.
# bench/leases.py --heap-containers 100000 --clients 100000 --pool-update-seconds 60
# (2 x 20 s of lease requests, three runs each, on the 2-core VM shared with other jobs):
# - Python's defaults: one full collection a run, of 597-744 ms; steady-phase lease p99
#   408-547 ms;
# - the loaded heap frozen (gc.freeze, below): it is left out of every collection; 0-5
#   full collections a run, the longest 23-49 ms; steady-phase p99 51-129 ms.
# The load itself runs with the collector off: it makes long-lived objects only, and each
# collection while the heap grows rescans it. Ready (process start to READY=1) in
# 5.5-6.9 s instead of 8.0-10.5 s, the one collection before the freeze included
# (0.5-0.9 s). Rejected: a young-generation threshold of 10,000 instead of 700
# (collector time 1.4 s -> 0.2 s a run, but each young collection then took 12 ms on
# average and up to 43 ms, over the 20 ms p99 goal); Python's thresholds are kept.
# What is loaded later (a deployment storm after start-up) is not frozen.
def settle_heap() -> None:
    """Once start-up has loaded the store (the collector off meanwhile): collect the
    start-up garbage once, freeze what is left (``gc.freeze``: no later collection looks
    at it again) and turn the collector back on."""
    gc.collect()
    gc.freeze()
    gc.enable()


async def serve(config: CoordinatorConfig) -> None:
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=5.0)
    gc.disable()  # until settle_heap: loading the store makes long-lived objects only
    try:
        await runner.setup()
    finally:
        settle_heap()
    try:
        site = web.TCPSite(runner, config.host, config.port)
        try:
            await site.start()
        except OSError as error:
            raise ListenError(error.strerror or str(error)) from error
        host, port = runner.addresses[0][:2]
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        log.info(
            "coordinator listening",
            url=url,
            store=config.store_path,
            lease_s=config.lease_seconds,
            heartbeat_s=config.heartbeat_seconds,
        )
        notify("READY=1", f"STATUS=serving on {url}")
        async with systemd_watchdog():
            await stop_signal()
        log.info("coordinator stopping")
        notify("STOPPING=1")
    finally:
        await runner.cleanup()
