"""One batch of lease decisions: taken on the committed tables, then taken back until
their commit succeeded.

    batch = LeaseBatch(books)
    point = batch.savepoint()
    batch.request("db.write", table, "team-a/web-7", 30.0, now=now)   # decides in place
    batch.rollback_to(point)        # a refused decision: its changes are gone
    settled = batch.settle()        # the batch's outcome; the books are as committed again
    store.commit(Txn(puts=settled.puts, deletes=settled.deletes))
    settled.apply(books)            # only once that commit succeeded

The lease engine's tables are mutable and large (a table of 100,000 clients holds its
band index and expiry heap), so a batch does not decide on copies: each decision changes
the tables in place, through this class, which logs how to undo every change. A decision
therefore sees the committed tables plus every decision before it in the same batch.
Once the batch is decided, ``settle`` reads what it changed (each touched lease, table,
the templates and the tables' settings), then undoes the log in reverse, all with no
``await`` in between: no reader ever sees a decision whose commit has not succeeded, and
a failed commit has nothing to undo. ``Settled.apply`` puts the outcome back on the
books; a lease is put back with ``LeaseTable.assign`` exactly as it was decided.

Cost: an undo entry per change; ``settle`` and ``apply`` are O(leases touched), plus
O(tables) when the batch changed the templates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from coordinator.leases import (
    LeaseState,
    LeaseTable,
    ResourceTemplate,
    apply_template,
    match_template,
    table_for,
)
from coordinator.leases.table import Lease
from coordinator.services.lease_keys import held_key
from coordinator.services.lease_records import TEMPLATES_KEY, lease_record
from shared.api.leases import Kind
from shared.codec import to_json

LeaseKey = tuple[str, str]  # (resource id, holder key)


@dataclass
class LeaseBooks:
    """The committed lease state: what every read answers from."""

    templates: list[ResourceTemplate]
    tables: dict[str, LeaseTable]
    started_at: float
    learning: bool
    # Store keys of leases a read dropped from memory as expired; the next commit
    # deletes them (a read does not write by itself).
    expired: set[str] = field(default_factory=set)

    def new_table(self, template: ResourceTemplate) -> LeaseTable:
        return table_for(template, started_at=self.started_at, learning=self.learning)

    def reapply(self) -> None:
        """Each table follows its matching template; leases are kept (spec 8, reload)."""
        for resource_id, table in self.tables.items():
            template = match_template(self.templates, resource_id)
            if template is not None:
                apply_template(table, template)

    def expire(self, resource_id: str, table: LeaseTable, now: float) -> None:
        """A read's expiry: dropped from memory now, from the store with the next commit."""
        self.expired.update(held_key(resource_id, holder) for holder in table.expire(now))


class Settings(NamedTuple):
    """A table's configuration, as ``LeaseTable.reconfigure`` takes it."""

    kind: Kind
    capacity: float
    lease_length: float
    refresh_interval: float
    learning_mode_duration: float
    safe_capacity: float | None

    @classmethod
    def of(cls, table: LeaseTable) -> Settings:
        return cls(
            table.kind,
            table.capacity,
            table.lease_length,
            table.refresh_interval,
            table.learning_mode_duration,
            table.safe_capacity,
        )

    def put_on(self, table: LeaseTable) -> None:
        table.reconfigure(
            self.kind,
            self.capacity,
            lease_length=self.lease_length,
            refresh_interval=self.refresh_interval,
            learning_mode_duration=self.learning_mode_duration,
            safe_capacity=self.safe_capacity,
        )


@dataclass(frozen=True)
class Settled:
    """What a decided batch changed, to commit and then apply."""

    leases: dict[LeaseKey, LeaseState | None]  # None: the lease is gone
    tables: dict[str, LeaseTable | None]  # None: the resource's table is gone
    templates: list[ResourceTemplate] | None  # None: unchanged
    settings: dict[str, Settings]  # every table's, when the templates changed
    puts: dict[str, bytes]
    deletes: tuple[str, ...]

    def is_empty(self) -> bool:
        return not (self.puts or self.deletes or self.tables)

    def apply(self, books: LeaseBooks) -> None:
        """Put the batch's outcome on ``books`` (its commit succeeded). The tables are
        placed first, so each lease goes into the table its resource has now."""
        if self.templates is not None:
            books.templates = self.templates
        for resource_id, table in self.tables.items():
            if table is None:
                books.tables.pop(resource_id, None)
            else:
                books.tables[resource_id] = table
        for resource_id, settings in self.settings.items():
            settings.put_on(books.tables[resource_id])
        for (resource_id, holder), lease in self.leases.items():
            present = books.tables.get(resource_id)
            if present is not None:
                hold(present, holder, lease)
        # Deleted now; and a lease a read expired while this commit was in flight and
        # that the batch granted again stays: its key must not be deleted next time.
        books.expired.difference_update(self.deletes)
        books.expired.difference_update(self.puts)


class LeaseBatch:
    """The deciders' way to change the books, every change logged to be undone."""

    def __init__(self, books: LeaseBooks) -> None:
        self.books = books
        self._undo: list[Callable[[], None]] = []
        self._first: dict[LeaseKey, LeaseState | None] = {}  # as committed
        self._tables: set[str] = set()
        self._templates: list[ResourceTemplate] | None = None  # as committed

    def savepoint(self) -> int:
        return len(self._undo)

    def rollback_to(self, point: int) -> None:
        """Undo every change since ``savepoint`` returned ``point``, newest first."""
        while len(self._undo) > point:
            self._undo.pop()()

    # --- changes ----------------------------------------------------------------------

    def table(self, resource_id: str, template: ResourceTemplate) -> LeaseTable:
        """The resource's table, made (empty, configured by ``template``) if it has none."""
        table = self.books.tables.get(resource_id)
        if table is None:
            table = self.books.new_table(template)
            self._place(resource_id, table)
        return table

    def drop_table(self, resource_id: str) -> None:
        self._place(resource_id, None)

    def expire(self, resource_id: str, table: LeaseTable, now: float) -> int:
        """Drop the table's leases due by ``now``; how many went."""
        due = table.expire_leases(now)
        for lease in due:
            self._changed(resource_id, table, lease.client_id, lease)
        return len(due)

    def request(
        self,
        resource_id: str,
        table: LeaseTable,
        holder: str,
        wants: float,
        *,
        now: float,
        has: float,
        subclients: int,
        priority: int,
    ) -> Lease:
        """The engine's decision for ``holder`` (after expiring what is due by ``now``)."""
        self.expire(resource_id, table, now)
        before = table.get(holder)
        lease = table.request(
            holder, wants, now=now, has=has, subclients=subclients, priority=priority
        )
        self._changed(resource_id, table, holder, before)
        return lease

    def release(self, resource_id: str, table: LeaseTable, holder: str) -> bool:
        before = table.get(holder)
        if before is None or not table.release(holder):
            return False
        self._changed(resource_id, table, holder, before)
        return True

    def replace_templates(self, templates: list[ResourceTemplate]) -> None:
        """The template list becomes ``templates`` (checked by the caller), and every
        table follows its template."""
        books = self.books
        previous, settings = books.templates, _settings(books.tables.items())
        if self._templates is None:
            self._templates = previous

        def undo() -> None:
            books.templates = previous
            for resource_id, table in books.tables.items():
                settings[resource_id].put_on(table)

        self._undo.append(undo)
        books.templates = templates
        books.reapply()

    # --- the outcome ------------------------------------------------------------------

    def settle(self) -> Settled:
        """What the batch changed, as writes and as what to apply; the books are put back
        as committed (the log undone, newest first)."""
        books = self.books
        tables = {resource_id: books.tables.get(resource_id) for resource_id in self._tables}
        leases: dict[LeaseKey, LeaseState | None] = {}
        puts: dict[str, bytes] = {}
        deletes: list[str] = []
        for key, first in self._first.items():
            resource_id, holder = key
            present = books.tables.get(resource_id)
            lease = leases[key] = None if present is None else present.get(holder)
            if lease == first:
                continue  # changed, then changed back: nothing to write
            if lease is None:
                deletes.append(held_key(resource_id, holder))
            else:
                puts[held_key(resource_id, holder)] = to_json(lease_record(lease))
        templates = None
        settings: dict[str, Settings] = {}
        if self._templates is not None:
            templates = list(books.templates)
            settings = _settings(books.tables.items())
            puts[TEMPLATES_KEY] = to_json(templates)
        self.rollback_to(0)
        expired = sorted(books.expired - puts.keys())
        return Settled(
            leases=leases,
            tables=tables,
            templates=templates,
            settings=settings,
            puts=puts,
            deletes=tuple(dict.fromkeys([*deletes, *expired])),
        )

    # --- the log ----------------------------------------------------------------------

    def _changed(
        self, resource_id: str, table: LeaseTable, holder: str, before: LeaseState | None
    ) -> None:
        """``holder``'s lease in ``table`` was ``before`` until now."""
        self._first.setdefault((resource_id, holder), before)
        self._undo.append(lambda: hold(table, holder, before))

    def _place(self, resource_id: str, table: LeaseTable | None) -> None:
        tables = self.books.tables
        before = tables.get(resource_id)

        def undo() -> None:
            if before is None:
                tables.pop(resource_id, None)
            else:
                tables[resource_id] = before

        self._tables.add(resource_id)
        self._undo.append(undo)
        if table is None:
            tables.pop(resource_id, None)
        else:
            tables[resource_id] = table


def _settings(tables: Iterable[tuple[str, LeaseTable]]) -> dict[str, Settings]:
    return {resource_id: Settings.of(table) for resource_id, table in tables}


def hold(table: LeaseTable, holder: str, lease: LeaseState | None) -> None:
    """``holder`` holds exactly ``lease`` in ``table`` (None: no lease), as decided
    or as stored; nothing is decided or expired."""
    if lease is None:
        table.release(holder)
        return
    table.assign(
        holder,
        has=lease.has,
        wants=lease.wants,
        expiry_time=lease.expiry_time,
        subclients=lease.subclients,
        priority=lease.priority,
    )
