"""The lease client against a scripted coordinator on a real loopback socket."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest

from client.leases import LeaseClient, LeaseError, ResourceHandle
from shared.logs import fields_of
from tests.client.lease_server import TOKEN, LeaseServer, serving, unused_url
from tests.polling import eventually

# Quick retries, so that tests about failures stay short.
FAST_RETRIES: dict[str, Any] = {"backoff_base": 0.01, "backoff_cap": 0.02}


def connect(url: str, **settings: Any) -> LeaseClient:
    """A client that waits long for answers, as the tests using it expect them; a loaded
    machine may take more than the default half second to answer."""
    return LeaseClient(url, **{"token": TOKEN, "answer_wait": 5.0, **settings})


@pytest.fixture
async def server() -> AsyncIterator[LeaseServer]:
    async with serving() as running:
        yield running


@pytest.fixture
def lease_log(
    restore_allot_logger: None, caplog: pytest.LogCaptureFixture
) -> pytest.LogCaptureFixture:
    """What allot logs, in caplog; the "allot" logger is restored afterwards."""
    logging.getLogger("allot").propagate = True
    caplog.set_level(logging.DEBUG, logger="allot")
    return caplog


def records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


def wanted(server: LeaseServer, index: int = -1) -> dict[str, float]:
    """Resource id -> wants, of one capacity request the server received."""
    body = server.capacity_requests()[index].body
    return {r["resource_id"]: r["wants"] for r in body["resources"]}


async def seconds_taken(operation: Awaitable[object]) -> float:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await operation
    return loop.time() - started


# --- identity ----------------------------------------------------------------------------


def test_each_client_gets_its_own_host_pid_hex_id() -> None:
    first = LeaseClient("http://127.0.0.1:1", token=TOKEN)
    second = LeaseClient("http://127.0.0.1:1", token=TOKEN)

    assert first.client_id != second.client_id
    form = re.compile(rf"^{re.escape(socket.gethostname())}:{os.getpid()}:[0-9a-f]+$")
    assert form.match(first.client_id)
    assert form.match(second.client_id)


@pytest.mark.parametrize("namespace", ["Team-A", "", "team/a", "team-a\n", "a" * 64])
def test_a_namespace_that_is_no_rfc1123_label_is_refused(namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace must be an RFC 1123 label"):
        LeaseClient("http://127.0.0.1:1", token=TOKEN, namespace=namespace)


async def test_the_namespace_goes_with_every_request(server: LeaseServer) -> None:
    async with connect(server.url, client_id="web-7", namespace="team-a") as client:
        kept = await client.resource("a", 1)
        released = await client.resource("b", 2)
        await released.release()
        await kept.ask(3)

    assert [r.body["resource_ids"] for r in server.releases()] == [["b"], ["a"]]  # a: on close
    assert len(server.capacity_requests()) >= 3
    assert {(r.body["client_id"], r.body["namespace"]) for r in server.received} == {
        ("web-7", "team-a")
    }


async def test_without_a_namespace_no_request_names_one(server: LeaseServer) -> None:
    async with connect(server.url) as client:
        assert client.namespace is None
        handle = await client.resource("a", 1)
        await handle.release()
        await client.resource("b", 1)

    assert len(server.received) == 4  # a, release a, b; release b on close
    assert all("namespace" not in r.body for r in server.received)


# --- requests ----------------------------------------------------------------------------


async def test_the_first_resource_is_requested_at_once(server: LeaseServer) -> None:
    async with connect(server.url) as client:
        handle = await client.resource("db.write", 25, priority=2)

        assert len(server.capacity_requests()) == 1
        assert server.capacity_requests()[0].body == {
            "client_id": client.client_id,
            "resources": [
                {"resource_id": "db.write", "priority": 2, "has": 0, "wants": 25, "subclients": 1}
            ],
        }
        assert (handle.capacity, handle.wants, handle.priority) == (25, 25, 2)
        assert handle.safe_capacity == server.safe_capacity
        assert handle.expiry_time is not None


async def test_a_refresh_reports_the_grant_held_as_has(server: LeaseServer) -> None:
    server.grants["db.write"] = 20
    async with connect(server.url) as client:
        handle = await client.resource("db.write", 25)
        await handle.ask(30)

    assert server.capacity_requests()[-1].body["resources"][0]["has"] == 20


@pytest.mark.parametrize(
    ("refresh_intervals", "min_refresh_interval", "expected_gap"),
    [
        pytest.param({"a": 0.2, "b": 1.0}, 0.1, 0.2, id="shortest-interval"),
        pytest.param({"a": 0.05, "b": 0.05}, 0.3, 0.3, id="min-refresh-floor"),
    ],
)
async def test_all_resources_are_refreshed_together_at_the_shortest_interval(
    server: LeaseServer,
    refresh_intervals: dict[str, float],
    min_refresh_interval: float,
    expected_gap: float,
) -> None:
    server.refresh_intervals = refresh_intervals
    async with connect(server.url, min_refresh_interval=min_refresh_interval) as client:
        await client.resource("a", 1)
        await client.resource("b", 2)
        await eventually(lambda: len(server.capacity_requests()) >= 5)

    requests = server.capacity_requests()
    assert wanted(server, 0) == {"a": 1}
    assert all(wanted(server, i) == {"a": 1, "b": 2} for i in range(1, len(requests)))
    scheduled = [r.at for r in requests[1:]]
    gaps = [later - earlier for earlier, later in itertools.pairwise(scheduled)]
    assert all(expected_gap - 0.01 <= gap < expected_gap + 0.3 for gap in gaps), gaps


async def test_ask_sends_the_new_wants_at_once(server: LeaseServer) -> None:
    async with connect(server.url) as client:
        handle = await client.resource("db.write", 25)
        await handle.ask(40)

        assert len(server.capacity_requests()) == 2
        assert wanted(server) == {"db.write": 40}
        assert (handle.wants, handle.capacity) == (40, 40)


@pytest.mark.parametrize("wants", [-1.0, math.nan, math.inf])
async def test_invalid_wants_are_refused_before_anything_is_sent(
    server: LeaseServer, wants: float
) -> None:
    async with connect(server.url) as client:
        with pytest.raises(ValueError, match="wants"):
            await client.resource("db.write", wants)
        handle = await client.resource("db.write", 25)
        with pytest.raises(ValueError, match="wants"):
            await handle.ask(wants)
        await asyncio.sleep(0.1)

        assert len(server.capacity_requests()) == 1
        assert handle.wants == 25


async def test_a_resource_cannot_be_held_twice(server: LeaseServer) -> None:
    async with connect(server.url) as client:
        await client.resource("db.write", 25)
        with pytest.raises(ValueError, match="already held"):
            await client.resource("db.write", 30)


# --- refusals and failures ---------------------------------------------------------------


async def test_a_400_is_raised_to_the_caller_and_never_retried(server: LeaseServer) -> None:
    server.unknown = {"no.such"}
    async with connect(server.url, **FAST_RETRIES) as client:
        with pytest.raises(LeaseError) as refused:
            await client.resource("no.such", 1)
        await asyncio.sleep(0.2)
        assert len(server.capacity_requests()) == 1

        assert (refused.value.status, refused.value.code) == (400, "unknown_resource")
        assert "no.such" in refused.value.message
        await client.resource("db.write", 1)  # the refused resource was dropped
        assert wanted(server) == {"db.write": 1}


async def test_a_refusal_naming_one_new_resource_spares_the_others(server: LeaseServer) -> None:
    server.unknown = {"no.such"}
    async with connect(server.url) as client:
        good, bad = await asyncio.gather(
            client.resource("db.write", 1), client.resource("no.such", 2), return_exceptions=True
        )

        assert isinstance(good, ResourceHandle)
        assert good.capacity == 1
        assert isinstance(bad, LeaseError)
        assert bad.resource_id == "no.such"
        assert [wanted(server, 0), wanted(server, 1)] == [
            {"db.write": 1, "no.such": 2},
            {"db.write": 1},
        ]


async def test_a_resource_refused_after_its_caller_returned_is_dropped(
    server: LeaseServer, lease_log: pytest.LogCaptureFixture
) -> None:
    server.status = 503
    async with connect(server.url, min_refresh_interval=0.1, max_retries=0) as client:
        good = await client.resource("db.write", 1)
        bad = await client.resource("no.such", 2)  # returns: a 503 is not raised
        server.unknown = {"no.such"}
        server.status = 200

        await eventually(lambda: good.capacity == 1)
        assert bad.capacity == 0
        assert [value async for value in bad.changes()] == []  # it ended
        assert wanted(server) == {"db.write": 1}
        (dropped,) = records(lease_log, "resource dropped: the coordinator refused it")
        assert fields_of(dropped)["resource"] == "no.such"


async def test_a_401_is_raised_to_the_caller_and_never_retried(server: LeaseServer) -> None:
    async with connect(server.url, token="wrong", **FAST_RETRIES) as client:
        with pytest.raises(LeaseError) as refused:
            await client.resource("db.write", 1)
        await asyncio.sleep(0.2)

    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    assert len(server.capacity_requests()) == 1


async def test_a_503_is_retried_at_most_max_retries_times_per_cycle(
    server: LeaseServer, lease_log: pytest.LogCaptureFixture
) -> None:
    server.status = 503
    async with connect(
        server.url, max_retries=3, min_refresh_interval=0.5, **FAST_RETRIES
    ) as client:
        handle = await client.resource("db.write", 1)
        assert handle.capacity == 0

        await eventually(lambda: len(server.capacity_requests()) >= 4)
        await asyncio.sleep(0.2)
        assert len(server.capacity_requests()) == 4  # 1 + 3 retries, then the next cycle
        await eventually(lambda: len(server.capacity_requests()) >= 8)
        server.status = 200
        await eventually(lambda: handle.capacity == 1)

    failed = records(lease_log, "capacity request failed")
    assert [fields_of(r)["reason"] for r in failed] == ["HTTP 503 from the coordinator"]
    assert len(records(lease_log, "capacity request still failing")) >= 6
    assert len(records(lease_log, "capacity requests succeed again")) == 1


@pytest.mark.parametrize("coordinator", ["hangs", "is down"])
async def test_operations_return_promptly_when_the_coordinator(
    server: LeaseServer, coordinator: str
) -> None:
    server.hang = True
    url = server.url if coordinator == "hangs" else unused_url()
    client = LeaseClient(url, token=TOKEN)

    taken = [await seconds_taken(client.resource("a", 1))]
    handle = await client.resource("b", 2)
    taken.append(await seconds_taken(handle.ask(3)))
    taken.append(await seconds_taken(handle.release()))
    taken.append(await seconds_taken(client.close()))

    assert max(taken) < 1.0, taken


# --- expiry ------------------------------------------------------------------------------


async def test_capacity_is_zero_before_the_first_grant(server: LeaseServer) -> None:
    server.hang = True
    async with connect(server.url, answer_wait=0.1) as client:
        handle = await client.resource("db.write", 25)

        assert handle.capacity == 0
        assert (handle.expiry_time, handle.safe_capacity) == (None, None)


@pytest.mark.parametrize("safe_capacity", [5.0, -1.0])
async def test_an_expired_lease_falls_back_to_safe_capacity_until_a_refresh(
    server: LeaseServer, lease_log: pytest.LogCaptureFixture, safe_capacity: float
) -> None:
    server.grants["db.write"] = 50
    server.safe_capacity = safe_capacity
    server.lease_length = 0.5
    server.refresh_interval = 0.2
    async with connect(server.url, min_refresh_interval=0.1, **FAST_RETRIES) as client:
        handle = await client.resource("db.write", 100)
        assert handle.capacity == 50
        server.status = 503

        await eventually(lambda: handle.capacity == safe_capacity)
        (expired,) = records(lease_log, "lease expired without a refresh; using safe capacity")
        assert expired.levelno == logging.WARNING
        assert fields_of(expired) == {"resource": "db.write", "safe_capacity": safe_capacity}
        await asyncio.sleep(0.3)
        assert server.capacity_requests()[-1].body["resources"][0]["has"] == 0

        server.status = 200
        await eventually(lambda: handle.capacity == 50)
        (renewed,) = records(lease_log, "lease refreshed after expiry; using the grant again")
        assert renewed.levelno == logging.INFO
        assert fields_of(renewed) == {"resource": "db.write", "capacity": 50}


# --- change notification -----------------------------------------------------------------


async def test_a_slow_reader_of_changes_gets_the_latest_capacity(server: LeaseServer) -> None:
    server.refresh_interval = 0.05
    async with connect(server.url, min_refresh_interval=0.05) as client:
        handle = await client.resource("db.write", 10)
        seen: list[float] = []
        reader_busy = asyncio.Event()
        reader_done = asyncio.Event()

        async def read_slowly(changes: AsyncIterator[float]) -> None:
            async for capacity in changes:
                seen.append(capacity)
                reader_busy.set()
                await reader_done.wait()  # busy with the first value for a long while

        reader = asyncio.create_task(read_slowly(handle.changes()))
        await handle.ask(20)
        await asyncio.wait_for(reader_busy.wait(), 5.0)
        refreshes_before = len(server.capacity_requests())
        for wants in (30, 40, 50):
            await handle.ask(wants)
            assert handle.capacity == wants  # the loop did not wait for the reader
        await eventually(lambda: len(server.capacity_requests()) >= refreshes_before + 5)
        reader_done.set()  # nor did the scheduled refreshes
        await eventually(lambda: len(seen) == 2)
        reader.cancel()

    assert seen == [20, 50]


async def test_changes_follow_each_update_and_end_on_release(server: LeaseServer) -> None:
    async with connect(server.url) as client:
        handle = await client.resource("db.write", 10)
        seen: list[float] = []

        async def read(changes: AsyncIterator[float]) -> None:
            async for value in changes:
                seen.append(value)

        reader = asyncio.create_task(read(handle.changes()))
        for wants in (20, 30):
            await handle.ask(wants)
            await eventually(lambda: handle.capacity in seen)
        await handle.release()
        await asyncio.wait_for(reader, 1.0)

    assert seen == [20, 30, 0]


# --- release and close -------------------------------------------------------------------


async def test_release_gives_the_lease_back_and_later_refreshes_leave_it_out(
    server: LeaseServer,
) -> None:
    async with connect(server.url) as client:
        kept = await client.resource("a", 1)
        released = await client.resource("b", 2)
        await released.release()
        await released.release()  # a second release changes nothing
        await kept.ask(3)

        assert [r.body["resource_ids"] for r in server.releases()] == [["b"]]
        assert server.releases()[0].body["client_id"] == client.client_id
        assert wanted(server) == {"a": 3}
        assert released.capacity == 0
        with pytest.raises(RuntimeError, match="released"):
            await released.ask(5)


async def test_a_release_that_failed_is_sent_again_by_the_loop(server: LeaseServer) -> None:
    async with connect(server.url, min_refresh_interval=0.1, **FAST_RETRIES) as client:
        handle = await client.resource("a", 1)
        server.status = 503
        await handle.release()  # returns: a 503 is not raised
        server.status = 200

        await eventually(lambda: len(server.releases()) >= 2)
        assert all(r.body["resource_ids"] == ["a"] for r in server.releases())


async def test_close_releases_exactly_the_held_resources_and_stops_its_tasks(
    server: LeaseServer,
) -> None:
    tasks_before = asyncio.all_tasks()
    client = connect(server.url)
    handles: list[ResourceHandle] = [await client.resource(i, 1) for i in ("a", "b", "c")]
    await handles[1].release()
    await client.close()
    await client.close()  # a second close changes nothing

    assert [r.body["resource_ids"] for r in server.releases()] == [["b"], ["a", "c"]]
    assert [h.capacity for h in handles] == [0, 0, 0]
    await eventually(lambda: asyncio.all_tasks() <= tasks_before)
    with pytest.raises(RuntimeError, match="closed"):
        await client.resource("d", 1)


async def test_a_client_that_held_nothing_sends_nothing_on_close(server: LeaseServer) -> None:
    async with connect(server.url):
        pass

    assert server.received == []
