"""What both daemons do the same way around their work: load their settings or exit
with a clear message, run until SIGINT or SIGTERM, and ping systemd's watchdog."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import msgspec

from shared import config as settings
from shared.sdnotify import ping_watchdog, watchdog_interval

C = TypeVar("C", bound=msgspec.Struct)


def add_config_arguments(parser: argparse.ArgumentParser, spec: type[msgspec.Struct]) -> None:
    parser.add_argument("--config", type=Path, help="TOML file of settings")
    settings.add_flags(parser, spec)


def load_config_or_exit(
    prog: str, spec: type[C], args: argparse.Namespace, *, env_prefix: str
) -> C:
    """The settings from ``--config``, the environment and flags; exit 2 if they are wrong."""
    try:
        return settings.load(
            spec,
            file=args.config,
            environ=os.environ,
            env_prefix=env_prefix,
            flags=settings.flag_values(args, spec),
        )
    except settings.ConfigError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


async def stop_signal() -> None:
    """Return once SIGINT or SIGTERM arrives (Ctrl-C, ``systemctl stop``).

    The handlers stay installed until the event loop closes, so a second signal during
    the graceful shutdown (Ctrl-C reaches every process of the terminal's group, and a
    supervisor may send SIGTERM too) cannot cut it short.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


@contextlib.asynccontextmanager
async def systemd_watchdog() -> AsyncIterator[None]:
    """Ping the watchdog from the event loop while the block runs, if systemd asked."""
    interval = watchdog_interval()
    if interval is None:
        yield
        return
    task = asyncio.create_task(ping_watchdog(interval))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
