"""The agent's reports stay within what the coordinator takes, however long the reasons
it has to give (an engine's error text, many discovery problems)."""

from __future__ import annotations

from pathlib import Path

from agent.runtime.docker_engine import DockerEngine
from agent.runtime.plan import Host
from agent.runtime.reconciler import Runtime, RuntimeOptions
from shared.bounds import MAX_MESSAGE, MAX_MESSAGES
from shared.protocol import decode_from_agent, encode
from tests.builders import make_inventory


def test_node_problems_are_clipped_to_what_a_status_may_carry() -> None:
    problems = ["p" * (MAX_MESSAGE * 3), *(f"problem {i}" for i in range(MAX_MESSAGES * 2))]
    engine = DockerEngine.connect(node="n1", base_url="unix:///nonexistent/docker.sock", timeout=1)
    options = RuntimeOptions(
        node="n1",
        state_path=Path("/nonexistent/agent.json"),
        applied_path=Path("/nonexistent/applied.json"),
        node_problems=problems,
    )
    report = Runtime(engine, Host.of(make_inventory()), options).report()
    assert len(report.problems) == MAX_MESSAGES
    assert report.problems[0] == "p" * (MAX_MESSAGE - 3) + "..."
    assert report.problems[1:] == problems[1:MAX_MESSAGES]
    assert decode_from_agent(encode(report)) == report
