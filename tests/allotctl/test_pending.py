"""``allotctl`` on pending containers (issue 17): a drain with nowhere to go says what
stayed pending and exits 3; ``why`` gives the reason with numbers; ``deploy --dry-run``
says what would happen and changes nothing."""

from __future__ import annotations

import asyncio

import pytest

from tests.allotctl.test_deployments import allotctl
from tests.coordinator.conftest import Coordinator, register, report_caught_up

DEPLOY = ["deploy", "team-a", "--name", "web", "--image", "busybox", "--cpu", "0.5"]
NO_NODE = "needs 0.5 CPU + 64Mi on one node; no node takes containers: 1 cordoned (node-a)"


async def test_drain_why_and_uncordon_through_main(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = await register(cluster, "node-a")
    code, out, err = await allotctl(cluster, capsys, *DEPLOY, "--memory", "64Mi", "--count", "2")
    assert code == 0, err
    placed = sorted(line.split()[0] for line in out.splitlines()[3:])
    code, out, err = await allotctl(cluster, capsys, "drain", "node-a")
    head, *moves = out.splitlines()
    assert (code, head) == (3, "node-a drained: moved 0, pending 2"), err
    assert sorted(move.split()[0] for move in moves) == placed
    assert {" ".join(move.split()[3:]) for move in moves} == {f"pending: {NO_NODE}"}
    stand_ins = sorted(move.split()[2] for move in moves)

    code, out, err = await allotctl(cluster, capsys, "why", "team-a/web")
    head, *lines = out.splitlines()
    assert (code, head) == (0, "team-a/web counts 2: 2 pending; 2 stopping"), err
    held = "held on node-a until its agent reports it removed"
    assert sorted(lines) == sorted(
        [
            *(f"  {cid} is pending: {NO_NODE}" for cid in stand_ins),
            *(f"  {cid} is stopping on node-a (node node-a drained; {held})" for cid in placed),
        ]
    )
    await report_caught_up(cluster, ws)
    code, out, _ = await allotctl(cluster, capsys, "why", stand_ins[0])
    assert (code, out) == (0, f"{stand_ins[0]} is pending: {NO_NODE}\n")

    code, out, err = await allotctl(cluster, capsys, "uncordon", "node-a")
    assert code == 0, err
    for _ in range(250):
        code, out, _ = await allotctl(cluster, capsys, "why", "team-a/web")
        if "2 starting" in out:
            break
        await asyncio.sleep(0.02)  # the scheduler's pass after the uncordon
    assert out.splitlines()[0] == "team-a/web counts 2: 2 starting"
    assert sorted(out.splitlines()[1:]) == sorted(
        f"  {cid} is starting on node-a (not reported by node node-a yet)" for cid in stand_ins
    )
    await ws.close()


async def test_deploy_dry_run_says_where_and_changes_nothing(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = await register(cluster, "node-a")
    code, out, err = await allotctl(cluster, capsys, *DEPLOY, "--memory", "64Mi", "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "would deploy team-a/web: 1 container(s)"
    assert lines[3].split()[1] == "node-a"
    assert lines[-2:] == ["would preempt: nothing", "(a dry run: nothing was changed)"]
    code, _, err = await allotctl(cluster, capsys, "deployment", "team-a", "web")
    assert (code, err) == (1, "allotctl: no deployment team-a/web (404 not_found)\n")
    code, _, err = await allotctl(cluster, capsys, *DEPLOY, "--memory", "64Gi", "--dry-run")
    assert code == 1
    assert "capacity" in err
    await ws.close()
