"""Several real coordinator processes on one etcd prefix, each on a fixed loopback port
(a standby names the leader by its URL, so it must not change across a restart).

group = CoordinatorGroup.start(tmp_path, services, settings, count=3)
leader = group.wait_for_leader()          # the index of the one whose /readyz is 200
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.etcd_cluster import free_ports
from coordinator.store.etcd_link import EtcdSettings
from tests.e2e.conftest import etcd_flags
from tests.e2e.processes import API_TOKEN, Service

TTL_SECONDS = 3  # short, so a takeover is quick; keep-alives go every 0.75 s


@dataclass
class CoordinatorGroup:
    coordinators: list[Service]
    urls: list[str]

    @classmethod
    def start(
        cls,
        workdir: Path,
        services: list[Service],
        settings: EtcdSettings | Sequence[EtcdSettings],
        *,
        count: int,
        toml: str = "",
        args: Sequence[tuple[str, ...]] = (),
    ) -> CoordinatorGroup:
        """``count`` coordinators, each started once the one before it serves, so the
        first leads; ``settings`` and ``args`` (more flags) for all, or one for each."""
        each = [settings] * count if isinstance(settings, EtcdSettings) else list(settings)
        more = list(args) or [()] * count
        ports = free_ports(count)
        coordinators = []
        for index, port in enumerate(ports):
            directory = workdir / f"coordinator-{index}"
            directory.mkdir()
            flags = (*etcd_flags(each[index]), f"--leader-ttl-seconds={TTL_SECONDS}")
            coordinator = Service.coordinator(
                directory, port=port, toml=toml, args=(*flags, *more[index])
            )
            services.append(coordinator.start())
            coordinators.append(coordinator)
            coordinator.wait_for(r"INFO standby |WARNING leading ")
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        return cls(coordinators, urls)

    @property
    def servers(self) -> str:
        """Every URL, comma-separated, as agents and clients take them."""
        return ",".join(self.urls)

    def wait_for_leader(self, among: list[int] | None = None, timeout: float = 15.0) -> int:
        """The index of the coordinator that answers /readyz with 200 (only one may), once
        it does (when ``among`` is given, the first of those to)."""
        candidates = range(len(self.urls)) if among is None else among
        deadline = time.monotonic() + timeout
        while True:
            leading = [i for i in candidates if readiness(self.urls[i])[0] == 200]
            assert len(leading) <= 1, f"more than one leader: {leading}"
            if leading:
                return leading[0]
            assert time.monotonic() < deadline, f"no leader among {list(candidates)}"
            time.sleep(0.05)

    def wait_until_known(self, leader: int, timeout: float = 10.0) -> None:
        """Until every other coordinator that answers names ``leader`` in its /readyz."""
        deadline = time.monotonic() + timeout
        while True:
            named = {
                readiness(url)[1].get("leader") for url in self.urls if url != self.urls[leader]
            }
            if named <= {self.urls[leader], None}:
                return
            assert time.monotonic() < deadline, f"the standbys name {named}"
            time.sleep(0.05)


def readiness(url: str) -> tuple[int, dict[str, Any]]:
    """/readyz's status and body; (0, {}) when nothing answers."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


def send(url: str, path: str, body: object, method: str = "PUT") -> int:
    """One request with the test's token (a PUT's 307 is not followed): its HTTP status."""
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
