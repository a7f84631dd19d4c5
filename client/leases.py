"""The capacity lease client for any asyncio application (leases spec §9).

    async with LeaseClient("http://coordinator:7600", token=api_token) as client:
        writes = await client.resource("db.write", wants=25)
        limiter = RateLimiter(writes)        # client.rate_limiter spends writes.capacity
        await writes.ask(40)

The client is ``client_id`` within a namespace. ``namespace`` names it in every request;
left out, the coordinator takes the token's only namespace (an admin token: the
cluster's own clients), and a token of several namespaces is refused until one is named.

An https ``url`` is verified against ``ca_file`` (else the system's CAs); ``cert_file``
and ``key_file`` present a client certificate to a coordinator that asks for one. A file
that cannot be used raises ``shared.tls.TlsError`` from the constructor.

``url`` may list several coordinators, comma-separated (on etcd one leads, the others
stand by): a standby's 307 is followed to the leader, which later requests go to, and a
coordinator that does not answer usably makes the next request go to the next one.

One task, the refresh loop, sends every request, so requests never overlap and their
answers are applied in the order they were sent. A request is one bulk
``POST /v1/capacity`` for every resource the client holds, preceded by a
``POST /v1/capacity/release`` when some were released since the last one. After a
success the next refresh is due after the shortest ``refresh_interval`` granted, but
never sooner than ``min_refresh_interval``. A timeout, a connection error or a 5xx is
retried with capped, fully jittered exponential backoff, at most ``max_retries`` times
per cycle; after that the loop waits for the next scheduled refresh. A refusal (400,
401 or another 4xx but 408 and 429: sending the same request again would not help) is
logged and ends the cycle at once. As the coordinator refuses a request whole, a refusal
that names one of the resources (``details.resource``, e.g. an id matching no template)
drops that resource, with a warning, and the request goes out again at once without it:
one bad id never stops the refreshes of the others.

Operations never wait behind that loop. ``resource``, ``ask`` and ``release`` change the
client's state, wake the loop so that a request carrying the change is sent at once (or
right after the one in flight), and wait for the answer to that single request for at
most ``answer_wait`` seconds. A refusal in that answer is raised to them as
``LeaseError`` (when it names another resource, they wait on for the request sent
without it); anything else, or no answer in time, lets them return, and the loop deals
with it alone. ``close`` gives its final release the same bounded wait.

Each lease has a timer at its ``expiry_time``. If no successful refresh replaced the
lease by then, the effective capacity falls back to the last ``safe_capacity`` (-1
unlimited, 0 blocked) until a refresh succeeds again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, NamedTuple, Self

import aiohttp
import msgspec

from shared.backoff import Backoff
from shared.codec import json_decoder, to_json
from shared.lease_protocol import (
    CapacityRequest,
    CapacityResponse,
    ReleaseRequest,
    ResourceRequest,
    ResourceResponse,
)
from shared.logs import get_logger
from shared.resource_names import is_rfc1123_label
from shared.servers import Servers, split_servers
from shared.tls import client_context

log = get_logger("allot.leases")

CAPACITY_PATH = "/v1/capacity"
MAX_REDIRECTS = 3
RELEASE_PATH = "/v1/capacity/release"


class _ErrorDetail(msgspec.Struct, frozen=True):
    code: str
    message: str
    details: dict[str, Any] = {}


class _ErrorBody(msgspec.Struct, frozen=True):
    error: _ErrorDetail


_capacity_response: msgspec.json.Decoder[CapacityResponse] = json_decoder(CapacityResponse)
_error_body: msgspec.json.Decoder[_ErrorBody] = json_decoder(_ErrorBody)


class LeaseError(Exception):
    """The coordinator refused a request (400 invalid, 401 bad token, 403 a namespace the
    token may not use): sending the same request again would not help, so it is never
    retried.

    ``resource_id`` is the resource the refusal is about, when the coordinator names one
    (its ``details.resource``, as for an id matching no template)."""

    def __init__(
        self, status: int, code: str, message: str, *, resource_id: str | None = None
    ) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.resource_id = resource_id

    def again(self) -> LeaseError:
        """The same refusal as a fresh exception, for one more caller to raise."""
        return LeaseError(self.status, self.code, self.message, resource_id=self.resource_id)


class _Unavailable(Exception):
    """The coordinator gave no usable answer this time (timeout, connection, 5xx)."""


def default_client_id() -> str:
    """``host:pid:hex``; the 64 random bits keep two clients of one process apart."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"


def _check_wants(wants: float) -> None:
    if not (math.isfinite(wants) and wants >= 0):
        raise ValueError(f"wants must be a finite number >= 0, got {wants!r}")


class ResourceHandle:
    """One resource the client holds: its effective capacity, and its lease behind it."""

    def __init__(self, client: LeaseClient, resource_id: str, wants: float, priority: int) -> None:
        self.resource_id = resource_id
        self._client = client
        self._wants = float(wants)
        self._priority = priority
        self._lease: ResourceResponse | None = None  # the last grant
        self._expired = False
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._capacity = 0.0
        self._version = 0  # counts changes of the effective capacity
        self._changed = asyncio.Event()  # replaced by a fresh one at each change
        self._ended = False

    @property
    def capacity(self) -> float:
        """The capacity to use now: the grant while the lease is live, the safe capacity
        once it expired without a refresh (-1 unlimited), 0 before the first grant."""
        return self._capacity

    @property
    def wants(self) -> float:
        return self._wants

    @property
    def priority(self) -> int:
        return self._priority

    @property
    def expiry_time(self) -> float | None:
        return self._lease.gets.expiry_time if self._lease else None

    @property
    def refresh_interval(self) -> float | None:
        return self._lease.gets.refresh_interval if self._lease else None

    @property
    def safe_capacity(self) -> float | None:
        return self._lease.safe_capacity if self._lease else None

    async def ask(self, wants: float) -> None:
        """Want ``wants`` from now on; a request carrying it is sent at once."""
        _check_wants(wants)
        self._client._require_held(self)
        self._wants = float(wants)
        await self._client._send_at_once(self.resource_id)

    async def release(self) -> None:
        """Give the lease back; the capacity becomes 0. Releasing twice is a no-op."""
        await self._client._release(self)

    def changes(self) -> AsyncIterator[float]:
        """The effective capacity each time it changes after this call.

        A reader that falls behind gets the latest value, never a queue of stale ones,
        and the refresh loop never waits for it. Ends once the resource is released."""
        return self._changes_after(self._version)

    async def _changes_after(self, seen: int) -> AsyncIterator[float]:
        while True:
            if self._version != seen:
                seen = self._version
                yield self._capacity
            elif self._ended:
                return
            else:
                await self._changed.wait()

    def _wire_request(self) -> ResourceRequest:
        held = self._lease.gets.capacity if self._lease and not self._expired else 0.0
        return ResourceRequest(
            resource_id=self.resource_id, priority=self._priority, has=held, wants=self._wants
        )

    def _accept(self, answer: ResourceResponse) -> None:
        """A successful refresh: the new lease replaces the old one and its timer."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._lease = answer
        loop = asyncio.get_running_loop()
        # expiry_time is on the wall clock; the timer runs on the loop's monotonic one.
        expires_at = loop.time() + (answer.gets.expiry_time - time.time())
        self._expiry_timer = loop.call_at(expires_at, self._expire, answer.safe_capacity)
        if self._expired:
            self._expired = False
            log.info(
                "lease refreshed after expiry; using the grant again",
                resource=self.resource_id,
                capacity=answer.gets.capacity,
            )
        self._set_capacity(answer.gets.capacity)

    def _expire(self, safe_capacity: float) -> None:
        self._expiry_timer = None
        self._expired = True
        log.warning(
            "lease expired without a refresh; using safe capacity",
            resource=self.resource_id,
            safe_capacity=safe_capacity,
        )
        self._set_capacity(safe_capacity)

    def _end(self) -> None:
        """Released or closed: no lease, capacity 0, and readers of changes() stop."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        self._set_capacity(0.0)
        self._ended = True
        self._changed.set()

    def _set_capacity(self, capacity: float) -> None:
        if capacity == self._capacity:
            return
        self._capacity = capacity
        self._version += 1
        self._changed.set()
        self._changed = asyncio.Event()


class _Waiter(NamedTuple):
    """A caller waiting for the answer to the request that carries its change."""

    resource_id: str
    answer: asyncio.Future[LeaseError | None]


class LeaseClient:
    """Holds capacity leases on a coordinator's resources for this process."""

    def __init__(
        self,
        url: str,
        *,
        token: str,
        client_id: str | None = None,
        namespace: str | None = None,
        min_refresh_interval: float = 1.0,
        timeout: float = 5.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        answer_wait: float = 0.5,
        ca_file: str = "",
        cert_file: str = "",
        key_file: str = "",
    ) -> None:
        for name, value in (
            ("min_refresh_interval", min_refresh_interval),
            ("timeout", timeout),
            ("backoff_base", backoff_base),
            ("backoff_cap", backoff_cap),
            ("answer_wait", answer_wait),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if namespace is not None and not is_rfc1123_label(namespace):
            raise ValueError(
                f"namespace must be an RFC 1123 label (a-z, 0-9 and '-', starting and ending"
                f" with a letter or digit, at most 63 characters), got {namespace!r}"
            )
        self.client_id = client_id if client_id is not None else default_client_id()
        self.namespace = namespace
        self._servers = Servers(split_servers(url) or [url])
        self._token = token
        self._min_refresh_interval = min_refresh_interval
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._answer_wait = answer_wait
        # Built now, so that a missing or wrong file is an error here, not in the loop.
        self._tls = client_context(ca_file, cert_file, key_file)
        self._resources: dict[str, ResourceHandle] = {}
        self._releasing: dict[str, None] = {}  # released ids not yet confirmed, in order
        self._waiters: list[_Waiter] = []  # for the answer to the next request
        self._changed = asyncio.Event()  # something must go out now
        self._next_refresh_at: float | None = None  # on the loop clock
        self._last_failure = ""
        self._http: aiohttp.ClientSession | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def resource(self, resource_id: str, wants: float, priority: int = 0) -> ResourceHandle:
        """Start leasing ``resource_id``; a request carrying it is sent at once.

        Raises ``LeaseError`` if the coordinator refuses that request within
        ``answer_wait`` (no template matches the id, a bad token); the resource is then
        not held."""
        _check_wants(wants)
        if not resource_id:
            raise ValueError("resource_id must not be empty")
        if resource_id in self._resources:
            raise ValueError(f"{resource_id!r} is already held; use its handle's ask()")
        self._start()
        handle = ResourceHandle(self, resource_id, wants, priority)
        self._resources[resource_id] = handle
        self._releasing.pop(resource_id, None)  # the new request keeps the old lease
        try:
            await self._send_at_once(resource_id)
        except LeaseError:
            self._drop(handle)
            raise
        return handle

    async def close(self) -> None:
        """Release every resource held, in one request, and stop the refresh loop.

        The release gets ``answer_wait`` to be answered; a failure is logged, not
        raised, as the leases then expire on their own."""
        if self._closed:
            return
        self._closed = True
        resource_ids = [*self._releasing, *self._resources]
        for handle in self._resources.values():
            handle._end()
        self._resources.clear()
        self._releasing.clear()
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        waiters, self._waiters = self._waiters, []
        self._answer(waiters, None)
        if self._http is not None:
            if resource_ids:
                await self._release_on_close(resource_ids)
            await self._http.close()

    # --- what the handles call ----------------------------------------------------------

    def _require_held(self, handle: ResourceHandle) -> None:
        if self._resources.get(handle.resource_id) is not handle:
            raise RuntimeError(f"{handle.resource_id!r} was released or the client closed")

    async def _release(self, handle: ResourceHandle) -> None:
        if self._resources.get(handle.resource_id) is not handle:
            return
        self._drop(handle)
        self._releasing[handle.resource_id] = None
        await self._send_at_once(handle.resource_id)

    def _drop(self, handle: ResourceHandle) -> None:
        if self._resources.get(handle.resource_id) is handle:
            del self._resources[handle.resource_id]
        handle._end()

    async def _send_at_once(self, resource_id: str) -> None:
        """Have the refresh loop send the current state now, and wait for the answer to
        that request, but no longer than ``answer_wait``.

        Only a refusal is raised here; a failure to retry is the loop's business, so the
        caller never waits behind a backoff, nor for a coordinator that hangs."""
        answer: asyncio.Future[LeaseError | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(_Waiter(resource_id, answer))
        self._changed.set()
        try:
            async with asyncio.timeout(self._answer_wait):
                refusal = await asyncio.shield(answer)
        except TimeoutError:
            return
        if refusal is not None:
            raise refusal.again()  # several callers may share one refusal

    # --- the refresh loop ---------------------------------------------------------------

    def _start(self) -> None:
        if self._closed:
            raise RuntimeError("the lease client is closed")
        if self._refresher is None:
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls or True),
                headers={
                    "Authorization": f"Bearer {self._token}",
                    "Content-Type": "application/json",
                },
                timeout=aiohttp.ClientTimeout(total=self._timeout),
            )
            self._refresher = asyncio.create_task(
                self._run(), name=f"lease refresh {self.client_id}"
            )

    async def _run(self) -> None:
        while True:
            await self._wait_for_change(self._seconds_until_refresh())
            await self._refresh_cycle()

    async def _refresh_cycle(self) -> None:
        backoff = Backoff(initial=self._backoff_base, cap=self._backoff_cap)
        while True:
            failure = await self._exchange()
            if failure is None:
                self._report_success()
                break
            retry = isinstance(failure, _Unavailable) and backoff.attempts < self._max_retries
            self._report_failure(failure, retry=retry)
            if not retry:
                break
            # A caller's change cuts the delay short; that attempt counts as a retry, so
            # callers busy during an outage do not multiply the retries.
            await self._wait_for_change(backoff.next_delay())
        self._next_refresh_at = asyncio.get_running_loop().time() + self._refresh_interval()

    async def _wait_for_change(self, delay: float | None) -> None:
        """Sleep ``delay`` (None: indefinitely), or less if a change must go out."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._changed.wait()

    def _seconds_until_refresh(self) -> float | None:
        if not self._resources and not self._releasing:
            return None
        if self._next_refresh_at is None:
            return 0.0
        return max(0.0, self._next_refresh_at - asyncio.get_running_loop().time())

    def _refresh_interval(self) -> float:
        granted = [
            h.refresh_interval for h in self._resources.values() if h.refresh_interval is not None
        ]
        return max(self._min_refresh_interval, min(granted, default=0.0))

    async def _exchange(self) -> LeaseError | _Unavailable | None:
        """One attempt: the pending releases, then the bulk capacity request.

        Whoever waits now has a change this attempt carries, and gets its refusal, if any."""
        self._changed.clear()
        waiters, self._waiters = self._waiters, []
        failure: LeaseError | _Unavailable | None = None
        try:
            await self._send_releases()
            await self._send_capacity_request()
        except (LeaseError, _Unavailable) as error:
            failure = error
        finally:
            self._answer(waiters, failure if isinstance(failure, LeaseError) else None)
        return failure

    def _answer(self, waiters: list[_Waiter], refusal: LeaseError | None) -> None:
        culprit = self._drop_culprit(refusal)
        for waiter in waiters:
            if culprit is not None and waiter.resource_id != culprit:
                self._waiters.append(waiter)  # answered by the request sent without it
            elif not waiter.answer.done():
                waiter.answer.set_result(refusal)

    def _drop_culprit(self, refusal: LeaseError | None) -> str | None:
        """Drop the resource a refusal names, if the client holds it, so that the others'
        request goes out again at once without it. Requests are refused whole: left in,
        it would spoil every later request for all of them."""
        handle = self._resources.get(refusal.resource_id or "") if refusal else None
        if refusal is None or handle is None:
            return None
        log.warning(
            "resource dropped: the coordinator refused it",
            resource=handle.resource_id,
            code=refusal.code,
            reason=refusal.message,
        )
        self._drop(handle)
        self._changed.set()
        return handle.resource_id

    async def _send_releases(self) -> None:
        if not self._releasing:
            return
        resource_ids = list(self._releasing)
        request = self._release_request(resource_ids)
        try:
            await self._post(RELEASE_PATH, request)
        except LeaseError:
            self._forget_releases(resource_ids)  # refused: repeating it would not help
            raise
        # An _Unavailable keeps them pending: the retry sends them again.
        self._forget_releases(resource_ids)

    def _forget_releases(self, resource_ids: list[str]) -> None:
        for resource_id in resource_ids:
            self._releasing.pop(resource_id, None)

    def _release_request(self, resource_ids: list[str]) -> ReleaseRequest:
        return ReleaseRequest(
            client_id=self.client_id, resource_ids=resource_ids, namespace=self.namespace
        )

    async def _send_capacity_request(self) -> None:
        held = list(self._resources.values())
        if not held:
            return
        request = CapacityRequest(
            client_id=self.client_id,
            resources=[h._wire_request() for h in held],
            namespace=self.namespace,
        )
        body = await self._post(CAPACITY_PATH, request)
        try:
            response = _capacity_response.decode(body)
        except msgspec.DecodeError as error:
            raise _Unavailable(f"malformed answer from the coordinator: {error}") from error
        answers = {answer.resource_id: answer for answer in response.resources}
        for handle in held:
            answer = answers.get(handle.resource_id)
            # A handle released while the request was out keeps its end.
            if answer is not None and self._resources.get(handle.resource_id) is handle:
                handle._accept(answer)

    async def _post(self, path: str, request: msgspec.Struct) -> bytes:
        """One POST; the body of a 200, else ``LeaseError`` or ``_Unavailable``.

        A standby's 307 is followed (the token would not be sent on by aiohttp to another
        address) and its leader kept for the next requests; a coordinator that gives no
        usable answer makes the next request go to the next one listed."""
        assert self._http is not None, "requests are sent only after _start()"
        data = to_json(request)
        for _ in range(MAX_REDIRECTS):
            try:
                response, body = await self._post_once(self._servers.current + path, data)
            except _Unavailable:
                self._servers.failed()
                raise
            location = response.headers.get("Location", "")
            if response.status not in (307, 308) or not location:
                break
            self._servers.follow(location.removesuffix(path))
        if response.status >= 500:
            self._servers.failed()
        if response.status == 200:
            return body
        if response.status >= 500 or response.status in (307, 308, 408, 429):
            raise _Unavailable(f"HTTP {response.status} from the coordinator")
        raise _refusal(response.status, body)

    async def _post_once(self, url: str, data: bytes) -> tuple[aiohttp.ClientResponse, bytes]:
        assert self._http is not None
        try:
            async with self._http.post(url, data=data, allow_redirects=False) as response:
                return response, await response.read()
        except TimeoutError as error:
            raise _Unavailable(f"no answer within {self._timeout:g}s") from error
        except (aiohttp.ClientError, OSError) as error:
            raise _Unavailable(str(error) or type(error).__name__) from error

    async def _release_on_close(self, resource_ids: list[str]) -> None:
        request = self._release_request(resource_ids)
        try:
            async with asyncio.timeout(self._answer_wait):
                await self._post(RELEASE_PATH, request)
        except (LeaseError, _Unavailable, TimeoutError) as error:
            log.warning(
                "could not release the leases on close; they will expire on their own",
                resources=len(resource_ids),
                reason=str(error) or f"no answer within {self._answer_wait:g}s",
            )

    def _report_failure(self, failure: LeaseError | _Unavailable, *, retry: bool) -> None:
        """Log a failure once; while the same failure repeats, only at debug."""
        reason = str(failure)
        if reason == self._last_failure:
            log.debug("capacity request still failing", reason=reason, retry=retry)
        elif isinstance(failure, LeaseError):
            log.error(
                "capacity request refused by the coordinator",
                status=failure.status,
                code=failure.code,
                reason=failure.message,
            )
        else:
            log.warning("capacity request failed", reason=reason, retry=retry)
        self._last_failure = reason

    def _report_success(self) -> None:
        if self._last_failure:
            log.info("capacity requests succeed again", after=self._last_failure)
            self._last_failure = ""


def _refusal(status: int, body: bytes) -> LeaseError:
    try:
        error = _error_body.decode(body).error
    except msgspec.DecodeError:
        text = body.decode(errors="replace").strip()[:200]
        return LeaseError(status, f"http_{status}", text or "no error body")
    named = error.details.get("resource")
    resource_id = named if isinstance(named, str) else None
    return LeaseError(status, error.code, error.message, resource_id=resource_id)
