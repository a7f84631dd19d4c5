"""A load shares equal stored allocations (``stored_books.change_of``): for any nodes,
share bases and allocations, in parts of any size, the books equal those each node
loaded alone gives, with no sharing; allocations stored alike on nodes of one share base
are one object, and no others are."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.deployments.books import Books
from coordinator.deployments.node_records import (
    ALLOCATION_PREFIX,
    StoredAllocation,
    StoredNode,
    container_allocation_key,
)
from coordinator.deployments.stored_books import SharedAllocations, building, change_of
from coordinator.store import Entry
from shared.codec import to_json

CORES = 4
MiB = 1024**2


def allocation(kind: int, share_base: int) -> StoredAllocation:
    """One of a few allocations: unbound ones of several sizes, or bound to core 0 or 1."""
    if kind < 4:
        return StoredAllocation(
            cores={},
            numa=None,
            memory=(kind + 1) * MiB,
            fragment=None,
            cpu_request=kind + 1,
            cpu_limit=kind + 1,
            memory_request=(kind + 1) * MiB,
            memory_limit=(kind + 1) * MiB,
            cpu_bind=False,
            soft_memory=False,
        )
    return StoredAllocation(
        cores={kind - 4: share_base},
        numa=None,
        memory=MiB,
        fragment=None,
        cpu_request=share_base,
        cpu_limit=share_base,
        memory_request=MiB,
        memory_limit=MiB,
        cpu_bind=True,
        soft_memory=False,
    )


def node_entries(name: str, share_base: int, kinds: list[int]) -> list[Entry]:
    """The node's header and allocations as stored, at made-up revisions; a bound
    kind is kept once on a node (each core holds one)."""
    header = StoredNode(
        name=name,
        cores=dict.fromkeys(range(CORES), share_base),
        numa=None,
        memory=1024 * MiB,
        numa_memory=None,
        share_base=share_base,
        version=1,
        allocations_apart=True,
    )
    entries = [Entry(ALLOCATION_PREFIX + name, to_json(header), 1, 1)]
    seen_bound: set[int] = set()
    for index, kind in enumerate(kinds):
        if kind >= 4:
            if kind in seen_bound:
                continue
            seen_bound.add(kind)
        key = container_allocation_key(name, f"c{index:02}")
        entries.append(Entry(key, to_json(allocation(kind, share_base)), 2, 2 + index))
    return entries


nodes = st.lists(
    st.tuples(st.sampled_from([100, 1000]), st.lists(st.integers(0, 5), max_size=8)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(nodes, st.integers(1, 20))
def test_a_shared_load_equals_each_node_loaded_alone(
    stored: list[tuple[int, list[int]]], part: int
) -> None:
    entries = [
        entry
        for index, (share_base, kinds) in enumerate(stored)
        for entry in node_entries(f"n{index}", share_base, kinds)
    ]
    shared_books = Books()
    for _ in building(entries, shared_books):
        pass
    by_node: dict[str, list[Entry]] = {}
    for entry in entries:
        by_node.setdefault(entry.key.removeprefix(ALLOCATION_PREFIX).split("/")[0], []).append(
            entry
        )
    alone: dict[str, object] = {}
    for node, its_entries in by_node.items():
        books = Books()
        books.apply(change_of(its_entries, books), 0)
        alone[node] = books.nodes[node]
    assert shared_books.nodes == alone

    # One object for each stored value and share base, whatever the parts.
    cache: SharedAllocations = {}
    books = Books()
    for start in range(0, len(entries), part):
        books.apply(change_of(entries[start : start + part], books, cache), 0)
    objects: dict[tuple[bytes, int], set[int]] = {}
    for entry in entries:
        node, _, container_id = entry.key.removeprefix(ALLOCATION_PREFIX).partition("/")
        if container_id:
            state = books.nodes[node]
            objects.setdefault((entry.value, state.share_base), set()).add(
                id(state.allocations[container_id])
            )
    assert all(len(ids) == 1 for ids in objects.values())
    assert len({next(iter(ids)) for ids in objects.values()}) == len(objects)
    assert books.nodes == alone
