"""systemd's notify protocol: datagrams like ``READY=1`` to ``$NOTIFY_SOCKET``.

    notify("READY=1", "STATUS=registered with coordinator")
    interval = watchdog_interval()       # None unless systemd asked for pings
    if interval: asyncio.create_task(ping_watchdog(interval))

Outside systemd (no ``NOTIFY_SOCKET``) every call is a no-op. The watchdog ping runs
as a task on the event loop, so a loop that stalls stops the pings and systemd
restarts the service, which is the point of it.
"""

from __future__ import annotations

import asyncio
import os
import socket

from shared.logs import get_logger

log = get_logger("allot.systemd")


def notify(*assignments: str) -> bool:
    """Send ``KEY=value`` lines in one datagram; True when a socket took them."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace: a leading NUL byte
        address = "\0" + address[1:]
    message = "\n".join(assignments).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            # Never block the event loop: if systemd's queue is full the datagram is
            # dropped (the next watchdog ping comes soon) rather than waited for.
            sock.setblocking(False)
            sock.connect(address)
            sock.send(message)
    except OSError as error:
        log.warning("systemd notify failed", socket=address.lstrip("\0"), error=error)
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between pings (half of ``WatchdogSec``), or None when not asked for.

    systemd sets ``WATCHDOG_USEC``, and ``WATCHDOG_PID`` when the request is meant for
    one process only; a child that inherited the environment must not ping.
    """
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        microseconds = int(usec)
    except ValueError:
        log.warning("ignoring a malformed WATCHDOG_USEC", value=usec)
        return None
    return microseconds / 2_000_000 if microseconds > 0 else None


async def ping_watchdog(interval: float) -> None:
    """Send ``WATCHDOG=1`` every ``interval`` seconds until cancelled."""
    while True:
        notify("WATCHDOG=1")
        await asyncio.sleep(interval)
