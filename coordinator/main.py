"""``allot-coordinator``: serve the API and the agent socket until told to stop."""

from __future__ import annotations

import argparse
import asyncio

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


async def serve(config: CoordinatorConfig) -> None:
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=5.0)
    await runner.setup()
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
