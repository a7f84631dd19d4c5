"""Restart to ready on a large SQLite store: a real ``allot-coordinator`` process started
on a copy of a store of ``--containers`` containers on ``--nodes`` nodes, until
``/readyz`` answers 200, wall and CPU; and where that time goes (``--profile``).

    .venv/bin/python bench/restart.py [--containers 200000] [--nodes 10000] [--runs 3]
                                      [--fixture DIR] [--coordinator BIN ...] [--warm]
                                      [--in-process | --profile N]

The store is built once in process (``DeploymentService`` over ``--nodes`` ready nodes of
24 CPUs, deployments of 500 containers of 0.01 CPU and 8 MiB, as
``bench/takeover_build.py`` fills its own) into ``--fixture`` (default: a directory of
the system's temporary directory named after the sizes) and reused by later runs, since
building 200,000 containers takes minutes. Each run copies it into a fresh directory, so
every start reads the same store, one no coordinator has served from yet; ``--warm``
runs one start first on each copy, so the measured one reads what a running coordinator
leaves (its pools' state saved on stopping, labels written at start).

For each ``--coordinator`` binary (the ``allot-coordinator`` beside this Python by
default; give another checkout's to compare with it in the same run), runs alternate
between the binaries, and each prints seconds from the process's start until ``/readyz``
answers 200, the CPU the process used until then (user + system, from
``/proc/<pid>/stat``) and its resident set then, then min / median / max of each and the
load average beside them; the ratio of the medians against the first binary.

``--profile N``: instead, the start the coordinator makes in process (``make_app`` and
its setup, the collector off until the heap is settled, as ``coordinator.main`` does)
under ``cProfile``; prints the N functions with the most cumulative time and the wall
and CPU seconds. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from aiohttp import web  # noqa: E402

from bench.takeover_build import fill  # noqa: E402
from coordinator.app import make_app  # noqa: E402
from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.main import settle_heap  # noqa: E402
from coordinator.store.sqlite import SqliteStore  # noqa: E402

STORE_FILE = "allot.db"
POLL_SECONDS = 0.01
TIMEOUT_SECONDS = 600.0
JOIN_TOKEN, API_TOKEN = "j" * 20, "t" * 20


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def build_fixture(directory: Path, containers: int, nodes: int) -> None:
    """The store, written beside its final name and renamed once complete."""
    building = directory / f"{STORE_FILE}.building"
    store = await SqliteStore.open(building)  # makes the directory
    took = await fill(store, nodes, containers)
    await store.close()
    await asyncio.to_thread(building.rename, directory / STORE_FILE)
    print(f"fixture: {containers:,} containers on {nodes:,} nodes built in {took:.0f} s")


def copy_store(fixture: Path, into: Path) -> Path:
    """A copy of the fixture's store in ``into``/data, as a data directory."""
    data = into / "data"
    data.mkdir()
    shutil.copyfile(fixture / STORE_FILE, data / STORE_FILE)
    return data


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def rss_bytes(pid: int) -> int:
    """The resident set of a process, from ``VmRSS`` in /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_once(binary: Path, workdir: Path, data: Path) -> tuple[float, float, int]:
    """Start ``binary`` on ``data``; seconds and CPU seconds until /readyz answers 200,
    and the process's resident set then. It is stopped (SIGTERM) before returning."""
    port = free_port()
    config = workdir / "coordinator.toml"
    config.write_text(
        f'host = "127.0.0.1"\nport = {port}\ndata_dir = "{data}"\n'
        f'join_token = "{JOIN_TOKEN}"\napi_tokens = ["{API_TOKEN}"]\n'
    )
    url = f"http://127.0.0.1:{port}/readyz"
    with (workdir / "coordinator.log").open("ab") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            [str(binary), f"--config={config}"], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        while True:
            if process.poll() is not None:
                tail = (workdir / "coordinator.log").read_text(errors="replace")[-3000:]
                raise SystemExit(f"the coordinator ended before it was ready:\n{tail}")
            try:
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if answer.status == 200:
                        took = time.monotonic() - started
                        return took, cpu_seconds(process.pid), rss_bytes(process.pid)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() - started > TIMEOUT_SECONDS:
                raise SystemExit("the coordinator was not ready in time")
            time.sleep(POLL_SECONDS)
    finally:
        process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def measure(fixture: Path, binaries: list[Path], runs: int, warm: bool) -> None:
    walls: dict[Path, list[float]] = {binary: [] for binary in binaries}
    cpus: dict[Path, list[float]] = {binary: [] for binary in binaries}
    rss: dict[Path, list[float]] = {binary: [] for binary in binaries}
    for run in range(runs):
        for binary in binaries:
            with tempfile.TemporaryDirectory(prefix="allot-restart-") as directory:
                workdir = Path(directory)
                data = copy_store(fixture, workdir)
                if warm:
                    start_once(binary, workdir, data)
                wall, cpu, resident = start_once(binary, workdir, data)
            walls[binary].append(wall)
            cpus[binary].append(cpu)
            rss[binary].append(resident / 2**20)
            print(
                f"run {run + 1} {binary}: ready after {wall:.2f} s, {cpu:.2f} s CPU,"
                f" RSS {resident / 2**20:.0f} MiB; load {load_average()}",
                flush=True,
            )
    first = binaries[0]
    for binary in binaries:
        ratio = statistics.median(walls[binary]) / statistics.median(walls[first])
        cpu_ratio = statistics.median(cpus[binary]) / statistics.median(cpus[first])
        print(
            f"{binary}: ready min/median/max {spread(walls[binary])} s wall,"
            f" {spread(cpus[binary])} s CPU, RSS {spread(rss[binary])} MiB;"
            f" x{ratio:.2f} wall, x{cpu_ratio:.2f} CPU"
            f" against {first}; load {load_average()}"
        )


async def start_in_process(data: Path) -> tuple[float, float]:
    """The coordinator's own start on ``data`` (as ``main._serve_alone`` makes it, up to
    binding its socket); wall and CPU seconds. Stopped again after."""
    config = CoordinatorConfig(
        data_dir=str(data), join_token=JOIN_TOKEN, api_tokens=[API_TOKEN], port=0
    )
    started, cpu = time.perf_counter(), time.process_time()
    runner = web.AppRunner(make_app(config), access_log=None)
    gc.disable()
    try:
        await runner.setup()
    finally:
        settle_heap()
    took = time.perf_counter() - started, time.process_time() - cpu
    await runner.cleanup()
    return took


def in_process(fixture: Path, runs: int, warm: bool, top: int) -> None:
    """``runs`` starts in process, each on a fresh copy; under cProfile if ``top``."""
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="allot-restart-") as directory:
            data = copy_store(fixture, Path(directory))
            if warm:
                asyncio.run(start_in_process(data))
            # CPU time, not wall: on a shared machine the wall time holds other
            # processes' turns, landing on whichever function was running.
            profiler = cProfile.Profile(time.process_time)
            if top:
                profiler.enable()
            wall, cpu = asyncio.run(start_in_process(data))
            profiler.disable()
        under = " under cProfile" if top else ""
        print(f"start in process{under}: {wall:.2f} s wall, {cpu:.2f} s CPU; load {load_average()}")
    if top:
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, default=200_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fixture", type=Path)
    parser.add_argument(
        "--coordinator",
        type=Path,
        nargs="+",
        default=[Path(sys.executable).parent / "allot-coordinator"],
    )
    parser.add_argument("--warm", action="store_true", help="one start on each copy first")
    parser.add_argument("--profile", type=int, metavar="N", default=0)
    parser.add_argument("--in-process", action="store_true", help="starts in this process")
    args = parser.parse_args()
    fixture = args.fixture or Path(tempfile.gettempdir()) / (
        f"allot-restart-fixture-{args.containers}-{args.nodes}"
    )
    if not (fixture / STORE_FILE).exists():
        asyncio.run(build_fixture(fixture, args.containers, args.nodes))
    if args.profile or args.in_process:
        in_process(fixture, 1 if args.profile else args.runs, args.warm, args.profile)
    else:
        measure(fixture, args.coordinator, args.runs, args.warm)


if __name__ == "__main__":
    main()
