"""shared.sdnotify and shared.service.systemd_watchdog, against a real datagram socket."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from shared.sdnotify import notify, ping_watchdog, watchdog_interval
from shared.service import systemd_watchdog

MAX_UNIX_PATH = 100  # sun_path holds 108 bytes; keep clear of it


@contextlib.contextmanager
def bound_datagram_socket(address: str) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.setblocking(False)
        yield sock


def received(sock: socket.socket) -> list[bytes]:
    """Every datagram waiting on the socket, without blocking."""
    datagrams: list[bytes] = []
    while True:
        try:
            datagrams.append(sock.recv(4096))
        except BlockingIOError:
            return datagrams


@pytest.fixture
def systemd_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A socket standing in for systemd's, named in NOTIFY_SOCKET."""
    path = tmp_path / "notify.sock"
    if len(str(path)) > MAX_UNIX_PATH:  # a long tmp_path; fall back to a short directory
        path = Path(tempfile.mkdtemp(prefix="sd")) / "notify.sock"
    with bound_datagram_socket(str(path)) as sock:
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        yield sock
    path.unlink(missing_ok=True)


# --- notify ------------------------------------------------------------------------------


def test_notify_sends_one_datagram(systemd_socket: socket.socket) -> None:
    assert notify("READY=1", "STATUS=x") is True
    assert received(systemd_socket) == [b"READY=1\nSTATUS=x"]


def test_each_notify_is_its_own_datagram(systemd_socket: socket.socket) -> None:
    assert notify("STATUS=starting")
    assert notify("READY=1")
    assert received(systemd_socket) == [b"STATUS=starting", b"READY=1"]


def test_notify_encodes_utf8(systemd_socket: socket.socket) -> None:
    assert notify("STATUS=prêt")
    assert received(systemd_socket) == ["STATUS=prêt".encode()]


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_notify_without_socket_is_a_no_op(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    else:
        monkeypatch.setenv("NOTIFY_SOCKET", value)
    with bound_datagram_socket(str(tmp_path / "s")) as bystander:
        assert notify("READY=1") is False
        assert received(bystander) == []


def test_notify_to_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"allot-test-{uuid.uuid4().hex}"
    with bound_datagram_socket("\0" + name) as sock:
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert notify("READY=1") is True
        assert received(sock) == [b"READY=1"]


def test_notify_to_missing_socket_warns_and_returns_false(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, allot_log: io.StringIO
) -> None:
    missing = tmp_path / "no-such.sock"
    monkeypatch.setenv("NOTIFY_SOCKET", str(missing))
    assert notify("READY=1") is False
    (line,) = allot_log.getvalue().splitlines()
    assert line.startswith(f"<4>systemd notify failed socket={missing} error=")


def test_notify_to_missing_abstract_socket_names_it_without_nul(
    monkeypatch: pytest.MonkeyPatch, allot_log: io.StringIO
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", f"@allot-absent-{uuid.uuid4().hex}")
    assert notify("READY=1") is False
    assert "\0" not in allot_log.getvalue()
    assert "socket=allot-absent-" in allot_log.getvalue()


# --- watchdog_interval -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        ("3000000", None, 1.5),
        ("3000000", "own", 1.5),
        ("3000000", "other", None),
        ("1", None, 0.0000005),
        ("0", None, None),
        ("-5", None, None),
        ("3s", None, None),
        ("", None, None),
        (None, None, None),
        (None, "own", None),
    ],
    ids=[
        "set",
        "for-this-process",
        "for-another-process",
        "tiny",
        "zero",
        "negative",
        "malformed",
        "empty",
        "unset",
        "pid-without-usec",
    ],
)
def test_watchdog_interval(
    monkeypatch: pytest.MonkeyPatch,
    allot_log: io.StringIO,
    usec: str | None,
    pid: str | None,
    expected: float | None,
) -> None:
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    if usec is not None:
        monkeypatch.setenv("WATCHDOG_USEC", usec)
    if pid is not None:
        monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + (0 if pid == "own" else 1)))
    assert watchdog_interval() == expected


def test_malformed_watchdog_usec_is_logged(
    monkeypatch: pytest.MonkeyPatch, allot_log: io.StringIO
) -> None:
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    monkeypatch.setenv("WATCHDOG_USEC", "soon")
    assert watchdog_interval() is None
    assert allot_log.getvalue() == "<4>ignoring a malformed WATCHDOG_USEC value=soon\n"


# --- the ping loop -----------------------------------------------------------------------
# The kernel queues only a few datagrams per unix socket (net.unix.max_dgram_qlen, often
# 10) and notify() sends blocking, so a ping test must keep reading while pings arrive.


@contextlib.asynccontextmanager
async def collecting(sock: socket.socket) -> AsyncIterator[list[bytes]]:
    """Read datagrams from ``sock`` on the event loop into a list, while the block runs."""
    loop = asyncio.get_running_loop()
    datagrams: list[bytes] = []

    async def read() -> None:
        while True:
            datagrams.append(await loop.sock_recv(sock, 4096))

    reader = asyncio.create_task(read())
    try:
        yield datagrams
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def watchdog_requested(monkeypatch: pytest.MonkeyPatch, usec: int) -> None:
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    monkeypatch.setenv("WATCHDOG_USEC", str(usec))


async def test_ping_watchdog_pings_until_cancelled(systemd_socket: socket.socket) -> None:
    async with collecting(systemd_socket) as pings:
        task = asyncio.create_task(ping_watchdog(0.01))
        await asyncio.sleep(0.15)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.01)
        sent_while_running = len(pings)
        await asyncio.sleep(0.05)
    assert sent_while_running >= 3
    assert set(pings) == {b"WATCHDOG=1"}
    assert len(pings) == sent_while_running


async def test_systemd_watchdog_pings_while_the_block_runs(
    systemd_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    watchdog_requested(monkeypatch, 20_000)  # pings every 10 ms
    async with collecting(systemd_socket) as pings:
        async with systemd_watchdog():
            await asyncio.sleep(0.15)
        await asyncio.sleep(0.01)
        sent_in_block = len(pings)
        await asyncio.sleep(0.05)
    assert sent_in_block >= 3
    assert set(pings) == {b"WATCHDOG=1"}
    assert len(pings) == sent_in_block


async def failing_while_watched() -> None:
    async with systemd_watchdog():
        await asyncio.sleep(0.05)
        raise RuntimeError("boom")


async def test_systemd_watchdog_stops_when_the_block_raises(
    systemd_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    watchdog_requested(monkeypatch, 20_000)
    async with collecting(systemd_socket) as pings:
        with pytest.raises(RuntimeError, match="boom"):
            await failing_while_watched()
        await asyncio.sleep(0.01)
        sent_in_block = len(pings)
        await asyncio.sleep(0.05)
    assert sent_in_block >= 1
    assert len(pings) == sent_in_block


async def test_systemd_watchdog_does_nothing_unless_asked(
    systemd_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    tasks_before = len(asyncio.all_tasks())
    async with systemd_watchdog():
        assert len(asyncio.all_tasks()) == tasks_before
        await asyncio.sleep(0.05)
    assert received(systemd_socket) == []


async def test_systemd_watchdog_ignores_a_request_for_another_process(
    systemd_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "20000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    async with systemd_watchdog():
        await asyncio.sleep(0.05)
    assert received(systemd_socket) == []


def test_notify_never_blocks_on_a_full_queue(
    systemd_socket: socket.socket, allot_log: io.StringIO
) -> None:
    # Nobody reads the socket, so the kernel's queue (net.unix.max_dgram_qlen) fills up;
    # from then on notify drops the datagram and says so instead of waiting.
    outcomes = [notify("WATCHDOG=1") for _ in range(5000)]
    assert outcomes[0] is True
    assert outcomes[-1] is False
    assert "<4>systemd notify failed" in allot_log.getvalue()
