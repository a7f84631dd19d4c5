"""A recorded dual-socket host with SMT, a whole GPU and two A100s in MIG mode, on the
dashboard in headless chromium: its core map by NUMA node and physical core, who holds
which CPU, GPU and MIG device, and the keyboard's way through the page.

The node's agent is a plain websocket client that says hello with the inventory the real
discovery finds in the recorded sysfs tree and the fake NVML; the coordinator runs in the
test's event loop and the browser in a thread beside it. With ALLOT_UPDATE_SCREENSHOTS=1
the node page becomes the README's docs/dashboard.png.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from agent.discovery.cpu import HostTotals
from agent.discovery.gpu import probe_gpus
from agent.discovery.inventory import discover
from shared.codec import to_builtins
from shared.cpuset import CpuSet
from shared.inventory import Inventory
from tests.coordinator.conftest import (
    API_TOKEN,
    Coordinator,
    config_for,
    hello,
    receive_frame,
    start,
)
from tests.fakes.nvml import eight_whole_gpus, two_gpus_mig_mixed
from tests.fixtures.sysfs import load_fixture, materialize
from tests.ui.test_dashboard import console_errors, log_in

NODE = "gpu-7"
GIB = 2**30
SLEEPER = {"image": "allot/busybox:test", "command": ["sleep", "3600"]}
README_SCREENSHOT = Path(__file__).parents[2] / "docs" / "dashboard.png"


def dual_socket_with_gpus(root: Path) -> Inventory:
    """The recorded dual-socket host (2 NUMA nodes, 16 cores, 32 CPUs; 0 and 16 reserved)
    with one whole H100 and two A100s in MIG mode."""
    materialize(load_fixture("dual_socket_ht"), root)
    found = discover(
        sysfs_root=root,
        reserved=CpuSet([0, 16]),
        hostname=NODE,
        nvml=two_gpus_mig_mixed(),
        totals=HostTotals(logical_cpus=32, memory=128 * GIB),
    )
    (whole, *_) = probe_gpus(eight_whole_gpus(), lambda _: None).gpus
    mig = [msgspec.structs.replace(gpu, index=gpu.index + 1) for gpu in found.gpus]
    return msgspec.structs.replace(found, gpus=[whole, *mig])


@pytest.fixture
async def gpu_node(tmp_path: Path) -> AsyncIterator[str]:
    """The coordinator's URL, with gpu-7 holding containers of two namespaces."""
    runner, url = await start(config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0))
    inventory = to_builtins(dual_socket_with_gpus(tmp_path / "host"))
    async with aiohttp.ClientSession() as http:
        coordinator = Coordinator(url=url, app=runner.app, http=http)
        agent = await coordinator.connect()
        await agent.send_bytes(hello(NODE, inventory=inventory))
        assert (await receive_frame(agent))["type"] == "welcome"
        for namespace, name, count, resources in [
            ("team-a", "train", 1, {"cpu": "6", "memory": "8Gi", "gpus": 1}),
            ("team-a", "infer", 2, {"cpu": "2", "memory": "2Gi", "mig": {"1g.10gb": 1}}),
            ("team-b", "etl", 3, {"cpu": "1.5", "memory": "1Gi"}),
            ("team-b", "web", 4, {"cpu": "0.5", "memory": "256Mi"}),
        ]:
            bind = {"cpu_bind": namespace == "team-a" or name == "etl"}
            body = SLEEPER | bind | {"name": name, "count": count, "resources": resources}
            status, answer = await coordinator.call(
                "POST", f"/v1/namespaces/{namespace}/deployments", body
            )
            assert status == 201, answer
        yield url
        await agent.close()
    await runner.cleanup()


async def test_a_dual_socket_gpu_host_on_the_core_map(
    gpu_node: str, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    facts = await asyncio.to_thread(look_at_the_node, browser, gpu_node, tmp_path)
    assert facts["numa"] == ["NUMA node 0", "NUMA node 1"]
    assert facts["cpus_per_core"] == [2] * 16
    assert facts["kinds"]["withheld"] == ["0", "16"]
    assert len(facts["kinds"]["bound"]) == 6 + 2 * 2 + 3
    assert len(facts["kinds"]["fragment"]) >= 1  # etl's half cores
    assert facts["kinds"]["shared"]  # where web runs
    gpus = facts["gpus"]
    assert any(line.startswith("GPU 0 ") and "team-a/train" in line for line in gpus), gpus
    assert sum("MIG 1g.10gb" in line and "team-a/infer" in line for line in gpus) == 2, gpus
    assert facts["focused"] == ("Cluster", True)
    assert facts["errors"] == []


def look_at_the_node(browser: webdriver.Chrome, url: str, tmp_path: Path) -> dict[str, Any]:
    log_in(browser, url, API_TOKEN)
    browser.get(f"{url}/ui/nodes/{NODE}")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(int(height) + 140, 2400))  # the whole page
    shot = tmp_path / "gpu-node.png"
    browser.save_screenshot(str(shot))
    if os.environ.get("ALLOT_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(shot, README_SCREENSHOT)
    kinds: dict[str, list[str]] = {}
    for cell in browser.find_elements(By.CSS_SELECTOR, "g.cpu-cell"):
        kind = cell.get_attribute("data-kind") or ""
        kinds.setdefault(kind, []).append(cell.get_attribute("data-cpu") or "")
    cores = browser.find_elements(By.CSS_SELECTOR, "g.physical-core")
    # The keyboard: the first Tab reaches the first link, with a visible focus ring.
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    focused = browser.switch_to.active_element
    outline = browser.execute_script("return getComputedStyle(arguments[0]).outlineStyle", focused)
    return {
        "numa": [
            e.text for e in browser.find_elements(By.CSS_SELECTOR, "figure.core-map figcaption")
        ],
        "cpus_per_core": [len(c.find_elements(By.CSS_SELECTOR, "g.cpu-cell")) for c in cores],
        "kinds": {kind: sorted(cpus, key=int) for kind, cpus in kinds.items()},
        "gpus": [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#gpus + ul li")],
        "focused": (focused.text, outline != "none"),
        "errors": console_errors(browser),
    }
