"""Capacity leases: how fast the engine decides, with figures to compare against.

    .venv/bin/python bench/leases.py [--block-sizes]

Sections, each a function that prints its own figures (no assertions):

- ``engine_benchmark``: the pure functions on 100,000 clients; the slow exact reference
  against ``fair_share`` on 2,000; a ``LeaseTable`` with 10,000 and 100,000 distinct
  clients making a first request each, then refreshing once with unchanged wants, then
  once more with changed wants (the case where every request moves the index).
- ``block_size_sweep`` (``--block-sizes``): the same table phases for several index
  block sizes, the measurement behind ``band_index.LOAD``.

- ``http_benchmark``: a real ``allot-coordinator`` on loopback (its store on this disk,
  every decision committed before the answer) driven by ``wrk`` from a separate process
  with ``--clients`` distinct client ids over ``--connections`` connections: requests/s
  and p50/p99 latency, first cold (every id is new), then in steady state.

The engine sections run single-threaded in this process; times are wall-clock, best of
a few runs for the pure functions. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import best_of

from coordinator.leases import Kind, LeaseTable, band_index, fair_share, proportional_share
from coordinator.leases.reference import proportional, water_filling

SHARING = (Kind.FAIR_SHARE, Kind.PROPORTIONAL_SHARE)


def _claims(n: int, seed: int) -> tuple[float, list[float], list[int], list[int]]:
    """n clients with random wants (0-100), subclients (1-4) and three priority bands;
    capacity half the total demand, so the middle band is cut and the lowest starves."""
    rng = random.Random(seed)
    wants = [rng.uniform(0, 100) for _ in range(n)]
    weights = [rng.randint(1, 4) for _ in range(n)]
    priorities = [rng.choice((-1, 0, 1)) for _ in range(n)]
    return 0.5 * sum(wants), wants, weights, priorities


def _table_phases(kind: Kind, n: int) -> tuple[float, float, float]:
    """Requests per second for n first requests, n unchanged refreshes, n changed ones."""
    rng = random.Random(n)
    wants = [rng.uniform(0, 40) for _ in range(n)]
    changed = [w * rng.uniform(0.9, 1.1) for w in wants]
    ids = [f"host-{i}:{i * 7919 % 65536}:{i:08x}" for i in range(n)]
    # Capacity half the demand: every decision has to find the water level.
    table = LeaseTable(kind, 10.0 * n, lease_length=30, refresh_interval=10)
    rates = []
    for now, values in ((1.0, wants), (2.0, wants), (3.0, changed)):
        gc.collect()
        started = time.perf_counter()
        for client_id, value in zip(ids, values, strict=True):
            table.request(client_id, value, now=now)
        rates.append(n / (time.perf_counter() - started))
    return rates[0], rates[1], rates[2]


def engine_benchmark() -> None:
    print("== lease engine (pure, one core) ==")
    capacity, wants, weights, priorities = _claims(100_000, seed=1)
    for name, share in (("fair_share", fair_share), ("proportional_share", proportional_share)):
        took = best_of(3, functools.partial(share, capacity, wants, weights, priorities))
        print(f"{name:<19} 100,000 clients, 3 bands: {took * 1e3:8.1f} ms per call")

    capacity, wants, weights, priorities = _claims(2_000, seed=2)
    for name, fast, slow in (
        ("fair_share", fair_share, water_filling),
        ("proportional_share", proportional_share, proportional),
    ):
        fast_time = best_of(3, functools.partial(fast, capacity, wants, weights, priorities))
        slow_time = best_of(1, functools.partial(slow, capacity, wants, weights, priorities))
        print(
            f"{name:<19} 2,000 clients: {fast_time * 1e3:7.2f} ms; exact reference"
            f" {slow_time * 1e3:8.1f} ms ({slow_time / fast_time:.0f}x slower)"
        )

    for n in (10_000, 100_000):
        for kind in SHARING:
            first, same, changed = _table_phases(kind, n)
            print(
                f"LeaseTable {kind:<18} {n:>7,} clients: first request {first:8,.0f} req/s,"
                f" refresh {same:8,.0f} req/s, refresh with new wants {changed:8,.0f} req/s"
                f" ({1e6 / changed:.1f} us each)"
            )


def block_size_sweep() -> None:
    print("== band index block size (load), FAIR_SHARE, microseconds per request ==")
    default = band_index.LOAD
    try:
        for n in (10_000, 100_000):
            for load in (16, 32, 64, 128, 256):
                band_index.BandIndex.__init__.__defaults__ = (load,)
                first, same, changed = _table_phases(Kind.FAIR_SHARE, n)
                print(
                    f"n {n:>7,} load {load:>3}: first {1e6 / first:5.1f} us,"
                    f" refresh {1e6 / same:5.1f} us, new wants {1e6 / changed:5.1f} us"
                )
    finally:
        band_index.BandIndex.__init__.__defaults__ = (default,)


# One wrk thread cycles through the client ids, so every id is first a newcomer (its
# first request changes the band index) and then a refreshing client. The requests are
# built once, in init: on two cores the load generator competes with the coordinator,
# and building each request in Lua cost it a tenth of its rate.
_WRK_SCRIPT = """
local requests = {}
local counter = 0
init = function(args)
  for id = 0, %(clients)d - 1 do
    local body = '{"client_id":"bench-' .. id .. '","resources":[{"resource_id":"bench",'
      .. '"wants":' .. (1 + id %% 50) .. '}]}'
    requests[id] = wrk.format("POST", "/v1/capacity", {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer %(token)s"}, body)
  end
end
request = function()
  counter = (counter + 1) %% %(clients)d
  return requests[counter]
end
"""
_WRK_FIGURES = {
    "requests_per_s": re.compile(r"Requests/sec:\s+([\d.]+)"),
    "p50": re.compile(r"^\s+50%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE),
    "p99": re.compile(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE),
    "errors": re.compile(r"Non-2xx or 3xx responses: (\d+)"),
}
_TO_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _wrk(url: str, script: Path, seconds: int, connections: int) -> dict[str, float]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script)]
    output = subprocess.run(
        [*command, url], capture_output=True, text=True, check=True, timeout=seconds + 60
    ).stdout
    figures: dict[str, float] = {"errors": 0.0}
    for name, pattern in _WRK_FIGURES.items():
        match = pattern.search(output)
        if match is None:
            continue
        value = float(match.group(1))
        figures[name] = value * _TO_MS[match.group(2)] if match.lastindex == 2 else value
    return figures


def http_benchmark(clients: int, seconds: int, connections: int) -> None:
    """A real coordinator on loopback, driven by wrk from another process."""
    print(f"== HTTP: POST /v1/capacity, {clients:,} distinct clients, {connections} connections ==")
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install -y wrk); skipping the HTTP benchmark")
        return
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as workdir:
        config = Path(workdir) / "coordinator.toml"
        config.write_text(
            f'join_token = "{secrets.token_urlsafe(24)}"\napi_tokens = ["{token}"]\n'
            '[[resources]]\nidentifier_glob = "bench"\ncapacity = 100000\n'
            '[resources.algorithm]\nkind = "FAIR_SHARE"\nlease_length = 300\n'
            "refresh_interval = 10\nlearning_mode_duration = 0\n"
        )
        script = Path(workdir) / "capacity.lua"
        script.write_text(_WRK_SCRIPT % {"clients": clients, "token": token})
        log = (Path(workdir) / "coordinator.log").open("w+")
        coordinator = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "allot-coordinator"),
                f"--config={config}",
                f"--data-dir={workdir}",
                "--port=0",
                "--log-level=info",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = _listening_url(coordinator, Path(workdir) / "coordinator.log")
            for phase in ("first requests + refreshes (cold)", "refreshes (steady state)"):
                figures = _wrk(url, script, seconds, connections)
                goal = figures["requests_per_s"] >= 5000 and figures["p99"] < 20
                print(
                    f"{phase:<34} {figures['requests_per_s']:8,.0f} req/s"
                    f"  p50 {figures['p50']:6.2f} ms  p99 {figures['p99']:6.2f} ms"
                    f"  non-2xx {figures['errors']:.0f}"
                    f"  {figures['requests_per_s'] / 1000:4.1f}x Doorman's 1,000/s target"
                    f"  goal (>= 5,000/s, p99 < 20 ms) {'met' if goal else 'MISSED'}"
                )
        finally:
            coordinator.terminate()
            coordinator.wait(timeout=30)
            log.close()


def _listening_url(coordinator: subprocess.Popen[bytes], log: Path) -> str:
    for _ in range(200):
        match = re.search(r"coordinator listening url=(\S+)", log.read_text())
        if match:
            return match.group(1)
        if coordinator.poll() is not None:
            raise SystemExit(f"the coordinator exited:\n{log.read_text()}")
        time.sleep(0.05)
    raise SystemExit(f"the coordinator did not start:\n{log.read_text()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--block-sizes", action="store_true", help="also sweep block sizes")
    parser.add_argument("--http-only", action="store_true", help="only the HTTP benchmark")
    parser.add_argument("--clients", type=int, default=10_000, help="distinct HTTP clients")
    parser.add_argument("--seconds", type=int, default=10, help="length of each HTTP run")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections")
    args = parser.parse_args()
    if not args.http_only:
        engine_benchmark()
        if args.block_sizes:
            block_size_sweep()
    http_benchmark(args.clients, args.seconds, args.connections)


if __name__ == "__main__":
    main()
