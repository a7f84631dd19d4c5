"""End to end: a real allot-agent offering an extended resource from its config file and
a flag, as the coordinator and allotctl then show it. No container is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.processes import Service, allotctl, wait_for_node_state

pytestmark = pytest.mark.e2e
NODE = "e2e-fpga"
FPGA = "example.com/fpga"


def test_an_agent_offers_its_configured_extended_resources(
    tmp_path: Path, services: list[Service]
) -> None:
    coordinator = Service.coordinator(tmp_path).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    config = tmp_path / "agent.toml"
    config.write_text(f'extended_resources = {{"{FPGA}" = 1, "x.io/nic" = 1}}\n')
    flags = (f"--config={config}", f"--extended-resources={FPGA}=2")  # the flag wins
    services.append(Service.agent(tmp_path, url, NODE, args=flags).start())

    record = wait_for_node_state(url, NODE, "ready")
    assert record["inventory"]["extended"] == {FPGA: 2}
    node = allotctl(url, "node", NODE)
    assert node.returncode == 0, node.stderr
    assert f"extended       {FPGA}=2" in node.stdout.splitlines()
    allocation = allotctl(url, "allocation", NODE)
    assert allocation.returncode == 0, allocation.stderr
    assert f"extended     {FPGA} 0 of 2 used" in allocation.stdout.splitlines()

    # More units than the node has: refused with the numbers, so nothing is started.
    refused = allotctl(
        url, "deploy", "team-a", "--name", "fpga", "--image", "allot/busybox:test",
        "--cpu", "0.1", "--memory", "16Mi", "--extended", f"{FPGA}=3",
    )  # fmt: skip
    assert refused.returncode != 0
    assert "409 insufficient_devices" in refused.stderr, refused.stderr
    lines = [" ".join(line.split()) for line in refused.stderr.splitlines()]
    assert f"needed: {FPGA}=3" in lines, refused.stderr
    assert f'free: {NODE}={{"{FPGA}": 2}}' in lines, refused.stderr
