"""The connection to an etcd cluster: one gRPC channel per endpoint, TLS and user
authentication, and moving to the next endpoint when one stops answering.

The messages and stubs are aetcd's bindings of etcd's v3 API. aetcd's own ``Client``
takes one endpoint and no TLS, so the channels are opened here:

    link = EtcdLink(EtcdSettings(endpoints=("127.0.0.1:2379", "127.0.0.1:22379")))
    response = await link.call(lambda s, meta: s.kv.Range(request, metadata=meta),
                               retry=True)

Only a call that is safe to send twice is retried elsewhere (``retry=True``: reads,
lease grants and keep-alives, and any call refused before the member took it: it was
not connected, or it had no raft leader). A commit cut off once sent is not: its outcome
is unknown, and the caller hears so (``coordinator.store.fenced`` resolves it).

A dead member must cost the caller far less than a leader's TTL (5 s by default), or
the leader's renewals and writes stop meanwhile. So nothing waits on one member for
long: connecting is given ``CONNECT_SECONDS`` and a member that refuses the connection
(a killed one) fails at once; every call asks etcd to refuse it at once when the member
has no raft leader (etcd's ``hasleader`` metadata), instead of holding it until etcd's
own request timeout (7 s); a dropped connection is tried again within
``MOST_RECONNECT_MS`` (gRPC's default backoff grows to 2 minutes), so a member that
comes back is used again within a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from aetcd import rpc

from coordinator.store import OutcomeUnknown, StoreError

R = TypeVar("R")
Metadata = tuple[tuple[str, str], ...]

# Large enough for a 1,000-container transaction or a page of a range (gRPC's default
# of 4 MiB is not); etcd's own limit (--max-request-bytes) is the one that binds.
_MESSAGE_BYTES = 256 * 1024 * 1024
CONNECT_SECONDS = 1.0  # to connect to one member (or the settings' timeout, if shorter)
LEAST_RECONNECT_MS = 100
MOST_RECONNECT_MS = 500
_OPTIONS = (
    ("grpc.max_receive_message_length", _MESSAGE_BYTES),
    ("grpc.max_send_message_length", _MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", LEAST_RECONNECT_MS),
    ("grpc.min_reconnect_backoff_ms", LEAST_RECONNECT_MS),
    ("grpc.max_reconnect_backoff_ms", MOST_RECONNECT_MS),
)
# Sent with every call: a member without a raft leader refuses it with "no leader" at
# once (etcd's v3 gRPC interceptors), so the call moves on to another member or, when
# quorum is lost, fails at once.
_REQUIRE_LEADER = (("hasleader", "true"),)
# What a call safe to send twice moves on from: the member is gone or has no leader
# (UNAVAILABLE), or it did not answer within the call's deadline (a hung member).
_MOVE_ON = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


@dataclass(frozen=True, kw_only=True)
class EtcdSettings:
    endpoints: tuple[str, ...]  # host:port, http://host:port or https://host:port
    prefix: str = "/allot"  # every key lives under it; invisible above the store
    ca_file: str = ""  # TLS: the CA that signed the members' certificates
    cert_file: str = ""  # TLS client certificate and its key, when etcd asks for one
    key_file: str = ""
    user: str = ""
    password: str = ""
    timeout_s: float = 10.0  # the most one call may take (a large commit or range)


@dataclass(frozen=True)
class Stubs:
    kv: Any
    lease: Any
    watch: Any
    encoded_txn: Any  # KV.Txn taking a TxnRequest already serialized (bytes)


class EtcdLink:
    def __init__(self, settings: EtcdSettings) -> None:
        self.settings = settings
        self._targets = [_target(e) for e in settings.endpoints]
        self._tls = _tls(settings) if _wants_tls(settings) else None
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._metadata: dict[int, Metadata] = {}
        # Built once per channel: a stub makes a callable per method of its service,
        # which took a tenth of the loop's time in a 1,000-container deployment.
        self._stubs: dict[int, Stubs] = {}
        self._current = 0

    async def call(self, request: Callable[[Stubs, Metadata], Awaitable[R]], *, retry: bool) -> R:
        """``request`` on the current endpoint, moving on to the next ones as needed."""
        problems: list[str] = []
        for _ in range(len(self._targets)):
            index = self._current
            try:
                stubs, metadata = await self._connect(index)
                return await request(stubs, metadata)
            except _Unreachable as unreachable:
                problems.append(f"{self._targets[index]}: {unreachable}")
            except grpc.aio.AioRpcError as error:
                if error.code() not in _MOVE_ON:
                    raise
                problems.append(f"{self._targets[index]}: {error.details()}")
                if not (retry or _refused_before_taken(error)):
                    self._move_on(index)
                    raise OutcomeUnknown(
                        f"etcd at {self._targets[index]} failed during a commit, which may or"
                        f" may not have been applied: {error.details()}"
                    ) from error
            self._move_on(index)
        raise StoreError(f"no etcd endpoint answers ({'; '.join(problems)})")

    def move_on(self) -> None:
        """The current endpoint failed a stream (a watch): use the next one from now on."""
        self._move_on(self._current)

    def _move_on(self, index: int) -> None:
        if self._current == index:
            self._current = (index + 1) % len(self._targets)

    def unreachable(self) -> int:
        """How many members are not connected now, by their channels' state alone (no
        request is sent; a channel not connected is asked to connect, for the next look).
        A killed member's connection drops at once; a live one's stays ready."""
        states = [self._channel(i).get_state(try_to_connect=True) for i in range(len(self))]
        return sum(state != grpc.ChannelConnectivity.READY for state in states)

    def __len__(self) -> int:
        """The number of members (endpoints)."""
        return len(self._targets)

    def _channel(self, index: int) -> grpc.aio.Channel:
        channel = self._channels.get(index)
        if channel is None:
            target = self._targets[index]
            if self._tls is None:
                channel = grpc.aio.insecure_channel(target, options=_OPTIONS)
            else:
                channel = grpc.aio.secure_channel(target, self._tls, options=_OPTIONS)
            self._channels[index] = channel
        return channel

    async def _connect(self, index: int) -> tuple[Stubs, Metadata]:
        channel = self._channel(index)
        await self._ready(channel)
        if index not in self._metadata:
            self._metadata[index] = (*await self._authenticate(channel), *_REQUIRE_LEADER)
        stubs = self._stubs.get(index)
        if stubs is None:
            encoded_txn = channel.unary_unary(
                "/etcdserverpb.KV/Txn", response_deserializer=rpc.TxnResponse.FromString
            )
            kv, lease, watch = rpc.KVStub(channel), rpc.LeaseStub(channel), rpc.WatchStub(channel)
            stubs = Stubs(kv, lease, watch, encoded_txn)
            self._stubs[index] = stubs
        return stubs, self._metadata[index]

    async def _ready(self, channel: grpc.aio.Channel) -> None:
        """Return once ``channel`` is connected; a member that refuses the connection (a
        killed one) or is not connected within ``CONNECT_SECONDS`` fails at once, so the
        call moves on to the next member. A commit need not wait for etcd to elect
        another raft leader: the others refuse it ("no leader") until they have one, and
        one whose outcome is unknown is resolved by ``coordinator.store.fenced``."""
        bound = min(self.settings.timeout_s, CONNECT_SECONDS)
        try:
            async with asyncio.timeout(bound):
                state = channel.get_state(try_to_connect=True)
                while state != grpc.ChannelConnectivity.READY:
                    if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                        raise _Unreachable("the connection failed")
                    await channel.wait_for_state_change(state)
                    state = channel.get_state(try_to_connect=True)
        except TimeoutError:
            raise _Unreachable(f"not connected within {bound:g}s") from None

    async def _authenticate(self, channel: grpc.aio.Channel) -> Metadata:
        """A token of this member (etcd's simple tokens are per member), or none."""
        if not self.settings.user:
            return ()
        request = rpc.AuthenticateRequest(name=self.settings.user, password=self.settings.password)
        try:
            answer = await rpc.AuthStub(channel).Authenticate(
                request, timeout=min(self.settings.timeout_s, CONNECT_SECONDS)
            )
        except grpc.aio.AioRpcError as error:
            if error.code() in _MOVE_ON:
                raise _Unreachable(error.details()) from error
            raise StoreError(
                f"etcd refused user {self.settings.user!r}: {error.details()}"
            ) from error
        return (("token", answer.token),)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()


class _Unreachable(Exception):
    """The endpoint could not be reached; nothing was sent."""


def _refused_before_taken(error: grpc.aio.AioRpcError) -> bool:
    """Whether the request never reached raft, so it is safe to send elsewhere: etcd
    refuses with UNAVAILABLE when the member has no leader or is stopping, and gRPC says
    UNAVAILABLE when it could not connect at all (the member was killed since the channel
    was last ready), in which case nothing was sent."""
    details = error.details() or ""
    never_taken = ("no leader", "server stopped", "failed to connect to all addresses")
    return any(reason in details for reason in never_taken)


def endpoint_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` is not host:port (with an optional http:// or https://), or None."""
    host, _, port = _target(endpoint).rpartition(":")
    if not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"{endpoint!r} is not host:port, http://host:port or https://host:port"
    return None


def _target(endpoint: str) -> str:
    for scheme in ("http://", "https://"):
        if endpoint.startswith(scheme):
            return endpoint.removeprefix(scheme).rstrip("/")
    return endpoint


def _wants_tls(settings: EtcdSettings) -> bool:
    https = any(e.startswith("https://") for e in settings.endpoints)
    return https or bool(settings.ca_file or settings.cert_file)


def _tls(settings: EtcdSettings) -> grpc.ChannelCredentials:
    def read(path: str) -> bytes | None:
        if not path:
            return None
        try:
            return Path(path).read_bytes()
        except OSError as error:
            raise StoreError(f"cannot read {path} for etcd TLS: {error.strerror}") from error

    return grpc.ssl_channel_credentials(
        root_certificates=read(settings.ca_file),
        private_key=read(settings.key_file),
        certificate_chain=read(settings.cert_file),
    )
