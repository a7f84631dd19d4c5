"""A batch of lease decisions, taken back before its commit and applied after it: settling
leaves the books exactly as committed, and applying gives exactly the state that deciding
in place gave; a decision taken back on its own leaves no trace (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.leases import Algorithm, Kind, LeaseState, ResourceTemplate
from coordinator.services.lease_batch import LeaseBatch, LeaseBooks, Settings, hold
from coordinator.services.lease_keys import held_key
from coordinator.services.lease_service import upsert

RESOURCES = ("a", "b", "c.1")
HOLDERS = ("/x", "/y", "t/x", "t/z")


def template(glob: str, kind: Kind, capacity: float) -> ResourceTemplate:
    return ResourceTemplate(
        identifier_glob=glob,
        capacity=capacity,
        algorithm=Algorithm(kind=kind, lease_length=10, refresh_interval=2),
    )


templates = st.builds(
    template,
    st.sampled_from(["a", "b", "c.*", "*"]),
    st.sampled_from(list(Kind)),
    st.sampled_from([0.0, 10.0, 100.0]),
)
steps = st.one_of(
    st.tuples(
        st.just("request"),
        st.sampled_from(RESOURCES),
        st.sampled_from(HOLDERS),
        st.floats(0, 60, allow_nan=False),
        st.integers(-1, 1),
        st.floats(0, 15),  # seconds after the start
    ),
    st.tuples(st.just("release"), st.sampled_from(RESOURCES), st.sampled_from(HOLDERS)),
    st.tuples(st.just("put_template"), templates),
    st.tuples(st.just("delete_template"), st.sampled_from(["a", "b", "c.*", "*"])),
    st.tuples(st.just("sweep"), st.floats(0, 30)),
    st.tuples(st.just("refused"), st.sampled_from(RESOURCES), st.sampled_from(HOLDERS)),
)

Seen = tuple[list[ResourceTemplate], dict[str, tuple[Settings, list[LeaseState]]]]


def seen(books: LeaseBooks) -> Seen:
    """Everything a read or a later decision can see of the books."""
    tables = {r: (Settings.of(t), t.leases()) for r, t in sorted(books.tables.items())}
    return list(books.templates), tables


def by_key(state: Seen) -> dict[str, LeaseState]:
    """Every lease seen, by its store key."""
    return {held_key(r, held.client_id): held for r, (_, ls) in state[1].items() for held in ls}


def books_with(committed: list[tuple[Any, ...]]) -> LeaseBooks:
    """Books holding the outcome of ``committed`` steps, decided in place."""
    books = LeaseBooks([template("*", Kind.FAIR_SHARE, 100.0)], {}, started_at=0.0, learning=False)
    batch = LeaseBatch(books)
    for step in committed:
        decide(batch, step)
    return books


def decide(batch: LeaseBatch, step: tuple[Any, ...]) -> None:
    """One decision, as the lease service's deciders take it."""
    books = batch.books
    match step:
        case ("request", resource, holder, wants, priority, at):
            found = [t for t in books.templates if t.identifier_glob in (resource, "*", "c.*")]
            if not found:
                return
            table = batch.table(resource, found[0])
            batch.request(
                resource, table, holder, wants, now=at, has=0.0, subclients=1, priority=priority
            )
        case ("release", resource, holder):
            if resource in books.tables:
                batch.release(resource, books.tables[resource], holder)
        case ("put_template", new):
            batch.replace_templates(upsert(books.templates, new))
        case ("delete_template", glob):
            batch.replace_templates([t for t in books.templates if t.identifier_glob != glob])
        case ("sweep", at):
            for resource, table in list(books.tables.items()):
                batch.expire(resource, table, at)
                if table.count == 0:
                    batch.drop_table(resource)
        case ("refused", resource, holder):
            point = batch.savepoint()
            table = batch.table(resource, template(resource, Kind.STATIC, 5.0))
            batch.request(resource, table, holder, 3.0, now=1.0, has=0.0, subclients=1, priority=0)
            batch.rollback_to(point)


@settings(max_examples=300, deadline=None)
@given(
    committed=st.lists(steps, max_size=12),
    decided=st.lists(steps, max_size=12),
)
def test_settle_restores_the_committed_books_and_apply_gives_the_decided_ones(
    committed: list[tuple[Any, ...]], decided: list[tuple[Any, ...]]
) -> None:
    books = books_with(committed)
    before = seen(books)
    in_place = books_with(committed)
    reference = LeaseBatch(in_place)
    for step in decided:
        decide(reference, step)

    batch = LeaseBatch(books)
    for step in decided:
        decide(batch, step)
    settled = batch.settle()

    assert seen(books) == before
    settled.apply(books)
    assert seen(books) == seen(in_place)
    for table in books.tables.values():
        table.check()
    # The writes are the difference: every lease that changed, and only those.
    old, new = by_key(before), by_key(seen(books))
    changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    written = {k for k in [*settled.puts, *settled.deletes] if k.startswith("/leases/held/")}
    assert written == changed


def test_a_lease_put_back_is_the_lease_decided() -> None:
    books = books_with([("request", "a", "/x", 30.0, 0, 1.0)])
    table = books.tables["a"]
    lease = table.get("/x")
    hold(table, "/x", None)
    assert table.get("/x") is None
    hold(table, "/x", lease)
    assert table.get("/x") == lease
