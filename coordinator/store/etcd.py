"""The store on etcd v3: every key under a prefix, every commit one etcd transaction.

    store = await EtcdStore.open(EtcdSettings(endpoints=("10.0.0.1:2379", ...)))

The store's revision is etcd's cluster revision, read from each answer's header: it grows
with every changing transaction, by one when nothing else writes to that etcd, and every
key a transaction writes has it as mod revision (see ``coordinator.store``).

A commit is one etcd ``Txn`` however large, so it stays atomic: etcd must be started
with ``--max-txn-ops`` above the largest transaction (a deployment writes one key per
container, plus its nodes and events) and ``--max-request-bytes`` above its size; one
over a limit is refused with a ``StoreError`` naming the setting, and nothing changes.
Ranges are read in pages at one revision, so a large range is still one snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import grpc
from aetcd import rpc

from coordinator.store import (
    Compare,
    CompareCreated,
    Entry,
    Event,
    LeaseNotFound,
    OutcomeUnknown,
    Snapshot,
    StoreError,
    Txn,
    TxnResult,
    WatchCompacted,
    check_key,
    check_prefix,
    check_ttl,
    check_txn,
    check_watch_start,
)
from coordinator.store.etcd_link import EtcdLink, EtcdSettings, Metadata, Stubs
from coordinator.store.watch_answers import Silent, answers

PAGE_KEYS = 1000  # entries per range request: a page of containers stays a few MiB
# Deadlines of one attempt on one member, well under a leader's TTL (5 s by default), so
# that a member that hangs costs that long and the call moves on to another: a small
# call (a keep-alive, a lease, one key) is answered in milliseconds by a live member; a
# commit is given more for each operation (a 1,000-container deployment is about 4,100).
SMALL_CALL_SECONDS = 1.0
COMMIT_SECONDS = 1.0
COMMIT_OPERATIONS_PER_SECOND = 1000
BYTES_PER_OPERATION = 256  # about a container's record or allocation
ENCODED_OFF_LOOP_OPS = 100  # a transaction this large is built on a worker thread
_LIMITS = {
    "too many operations in txn request": (
        "more operations than this etcd's --max-txn-ops allows; start every member with"
        " a larger --max-txn-ops (allot's README says how large)"
    ),
    "request is too large": (
        "larger than this etcd's --max-request-bytes allows; start every member with a"
        " larger --max-request-bytes (allot's README says how large)"
    ),
}


class EtcdStore:
    """``Store`` on an etcd cluster; several processes may open the same one."""

    # Commits are sent whatever etcd's quorum: a leader's ``FencedStore`` is what refuses
    # them at once while it is known lost (``Store.quorum``).
    quorum = None

    def __init__(self, link: EtcdLink, revision: int) -> None:
        self._link = link
        self._root = link.settings.prefix.encode()
        self._revision = revision

    @classmethod
    async def open(cls, settings: EtcdSettings) -> EtcdStore:
        """Connect (failing with a ``StoreError`` if no endpoint answers)."""
        check_root(settings.prefix)
        link = EtcdLink(settings)
        store = cls(link, 0)
        try:
            await store.snapshot("/~")  # reaches etcd and reads its revision
        except BaseException:
            await link.close()
            raise
        return store

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def settings(self) -> EtcdSettings:
        """What it was opened with: another connection to the same etcd uses them."""
        return self._link.settings

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        request = rpc.RangeRequest(key=self._physical(key))
        answer = await self._read(lambda s, m: s.kv.Range(request, metadata=m, timeout=self._small))
        return self._entry(answer.kvs[0]) if answer.kvs else None

    async def range(self, prefix: str) -> list[Entry]:
        return (await self.snapshot(prefix)).entries

    async def snapshot(self, prefix: str) -> Snapshot:
        check_prefix(prefix)
        start, end = self._span(prefix)
        entries: list[Entry] = []
        revision = 0  # the first page's revision, then every page at it
        while True:
            request = rpc.RangeRequest(key=start, range_end=end, limit=PAGE_KEYS, revision=revision)
            answer = await self._read(
                lambda s, m, r=request: s.kv.Range(r, metadata=m, timeout=self._t)
            )
            revision = revision or answer.header.revision
            entries.extend(self._entry(kv) for kv in answer.kvs)
            if not answer.more:
                return Snapshot(entries, revision)
            start = answer.kvs[-1].key + b"\0"

    async def commit(self, txn: Txn) -> TxnResult:
        check_txn(txn)
        # Building and serializing the request of a 1,000-container deployment took
        # about 0.1 s of the event loop per commit (py-spy, on a loaded 2-core host); on
        # a thread the loop gets the interpreter back every switch interval meanwhile.
        # A small one (a lease, a heartbeat) is built here: a hop to a thread and back
        # can cost it a switch interval (5 ms) of waiting for the interpreter.
        if len(txn.puts) + len(txn.deletes) >= ENCODED_OFF_LOOP_OPS:
            request = await asyncio.to_thread(self._encoded_txn, txn)
        else:
            request = self._encoded_txn(txn)
        # Weighed by its bytes too: the journal of a commit made in steps is one put of
        # every write's value (``coordinator.store.steps``).
        operations = len(txn.puts) + len(txn.deletes) + len(txn.compares)
        weight = max(operations, len(request) // BYTES_PER_OPERATION)
        deadline = min(self._t, COMMIT_SECONDS + weight / COMMIT_OPERATIONS_PER_SECOND)
        try:
            answer = await self._link.call(
                lambda s, m: s.encoded_txn(request, metadata=m, timeout=deadline), retry=False
            )
        except grpc.aio.AioRpcError as error:
            raise _refusal(error, txn) from error
        self._saw(answer.header.revision)
        return TxnResult(succeeded=answer.succeeded, revision=answer.header.revision)

    def _encoded_txn(self, txn: Txn) -> bytes:
        request = rpc.TxnRequest(
            compare=[self._compare(c) for c in txn.compares],
            success=[self._put(k, v, txn.lease) for k, v in txn.puts.items()]
            + [self._delete(k) for k in txn.deletes],
        )
        return bytes(request.SerializeToString())

    async def answers_writes(self, within: float) -> bool:
        """Whether a member confirms, within ``within`` seconds each, that etcd has a
        quorum: a linearizable read, which its raft leader serves only once a majority of
        members acknowledged it still leads (a member without a leader refuses it at once,
        as every call asks: ``hasleader``)."""
        request = rpc.RangeRequest(key=self._physical("/"), count_only=True)
        try:
            await self._link.call(
                lambda s, m: s.kv.Range(request, metadata=m, timeout=within), retry=True
            )
        except (StoreError, grpc.aio.AioRpcError):
            return False
        return True

    def members_unreachable(self) -> int:
        """How many of the members are not connected now (see ``EtcdLink.unreachable``)."""
        return self._link.unreachable()

    @property
    def members(self) -> int:
        return len(self._link)

    async def watch(self, prefix: str, start_revision: int) -> AsyncGenerator[list[Event], None]:
        """Follows etcd's watch; when the stream breaks, or its member hangs (see
        ``watch_answers``), it goes on from the next revision on another endpoint, so the
        caller sees no gap."""
        check_prefix(prefix)
        check_watch_start(start_revision)
        start, end = self._span(prefix)
        following = start_revision
        while True:
            try:
                stubs, metadata = await self._link.call(_stubs, retry=True)
                async for events in self._watch_stream(stubs, metadata, start, end, following):
                    following = events[0].mod_revision + 1
                    yield events
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise StoreError(f"etcd watch failed: {error.details()}") from error
                self._link.move_on()
                await asyncio.sleep(0.1)
            except Silent:  # the member hangs, or ended the watch at once
                self._link.move_on()
                await asyncio.sleep(0.1)

    async def compact(self, revision: int) -> None:
        request = rpc.CompactionRequest(revision=revision)
        await self._read(lambda s, m: s.kv.Compact(request, metadata=m, timeout=self._t))

    async def grant_lease(self, ttl: int) -> int:
        check_ttl(ttl)
        request = rpc.LeaseGrantRequest(TTL=ttl)
        answer = await self._read(
            lambda s, m: s.lease.LeaseGrant(request, metadata=m, timeout=self._small)
        )
        if answer.error:
            raise StoreError(f"etcd refused a lease: {answer.error}")
        return int(answer.ID)

    async def keep_alive(self, lease: int) -> int:
        async def refresh(stubs: Stubs, metadata: Metadata) -> Any:
            call = stubs.lease.LeaseKeepAlive(metadata=metadata, timeout=self._small)
            try:
                await call.write(rpc.LeaseKeepAliveRequest(ID=lease))
                return await call.read()
            finally:
                call.cancel()

        answer = await self._read(refresh)
        if answer is grpc.aio.EOF or answer.TTL <= 0:
            raise LeaseNotFound(lease)
        return int(answer.TTL)

    async def revoke_lease(self, lease: int) -> None:
        request = rpc.LeaseRevokeRequest(ID=lease)
        try:
            answer = await self._link.call(
                lambda s, m: s.lease.LeaseRevoke(request, metadata=m, timeout=self._small),
                retry=True,
            )
        except grpc.aio.AioRpcError as error:
            if "lease not found" in (error.details() or ""):
                return  # already gone
            raise StoreError(f"etcd could not revoke lease {lease:x}: {error.details()}") from error
        self._saw(answer.header.revision)

    async def close(self) -> None:
        await self._link.close()

    # --- helpers ----------------------------------------------------------------------

    @property
    def _t(self) -> float:
        return self._link.settings.timeout_s

    @property
    def _small(self) -> float:
        return min(self._t, SMALL_CALL_SECONDS)

    async def _read(self, request: Any) -> Any:
        try:
            answer = await self._link.call(request, retry=True)
        except grpc.aio.AioRpcError as error:
            raise StoreError(f"etcd refused a request: {error.details()}") from error
        if hasattr(answer, "header"):
            self._saw(answer.header.revision)
        return answer

    def _saw(self, revision: int) -> None:
        self._revision = max(self._revision, revision)

    async def _watch_stream(
        self, stubs: Stubs, metadata: Metadata, start: bytes, end: bytes, revision: int
    ) -> AsyncGenerator[list[Event], None]:
        call = stubs.watch.Watch(metadata=metadata)
        try:
            create = rpc.WatchCreateRequest(key=start, range_end=end, start_revision=revision)
            try:
                await call.write(rpc.WatchRequest(create_request=create))
            except grpc.aio.AioRpcError as error:
                # The member ended the call first (it has no raft leader); gRPC hides its
                # reason behind "Internal error from Core".
                raise Silent(f"the watch ended before it began: {error.details()}") from None
            async for answer in answers(call):
                if answer.compact_revision:
                    raise WatchCompacted(revision, answer.compact_revision)
                if answer.canceled:
                    raise StoreError(f"etcd cancelled the watch: {answer.cancel_reason}")
                self._saw(answer.header.revision)
                for events in _by_revision(self._event(e) for e in answer.events):
                    yield events
            raise StoreError("etcd ended the watch")
        finally:
            call.cancel()

    def _physical(self, key: str) -> bytes:
        return self._root + key.encode()

    def _span(self, prefix: str) -> tuple[bytes, bytes]:
        """The [start, end) of the keys under ``prefix``; "" is every key of this store
        (keys start with "/", so another prefix that merely starts the same is outside)."""
        start = self._physical(prefix or "/")
        return start, _after_prefix(start)

    def _logical(self, key: bytes) -> str:
        return key[len(self._root) :].decode()

    def _entry(self, kv: Any) -> Entry:
        return Entry(self._logical(kv.key), kv.value, kv.create_revision, kv.mod_revision)

    def _event(self, event: Any) -> Event:
        deleted = event.type == rpc.Event.DELETE
        value = b"" if deleted else event.kv.value
        return Event(self._logical(event.kv.key), value, event.kv.mod_revision, deleted)

    def _compare(self, compare: Compare | CompareCreated) -> Any:
        key = self._physical(compare.key)
        if isinstance(compare, Compare):
            return rpc.Compare(
                key=key,
                result=rpc.Compare.EQUAL,
                target=rpc.Compare.MOD,
                mod_revision=compare.mod_revision,
            )
        return rpc.Compare(
            key=key,
            result=rpc.Compare.EQUAL,
            target=rpc.Compare.CREATE,
            create_revision=compare.create_revision,
        )

    def _put(self, key: str, value: bytes, lease: int) -> Any:
        put = rpc.PutRequest(key=self._physical(key), value=value, lease=lease)
        return rpc.RequestOp(request_put=put)

    def _delete(self, key: str) -> Any:
        return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=self._physical(key)))


async def _stubs(stubs: Stubs, metadata: Metadata) -> tuple[Stubs, Metadata]:
    return stubs, metadata


def _by_revision(events: Iterable[Event]) -> Iterable[list[Event]]:
    """etcd's events of one answer, one list per revision, each in key order."""
    groups: dict[int, list[Event]] = {}
    for event in events:
        groups.setdefault(event.mod_revision, []).append(event)
    for revision in sorted(groups):
        yield sorted(groups[revision], key=lambda e: e.key)


def _after_prefix(prefix: bytes) -> bytes:
    """The least byte string above every one that starts with ``prefix``."""
    stem = prefix.rstrip(b"\xff")
    return stem[:-1] + bytes([stem[-1] + 1]) if stem else b"\0"


# Answers that say etcd did not apply the transaction; any other failure (a deadline,
# a lost connection) leaves its outcome unknown.
_REFUSED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
}


def _refusal(error: grpc.aio.AioRpcError, txn: Txn) -> StoreError:
    details = error.details() or ""
    if error.code() not in _REFUSED:
        return OutcomeUnknown(
            f"etcd did not answer a transaction ({error.code().name}: {details}); it may or"
            " may not have been applied"
        )
    if "requested lease not found" in details:
        return LeaseNotFound(txn.lease)
    operations = len(txn.puts) + len(txn.deletes)
    if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        details = "request is too large"
    for marker, advice in _LIMITS.items():
        if marker in details:
            return StoreError(
                f"etcd refused a transaction of {operations} operations and"
                f" {len(txn.compares)} compares, {advice}; nothing was committed"
            )
    return StoreError(f"etcd refused a transaction: {details}; nothing was committed")


def check_root(prefix: str) -> None:
    """An etcd prefix is "" or "/name..." without a trailing "/" (keys bring theirs)."""
    if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
        raise ValueError(
            f"etcd_prefix must start with '/' and not end with one (or be empty), got {prefix!r}"
        )
