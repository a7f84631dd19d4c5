"""A real Prometheus (Debian's ``/usr/bin/prometheus``) on a loopback port, with a data
directory of its own, scraping the test's targets every second and loading the alert
rules of contrib/prometheus.

    with running_prometheus(tmp_path, {"coordinator": url1, "agent": url2}) as prometheus:
        prometheus.eventually('allot_agent_connected{job="agent"}', lambda v: v == [1.0])

Prometheus cannot bind port 0 and tell which it got, so a free port is picked and the
start tried again on another should something take it meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.processes import free_port
from tests.prometheus.tools import RULES, tool

SCRAPE_SECONDS = 1
READY_SECONDS = 30.0
# A series is in Prometheus within a scrape or two; generous for two shared cores.
SEEN_SECONDS = 30.0
STARTS = 3


class Prometheus:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of an answer of the HTTP API (``/api/v1/...``)."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant vector: each series' labels and value, now."""
        data = self.api("/api/v1/query", query=promql)
        assert data["resultType"] == "vector", data
        return [(one["metric"], float(one["value"][1])) for one in data["result"]]

    def values(self, promql: str) -> list[float]:
        return sorted(value for _, value in self.query(promql))

    def eventually(
        self, promql: str, holds: Callable[[list[float]], bool], within: float = SEEN_SECONDS
    ) -> list[float]:
        """The values of ``promql`` once ``holds`` says yes of them; fails with the last
        values seen when it never does."""
        deadline = time.monotonic() + within
        while True:
            found = self.values(promql)
            if holds(found):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{promql}: {found} after {within:g}s")
            time.sleep(0.25)


def config(targets: dict[str, str]) -> dict[str, Any]:
    """Prometheus' configuration: one job per target, named as in ``targets``, each a
    ``/metrics`` URL."""
    jobs = []
    for job, url in targets.items():
        parts = urllib.parse.urlsplit(url)
        jobs.append(
            {
                "job_name": job,
                "metrics_path": parts.path,
                "static_configs": [{"targets": [parts.netloc]}],
            }
        )
    interval = f"{SCRAPE_SECONDS}s"
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(RULES)],
        "scrape_configs": jobs,
    }


@contextlib.contextmanager
def running_prometheus(workdir: Path, targets: dict[str, str]) -> Iterator[Prometheus]:
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config(targets)))
    prometheus = _started(workdir, config_file)
    try:
        yield prometheus
    finally:
        prometheus.process.terminate()
        try:
            prometheus.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            prometheus.process.kill()
            prometheus.process.wait(timeout=10)


def _started(workdir: Path, config_file: Path) -> Prometheus:
    """A Prometheus that answers ``/-/ready``, on a port picked free."""
    log = workdir / "prometheus.log"
    for _ in range(STARTS):
        port = free_port()
        with log.open("ab") as output:
            process = subprocess.Popen(
                [
                    tool("prometheus"),
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        prometheus = Prometheus(f"http://127.0.0.1:{port}", process, log)
        if _ready(prometheus):
            return prometheus
        process.kill()
        process.wait(timeout=10)
        if "address already in use" not in log.read_text():
            break
    raise AssertionError(f"prometheus never became ready:\n{log.read_text()}")


def _ready(prometheus: Prometheus) -> bool:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline and prometheus.process.poll() is None:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2),
        ):
            return True  # urlopen raises on any answer but a 2xx
        time.sleep(0.1)
    return False
