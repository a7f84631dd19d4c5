"""``allotctl apply -f`` through ``main`` against a real coordinator: a file of every kind
is created, then applied again it writes nothing (the store's revision stays) and says
``unchanged``; a changed count scales, another change of a deployment is refused; a bad
document is refused by index and field before anything is written."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import pytest

from allotctl.apply import read_documents
from allotctl.main import main
from coordinator.keys import STORE
from tests.coordinator.conftest import API_TOKEN, Coordinator, register

EVERY_KIND = """\
kind: ElasticQuota
name: team-a
namespace: team-a
min: {cpu: 500m, memory: 1Gi}
max: {cpu: 2}
---
kind: CompositeElasticQuota
name: shared
namespaces: [team-b, team-c]
min: {cpu: "1"}
---
kind: Pool
name: batch
weight: 2
strong_guarantee_resources: {cpu: 1}
---
kind: ResourceTemplate
name: db-*
capacity: 100
algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 10}
---
kind: Deployment
namespace: team-a
name: web
image: busybox
command: [sleep, "3600"]
count: 1
resources: {cpu: 250m, memory: 64Mi}
"""
LABELS = [
    "ElasticQuota team-a",
    "CompositeElasticQuota shared",
    "Pool batch",
    "ResourceTemplate db-*",
    "Deployment team-a/web",
]


async def apply(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    code = await asyncio.to_thread(
        main, ["--server", cluster.url, "--token", API_TOKEN, "apply", *argv]
    )
    out, err = capsys.readouterr()
    return code, out, err


def revision(cluster: Coordinator) -> int:
    return cluster.app[STORE].revision


async def test_every_kind_applied_twice(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    await register(cluster, "node-a")
    path = tmp_path / "cluster.yaml"
    await asyncio.to_thread(path.write_text, EVERY_KIND)
    code, out, err = await apply(cluster, capsys, "-f", str(path))
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{label} created" for label in LABELS]
    before = revision(cluster)
    code, out, err = await apply(cluster, capsys, "-f", str(path))
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{label} unchanged" for label in LABELS]
    assert revision(cluster) == before
    stored = await cluster.get_json("/v1/namespaces/team-a/deployments/web")
    assert len(stored["containers"]) == 1
    quota = await cluster.get_json("/v1/elasticquotas/team-a")
    assert quota["min"] == {"cpu": "0.5", "memory": 1024**3}


async def test_a_change_configures_only_what_changed(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    await register(cluster, "node-a")
    path = tmp_path / "cluster.yaml"
    await asyncio.to_thread(path.write_text, EVERY_KIND)
    assert (await apply(cluster, capsys, "-f", str(path)))[0] == 0
    changed = EVERY_KIND.replace("weight: 2", "weight: 3").replace("count: 1", "count: 2")
    await asyncio.to_thread(path.write_text, changed)
    code, out, err = await apply(cluster, capsys, "-f", str(path), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == [
        "ElasticQuota team-a unchanged",
        "CompositeElasticQuota shared unchanged",
        "Pool batch configured",
        "ResourceTemplate db-* unchanged",
        "Deployment team-a/web configured (count 1 -> 2)",
    ]
    assert (await cluster.get_json("/v1/pools/batch"))["config"]["weight"] == 3
    # A document without count keeps the count the deployment has.
    await asyncio.to_thread(path.write_text, changed.replace("count: 2\n", ""))
    code, out, _ = await apply(cluster, capsys, "-f", str(path))
    assert (code, out.splitlines()[-1]) == (0, "Deployment team-a/web unchanged")
    web = await cluster.get_json("/v1/namespaces/team-a/deployments/web")
    assert web["deployment"]["spec"]["count"] == 2
    # A new image is not a change apply makes: it says what to do, and the pool above it
    # was applied (unchanged) before it.
    await asyncio.to_thread(path.write_text, changed.replace("image: busybox", "image: nginx"))
    code, out, err = await apply(cluster, capsys, "-f", str(path))
    assert code == 1
    assert out.splitlines() == [f"{label} unchanged" for label in LABELS[:4]]
    assert err == (
        "allotctl: document 5 (Deployment team-a/web): it exists with another image; apply"
        " changes only a deployment's count: delete it (allotctl delete deployment team-a web)"
        " and apply again\n"
    )
    stored = await cluster.get_json("/v1/namespaces/team-a/deployments/web")
    assert stored["deployment"]["spec"]["image"] == "busybox"


async def test_stdin_and_a_refusal_in_the_middle(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-f -`` reads stdin. The API refuses the second document: the first stays
    applied and is reported, the third is not tried."""
    documents = (
        "kind: Pool\nname: a\n---\nkind: Pool\nname: b\nweight: -1\n---\nkind: Pool\nname: c\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(documents))
    code, out, err = await apply(cluster, capsys, "-f", "-")
    assert (code, out) == (1, "Pool a created\n")
    assert err.startswith("allotctl: document 2 (Pool b): pool 'b': field 'weight' = -1")
    names = [pool["name"] for pool in (await cluster.get_json("/v1/pools"))["pools"]]
    assert names == ["<root>", "a"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("kind: [", "f.yaml: not YAML"),
        ("- a list", "f.yaml: document 1: expected a mapping with kind and name"),
        ("name: x", "f.yaml: document 1: kind is missing Deployment, ElasticQuota"),
        ("kind: Pod\nname: x", "f.yaml: document 1: kind 'Pod' is not one of Deployment"),
        ("kind: Pool\nname: a\n---\nkind: Pool", "f.yaml: document 2: name is missing"),
        ("kind: Pool\nname: ''", "f.yaml: document 1: name is missing"),
        ("kind: Deployment\nname: web", "f.yaml: document 1: namespace is missing"),
        ("---\n---\n", "f.yaml: no documents"),
    ],
)
def test_a_bad_document_is_named(text: str, said: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        read_documents(text, "f.yaml")


async def test_a_bad_document_stops_the_file_before_any_write(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    await asyncio.to_thread(path.write_text, EVERY_KIND + "---\nkind: Pod\nname: x\n")
    before = revision(cluster)
    code, out, err = await apply(cluster, capsys, "-f", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"allotctl: {path}: document 6: kind 'Pod' is not one of")
    assert revision(cluster) == before


def test_documents_keep_the_api_fields() -> None:
    (document,) = read_documents(
        "kind: Deployment\nnamespace: ns\nname: web\nimage: x\ncount: 2", "f"
    )
    assert (document.kind, document.namespace, document.name) == ("Deployment", "ns", "web")
    assert document.body == {"image": "x", "count": 2}
    assert document.label == "Deployment ns/web"
