"""coordinator.deployments.node_records: a node's header and one key per allocation. A
commit writes the header and only the allocations that changed; a store written before
allocations had keys of their own (inline in the header) loads as it was, and the node's
first write after that gives every allocation its key, for the leader, a standby
following the store, and a fresh load alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from coordinator.deployments.node_records import (
    allocation_key,
    container_allocation_key,
    header,
    node_writes,
    parse_key,
    stored_allocation,
)
from coordinator.deployments.stored_books import WarmBooks
from coordinator.placement import Allocation, NodeState, Normalized, Plan
from coordinator.services.registry import NodeRegistry
from coordinator.store import Txn
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore
from shared.codec import to_json
from tests.builders import make_inventory
from tests.coordinator.deployments.test_indexes import _plain_books, load, spec


def allocation(cores: dict[int, int], memory: int = 64) -> Allocation:
    resources = Normalized(
        cpu_request=sum(cores.values()),
        cpu_limit=sum(cores.values()),
        memory_request=memory,
        memory_limit=memory,
        cpu_bind=True,
        soft_memory=False,
        share_base=100,
    )
    return Allocation(Plan(cores, memory=memory), resources)


def node(**allocations: Allocation) -> NodeState:
    return NodeState("n1", {0: 100, 1: 100}, memory=1024, share_base=100, allocations=allocations)


def test_a_write_holds_the_header_and_the_allocations_that_changed_came_or_went() -> None:
    a, b, c, d = allocation({0: 50}), allocation({1: 50}), allocation({0: 20}), allocation({1: 30})
    before = node(a=a, b=b)
    after = dataclasses.replace(before, version=2, allocations={"a": a, "b": c, "d": d})
    puts, deletes = node_writes(before, after, inline=False)
    assert set(puts) == {
        allocation_key("n1"),
        container_allocation_key("n1", "b"),
        container_allocation_key("n1", "d"),
    }
    assert puts[allocation_key("n1")] == to_json(header(after))
    assert puts[container_allocation_key("n1", "b")] == to_json(stored_allocation(c))
    assert deletes == []
    puts, deletes = node_writes(after, before, inline=False)
    assert deletes == [container_allocation_key("n1", "d")]
    # the first write, and the first after an inline header: every allocation
    for was, inline in ((None, False), (before, True)):
        puts, _ = node_writes(was, after, inline=inline)
        assert len(puts) == 1 + len(after.allocations)


def test_keys_name_their_node_and_container() -> None:
    assert parse_key(allocation_key("n1.example")) == ("n1.example", "")
    assert parse_key(container_allocation_key("n1", "team-a-web-1")) == ("n1", "team-a-web-1")


async def inline_layout(store: SqliteStore, name: str) -> None:
    """Rewrite node ``name``'s allocations as a coordinator before this layout stored
    them: inline in its header, no key of their own."""
    entries = await store.range(allocation_key(name))
    head = next(e for e in entries if e.key == allocation_key(name))
    allocations = {parse_key(e.key)[1]: json.loads(e.value) for e in entries if e is not head}
    record = json.loads(head.value) | {"allocations": allocations}
    del record["allocations_apart"]
    keys = [e.key for e in entries if e is not head]
    await store.commit(Txn(puts={head.key: json.dumps(record).encode()}, deletes=tuple(keys)))


async def test_inline_allocations_load_and_the_first_write_gives_each_a_key(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    replica = await Replica.follow(store)
    try:
        first = await load(store)
        registry = first._context.registry
        assert isinstance(registry, NodeRegistry)
        await first.hello("n0", inventory=make_inventory(), address="x", agent_version="t")
        await first.deploy("team-a", spec("web", 3, True))
        await first.close()
        await inline_layout(store, "n0")
        assert [e.key for e in await store.range("/allocations/")] == ["/allocations/n0"]

        service = await load(store)  # as it was, noting the inline header
        assert service._books.inline_allocations == {"n0"}
        assert len(service._books.nodes["n0"].allocations) == 3
        warm = await WarmBooks.build(replica)
        assert _plain_books(warm._books) == _plain_books(service._books)

        # The first write removes one of them: its key never existed, and the standby
        # must not keep it from the inline header.
        gone = service.containers()[0].id
        await service.delete_container(gone)
        stored = {e.key: e for e in await store.range("/allocations/")}
        kept = {c.id for c in service.containers()}
        assert stored.keys() == {"/allocations/n0"} | {f"/allocations/n0/{c}" for c in kept}
        head = json.loads(stored["/allocations/n0"].value)
        assert head["allocations_apart"] is True
        assert head["allocations"] == {}
        assert service._books.inline_allocations == set()
        await replica.caught_up(store.revision)
        assert _plain_books(warm._books) == _plain_books(service._books)
        again = await load(store)
        assert _plain_books(again._books) == _plain_books(service._books)
        await again.close()
        await service.close()
    finally:
        await replica.close()
