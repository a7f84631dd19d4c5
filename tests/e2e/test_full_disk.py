"""A coordinator whose SQLite store sits on a small tmpfs that fills up (a real mount, a
real coordinator process): writes are refused with 503 and nothing acknowledged is lost,
the log names the cause once, /readyz says degraded until a write succeeds again, and a
start on the full disk says why in one line and exits 1.

The disk is ``tests.small_disk``'s: mounting needs root, or the test fails and says so
(``ALLOT_SKIP_MOUNT_TESTS=1`` skips it on purpose).
"""

from __future__ import annotations

import re
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.coordinator_group import readiness, send
from tests.e2e.processes import Service, api
from tests.small_disk import fill, small_disk

__all__ = ["small_disk"]  # the fixture, used by name

pytestmark = pytest.mark.e2e
FULL_CAUSE = "database or disk is full"


def quota(namespace: str) -> dict[str, object]:
    return {"namespace": namespace, "min": {"cpu": "1"}, "max": {"cpu": "4"}}


def write(url: str, namespace: str) -> int:
    return send(url, f"/v1/elasticquotas/{namespace}", quota(namespace))


def stored_namespaces(url: str) -> set[str]:
    return {q["name"] for q in api(url, "/v1/quotas")["quotas"]}


def test_a_full_disk_is_said_plainly_and_loses_nothing(
    small_disk: Path, services: list[Service]
) -> None:
    coordinator = Service.coordinator(small_disk.parent, args=(f"--data-dir={small_disk}",))
    services.append(coordinator.start())
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    acknowledged = {f"before-{i}" for i in range(20) if write(url, f"before-{i}") == 200}
    assert len(acknowledged) == 20

    # 1. The disk fills up: writes are refused, the cause is logged once, /readyz degraded.
    filler = fill(small_disk)
    with ThreadPoolExecutor(10) as pool:  # at once: one group commit or several
        refused = list(pool.map(write, [url] * 10, [f"full-{i}" for i in range(10)]))
    assert set(refused) == {503}, refused
    status, body = readiness(url)
    assert (status, body["status"]) == (503, "degraded"), body
    assert FULL_CAUSE in body["reason"], body
    log = coordinator.text()
    causes = re.findall(rf"ERROR store writes fail: {FULL_CAUSE} .*free_bytes=\d+", log)
    assert len(causes) == 1, log
    assert "cannot rollback" not in log
    assert "Traceback" not in log
    assert stored_namespaces(url) >= acknowledged
    assert not stored_namespaces(url) & {f"full-{i}" for i in range(10)}

    # 2. Space is freed: the next write succeeds and the coordinator is ready again.
    filler.unlink()
    assert write(url, "after-freeing") == 200
    acknowledged.add("after-freeing")
    assert readiness(url) == (200, {"status": "ok", "role": "leader"})
    coordinator.wait_for(r"INFO store writes succeed again ")

    # 3. The disk fills again and the coordinator is restarted: one line, exit 1.
    filler = fill(small_disk)
    assert write(url, "full-again") == 503
    assert coordinator.stop() == 0
    restarted = coordinator.start()
    assert restarted.process is not None
    assert restarted.process.wait(timeout=30) == 1
    said = coordinator.text()[coordinator.log_start :]
    assert "Traceback" not in said, said
    (line,) = [line for line in said.splitlines() if " ERROR " in line]
    assert "cannot open the store" in line, said
    assert re.search(rf"{FULL_CAUSE}|disk I/O error", line), said
    assert f"0 bytes free in {small_disk}" in line, said

    # 4. Freed again: a fresh start holds every acknowledged write.
    filler.unlink()
    coordinator.start()
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    try:
        assert stored_namespaces(url) >= acknowledged
    except urllib.error.URLError as error:
        raise AssertionError(coordinator.text()) from error
    assert readiness(url)[0] == 200
