"""What a coordinator does with connections that never authenticate: half-header
connections, websocket upgrades without a token, and wrong join tokens in a row.

    .venv/bin/python bench/doors.py [--idle 3000] [--upgrades 2000] [--wrong 500]
                                    [--wrong-seconds 20] [--header-timeout 2] [--wait 5]

It starts a real coordinator (SQLite store in a temporary directory, on loopback), and
an authenticated client in a process of its own that lists nodes every 10 ms from then
on; after ``--baseline`` seconds of the client alone, it:
1. opens ``--idle`` connections that send half a request header and nothing more, and
   after ``--wait`` seconds counts how many the server has closed;
2. sends ``--upgrades`` websocket upgrades of /v1/agent without a token, reads each 401,
   and after ``--wait`` seconds counts how many sockets the server has closed;
3. prints the client's latency (p50, p99) and answers a second alone and during 1-2,
   with the ratios (the client's figures are those that ``tests/e2e/test_abuse.py``
   once asserted; the test now compares rates alone, with a generous bound);
4. sends ``--wrong`` upgrades with a wrong join token one after the other (for at most
   ``--wrong-seconds``) and prints their rate, how many lines the coordinator logged
   meanwhile, and its ``allot_auth_failures_total`` (absent before this existed).

Run it with ``--header-timeout`` on a coordinator that has the setting; the default,
``0``, passes no such flag (for a coordinator from before it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import queue
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Protocol

import aiohttp

BIN = Path(sys.executable).parent
JOIN_TOKEN = "bench-join-token-0123456789abcdef"
API_TOKEN = "bench-api-token-0123456789abcdef"
HALF_HEADER = b"GET /v1/nodes HTTP/1.1\r\nHost: bench\r\n"
UPGRADE = (
    b"GET /v1/agent HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: allot.v1\r\n"
)


def raise_open_files() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def start(workdir: Path, header_timeout: float) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = workdir / "coordinator.log"
    argv = [str(BIN / "allot-coordinator"), f"--data-dir={workdir}", "--port=0"]
    if header_timeout:
        argv.append(f"--header-timeout-seconds={header_timeout}")
    env = {
        "ALLOT_COORDINATOR_JOIN_TOKEN": JOIN_TOKEN,
        "ALLOT_COORDINATOR_API_TOKENS": API_TOKEN,
        "PATH": "/usr/bin:/bin",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"coordinator listening url=(\S+)", log.read_text())
        if found:
            return process, found.group(1), log
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"the coordinator did not start:\n{log.read_text()}")


async def closed_after(reader: asyncio.StreamReader, *, within: float) -> float | None:
    """Seconds until the server closes this connection (reading whatever it sends), or
    None if it is still open after ``within``."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(within):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return None
    except ConnectionError:
        pass
    return time.monotonic() - started


async def hold(host: str, port: int, request: bytes, count: int, wait: float) -> int:
    """Open ``count`` connections that send ``request``; how many the server closed
    within ``wait`` seconds of the last one being opened."""
    streams = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        streams.append((reader, writer))
    waited = await asyncio.gather(*(closed_after(r, within=wait) for r, _ in streams))
    for _, writer in streams:
        writer.close()
    return sum(w is not None for w in waited)


async def wrong_tokens(host: str, port: int, count: int, seconds: float) -> tuple[int, float]:
    """Send up to ``count`` upgrades with a wrong token, one after the other, for at most
    ``seconds``: how many were answered, and how many a second."""
    request = UPGRADE + b"Authorization: Bearer wrong-token-0123456789abcdef\r\n\r\n"
    started = time.perf_counter()
    answered = 0
    while answered < count and time.perf_counter() - started < seconds:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        answered += 1
    return answered, answered / (time.perf_counter() - started)


class Flag(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...


Timed = list[tuple[float, float]]  # when each request began (time.monotonic), its latency


async def work(url: str, token: str, started: Flag, stop: Flag) -> Timed:
    """An authenticated client listing nodes again and again, 10 ms apart, until
    ``stop``: when each request began (``time.monotonic``, the same clock in every
    process) and its latency. ``started`` is set once the first one is answered; an
    answer other than 200 ends it with an error."""
    timed = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        while not stop.is_set():
            began = time.monotonic()
            async with http.get(url + "/v1/nodes") as response:
                assert response.status == 200, await response.text()
                await response.read()
            timed.append((began, time.monotonic() - began))
            started.set()
            await asyncio.sleep(0.01)
    return timed


def client_process(url: str, token: str, started: Flag, stop: Flag, results: Queue[Timed]) -> None:
    results.put(asyncio.run(work(url, token, started, stop)))


@contextlib.asynccontextmanager
async def working_client(url: str, token: str) -> AsyncIterator[Timed]:
    """``work`` in a process of its own while the body runs, from the client's first
    answer on; the list yielded is filled with its requests on the way out. Its own
    process, because the flood the body sends must not take the client's turns (one
    interpreter lock), or its figures would measure the flood's sender."""
    spawn = multiprocessing.get_context("spawn")
    started, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
    client = spawn.Process(target=client_process, args=(url, token, started, stop, results))
    client.start()
    timed: Timed = []
    try:
        if not await asyncio.to_thread(started.wait, 30):
            raise RuntimeError("the client never got an answer")
        yield timed
    finally:
        stop.set()
        try:
            timed += await asyncio.to_thread(results.get, timeout=30)
        except queue.Empty:
            raise RuntimeError(
                f"the client ended (exit code {client.exitcode}) without its figures:"
                " its error is above"
            ) from None
        finally:
            client.join(timeout=30)


def answered_within(timed: Timed, since: float, until: float) -> list[float]:
    """The latencies of the requests answered from ``since`` to ``until``."""
    return [latency for began, latency in timed if since <= began + latency <= until]


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def client_figures(timed: Timed, alone: tuple[float, float], flood: tuple[float, float]) -> str:
    """The client's latency and answers a second alone and during the flood, and the
    ratios flood/alone."""
    figures = {}
    for name, (since, until) in {"alone": alone, "flood": flood}.items():
        latencies = answered_within(timed, since, until)
        if not latencies:
            return f"client: no answer {name} ({len(timed)} in all)"
        figures[name] = (
            statistics.median(latencies) * 1000,
            p99(latencies) * 1000,
            len(latencies) / (until - since),
            len(latencies),
        )
    lines = [
        f"client {name:5}: {count:5} answers, {rate:6.1f}/s, p50 {p50:6.1f} ms, p99 {high:6.1f} ms"
        for name, (p50, high, rate, count) in figures.items()
    ]
    (a50, a99, a_rate, _), (f50, f99, f_rate, _) = figures["alone"], figures["flood"]
    lines.append(
        f"client flood/alone: p50 x{f50 / a50:.1f}, p99 x{f99 / a99:.1f},"
        f" answers a second x{f_rate / a_rate:.2f}"
    )
    return "\n".join(lines)


def auth_failures(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text: str = response.read().decode()
    lines = [line for line in text.splitlines() if line.startswith("allot_auth_failures_total")]
    return "; ".join(lines) or "no such metric"


async def run(args: argparse.Namespace) -> None:
    raise_open_files()
    with tempfile.TemporaryDirectory() as workdir:
        process, url, log = start(Path(workdir), args.header_timeout)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        started_at = len(log.read_text().splitlines())
        try:
            async with working_client(url, API_TOKEN) as timed:
                alone = time.monotonic()
                await asyncio.sleep(args.baseline)
                flood = time.monotonic()
                closed = await hold(host, int(port), HALF_HEADER, args.idle, args.wait)
                print(f"half-header connections: {args.idle}, closed by the server: {closed}")
                headers = UPGRADE + b"\r\n"
                closed = await hold(host, int(port), headers, args.upgrades, args.wait)
                print(f"upgrades without a token: {args.upgrades}, closed by the server: {closed}")
                flood_ended = time.monotonic()
            print(client_figures(timed, (alone, flood), (flood, flood_ended)))
            lines_before = len(log.read_text().splitlines())
            answered, rate = await wrong_tokens(host, int(port), args.wrong, args.wrong_seconds)
            logged = len(log.read_text().splitlines()) - lines_before
            print(f"wrong join tokens: {answered} answered at {rate:,.1f}/s; log lines: {logged}")
            print(f"metrics: {auth_failures(url)}")
            lines = log.read_text().splitlines()[started_at:]
            print(f"the coordinator logged {len(lines)} lines in all:", *lines, sep="\n  ")
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--upgrades", type=int, default=2000)
    parser.add_argument("--wrong", type=int, default=500)
    parser.add_argument("--wrong-seconds", type=float, default=20.0)
    parser.add_argument("--header-timeout", type=float, default=0.0)
    parser.add_argument("--wait", type=float, default=5.0)
    parser.add_argument("--baseline", type=float, default=3.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
