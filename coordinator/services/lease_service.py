"""Capacity leases in the coordinator: the engine's tables, persisted, behind the API.

Each operation decides synchronously (no ``await`` between reading a table and writing
its new lease), then commits everything it changed in one store transaction before it
answers; if that commit fails, the in-memory change is undone and the caller gets an
error, so memory never holds a grant the store does not.

A lease is held by a client id within a namespace (``lease_keys``): the caller says
which namespace a request acts for, and the engine's tables key each lease by the
``holder_key`` of both.

Store keys:
    /leases/templates                              the ordered template list (JSON)
    /leases/initialized                            present once lease state has ever
                                                   been persisted
    /leases/held/<resource>/<namespace>/<client>   one live lease (parts percent-encoded)

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
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from coordinator.leases import (
    LeaseState,
    LeaseTable,
    ResourceTemplate,
    TemplateError,
    apply_template,
    match_template,
    table_for,
    validate_templates,
)
from coordinator.services.lease_keys import HELD_PREFIX, held_key, holder_key, parse_held_key
from coordinator.services.lease_views import client_lease
from coordinator.store import Store, Txn
from shared.api.leases import ClientLease, ResourceStatus
from shared.codec import json_decoder, to_json
from shared.lease_protocol import (
    CapacityRequest,
    CapacityResponse,
    Gets,
    ReleaseRequest,
    ResourceResponse,
    request_problems,
)
from shared.logs import get_logger

log = get_logger("allot.coordinator.leases")

TEMPLATES_KEY = "/leases/templates"
INITIALIZED_KEY = "/leases/initialized"


class LeaseRequestError(Exception):
    """A request that breaks a rule; nothing was changed. ``code`` names the rule."""

    def __init__(self, code: str, message: str, details: dict[str, object] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


class StoredLease(msgspec.Struct, frozen=True, kw_only=True):
    has: float
    wants: float
    subclients: int
    priority: int
    expiry_time: float


_decode_templates: msgspec.json.Decoder[list[ResourceTemplate]] = json_decoder(
    list[ResourceTemplate]
)
_decode_lease: msgspec.json.Decoder[StoredLease] = json_decoder(StoredLease)


@dataclass
class _Change:
    """What one operation did: the writes to commit, and how to undo it in memory."""

    puts: dict[str, bytes] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    undo: list[Callable[[], None]] = field(default_factory=list)

    def hold(self, resource_id: str, lease: LeaseState) -> None:
        """Persist ``lease``, whose client id is a holder key."""
        self.puts[held_key(resource_id, lease.client_id)] = to_json(
            StoredLease(
                has=lease.has,
                wants=lease.wants,
                subclients=lease.subclients,
                priority=lease.priority,
                expiry_time=lease.expiry_time,
            )
        )


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
        templates: Sequence[ResourceTemplate],
        *,
        started_at: float,
        learning: bool,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._templates = list(templates)
        self._tables: dict[str, LeaseTable] = {}
        # Keys of leases dropped from memory as expired, deleted from the store with the
        # next commit (a read that expires leases does not write by itself).
        self._expired: set[str] = set()
        self.started_at = started_at
        self.learning_at_start = learning
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
        entries = {entry.key: entry.value for entry in await store.range("/leases/")}
        templates = _decode_templates.decode(entries.get(TEMPLATES_KEY, b"[]"))
        for template in config_templates:
            templates = upsert(templates, template)
        validate_templates(templates)
        now = wall_clock()
        learning = INITIALIZED_KEY not in entries
        service = cls(store, templates, started_at=now, learning=learning, wall_clock=wall_clock)
        change = _Change(puts={TEMPLATES_KEY: to_json(templates)})
        if learning:
            change.puts[INITIALIZED_KEY] = to_json({"at": now})
        outcomes = Counter(
            service._restore(key, _decode_lease.decode(value), now, change)
            for key, value in entries.items()
            if key.startswith(HELD_PREFIX)
        )
        await store.commit(Txn(puts=change.puts, deletes=tuple(change.deletes)))
        log.info(
            "leases loaded",
            templates=len(templates),
            resources=len(service._tables),
            leases=outcomes["kept"] + outcomes["rekeyed"],
            dropped=outcomes["dropped"],
            learning=learning,
        )
        if outcomes["rekeyed"]:
            log.info(
                "leases of a store without namespaces now belong to the cluster's own clients",
                leases=outcomes["rekeyed"],
            )
        return service

    def _restore(
        self, key: str, lease: StoredLease, now: float, change: _Change
    ) -> Literal["kept", "rekeyed", "dropped"]:
        """Hold the stored lease again, unless it expired or no template matches it any
        more (then its key goes); a key without a namespace is replaced by one with."""
        held = parse_held_key(key)
        template = match_template(self._templates, held.resource_id)
        if template is None or lease.expiry_time <= now:
            change.deletes.append(key)
            return "dropped"
        state = LeaseState(held.holder, **msgspec.structs.asdict(lease))
        _put_back(self._table(held.resource_id, template), state)
        if not held.legacy:
            return "kept"
        change.deletes.append(key)
        change.hold(held.resource_id, state)
        return "rekeyed"

    @property
    def templates(self) -> list[ResourceTemplate]:
        return list(self._templates)

    def _table(self, resource_id: str, template: ResourceTemplate) -> LeaseTable:
        table = self._tables.get(resource_id)
        if table is None:
            table = table_for(template, started_at=self.started_at, learning=self.learning_at_start)
            self._tables[resource_id] = table
        return table

    async def capacity(self, request: CapacityRequest, namespace: str) -> CapacityResponse:
        """Decide every resource of the request for its client in ``namespace`` (which
        the caller has checked the request may act for), persist, answer (spec 2 and 5)."""
        problems = request_problems(request)
        if problems:
            raise LeaseRequestError("invalid_request", problems[0], {"problems": problems})
        templates = {}
        for item in request.resources:
            template = match_template(self._templates, item.resource_id)
            if template is None:
                message = f"resource {item.resource_id!r} matches no resource template"
                raise LeaseRequestError("unknown_resource", message, {"resource": item.resource_id})
            templates[item.resource_id] = template
        holder = holder_key(namespace, request.client_id)
        now = self._wall()
        change = _Change()
        answers: list[ResourceResponse] = []
        for item in request.resources:
            table = self._table(item.resource_id, templates[item.resource_id])
            self._expire(item.resource_id, table, now)
            before = table.get(holder)
            lease = table.request(
                holder,
                item.wants,
                now=now,
                has=item.has,
                subclients=item.subclients,
                priority=item.priority,
            )
            after = table.get(holder)
            assert after is not None
            change.hold(item.resource_id, after)
            change.undo.append(_restorer(table, holder, before, after))
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
        await self._commit(change)
        return CapacityResponse(resources=answers)

    async def release(self, request: ReleaseRequest, namespace: str) -> None:
        """Drop the named leases of the request's client in ``namespace`` at once;
        unknown clients and resources are ignored."""
        holder = holder_key(namespace, request.client_id)
        change = _Change()
        for resource_id in dict.fromkeys(request.resource_ids):
            table = self._tables.get(resource_id)
            before = table.get(holder) if table else None
            if table is not None and before is not None and table.release(holder):
                change.deletes.append(held_key(resource_id, holder))
                change.undo.append(_restorer(table, holder, before, None))
        if change.deletes:
            await self._commit(change)

    async def put_template(self, template: ResourceTemplate) -> None:
        await self._replace_templates(upsert(self._templates, template))

    async def delete_template(self, glob: str) -> bool:
        remaining = [t for t in self._templates if t.identifier_glob != glob]
        if len(remaining) == len(self._templates):
            return False
        await self._replace_templates(remaining)
        return True

    async def _replace_templates(self, templates: list[ResourceTemplate]) -> None:
        try:
            validate_templates(templates)
        except TemplateError as error:
            raise LeaseRequestError(error.code, error.message, dict(error.details)) from error
        previous = self._templates
        self._templates = templates
        self._reapply()
        change = _Change(puts={TEMPLATES_KEY: to_json(templates)})

        def undo() -> None:
            self._templates = previous
            self._reapply()

        change.undo.append(undo)
        await self._commit(change)

    def _reapply(self) -> None:
        """Each table follows its matching template; leases are kept (spec 8, reload)."""
        for resource_id, table in self._tables.items():
            template = match_template(self._templates, resource_id)
            if template is not None:
                apply_template(table, template)

    async def sweep(self) -> int:
        """Drop every expired lease, and tables left empty without a template; persist."""
        now = self._wall()
        for resource_id, table in list(self._tables.items()):
            self._expire(resource_id, table, now)
            if table.count == 0 and match_template(self._templates, resource_id) is None:
                del self._tables[resource_id]
        dropped = len(self._expired)
        if dropped:
            await self._commit(_Change())
        return dropped

    def _expire(self, resource_id: str, table: LeaseTable, now: float) -> None:
        self._expired.update(held_key(resource_id, holder) for holder in table.expire(now))

    def status(self, resource_id: str) -> ResourceStatus | None:
        """The resource's state; a resource matching a template but never requested has
        an empty status; one matching nothing and holding nothing has none."""
        template = match_template(self._templates, resource_id)
        table = self._tables.get(resource_id)
        now = self._wall()
        if table is None:
            if template is None:
                return None
            table = table_for(template, started_at=self.started_at, learning=self.learning_at_start)
        self._expire(resource_id, table, now)
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
        found = (self.status(resource_id) for resource_id in sorted(self._tables))
        return [status for status in found if status is not None]

    def leases(self, resource_id: str) -> list[ClientLease]:
        """Every live lease of the resource, with its namespace and client id."""
        table = self._tables.get(resource_id)
        if table is None:
            return []
        self._expire(resource_id, table, self._wall())
        return [client_lease(lease) for lease in table.leases()]

    async def _commit(self, change: _Change) -> None:
        # A lease that expired and was granted again in the same turn is put, not deleted.
        expired = self._expired - change.puts.keys()
        self._expired = set()
        deletes = tuple(dict.fromkeys([*change.deletes, *sorted(expired)]))
        try:
            await self._store.commit(Txn(puts=change.puts, deletes=deletes))
        except BaseException:
            self._expired |= expired  # still gone from memory: delete them next time
            for undo in reversed(change.undo):
                undo()
            raise


def _restorer(
    table: LeaseTable, holder: str, before: LeaseState | None, after: LeaseState | None
) -> Callable[[], None]:
    """Put ``holder``'s lease back to ``before``, unless a later decision replaced
    ``after`` meanwhile (then that newer lease stands)."""

    def restore() -> None:
        if table.get(holder) != after:
            return
        if before is None:
            table.release(holder)
        else:
            _put_back(table, before)

    return restore


def _put_back(table: LeaseTable, lease: LeaseState) -> None:
    """Hold ``lease`` in ``table`` exactly as it was (from the store, or undoing)."""
    table.assign(
        lease.client_id,
        has=lease.has,
        wants=lease.wants,
        expiry_time=lease.expiry_time,
        subclients=lease.subclients,
        priority=lease.priority,
    )
