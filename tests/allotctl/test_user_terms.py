"""allotctl's errors in the user's terms: a refusal of a flag's value names the flag, not
the API body's JSON path or the coordinator's field; a token the coordinator does not
accept is said to be one; and the cap on containers a deployment holds is in the help."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from allotctl.main import main
from allotctl.user_terms import in_user_terms
from client.api import ApiClientError
from shared.api.deployments import MAX_COUNT
from tests.coordinator.conftest import API_TOKEN, Coordinator

DEPLOY = ("deploy", "team-a", "--name", "web", "--image", "busybox", "--memory", "64Mi")


async def allotctl(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], *argv: str, token: str = API_TOKEN
) -> tuple[int, str]:
    """The exit code and what was printed on stderr."""
    code = await asyncio.to_thread(main, ["--server", cluster.url, "--token", token, *argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (DEPLOY, "allotctl: --cpu is required"),
        (("deploy", "team-a", "--image", "busybox", "--cpu", "1"), "allotctl: --name is required"),
        (("deploy", "team-a", "--name", "web", "--cpu", "1"), "allotctl: --image is required"),
        ((*DEPLOY, "--cpu", "1", "--count", "1001"), "allotctl: --count must be at most 1000"),
        ((*DEPLOY, "--cpu", "1", "--count", "-1"), "allotctl: --count must be at least 0"),
        (
            (*DEPLOY, "--cpu", "1", "--nodes-limit", "-1"),
            "allotctl: --nodes-limit must be at least 0",
        ),
        (
            ("deploy", "team-a", "--name", "Web_", "--image", "busybox", "--cpu", "1"),
            "allotctl: --name is not a name: lowercase letters, digits and '-',"
            " beginning and ending with a letter or digit",
        ),
        (
            (*DEPLOY, "--cpu", "lots"),
            "allotctl: --cpu 'lots': is not cores, like '1.7', '2' or '500m'",
        ),
        (
            (*DEPLOY[:-2], "--cpu", "1", "--memory", "12Q"),
            "allotctl: --memory '12Q': is not bytes, like '536870912', '512Mi' or '2G'",
        ),
        (
            ("plan", "--cpu", "x", "--memory", "64Mi", "--count", "1"),
            "allotctl: --cpu 'x': is not cores, like '1.7', '2' or '500m'",
        ),
    ],
    ids=[
        "no-cpu", "no-name", "no-image", "count-over-cap", "count-negative",
        "nodes-limit-negative", "bad-name", "bad-cpu", "bad-memory", "plan-bad-cpu",
    ],
)  # fmt: skip
async def test_a_refused_flag_is_named(
    cluster: Coordinator,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    expected: str,
) -> None:
    code, err = await allotctl(cluster, capsys, *argv)
    assert code == 1
    assert err.splitlines()[0] == expected
    assert "$." not in err
    assert "_request" not in err
    assert await cluster.get_json("/v1/namespaces/team-a/deployments") == {"deployments": []}


async def test_a_deployment_file_without_cpu_names_the_flag_too(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "web.toml"
    path.write_text('name = "web"\nimage = "busybox"\n[resources]\nmemory = "64Mi"\n')
    code, err = await allotctl(cluster, capsys, "deploy", "team-a", "--file", str(path))
    assert (code, err.splitlines()[0]) == (1, "allotctl: --cpu is required")


async def test_scaling_past_the_cap_names_it(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = await allotctl(cluster, capsys, *DEPLOY, "--cpu", "1", "--count", "0")
    assert code == 0, err
    code, err = await allotctl(cluster, capsys, "scale", "team-a", "web", "1001")
    assert (code, err.splitlines()[0]) == (1, "allotctl: COUNT must be at most 1000")


async def test_a_token_not_accepted_is_said_to_be_one(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = await allotctl(cluster, capsys, "nodes", token="not-the-token-0123456789")
    assert code == 1
    assert err == (
        f"allotctl: the coordinator at {cluster.url} did not accept the API token"
        " (from --token or ALLOT_TOKEN)\n"
    )


@pytest.mark.parametrize("command", ["deploy", "scale"])
def test_the_help_names_the_cap(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert f"at most {MAX_COUNT}" in " ".join(capsys.readouterr().out.split())


# -- the refusals of quotas and pools, without a coordinator -----------------------------

QUOTA_ITEMS = ApiClientError(
    "...",
    status=422,
    code="invalid_quantity",
    message="ElasticQuota 'q': invalid quantity: ...",
    details={
        "quota": "q",
        "items": [
            {"field": "min.cpu", "value": "x", "reason": "is not cores"},
            {"field": "max.memory", "value": "1.5", "reason": "is not a whole number of bytes"},
        ],
    },
)
POOL_FIELD = ApiClientError(
    "...",
    status=422,
    code="invalid_weight",
    message="pool 'p': field 'weight' = -1: must be a finite number > 0",
    details={"pool": "p", "field": "weight", "value": -1},
)


def test_each_refused_quota_quantity_names_its_flag_and_pair() -> None:
    assert in_user_terms(QUOTA_ITEMS, "http://c", {"min": "--min", "max": "--max"}) == (
        "--min cpu='x': is not cores\n--max memory='1.5': is not a whole number of bytes"
    )


def test_a_refused_pool_field_names_its_flag() -> None:
    said = in_user_terms(POOL_FIELD, "http://c", {"weight": "--weight"})
    assert said == "--weight -1: must be a finite number > 0"


def test_a_refusal_of_something_without_a_flag_is_said_as_the_api_says_it() -> None:
    assert in_user_terms(QUOTA_ITEMS, "http://c", {"min": "--min"}) == "..."
    assert in_user_terms(POOL_FIELD, "http://c", {"parent": "--parent"}) == "..."
