"""Capacity leases in the coordinator: the engine's tables, persisted, behind the API.

Every change (a capacity request, a release, a template change, the sweep) is a decider
on the lease domain's own sequencer (``lease_sequencer``): decided in order on the
committed tables and the earlier decisions of its batch, committed with its batch,
applied to the tables only once that commit succeeded, then answered. Reads (status,
leases, templates) see committed state only.

A lease is held by a client id within a namespace (``lease_keys``): the caller says
which namespace a request acts for, and the engine's tables key each lease by the
``holder_key`` of both.

Store keys: ``lease_records``.

A store written before namespaces holds ``/leases/held/<resource>/<client>``; loading it
gives those leases to the cluster's own clients (namespace "") and rewrites their keys in
the form of now, in the same commit.

Learning mode (spec 6) runs only when the coordinator starts on a store without
``/leases/initialized``: a store that lost its lease table looks exactly like that.
Templates named in the coordinator's config are applied at every start (replacing the
stored template with the same glob); the API adds, replaces and deletes templates
afterwards, and those changes persist.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec

from coordinator.leases import (
    LeaseState,
    ResourceTemplate,
    TemplateError,
    match_template,
    validate_templates,
)
from coordinator.services.lease_batch import LeaseBatch, LeaseBooks, hold
from coordinator.services.lease_keys import HELD_PREFIX, held_key, holder_key, parse_held_key
from coordinator.services.lease_records import (
    INITIALIZED_KEY,
    LEASES_PREFIX,
    TEMPLATES_KEY,
    StoredLease,
    decode_lease,
    decode_templates,
    lease_record,
)
from coordinator.services.lease_sequencer import LeaseSequencer
from coordinator.services.lease_views import client_lease
from coordinator.store import Store, Txn
from shared.api.leases import ClientLease, ResourceStatus
from shared.codec import to_json
from shared.lease_protocol import (
    CapacityRequest,
    CapacityResponse,
    Gets,
    ReleaseRequest,
    ResourceResponse,
    request_problems,
)
from shared.logs import get_logger

__all__ = ["LeaseRequestError", "LeaseService", "StoredLease", "upsert"]

log = get_logger("allot.coordinator.leases")


class LeaseRequestError(Exception):
    """A request that breaks a rule; nothing was changed. ``code`` names the rule."""

    def __init__(self, code: str, message: str, details: dict[str, object] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


def upsert(templates: Sequence[ResourceTemplate], new: ResourceTemplate) -> list[ResourceTemplate]:
    """The list with ``new`` in place of the template of the same glob; a new glob goes
    last, but before a trailing catch-all ``*`` (which must stay last)."""
    result = list(templates)
    for index, old in enumerate(result):
        if old.identifier_glob == new.identifier_glob:
            result[index] = new
            return result
    if result and result[-1].identifier_glob == "*" and new.identifier_glob != "*":
        result.insert(len(result) - 1, new)
    else:
        result.append(new)
    return result


class LeaseService:
    def __init__(
        self,
        store: Store,
        books: LeaseBooks,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._books = books
        self._sequencer = LeaseSequencer(store, books)
        self._wall = wall_clock

    @classmethod
    async def load(
        cls,
        store: Store,
        config_templates: Sequence[ResourceTemplate],
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> LeaseService:
        """The lease state of ``store`` with the config's templates applied on top."""
        entries = {entry.key: entry.value for entry in await store.range(LEASES_PREFIX)}
        templates = decode_templates.decode(entries.get(TEMPLATES_KEY, b"[]"))
        for template in config_templates:
            templates = upsert(templates, template)
        validate_templates(templates)
        now = wall_clock()
        learning = INITIALIZED_KEY not in entries
        books = LeaseBooks(templates, {}, started_at=now, learning=learning)
        puts = {TEMPLATES_KEY: to_json(templates)}
        if learning:
            puts[INITIALIZED_KEY] = to_json({"at": now})
        deletes: list[str] = []
        outcomes = Counter(
            _restore(books, key, decode_lease.decode(value), now, puts, deletes)
            for key, value in entries.items()
            if key.startswith(HELD_PREFIX)
        )
        await store.commit(Txn(puts=puts, deletes=tuple(deletes)))
        log.info(
            "leases loaded",
            templates=len(templates),
            resources=len(books.tables),
            leases=outcomes["kept"] + outcomes["rekeyed"],
            dropped=outcomes["dropped"],
            learning=learning,
        )
        if outcomes["rekeyed"]:
            log.info(
                "leases of a store without namespaces now belong to the cluster's own clients",
                leases=outcomes["rekeyed"],
            )
        return cls(store, books, wall_clock=wall_clock)

    @property
    def templates(self) -> list[ResourceTemplate]:
        return list(self._books.templates)

    async def idle(self) -> None:
        """Wait until no lease decision is queued or being committed."""
        await self._sequencer.idle()

    # --- changes: each a decider on the sequencer ------------------------------------

    async def capacity(self, request: CapacityRequest, namespace: str) -> CapacityResponse:
        """Decide every resource of the request for its client in ``namespace`` (which
        the caller has checked the request may act for), persist, answer (spec 2 and 5)."""
        problems = request_problems(request)
        if problems:
            raise LeaseRequestError("invalid_request", problems[0], {"problems": problems})
        holder = holder_key(namespace, request.client_id)
        return await self._sequencer.decide(lambda batch: self._grant(batch, request, holder))

    def _grant(self, batch: LeaseBatch, request: CapacityRequest, holder: str) -> CapacityResponse:
        templates = {}
        for item in request.resources:
            template = match_template(self._books.templates, item.resource_id)
            if template is None:
                message = f"resource {item.resource_id!r} matches no resource template"
                raise LeaseRequestError("unknown_resource", message, {"resource": item.resource_id})
            templates[item.resource_id] = template
        now = self._wall()
        answers: list[ResourceResponse] = []
        for item in request.resources:
            table = batch.table(item.resource_id, templates[item.resource_id])
            lease = batch.request(
                item.resource_id,
                table,
                holder,
                item.wants,
                now=now,
                has=item.has,
                subclients=item.subclients,
                priority=item.priority,
            )
            answers.append(
                ResourceResponse(
                    resource_id=item.resource_id,
                    gets=Gets(
                        capacity=lease.capacity,
                        expiry_time=lease.expiry_time,
                        refresh_interval=lease.refresh_interval,
                    ),
                    safe_capacity=lease.safe_capacity,
                )
            )
        return CapacityResponse(resources=answers)

    async def release(self, request: ReleaseRequest, namespace: str) -> None:
        """Drop the named leases of the request's client in ``namespace`` at once;
        unknown clients and resources are ignored."""
        holder = holder_key(namespace, request.client_id)
        resource_ids = list(dict.fromkeys(request.resource_ids))

        def release(batch: LeaseBatch) -> None:
            for resource_id in resource_ids:
                table = self._books.tables.get(resource_id)
                if table is not None:
                    batch.release(resource_id, table, holder)

        await self._sequencer.decide(release)

    async def put_template(self, template: ResourceTemplate) -> None:
        await self._sequencer.decide(
            lambda batch: _replace_templates(batch, upsert(batch.books.templates, template))
        )

    async def delete_template(self, glob: str) -> bool:
        def delete(batch: LeaseBatch) -> bool:
            before = batch.books.templates
            remaining = [t for t in before if t.identifier_glob != glob]
            if len(remaining) == len(before):
                return False
            _replace_templates(batch, remaining)
            return True

        return await self._sequencer.decide(delete)

    async def sweep(self) -> int:
        """Drop every expired lease, and tables left empty without a template; persist.
        How many leases were dropped (those reads dropped since the last commit too)."""
        return await self._sequencer.decide(self._sweep)

    def _sweep(self, batch: LeaseBatch) -> int:
        books, now = self._books, self._wall()
        dropped = len(books.expired)
        for resource_id, table in list(books.tables.items()):
            dropped += batch.expire(resource_id, table, now)
            if table.count == 0 and match_template(books.templates, resource_id) is None:
                batch.drop_table(resource_id)
        return dropped

    # --- reads: committed state only ------------------------------------------------

    def status(self, resource_id: str) -> ResourceStatus | None:
        """The resource's state; a resource matching a template but never requested has
        an empty status; one matching nothing and holding nothing has none."""
        books = self._books
        template = match_template(books.templates, resource_id)
        table = books.tables.get(resource_id)
        now = self._wall()
        if table is None:
            if template is None:
                return None
            table = books.new_table(template)
        books.expire(resource_id, table, now)
        return ResourceStatus(
            resource_id=resource_id,
            template=template.identifier_glob if template else "",
            kind=table.kind,
            capacity=table.capacity,
            safe_capacity=table.safe_capacity,
            lease_length=table.lease_length,
            refresh_interval=table.refresh_interval,
            sum_has=table.sum_has,
            sum_wants=table.sum_wants,
            clients=table.count,
            learning=table.learning(now),
        )

    def statuses(self) -> list[ResourceStatus]:
        found = (self.status(resource_id) for resource_id in sorted(self._books.tables))
        return [status for status in found if status is not None]

    def leases(self, resource_id: str) -> list[ClientLease]:
        """Every live lease of the resource, with its namespace and client id."""
        table = self._books.tables.get(resource_id)
        if table is None:
            return []
        self._books.expire(resource_id, table, self._wall())
        return [client_lease(lease) for lease in table.leases()]


def _replace_templates(batch: LeaseBatch, templates: list[ResourceTemplate]) -> None:
    try:
        validate_templates(templates)
    except TemplateError as error:
        raise LeaseRequestError(error.code, error.message, dict(error.details)) from error
    batch.replace_templates(templates)


def _restore(
    books: LeaseBooks,
    key: str,
    stored: StoredLease,
    now: float,
    puts: dict[str, bytes],
    deletes: list[str],
) -> Literal["kept", "rekeyed", "dropped"]:
    """Hold the stored lease again, unless it expired or no template matches it any
    more (then its key goes); a key without a namespace is replaced by one with."""
    held = parse_held_key(key)
    template = match_template(books.templates, held.resource_id)
    if template is None or stored.expiry_time <= now:
        deletes.append(key)
        return "dropped"
    lease = LeaseState(held.holder, **msgspec.structs.asdict(stored))
    table = books.tables.get(held.resource_id)
    if table is None:
        table = books.tables[held.resource_id] = books.new_table(template)
    hold(table, lease.client_id, lease)
    if not held.legacy:
        return "kept"
    deletes.append(key)
    puts[held_key(held.resource_id, held.holder)] = to_json(lease_record(lease))
    return "rekeyed"
