"""``allotctl quota|pool|resource set|delete`` through ``main`` against a real
coordinator: what each writes (read back from the API), ``--file`` under the flags, and
refusals in the terms of the flags that caused them, with nothing changed."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest

from allotctl.bodies import pool_body, quota_body, template_body
from allotctl.main import main, parse
from tests.coordinator.conftest import API_TOKEN, Coordinator

GIB = 1024**3


async def allotctl(
    capsys: pytest.CaptureFixture[str], server: str, *argv: str
) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, ["--server", server, "--token", API_TOKEN, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def parsed(*argv: str) -> argparse.Namespace:
    return parse(["--token", "t", *argv])


# -- the bodies the flags make ----------------------------------------------------------


def test_quota_flags_over_a_file(tmp_path: Path) -> None:
    body = tmp_path / "q.yaml"
    body.write_text("namespace: old\nmin: {cpu: 1, memory: 1Gi}\nmax: {cpu: 4}\n")
    args = parsed(
        "quota",
        "set",
        "q",
        "--file",
        str(body),
        "--namespace",
        "team-a",
        "--min",
        "cpu=2",
        "--max",
        "memory=8Gi",
    )
    assert quota_body(args) == (
        "ElasticQuota",
        {
            "namespace": "team-a",
            "min": {"cpu": 2, "memory": "1Gi"},
            "max": {"cpu": 4, "memory": "8Gi"},
        },
    )
    args = parsed("quota", "set", "q", "--composite", "--namespace", "a", "--namespace", "b")
    assert quota_body(args) == ("CompositeElasticQuota", {"namespaces": ["a", "b"]})


def test_pool_and_template_flags() -> None:
    args = parsed(
        "pool",
        "set",
        "p",
        "--parent",
        "root-a",
        "--weight",
        "2",
        "--namespace",
        "x",
        "--strong-guarantee",
        "cpu=4",
        "--limit",
        "cpu=8.5",
    )
    assert pool_body(args) == {
        "parent": "root-a",
        "weight": 2.0,
        "namespaces": ["x"],
        "strong_guarantee_resources": {"cpu": 4},
        "resource_limits": {"cpu": 8.5},
    }
    args = parsed(
        "resource",
        "set",
        "db-*",
        "--capacity",
        "100",
        "--algorithm",
        "FAIR_SHARE",
        "--lease-length",
        "60",
        "--refresh-interval",
        "10",
    )
    assert template_body(args) == {
        "capacity": 100.0,
        "algorithm": {"kind": "FAIR_SHARE", "lease_length": 60.0, "refresh_interval": 10.0},
    }


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["quota", "set"], "allotctl: set needs a NAME\n"),
        (["quota", "q", "extra"], "allotctl: 'extra': expected NAME, set NAME or delete NAME\n"),
        (
            ["quota", "set", "q", "--namespace", "a", "--namespace", "b"],
            "allotctl: --namespace given more than once: that needs --composite\n",
        ),
        (["pool", "set", "p", "--file", "/no/such.yaml"], "No such file or directory"),
        (["quota", "q", "--min", "cpu=1"], "allotctl: --min is a flag of set, not of show\n"),
        (["pool", "delete", "p", "--weight", "2"], "--weight is a flag of set, not of delete"),
    ],
)
def test_bad_arguments_change_nothing(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    # No coordinator listens there: the refusal comes before any request.
    code = main(["--server", "http://127.0.0.1:9", "--token", "t", *argv])
    err = capsys.readouterr().err
    assert code == 1
    assert said in err


def test_a_bad_pair_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parsed("quota", "set", "q", "--min", "cpu")
    assert stopped.value.code == 2
    assert "expected K=V, got 'cpu'" in capsys.readouterr().err


# -- against the coordinator ------------------------------------------------------------


async def test_quota_set_show_delete(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    url = coordinator.url
    code, out, err = await allotctl(
        capsys,
        url,
        "quota",
        "set",
        "team-a",
        "--namespace",
        "team-a",
        "--min",
        "cpu=500m",
        "--min",
        "memory=1Gi",
        "--max",
        "cpu=2",
    )
    assert (code, err) == (0, "")
    assert "kind        ElasticQuota" in out
    stored = await coordinator.get_json("/v1/elasticquotas/team-a")
    assert (stored["min"], stored["max"]) == ({"cpu": "0.5", "memory": GIB}, {"cpu": "2"})
    code, out, _ = await allotctl(capsys, url, "quota", "team-a")
    assert "namespaces  team-a" in out
    code, out, _ = await allotctl(
        capsys, url, "quota", "set", "shared", "--composite", "--namespace", "b", "--namespace", "c"
    )
    assert code == 0
    assert (await coordinator.get_json("/v1/compositeelasticquotas/shared"))["namespaces"] == [
        "b",
        "c",
    ]
    code, out, _ = await allotctl(capsys, url, "quota", "delete", "shared")
    assert (code, out) == (0, "deleted CompositeElasticQuota 'shared'\n")
    code, _, err = await allotctl(capsys, url, "quota", "delete", "shared")
    assert (code, err) == (1, "allotctl: no quota named 'shared'\n")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--min", "cpu=x"], "allotctl: --min cpu='x': is not cores, like '1.7', '2' or '500m'\n"),
        (["--min", "cpu=3", "--max", "cpu=2"], "allotctl: ElasticQuota 'q': max is below min"),
        ([], "allotctl: --namespace is required\n"),
    ],
)
async def test_quota_refusals_in_flag_terms(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    namespace = ["--namespace", "team-a"] if argv else []
    code, out, err = await allotctl(capsys, coordinator.url, "quota", "set", "q", *namespace, *argv)
    assert (code, out) == (1, "")
    assert err.startswith(said)
    assert (await coordinator.get_json("/v1/quotas"))["quotas"] == []


async def test_pool_set_show_delete_and_refusals(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    url = coordinator.url
    code, out, err = await allotctl(
        capsys, url, "pool", "set", "batch", "--weight", "2", "--strong-guarantee", "cpu=1"
    )
    assert (code, err) == (0, "")
    assert "config weight" in out
    stored = await coordinator.get_json("/v1/pools/batch")
    assert stored["config"] == {"weight": 2.0, "strong_guarantee_resources": {"cpu": 1}}
    refusals = [
        (["--weight", "-1"], "allotctl: --weight -1.0: must be a finite number > 0\n"),
        (["--parent", "nowhere"], "allotctl: --parent 'nowhere': no such pool\n"),
    ]
    for argv, said in refusals:
        code, out, err = await allotctl(capsys, url, "pool", "set", "batch", *argv)
        assert (code, out, err) == (1, "", said)
    assert (await coordinator.get_json("/v1/pools/batch"))["config"] == stored["config"]
    code, out, _ = await allotctl(capsys, url, "pool", "delete", "batch")
    assert (code, out) == (0, "deleted pool 'batch'\n")
    code, _, err = await allotctl(capsys, url, "pool", "batch")
    assert code == 1
    assert "no pool named 'batch'" in err


async def test_resource_set_show_delete_and_refusals(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    url = coordinator.url
    template = ["--capacity", "100", "--algorithm", "FAIR_SHARE", "--lease-length", "60"]
    code, out, err = await allotctl(capsys, url, "resource", "set", "db-*", *template)
    assert (code, out, err) == (1, "", "allotctl: --refresh-interval is required\n")
    code, out, err = await allotctl(
        capsys, url, "resource", "set", "db-*", *template, "--refresh-interval", "10"
    )
    assert (code, err) == (0, "")
    assert "algorithm      FAIR_SHARE" in out
    stored: dict[str, Any] = await coordinator.get_json("/v1/resources/db-*")
    assert (stored["capacity"], stored["algorithm"]["lease_length"]) == (100.0, 60.0)
    code, out, _ = await allotctl(capsys, url, "resource", "delete", "db-*")
    assert (code, out) == (0, "deleted resource template 'db-*'\n")
    assert (await coordinator.get_json("/v1/resources"))["templates"] == []


async def test_writes_at_once_all_land(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eight quota writes in eight threads at the same time: each answered, each stored."""
    names = [f"team-{i}" for i in range(8)]
    codes = await asyncio.gather(
        *(
            asyncio.to_thread(
                main,
                [
                    "--server",
                    coordinator.url,
                    "--token",
                    API_TOKEN,
                    "quota",
                    "set",
                    name,
                    "--namespace",
                    name,
                    "--min",
                    "cpu=1",
                ],
            )
            for name in names
        )
    )
    assert codes == [0] * len(names)
    stored = (await coordinator.get_json("/v1/quotas"))["quotas"]
    assert sorted(q["name"] for q in stored) == names
