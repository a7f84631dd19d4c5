"""The coordinator's state store: one small interface with etcd v3's semantics.

Keys (text starting with "/") map to byte values, each with the revision that created it
and the one that last modified it. A transaction commits its writes only if every key it
read still has the revision it saw (compare-and-swap), so two deciders can never both
spend the same capacity:

    entry = await store.get("/nodes/n1")
    seen = entry.mod_revision if entry else 0            # 0: the key must not exist
    result = await store.commit(Txn(compares=(Compare("/nodes/n1", seen),),
                                    puts={"/nodes/n1": b"..."}))
    if not result.succeeded: ...                          # someone else wrote first

Revisions, on both engines:
- the store's revision grows with every transaction that changes something, and only
  then (a failed one, a compare-only one or a delete of missing keys leaves it);
- every key a transaction writes gets the same mod revision, ``TxnResult.revision``,
  greater than every revision before it; ``Compare`` on that number holds until the key
  changes again;
- on SQLite it grows by exactly one per changing transaction; on etcd it is etcd's own
  cluster revision, which every write to that etcd moves, so it may jump (another allot
  cluster under another prefix, ``migrate``). Callers rely on the order, never on steps.

Besides reading and committing, a ``ClusterStore`` follows itself (``watch``: every change from a
revision on, one transaction at a time) and holds leases (``grant_lease``): keys put
with a lease vanish, in one transaction, when it expires or is revoked, which is what a
leader key needs; ``CompareCreated`` fences a commit on that key's incarnation.

Nothing above the store touches SQL or etcd; ``SqliteStore`` is the embedded engine,
``EtcdStore`` the one for several coordinators.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from coordinator.store.quorum import Quorum


@dataclass(frozen=True)
class Entry:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    deleted: ClassVar[bool] = False  # read as an ``Event`` is: a key that is there


@dataclass(frozen=True)
class Compare:
    """Holds when ``key``'s modification revision is ``mod_revision`` (0: key absent)."""

    key: str
    mod_revision: int


@dataclass(frozen=True)
class CompareCreated:
    """Holds when ``key``'s create revision is ``create_revision`` (0: key absent).

    A key deleted and put again has a new create revision, so this tells one holder of a
    leader key from the next even when their values are equal.
    """

    key: str
    create_revision: int


@dataclass(frozen=True)
class Txn:
    compares: tuple[Compare | CompareCreated, ...] = ()
    puts: Mapping[str, bytes] = field(default_factory=dict)
    deletes: tuple[str, ...] = ()
    lease: int = 0  # every put is attached to this lease (0: none); see ``grant_lease``


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int  # the store's revision after this transaction (unchanged if it failed)
    # A commit made in several steps (``coordinator.store.steps``): the revision each key
    # it put was written at, which is ``revision`` only for those of its last step. Empty
    # for a commit made in one transaction: every key it wrote has ``revision``.
    revisions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    """One key changed: put (with its new value) or deleted (``value`` empty)."""

    key: str
    value: bytes
    mod_revision: int
    deleted: bool = False


@dataclass(frozen=True)
class Snapshot:
    """What ``range`` gives, and the revision it was read at: ``watch`` from
    ``revision + 1`` follows on with no change missed or repeated. Entries are in the
    order of their keys' UTF-8 bytes (etcd's order, and SQLite's for text keys)."""

    entries: list[Entry]
    revision: int


class StoreError(Exception):
    """The store cannot be opened or written; the message says what to do."""


class OutcomeUnknown(StoreError):
    """A commit sent to the store that it may or may not have applied (a connection lost
    or a deadline passed while it was in flight): the caller's memory may lag the store."""


class WatchCompacted(StoreError):
    """The changes asked for are no longer kept: read a snapshot and watch from there."""

    def __init__(self, start_revision: int, oldest: int) -> None:
        super().__init__(
            f"changes from revision {start_revision} are no longer kept (the oldest kept"
            f" is {oldest}); read a snapshot and watch from its revision + 1"
        )
        self.oldest = oldest


class LeaseNotFound(StoreError):
    """The lease expired or was revoked (or never existed)."""

    def __init__(self, lease: int) -> None:
        super().__init__(f"lease {lease:x} does not exist (expired or revoked)")
        self.lease = lease


class Store(Protocol):
    @property
    def revision(self) -> int:
        """The latest revision this store has seen committed."""
        ...

    @property
    def quorum(self) -> Quorum | None:
        """The watch of etcd's quorum on which this store refuses commits at once while
        quorum is known lost (a leader's ``FencedStore``, and whatever wraps one), for
        the services to refuse what they queued as well; None where there is none."""
        ...

    async def get(self, key: str) -> Entry | None: ...

    async def range(self, prefix: str) -> list[Entry]:
        """Every entry whose key starts with ``prefix`` ("" or "/..."), in key order
        (keys compare as their UTF-8 bytes)."""
        ...

    async def commit(self, txn: Txn) -> TxnResult:
        """Apply ``txn`` atomically and durably if its compares hold. Raises
        ``LeaseNotFound`` (nothing written) when ``txn.lease`` is gone."""
        ...

    async def close(self) -> None: ...


class ClusterStore(Store, Protocol):
    """What several coordinators need besides: following the store and leases. Both
    engines have it; the services need only ``Store``."""

    async def snapshot(self, prefix: str) -> Snapshot:
        """``range(prefix)`` with the revision it was read at, in one consistent read."""
        ...

    def watch(self, prefix: str, start_revision: int) -> AsyncGenerator[list[Event], None]:
        """Every change to keys under ``prefix`` committed at ``start_revision`` (>= 1) or
        later, one list per transaction (its events in key order), in revision order, and
        then each new one as it commits, until the caller stops iterating. Raises
        ``WatchCompacted`` when changes that old are no longer kept."""
        ...

    async def compact(self, revision: int) -> None:
        """Forget the changes before ``revision``: a watch from earlier is refused with
        ``WatchCompacted``. Entries are untouched."""
        ...

    async def grant_lease(self, ttl: int) -> int:
        """A new lease of ``ttl`` seconds (>= 1; an engine may raise it to its minimum,
        2 s on etcd by default); its id, never 0."""
        ...

    async def keep_alive(self, lease: int) -> int:
        """Restart ``lease``'s clock; its TTL in seconds. ``LeaseNotFound`` if gone."""
        ...

    async def revoke_lease(self, lease: int) -> None:
        """End ``lease`` now: its keys are deleted in one transaction. A lease already
        gone is no error."""
        ...


def check_key(key: object) -> None:
    if not isinstance(key, str) or not key.startswith("/"):
        raise ValueError(f"store keys must be strings starting with '/', got {key!r}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"store key {key!r} is not valid Unicode text") from None


def check_prefix(prefix: object) -> None:
    if prefix != "":
        check_key(prefix)


def check_txn(txn: Txn) -> None:
    """Refuse a malformed transaction before it reaches an engine (nothing is written)."""
    for key in [c.key for c in txn.compares] + list(txn.puts) + list(txn.deletes):
        check_key(key)
    for key, value in txn.puts.items():
        if not isinstance(value, bytes):
            raise ValueError(f"value of {key!r} must be bytes, got {type(value).__name__}")
    both = set(txn.puts) & set(txn.deletes)
    if both:
        raise ValueError(f"a transaction may not both put and delete {sorted(both)}")
    if not isinstance(txn.lease, int) or txn.lease < 0:
        raise ValueError(f"a transaction's lease must be a lease id or 0, got {txn.lease!r}")


def check_watch_start(start_revision: int) -> None:
    if start_revision < 1:
        raise ValueError(f"a watch starts at revision 1 or later, got {start_revision}")


def check_ttl(ttl: int) -> None:
    if not isinstance(ttl, int) or ttl < 1:
        raise ValueError(f"a lease's TTL is a whole number of seconds >= 1, got {ttl!r}")
