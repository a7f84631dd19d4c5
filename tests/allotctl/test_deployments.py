"""allotctl's deployment, container and event commands: the API bodies their flags and
files make, the tables and details they print, refusals with their numbers, and every
command run through ``main`` against an in-process coordinator."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from allotctl.deployment_views import (
    container_details,
    containers_table,
    deleted_view,
    events_table,
    placed_table,
    realloc_view,
    replaced_view,
)
from allotctl.deployments import (
    containers_path,
    deletion_path,
    deployment_spec,
    events_path,
    realloc_delta,
    replacement,
)
from allotctl.main import main, parse
from client.api import describe_details
from coordinator.openapi import examples as ex
from shared.api.containers import ContainerRecord, ContainerView, HistoryEntry
from shared.api.events import Event
from shared.codec import to_json
from shared.protocol import Attempt, ContainerStatus, Limits
from tests.coordinator.conftest import API_TOKEN, Coordinator, register, report_caught_up

MIB = 1024 * 1024
WEB_TOML = """\
name = "web"
image = "busybox"
command = ["sleep", "3600"]
count = 2
cpu_bind = true
[resources]
cpu = "0.5"
memory = "64Mi"
[env]
MODE = "prod"
"""
WEB = {
    "name": "web",
    "image": "busybox",
    "command": ["sleep", "3600"],
    "count": 2,
    "cpu_bind": True,
    "resources": {"cpu": "0.5", "memory": "64Mi"},
    "env": {"MODE": "prod"},
}


def parsed(*argv: str) -> argparse.Namespace:
    return parse(["--token", "t", *argv])


# -- what the flags and files ask for ---------------------------------------------------


def test_deploy_flags_make_the_api_body() -> None:
    args = parsed(
        "deploy", "team-a", "--name", "web", "--image", "busybox", "--cpu", "0.5",
        "--memory", "64Mi", "--count", "2", "--cpu-bind", "--strategy", "each",
        "--nodes-limit", "1", "--priority", "3", "--restart-policy", "on-failure",
        "--stop-timeout", "30",
        "--env", "A=1", "--env", "B=x=y", "--label", "tier=web", "--", "sleep", "--for", "60",
    )  # fmt: skip
    assert args.namespace == "team-a"
    assert deployment_spec(args) == {
        "name": "web",
        "image": "busybox",
        "count": 2,
        "cpu_bind": True,
        "strategy": "each",
        "nodes_limit": 1,
        "priority": 3,
        "restart_policy": "on-failure",
        "stop_timeout_seconds": 30,
        "resources": {"cpu": "0.5", "memory": "64Mi"},
        "env": {"A": "1", "B": "x=y"},
        "labels": {"tier": "web"},
        "command": ["sleep", "--for", "60"],
    }


@pytest.mark.parametrize("suffix", ["toml", "json"])
def test_a_file_gives_the_fields_and_flags_win_over_them(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"web.{suffix}"
    path.write_text(WEB_TOML if suffix == "toml" else json.dumps(WEB))
    assert deployment_spec(parsed("deploy", "team-a", "--file", str(path))) == WEB
    args = parsed(
        "deploy", "team-a", "--file", str(path), "--count", "3", "--no-cpu-bind",
        "--memory", "128Mi", "--env", "DEBUG=1", "--", "sleep", "60",
    )  # fmt: skip
    assert deployment_spec(args) == WEB | {
        "count": 3,
        "cpu_bind": False,
        "resources": {"cpu": "0.5", "memory": "128Mi"},
        "env": {"MODE": "prod", "DEBUG": "1"},
        "command": ["sleep", "60"],
    }


def test_extended_flags_add_to_the_files_resources(tmp_path: Path) -> None:
    path = tmp_path / "fpga.toml"
    path.write_text(WEB_TOML + '\n[resources.extended]\n"example.com/fpga" = 1\n"x.io/nic" = 1\n')
    from_file = deployment_spec(parsed("deploy", "team-a", "--file", str(path)))
    assert from_file["resources"]["extended"] == {"example.com/fpga": 1, "x.io/nic": 1}
    args = parsed(
        "deploy", "team-a", "--file", str(path),
        "--extended", "example.com/fpga=2", "--extended", "y.io/dsp=1",
    )  # fmt: skip
    assert deployment_spec(args)["resources"] == {
        "cpu": "0.5",
        "memory": "64Mi",
        "extended": {"example.com/fpga": 2, "x.io/nic": 1, "y.io/dsp": 1},
    }
    bare = parsed("deploy", "team-a", "--extended", "example.com/fpga=1")
    assert deployment_spec(bare) == {"resources": {"extended": {"example.com/fpga": 1}}}


@pytest.mark.parametrize(
    ("name", "text", "flags", "message"),
    [
        ("web.yaml", "name: web", (), "web.yaml: a deployment file is .toml or .json"),
        ("web.toml", "name = ", (), "web.toml: Invalid value (at end of document)"),
        ("web.json", "[1]", (), "web.json: expected an object with the deployment's fields"),
        ("web.toml", 'resources = "1"', ("--cpu", "1"), "resources in the deployment file"),
        (
            "web.toml",
            "[resources]\nextended = 2",
            ("--extended", "a.io/b=1"),
            "resources.extended in the deployment file must be a table, not 2",
        ),
    ],
)
def test_a_bad_deployment_file_is_refused_saying_why(
    tmp_path: Path, name: str, text: str, flags: tuple[str, ...], message: str
) -> None:
    (tmp_path / name).write_text(text)
    args = parsed("deploy", "team-a", "--file", str(tmp_path / name), *flags)
    with pytest.raises(ValueError, match=re.escape(message)):
        deployment_spec(args)


@pytest.mark.parametrize(
    "argv",
    [
        ["containers", "--", "sleep"],  # only deploy runs a command
        ["deploy", "team-a", "--env", "NOEQUALS"],
        ["deploy", "team-a", "--extended", "example.com/fpga"],
        ["deploy", "team-a", "--extended", "example.com/fpga=one"],
        ["containers", "--capacity", "sometimes"],
        ["delete", "pod", "x"],
        ["scale", "team-a", "web", "many"],
        ["scale", "team-a", "web"],
        ["replace", "c1", "--", "sleep"],  # --image is required
        ["events", "--since", "yesterday"],
        ["events", "--colour", "red"],
        ["deploy", "team-a", "--stop-timeout", "soon"],
    ],
)
def test_bad_arguments_stop_with_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parsed(*argv)
    assert stopped.value.code == 2


def test_realloc_sends_only_the_changes_given() -> None:
    args = parsed("realloc", "c1", "--cpu", "-0.5", "--memory=-32Mi", "--cpu-limit", "+1")
    assert realloc_delta(args) == {"cpu": "-0.5", "memory": "-32Mi", "cpu_limit": "1"}
    assert realloc_delta(parsed("realloc", "c1", "--no-cpu-bind")) == {"cpu_bind": False}
    with pytest.raises(ValueError, match="realloc changes nothing: give one of --cpu, "):
        realloc_delta(parsed("realloc", "c1"))


def test_containers_filters_become_the_query() -> None:
    assert containers_path(parsed("containers")) == "/v1/containers"
    args = parsed("containers", "--node", "node a", "--capacity", "over-quota")
    assert containers_path(args) == "/v1/containers?node=node+a&capacity=over-quota"


def test_scale_takes_a_whole_count() -> None:
    args = parsed("scale", "team-a", "web", "3")
    assert (args.namespace, args.name, args.count) == ("team-a", "web", 3)


def test_replace_sends_the_image_and_a_command_only_when_given() -> None:
    assert replacement(parsed("replace", "c1", "--image", "busybox:2")) == {"image": "busybox:2"}
    args = parsed("replace", "c1", "--image", "busybox:2", "--", "sleep", "--for", "60")
    assert args.id == "c1"
    assert replacement(args) == {"image": "busybox:2", "command": ["sleep", "--for", "60"]}


def test_events_filters_become_the_query() -> None:
    assert events_path(parsed("events")) == "/v1/events"
    args = parsed(
        "events", "--namespace", "team-a", "--deployment", "web", "--container", "c 1",
        "--node", "node-a", "--kind", "placed", "--since", "12",
    )  # fmt: skip
    query = "namespace=team-a&deployment=web&container=c+1&node=node-a&kind=placed&since=12"
    assert events_path(args) == f"/v1/events?{query}"
    assert events_path(parsed("events", "--since", "0")) == "/v1/events?since=0"


def test_delete_names_a_deployment_or_a_container() -> None:
    assert deletion_path("deployment", ["team-a", "web"]) == "/v1/namespaces/team-a/deployments/web"
    assert deletion_path("container", ["a/b"]) == "/v1/containers/a%2Fb"
    with pytest.raises(ValueError, match=r"^usage: allotctl delete deployment NAMESPACE NAME$"):
        deletion_path("deployment", ["web"])
    with pytest.raises(ValueError, match=r"^usage: allotctl delete container ID$"):
        deletion_path("container", ["a", "b"])


# -- what is shown ----------------------------------------------------------------------


def container(**fields: Any) -> ContainerView:
    """A bound half-core container on node-a; ``fields`` override the record's."""
    record: dict[str, Any] = {
        "id": "team-a-web-1",
        "namespace": "team-a",
        "deployment": "web",
        "node": "node-a",
        "image": "busybox",
        "command": ["sleep", "3600"],
        "env": {},
        "labels": {},
        "restart_policy": "no",
        "cpu_bind": True,
        "requests": {"cpu": "0.5", "memory": 64 * MIB},
        "priority": 0,
        "pool": "team-a",
        "created": 0.0,
        "capacity": "in-quota",
        "limits": Limits(
            cpuset_cpus="2",
            cpu_shares=512,
            mem_limit=64 * MIB,
            memswap_limit=64 * MIB,
            mem_reservation=32 * MIB,
        ),
        "history": [HistoryEntry(at=0.0, event="placed", detail="on node-a")],
    }
    return ContainerView(
        record=ContainerRecord(**(record | fields)),
        state="starting",
        observed=None,
        reason="not reported by node node-a yet",
    )


def test_the_containers_table_shows_placement_and_limits() -> None:
    bound = container()
    shared = container(
        id="team-a-batch-1",
        deployment="batch",
        cpu_bind=False,
        capacity="",
        limits=Limits(cpuset_cpus="0-1", cpu_shares=1024, cpu_quota=25_000, mem_reservation=MIB),
    )
    failed = msgspec.structs.replace(
        container(id="team-a-web-2"), state="failed", reason="create failed: No such image: x"
    )
    body = to_json({"containers": [bound, shared, failed]})
    assert containers_table(body).splitlines() == [
        "ID              NAMESPACE  DEPLOYMENT  NODE    STATE     CAPACITY  CPUSET  SHARES"
        "  QUOTA         MEMORY    REASON",
        "team-a-web-1    team-a     web         node-a  starting  in-quota  2       512"
        "     none          64Mi      not reported by node node-a yet",
        "team-a-batch-1  team-a     batch       node-a  starting  -         shared  1024"
        "    25000/100000  soft 1Mi  not reported by node node-a yet",
        "team-a-web-2    team-a     web         node-a  failed    in-quota  2       512"
        "     none          64Mi      create failed: No such image: x",
    ]
    assert containers_table(b'{"containers": []}') == "no containers"


def test_a_containers_details_show_what_its_agent_reported() -> None:
    view = container()
    observed = ContainerStatus(
        id=view.record.id,
        state="exited",
        limits=view.record.limits,
        revision=7,
        started_at="2026-11-21T09:00:00Z",
        exit_code=137,
        error="exited with code 137 (try 3 in a row; the next 4s after it)",
        drift=["cpu_shares 2 -> 512"],
        cpu_usage=0.25,
        cpu_pressure=12.5,
        attempt=Attempt(
            outcome="restarted",
            reason="started again: exited with code 137 (2 tries in a row)",
            number=2,
            at=0.0,
        ),
    )
    reported = ContainerView(
        record=view.record,
        state="failed",
        observed=observed,
        reason="exited with code 137 (try 3 in a row; the next 4s after it)",
    )
    lines = container_details(to_json(reported)).splitlines()
    for line in [
        "capacity        in-quota",
        "requests        cpu=0.5, memory=64Mi",
        "cpuset          2 (bound)",
        "cpu shares      512",
        "cpu quota       none",
        "memory          limit 64Mi, with swap 64Mi, reserved 32Mi",
        "holds           -",
        "state           failed: exited with code 137 (try 3 in a row; the next 4s after it)",
        "engine state    exited, started 2026-11-21T09:00:00Z, exit code 137",
        "last attempt    restarted 1970-01-01T00:00:00Z: started again: exited with code 137"
        " (2 tries in a row)",
        "engine holds    cpuset 2, shares 512, quota none, memory limit 64Mi, with swap 64Mi,"
        " reserved 32Mi",
        "uses            cpu 0.25 cores, memory -",
        "cpu pressure    12.5%",
        "revision        7",
        "drift           cpu_shares 2 -> 512",
        "AT                    EVENT   DETAIL",
        "1970-01-01T00:00:00Z  placed  on node-a",
    ]:
        assert line in lines
    pending = container_details(to_json(view))
    assert "state           starting: not reported by node node-a yet" in pending


def test_a_containers_details_show_the_devices_and_extended_resources_it_holds() -> None:
    view = container(gpus=["GPU-aaa"], extended={"x.io/nic": 1, "example.com/fpga": 2})
    lines = container_details(to_json(view)).splitlines()
    assert "holds           GPU-aaa, example.com/fpga=2, x.io/nic=1" in lines


def test_a_deploy_names_the_nodes_it_left_out() -> None:
    lines = placed_table(to_json(ex.DEPLOYMENT_SKIPPING)).splitlines()
    assert lines[0] == "deployed team-a/web: 2 container(s)"
    assert lines[-2:] == [
        "",
        "node node-old left out: inventory.memory = -5: Expected `int` >= 1",
    ]
    assert placed_table(to_json(ex.DEPLOYMENT)).splitlines()[-1].startswith("team-a-web-")


def test_a_realloc_shows_the_new_limits() -> None:
    assert realloc_view(to_json(container())).splitlines() == [
        "container   team-a-web-1 on node-a",
        "requests    cpu=0.5, memory=64Mi",
        "cpuset      2 (bound)",
        "cpu shares  512",
        "cpu quota   none",
        "memory      limit 64Mi, with swap 64Mi, reserved 32Mi",
    ]


def test_a_replacement_shows_the_new_container_and_its_limits() -> None:
    fresh = container(id="team-a-web-2", image="busybox:2", command=[])
    assert replaced_view(to_json(fresh), "team-a-web-1").splitlines() == [
        "replaced    team-a-web-1",
        "container   team-a-web-2 on node-a",
        "image       busybox:2",
        "command     - (the image's)",
        "requests    cpu=0.5, memory=64Mi",
        "cpuset      2 (bound)",
        "cpu shares  512",
        "cpu quota   none",
        "memory      limit 64Mi, with swap 64Mi, reserved 32Mi",
    ]


def test_the_events_table_shows_each_events_subject_and_reason() -> None:
    events = [
        Event(
            sequence=7,
            at=1000.0,
            kind="placed",
            reason="on node-a",
            namespace="team-a",
            deployment="web",
            container="team-a-web-1",
            node="node-a",
        ),
        Event(sequence=12, at=1000.0 - 7200, kind="node", reason="cordoned", node="node-b"),
    ]
    assert events_table(to_json({"events": events}), now=1045.0).splitlines() == [
        "SEQ  AGE  KIND    NAMESPACE  DEPLOYMENT  CONTAINER     NODE    REASON",
        "7    45s  placed  team-a     web         team-a-web-1  node-a  on node-a",
        "12   2h   node    -          -           -             node-b  cordoned",
    ]
    assert events_table(b'{"events": []}') == "no events"


def test_deletions_say_what_went() -> None:
    both = b'{"deleted": "web", "containers": ["c1", "c2"]}'
    shown = deleted_view(both, "deployment", ["team-a", "web"])
    assert shown == "deleted deployment team-a/web and its 2 container(s): c1, c2"
    placed = b'{"deleted": "c1", "stand_in": "c2", "node": "node-a"}'
    assert deleted_view(placed, "container", ["c1"]) == (
        "deleted container c1; its stand-in c2 is on node-a"
    )
    waiting = b'{"deleted": "c1", "stand_in": "c2", "pending": "no room"}'
    assert deleted_view(waiting, "container", ["c1"]) == (
        "deleted container c1; its stand-in c2 is pending: no room"
    )


def test_a_refusals_details_are_shown_one_per_line() -> None:
    details = {
        "reason": "quota",
        "quota": "team-a",
        "items": [{"resource": "cpu", "used": "1", "request": "0.5", "max": "1"}],
        "capacities": {"node-a": 4, "node-b": 0},
        "fits": False,
        "nodes": [],
    }
    assert describe_details(details).splitlines() == [
        "  reason:      quota",
        "  quota:       team-a",
        "  items:       resource=cpu used=1 request=0.5 max=1",
        "  capacities:  node-a=4 node-b=0",
        "  fits:        false",
        "  nodes:       -",
    ]


# -- through main, against a coordinator ------------------------------------------------


async def allotctl(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    """``main`` in a thread (its client blocks) while the coordinator serves in this loop."""
    code = await asyncio.to_thread(main, ["--server", cluster.url, "--token", API_TOKEN, *argv])
    out, err = capsys.readouterr()
    return code, out, err


async def test_every_command_through_main(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ws = await register(cluster, "node-a")
    (tmp_path / "web.toml").write_text(WEB_TOML)
    code, out, err = await allotctl(
        cluster, capsys, "deploy", "team-a", "--file", str(tmp_path / "web.toml")
    )
    assert code == 0, err
    head, _, header, *rows = out.splitlines()
    assert head == "deployed team-a/web: 2 container(s)"
    assert header.split() == ["ID", "NODE", "CAPACITY", "CPUSET", "SHARES", "QUOTA", "MEMORY"]
    assert [row.split()[1:] for row in rows] == [["node-a", "-", "0", "512", "none", "64Mi"]] * 2
    first = rows[0].split()[0]
    code, out, err = await allotctl(
        cluster, capsys, "deploy", "team-a", "--name", "batch", "--image", "busybox",
        "--cpu", "0.25", "--memory", "32Mi", "--json", "--", "sleep", "60",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["deployment"]["spec"]["command"] == ["sleep", "60"]

    code, out, _ = await allotctl(cluster, capsys, "deployments", "team-a")
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "IMAGE", "COUNT", "CPU", "MEMORY", "CPU-BIND", "STRATEGY", "RUNNING/TOTAL"],
        ["batch", "busybox", "1", "0.25", "32Mi", "no", "auto", "0/1"],
        ["web", "busybox", "2", "0.5", "64Mi", "yes", "auto", "0/2"],
    ]
    code, out, _ = await allotctl(cluster, capsys, "deployment", "team-a", "web")
    assert "command         sleep 3600" in out.splitlines()
    assert "env             MODE=prod" in out.splitlines()
    assert out.count("team-a-web-") == 2

    code, out, _ = await allotctl(cluster, capsys, "containers", "--deployment", "batch")
    assert [line.split()[1:6] for line in out.splitlines()[1:]] == [
        ["team-a", "batch", "node-a", "starting", "-"]
    ]
    code, out, _ = await allotctl(cluster, capsys, "containers", "--json")
    assert len(json.loads(out)["containers"]) == 3

    # batch runs on the shared pool, core 1, which a bound container may not take.
    code, _, err = await allotctl(cluster, capsys, "delete", "deployment", "team-a", "batch")
    assert code == 0, err
    code, out, _ = await allotctl(cluster, capsys, "containers", "--deployment", "batch")
    (row,) = [line.split() for line in out.splitlines()[1:]]
    assert row[4] == "stopping"
    code, out, _ = await allotctl(cluster, capsys, "container", row[0])
    held = "its allocation stays on node-a until its agent reports it removed"
    assert f"stopping        its deployment was deleted; {held}" in out.splitlines()
    await report_caught_up(cluster, ws)  # its agent removed it: core 1 is free again
    code, out, err = await allotctl(
        cluster, capsys, "realloc", first, "--cpu", "+0.5", "--memory", "32Mi"
    )
    assert code == 0, err
    assert "memory      limit 96Mi, with swap 96Mi, reserved 48Mi" in out.splitlines()
    code, out, _ = await allotctl(cluster, capsys, "container", first)
    assert "requests        cpu=1, memory=96Mi" in out.splitlines()
    assert any(line.split()[1:2] == ["realloc"] for line in out.splitlines())
    code, out, err = await allotctl(cluster, capsys, "realloc", first, "--cpu", "-2")
    assert code == 1
    message, *details = err.splitlines()
    assert message.startswith("allotctl: cpu_request")
    assert message.endswith("(422 invalid_request)")
    assert "  reason:  invalid" in details

    code, out, _ = await allotctl(cluster, capsys, "delete", "container", first)
    assert code == 0
    stand_in = out.removeprefix(f"deleted container {first}; its stand-in ").split()[0]
    assert out == f"deleted container {first}; its stand-in {stand_in} is on node-a\n"
    code, out, _ = await allotctl(cluster, capsys, "delete", "deployment", "team-a", "web")
    assert out.startswith("deleted deployment team-a/web and its 2 container(s): ")
    assert stand_in in out
    assert first not in out
    code, out, _ = await allotctl(cluster, capsys, "container", first)
    assert "stopping        deleted on request; " in "\n".join(out.splitlines())
    await report_caught_up(cluster, ws)  # gone from the host, so gone from the books
    code, _, err = await allotctl(cluster, capsys, "container", first)
    assert (code, err) == (1, f"allotctl: no container {first} (404 not_found)\n")
    await ws.close()


async def test_a_quota_refusal_shows_its_reason_and_numbers(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = await register(cluster, "node-a")
    quota = {"namespace": "team-a", "max": {"cpu": "1"}}
    response = await cluster.http.put(
        cluster.url + "/v1/elasticquotas/team-a",
        json=quota,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert response.status == 200, await response.text()
    code, out, err = await allotctl(
        cluster, capsys, "deploy", "team-a", "--name", "web", "--image", "busybox",
        "--cpu", "0.5", "--count", "3", "--cpu-bind",
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "allotctl: ElasticQuota 'team-a': max exceeded: cpu used 1 + request 0.5 > max 1"
        " (403 quota_max_exceeded)",
        "  reason:                   quota",
        "  quota:                    team-a",
        "  kind:                     ElasticQuota",
        "  items:                    resource=cpu used=1 request=0.5 max=1",
        "  admitted_before_refusal:  2",
    ]
    await ws.close()


async def test_scale_replace_and_events_through_main(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.time()  # before any event: none can be older than the test
    ws = await register(cluster, "node-a")
    code, _, err = await allotctl(
        cluster, capsys, "deploy", "team-a", "--name", "web", "--image", "busybox",
        "--cpu", "0.5", "--memory", "64Mi", "--cpu-bind", "--", "sleep", "60",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = await allotctl(cluster, capsys, "scale", "team-a", "web", "3")
    assert code == 0, err
    assert "count           3: 3 starting" in out.splitlines()
    _, listed = out.split("\n\n")
    ids = [row.split()[0] for row in listed.splitlines()[1:]]
    assert len(ids) == 3
    code, _, err = await allotctl(cluster, capsys, "scale", "team-a", "web", "9")
    assert (code, err.splitlines()[:3]) == (
        1,
        [
            "allotctl: need 6 containers, the nodes have room for 1 (409 insufficient_capacity)",
            "  reason:      capacity",
            "  need:        6",
        ],
    )

    old = ids[0]
    code, out, err = await allotctl(
        cluster, capsys, "replace", old, "--image", "busybox:2", "--", "sleep", "120"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"replaced    {old}"
    fresh, on, node = lines[1].split()[1:]
    assert (on, node) == ("on", "node-a")
    assert fresh != old
    assert lines[2:4] == ["image       busybox:2", "command     sleep 120"]
    code, out, _ = await allotctl(cluster, capsys, "container", fresh)
    assert "command         sleep 120" in out.splitlines()
    assert f"replacing       {old} (until this one has run for a while)" in out.splitlines()
    code, out, _ = await allotctl(cluster, capsys, "container", old)
    assert f"replaced by     {fresh} (stopped, kept until the swap ends)" in out.splitlines()

    code, out, err = await allotctl(cluster, capsys, "events")
    assert code == 0, err
    header, *rows = [line.split() for line in out.splitlines()]
    assert header == [
        "SEQ", "AGE", "KIND", "NAMESPACE", "DEPLOYMENT", "CONTAINER", "NODE", "REASON"
    ]  # fmt: skip
    kinds = [row[2] for row in rows]
    assert kinds == ["admitted", "placed", "admitted", "placed", "placed", "refused", "replaced"]
    assert rows[-1][3:7] == ["team-a", "web", old, "node-a"]
    assert " ".join(rows[-1][7:]) == f"by {fresh} with image busybox:2"
    code, out, _ = await allotctl(cluster, capsys, "events", "--kind", "placed", "--since", "4")
    lasted = time.time() - began
    [[sequence, age, kind]] = [line.split()[:3] for line in out.splitlines()[1:]]
    assert (sequence, kind) == ("5", "placed")
    # An age no older than the test, however slow the machine (in seconds unless it took a
    # minute); the age against a given clock is that of
    # test_the_events_table_shows_each_events_subject_and_reason.
    shown = re.fullmatch(r"(\d+)([smhd])", age)
    assert shown, age
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[shown.group(2)]
    assert int(shown.group(1)) * unit <= lasted, (age, lasted)
    code, out, _ = await allotctl(cluster, capsys, "events", "--container", "nothing")
    assert (code, out) == (0, "no events\n")
    code, out, _ = await allotctl(cluster, capsys, "events", "--json", "--kind", "replaced")
    assert [event["container"] for event in json.loads(out)["events"]] == [old]
    await ws.close()
