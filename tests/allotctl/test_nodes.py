"""allotctl's node administration commands: the SetNode body its flags make, the
allocation and the answers of cordon, uncordon, drain and node delete as printed, and
every command run through ``main`` against an in-process coordinator (deleting a lost
node: tests/coordinator/test_node_delete.py)."""

from __future__ import annotations

import json

import msgspec
import pytest

from allotctl.node_views import (
    allocation_view,
    cordoned_view,
    drain_left_pending,
    drained_view,
    node_deleted_view,
)
from allotctl.nodes import capacity
from allotctl.views import plan_tables
from coordinator.openapi import examples as ex
from shared.api.node_admin import Allocation
from shared.codec import to_json
from tests.allotctl.test_deployments import allotctl, parsed
from tests.coordinator.conftest import Coordinator, register, report_caught_up

MIB = 1024 * 1024
GIB = 1024 * MIB


# -- what the flags ask for -------------------------------------------------------------


def test_set_node_flags_make_the_api_body() -> None:
    args = parsed(
        "set-node", "node-a", "--mode", "delta", "--core", "2=100", "--core", "3=-50",
        "--numa", "2=0", "--memory=-1Gi", "--numa-memory", "0=512Mi",
    )  # fmt: skip
    assert args.node == "node-a"
    assert capacity(args) == {
        "mode": "delta",
        "cores": {2: 100, 3: -50},
        "numa": {2: 0},
        "memory": "-1Gi",
        "numa_memory": {0: "512Mi"},
    }
    absolute = parsed("set-node", "node-a", "--mode", "absolute", "--memory", "64Gi")
    assert capacity(absolute) == {"mode": "absolute", "memory": "64Gi"}
    oversold = parsed("set-node", "node-a", "--mode", "delta", "--cpu-overcommit", "1.5")
    assert capacity(oversold) == {"mode": "delta", "cpu_overcommit": "1.5"}


def test_set_node_refuses_to_change_nothing() -> None:
    message = (
        "set-node changes nothing: give one of --core, --numa, --numa-memory, --memory,"
        " --cpu-overcommit"
    )
    with pytest.raises(ValueError, match=f"^{message}$"):
        capacity(parsed("set-node", "node-a", "--mode", "delta"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["set-node", "node-a", "--core", "2=1"], "the following arguments are required: --mode"),
        (["set-node", "node-a", "--mode", "sideways"], "invalid choice: 'sideways'"),
        (["set-node", "node-a", "--mode", "delta", "--core", "two=1"], "expected ID=PIECES"),
        (["set-node", "node-a", "--mode", "delta", "--core", "2=half"], "expected ID=PIECES"),
        (["set-node", "node-a", "--mode", "delta", "--numa", "2"], "expected CORE=NUMA, got '2'"),
        (["set-node", "node-a", "--mode", "delta", "--numa-memory", "x=1Gi"], "NUMA=BYTES"),
        (["cordon"], "the following arguments are required: node"),
        (["drain", "node-a", "node-b"], "unrecognized arguments: node-b"),
        (["node"], "the following arguments are required: {NAME,delete}"),
        (["node", "delete", "node-a", "node-b"], "unrecognized arguments: node-b"),
        (["allocation", "node-a", "--", "sleep"], "allocation takes no command after --"),
    ],
)
def test_bad_node_arguments_stop_with_usage(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parsed(*argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


# -- what is shown ----------------------------------------------------------------------


ALLOCATION = Allocation(  # two cores on NUMA node 0, one and a half allocated
    node="node-a",
    cordoned=False,
    share_base=100,
    cores={0: 100, 1: 100},
    used={0: 100},
    memory=GIB,
    memory_used=192 * MIB,
    numa={0: 0, 1: 0},
    numa_memory={0: GIB},
    shared_pool=[1],
    containers=["team-a-web-1", "team-a-web-2"],
    version=4,
    shared_cpu=100,
    cpu_overcommit="1.5",
    shared_limit=150,
    unbound_cpu=50,
)


def allocation(**changes: object) -> bytes:
    return to_json(msgspec.structs.replace(ALLOCATION, **changes))


def test_the_allocation_shows_the_node_and_each_core() -> None:
    assert allocation_view(allocation()).splitlines() == [
        "node         node-a",
        "cordoned     no",
        "cores        1.5 of 2 used (1 bound, 0.5 unbound)",
        "share base   100 pieces per core",
        "memory       192Mi of 1Gi used",
        "numa memory  0=1Gi",
        "shared pool  1 (1 CPU x cpu_overcommit 1.5 = 1.5 for unbound containers, 0.5 requested)",
        "extended     -",
        "containers   2: team-a-web-1, team-a-web-2",
        "version      4",
        "",
        "CORE  NUMA  OFFERED  BOUND  FREE",
        "0     0     1        1      0",
        "1     0     1        0      1",
    ]


def test_an_empty_cordoned_node_without_numa_says_so() -> None:
    shown = allocation(
        cordoned=True,
        cores={0: 100, 2: 30},
        used={},
        memory=3 * GIB + 1000,
        memory_used=0,
        numa=None,
        numa_memory=None,
        shared_pool=[],
        containers=[],
        unbound_cpu=0,
    )
    assert allocation_view(shown).splitlines() == [
        "node         node-a",
        "cordoned     yes (takes no new containers)",
        "cores        0 of 1.3 used (0 bound, 0 unbound)",
        "share base   100 pieces per core",
        "memory       0 of 3.0Gi used",
        "numa memory  -",
        "shared pool  - (every core is bound)",
        "extended     -",
        "containers   none",
        "version      4",
        "",
        "CORE  NUMA  OFFERED  BOUND  FREE",
        "0     -     1        0      1",
        "2     -     0.3      0      0.3",
    ]
    bare = allocation_view(allocation(cores={}, used={}, numa={}, numa_memory={}))
    assert bare.endswith("version      4\n\nno cores offered")


def test_the_allocation_shows_extended_resources_offered_and_used() -> None:
    shown = allocation(
        extended={"example.com/fpga": 2, "x.io/nic": 1}, extended_used={"x.io/nic": 1}
    )
    assert "extended     example.com/fpga 0 of 2 used, x.io/nic 1 of 1 used" in (
        allocation_view(shown).splitlines()
    )


def test_cordon_uncordon_and_drain_answer_in_one_line() -> None:
    assert cordoned_view(b'{"node": "node-a", "cordoned": true}') == "node-a cordoned"
    assert cordoned_view(b'{"node": "node-a", "cordoned": false}') == "node-a uncordoned"
    moved = (
        b'{"node": "node-a", "cordoned": true, "released": ["a", "b"],'
        b' "stand_ins": {"a": "c", "b": "d"}, "placed": {"c": "node-b"},'
        b' "pending": {"d": "no room"}}'
    )
    assert drained_view(moved) == (
        "node-a drained: moved 1, pending 1\n  a -> c on node-b\n  b -> d pending: no room"
    )
    assert drain_left_pending(moved)
    empty = b'{"node": "node-a", "cordoned": true, "released": []}'
    assert drained_view(empty) == "node-a drained: moved 0, pending 0"
    assert not drain_left_pending(empty)


def test_a_node_deletion_shows_where_its_containers_went() -> None:
    deleted = (
        b'{"node": "node-c", "deleted": true, "released": ["a", "b"],'
        b' "stand_ins": {"a": "c", "b": "d"}, "placed": {"c": "node-b"},'
        b' "pending": {"d": "no room"}}'
    )
    assert node_deleted_view(deleted) == (
        "node-c deleted: moved 1, pending 1\n  a -> c on node-b\n  b -> d pending: no room"
    )
    empty = b'{"node": "node-c", "deleted": true}'
    assert node_deleted_view(empty) == "node-c deleted: moved 0, pending 0"


# -- through main, against a coordinator ------------------------------------------------


async def test_every_node_command_through_main(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    node_a = await register(cluster, "node-a")
    node_b = await register(cluster, "node-b")
    code, out, err = await allotctl(cluster, capsys, "cordon", "node-b")
    assert (code, out) == (0, "node-b cordoned\n"), err
    code, out, err = await allotctl(
        cluster, capsys, "deploy", "team-a", "--name", "web", "--image", "busybox",
        "--cpu", "0.5", "--memory", "64Mi", "--count", "2", "--cpu-bind", "--json",
    )  # fmt: skip
    assert code == 0, err
    placed = sorted(view["record"]["id"] for view in json.loads(out)["containers"])

    code, out, err = await allotctl(cluster, capsys, "allocation", "node-a")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:5] == [
        "node         node-a",
        "cordoned     no",
        "cores        1 of 2 used (1 bound, 0 unbound)",
        "share base   100 pieces per core",
        "memory       128Mi of 1Gi used",
    ]
    assert f"containers   2: {', '.join(placed)}" in lines
    assert lines[-3] == "CORE  NUMA  OFFERED  BOUND  FREE"
    code, out, _ = await allotctl(cluster, capsys, "allocation", "node-a", "--json")
    assert json.loads(out)["containers"] == placed

    code, out, err = await allotctl(
        cluster, capsys, "set-node", "node-a", "--mode", "delta", "--core", "2=100",
        "--numa", "2=0", "--memory", "1Gi", "--numa-memory", "0=1Gi",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == "cores        1 of 3 used (1 bound, 0 unbound)"
    assert lines[4:6] == ["memory       128Mi of 2Gi used", "numa memory  0=2Gi"]
    assert lines[-1] == "2     0     1        0      1"
    code, out, err = await allotctl(
        cluster, capsys, "set-node", "node-a", "--mode", "absolute", "--memory", "64Mi"
    )
    assert (code, out) == (1, "")
    assert err.splitlines()[0].endswith("(409 below_allocation)")
    assert "  reason:     capacity" in err.splitlines()

    code, out, err = await allotctl(cluster, capsys, "uncordon", "node-b")
    assert (code, out) == (0, "node-b uncordoned\n"), err
    code, out, err = await allotctl(cluster, capsys, "drain", "node-a")
    assert code == 0, err
    code, listing, _ = await allotctl(cluster, capsys, "containers")
    rows = [line.split() for line in listing.splitlines()[1:]]
    stopping = [row for row in rows if row[4] == "stopping"]
    rows = [row for row in rows if row[4] != "stopping"]
    assert sorted(row[0] for row in stopping) == sorted(placed)
    assert [row[3] for row in stopping + rows] == ["node-a", "node-a", "node-b", "node-b"]
    replacements = sorted(row[0] for row in rows)
    head, *moves = out.splitlines()
    assert head == "node-a drained: moved 2, pending 0"
    assert sorted(move.split()[0] for move in moves) == sorted(placed), err
    assert sorted(move.split()[2] for move in moves) == replacements
    assert {" ".join(move.split()[3:]) for move in moves} == {"on node-b"}
    code, out, _ = await allotctl(cluster, capsys, "allocation", "node-a")
    assert out.splitlines()[1:3] == [
        "cordoned     yes (takes no new containers)",
        "cores        1 of 3 used (1 bound, 0 unbound)",  # held by those stopping
    ]
    await report_caught_up(cluster, node_a)
    code, out, _ = await allotctl(cluster, capsys, "allocation", "node-a")
    assert out.splitlines()[2] == "cores        0 of 3 used (0 bound, 0 unbound)"

    code, out, err = await allotctl(cluster, capsys, "node", "delete", "node-a")
    assert (code, out) == (1, ""), out
    assert err.splitlines()[0].endswith("(409 node_not_lost)"), err
    code, out, err = await allotctl(cluster, capsys, "node", "delete")
    assert (code, err) == (1, "allotctl: delete needs a NAME\n")
    code, out, err = await allotctl(cluster, capsys, "node", "node-a", "extra")
    assert (code, err) == (1, "allotctl: 'extra': expected NAME or delete NAME\n")
    code, out, err = await allotctl(cluster, capsys, "node", "node-a")
    assert (code, out.splitlines()[0].split()) == (0, ["name", "node-a"]), err
    code, out, _ = await allotctl(cluster, capsys, "drain", "node-a")
    assert out == "node-a drained: moved 0, pending 0\n"
    code, out, _ = await allotctl(cluster, capsys, "events", "--node", "node-a", "--kind", "node")
    reasons = [" ".join(line.split()[7:]) for line in out.splitlines()[1:]]
    assert reasons == ["capacity set (delta): 3 cores, 2Gi", "cordoned"]

    code, _, err = await allotctl(cluster, capsys, "cordon", "nowhere")
    assert (code, err) == (1, "allotctl: no node nowhere (404 not_found)\n")
    for ws in (node_a, node_b):
        await ws.close()


def test_a_plan_names_the_nodes_it_left_out() -> None:
    lines = plan_tables(to_json(ex.PLAN_SKIPPING)).splitlines()
    assert "left out  node-old: inventory.memory = -5: Expected `int` >= 1" in lines
    assert not any(
        line.startswith("left out") for line in plan_tables(to_json(ex.PLAN_RESPONSE)).splitlines()
    )


async def test_the_walkthrough_charges_unbound_cpu_and_keeps_bound_cores_exclusive(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 17, items 2-4, as the README's walk-through saw them on a two-CPU node."""
    node = await register(cluster, "node-a")
    deploy = ("deploy", "team-a", "--image", "busybox", "--memory", "32Mi")
    code, out, err = await allotctl(
        cluster, capsys, *deploy, "--name", "web", "--cpu", "0.5", "--count", "2", "--cpu-bind",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    web = json.loads(out)["containers"][0]["record"]["id"]
    code, _, err = await allotctl(cluster, capsys, *deploy, "--name", "batch", "--cpu", "0.5")
    assert code == 0, err
    code, out, err = await allotctl(cluster, capsys, "allocation", "node-a")
    assert "cores        1.5 of 2 used (1 bound, 0.5 unbound)" in out.splitlines(), out
    code, out, err = await allotctl(cluster, capsys, "realloc", web, "--cpu", "+0.5")
    assert code == 1, out  # item 2: it took core 1, and the shared pool fell back to 0-1
    assert "kept for the unbound containers" in err
    code, out, err = await allotctl(cluster, capsys, "allocation", "node-a")
    assert "shared pool" in out
    assert "1 (1 CPU x cpu_overcommit 1 = 1 for unbound containers, 0.5 requested)" in out
    code, out, err = await allotctl(
        cluster, capsys, "plan", "--cpu", "2", "--memory", "16Mi", "--count", "1"
    )
    assert code == 1, out  # item 3: it answered "1506 more"
    assert "(409 insufficient_capacity)" in err.splitlines()[0]
    code, out, err = await allotctl(cluster, capsys, *deploy, "--name", "idle", "--cpu", "0")
    assert code == 1, out  # item 4: it ran with no CPU limit, uncounted
    assert err == "allotctl: --cpu '0': must be > 0: every container asks for CPU\n"
    code, out, _ = await allotctl(cluster, capsys, "deployments", "team-a")
    assert "idle" not in out
    await node.close()
