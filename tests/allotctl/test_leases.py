"""allotctl's view of one lease resource: its leases with their namespaces, and for a
namespace token the other namespaces' leases only as totals."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from allotctl.main import main
from allotctl.views import resource_details
from shared.codec import to_json
from tests.coordinator.conftest import API_TOKEN, NAMESPACE, NAMESPACE_TOKEN, Coordinator

STATUS: dict[str, Any] = {
    "resource_id": "db-orders",
    "template": "db-*",
    "kind": "FAIR_SHARE",
    "capacity": 10.0,
    "safe_capacity": None,
    "lease_length": 60.0,
    "refresh_interval": 5.0,
    "sum_has": 10.0,
    "sum_wants": 54.0,
    "clients": 3,
    "learning": False,
}


def lease(namespace: str, client_id: str, has: float, wants: float) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "client_id": client_id,
        "has": has,
        "wants": wants,
        "subclients": 1,
        "priority": 0,
        "expiry_time": time.time() + 30,
    }


def details(leases: list[dict[str, Any]], others: dict[str, Any]) -> list[str]:
    view = {"resource_id": "db-orders", "leases": leases, "others": others}
    return resource_details(to_json({"status": STATUS, "leases": view})).splitlines()


def after_header(lines: list[str]) -> list[list[str]]:
    header = next(i for i, line in enumerate(lines) if line.startswith("NAMESPACE"))
    return [line.split()[:4] for line in lines[header + 1 :]]


def test_every_lease_shows_its_namespace_and_the_clusters_own_show_a_dash() -> None:
    leases = [
        lease("", "batch", 2, 4),
        lease("team-a", "web-7", 5, 40),
        lease("team-b", "web-7", 3, 10),
    ]
    lines = details(leases, {"clients": 0, "has": 0, "wants": 0})

    assert [
        "NAMESPACE", "CLIENT", "HAS", "WANTS", "SUBCLIENTS", "PRIORITY", "EXPIRES", "IN",
    ] in [line.split() for line in lines]  # fmt: skip
    assert after_header(lines) == [
        ["-", "batch", "2", "4"],
        ["team-a", "web-7", "5", "40"],
        ["team-b", "web-7", "3", "10"],
    ]


def test_the_leases_of_other_namespaces_show_only_as_totals() -> None:
    lines = details([lease("team-a", "web-7", 5, 40)], {"clients": 2, "has": 5, "wants": 14})

    assert after_header(lines) == [
        ["team-a", "web-7", "5", "40"],
        [],
        ["2", "lease(s)", "of", "other"],
    ]
    assert lines[-1] == "2 lease(s) of other namespaces, not shown: has 5, wants 14"


@pytest.mark.parametrize(
    ("others", "last"),
    [
        ({"clients": 0, "has": 0, "wants": 0}, "no leases"),
        (
            {"clients": 1, "has": 2.5, "wants": 3},
            "1 lease(s) of other namespaces, not shown: has 2.5, wants 3",
        ),
    ],
    ids=["none-at-all", "only-others"],
)
def test_without_leases_to_show_the_view_says_so(others: dict[str, Any], last: str) -> None:
    lines = details([], others)

    assert lines[-1] == last
    assert not any(line.startswith("NAMESPACE") for line in lines)


async def test_a_namespace_token_sees_its_namespaces_leases_through_main(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    template = {
        "capacity": 10,
        "algorithm": {"kind": "STATIC", "lease_length": 60, "refresh_interval": 5},
    }
    put = await coordinator.http.put(
        coordinator.url + "/v1/resources/db-*",
        json=template,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert put.status == 200, await put.text()
    for token, wants in ((NAMESPACE_TOKEN, 4), (API_TOKEN, 3)):
        body = {"client_id": "web-7", "resources": [{"resource_id": "db-orders", "wants": wants}]}
        answer = await coordinator.http.post(
            coordinator.url + "/v1/capacity",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status == 200, await answer.text()

    argv = ["--server", coordinator.url, "--token", NAMESPACE_TOKEN, "resource", "db-orders"]
    code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()

    assert code == 0, err
    lines = out.splitlines()
    assert after_header(lines) == [
        [NAMESPACE, "web-7", "4", "4"],
        [],
        ["1", "lease(s)", "of", "other"],
    ]
    assert lines[-1] == "1 lease(s) of other namespaces, not shown: has 3, wants 3"
