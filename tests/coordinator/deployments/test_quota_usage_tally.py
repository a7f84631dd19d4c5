"""A quota's usage read from the books' request tally equals a recount of its
namespaces' containers: for any set of containers (the engine's ``used``), for any
sequence of count and forget on the tally alone, and for any sequence of decisions on a
real service over SQLite (the decisions of ``test_indexes``, reallocations that change a
container's requests among them)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections import Counter
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.deployments.request_tally import RequestTally
from coordinator.deployments.service import DeploymentService
from coordinator.deployments.translate import quota_container
from coordinator.errors import ApiError
from coordinator.quotas import Container, Quota, QuotaError, used, used_by_shapes
from coordinator.store.sqlite import SqliteStore
from shared.api.containers import ContainerRecord
from tests.builders import make_inventory
from tests.coordinator.deployments.test_container_state import RECORD
from tests.coordinator.deployments.test_indexes import NODES, Op, load, operations, run
from tests.coordinator.quotas.states import containers, quota_sets, requests

QUOTAS = (
    Quota("a", ["team-a"], {}),
    Quota("b", ["team-b"], {"cpu": "1"}),
    Quota("both", ["team-a", "team-b"], {"memory": "1Gi"}, {"cpu": "100"}),
)


def _shapes(counted: list[Container]) -> list[tuple[dict[str, object], int]]:
    tally: Counter[tuple[tuple[str, object], ...]] = Counter(
        tuple(c.requests.items()) for c in counted
    )
    return [(dict(shape), n) for shape, n in tally.items()]


@given(quota_sets(), containers(count=12))
def test_used_by_shapes_equals_used(quotas: list[Quota], state: list[Container]) -> None:
    for quota in quotas:
        mine = [c for c in state if c.running and c.namespace in quota.namespaces]
        assert used_by_shapes(quota, _shapes(mine)) == used(quota, state)


# A step on the tally: count a container (id, namespace, requests) or forget an id.
steps = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from(["team-a", "team-b"]), requests, st.booleans()),
    max_size=30,
)


@given(steps)
def test_the_tally_equals_a_recount_after_any_counts_and_forgets(
    sequence: list[tuple[int, str, dict[str, object], bool]],
) -> None:
    tally, live = RequestTally(), dict[str, ContainerRecord]()
    for number, namespace, wanted, forget in sequence:
        cid = f"c{number}"
        if forget:
            tally.forget(cid)
            live.pop(cid, None)
        else:
            record = _record(cid, namespace, wanted)
            tally.count(record)
            live[cid] = record
        tally.check(live)
        for quota in QUOTAS:
            recounted = [quota_container(r) for r in live.values()]
            assert used_by_shapes(quota, tally.shapes(quota.namespaces)) == used(quota, recounted)


def _record(cid: str, namespace: str, wanted: dict[str, object]) -> ContainerRecord:
    requests = {name: value for name, value in wanted.items() if isinstance(value, int | str)}
    return msgspec.structs.replace(RECORD, id=cid, namespace=namespace, requests=requests)


def _check_quotas(service: DeploymentService) -> None:
    quotas = service._context.quotas
    live = [quota_container(r) for r in service._books.containers.values()]
    for quota in QUOTAS:
        assert quotas.used(quota, service.quota_requests) == used(
            quota, live, quotas.gb_per_gpu, share_base=100
        ), quota.name


async def _scenario(ops: list[Op], directory: Path) -> None:
    store = await SqliteStore.open(directory / "allot.db")
    clock = [0.0]
    service = await load(store, clock)
    try:
        for node in NODES:
            await service.hello(
                node, inventory=make_inventory(), address="127.0.0.1", agent_version="t"
            )
        for op in ops:
            with contextlib.suppress(ApiError, QuotaError):  # refused: nothing changed
                await run(op, service, clock)
            _check_quotas(service)
        again = await load(store)
        _check_quotas(again)
        await again.close()
    finally:
        await service.close()
        await store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, max_size=14))
def test_quota_usage_equals_a_recount_after_any_sequence_of_decisions(ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_scenario(ops, Path(directory)))
