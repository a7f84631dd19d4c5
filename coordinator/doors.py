"""The coordinator's listening socket: no door held open for a connection that has not
earned it.

    doors = open_doors(config)           # the cap fitted to the open-files limit
    runner = web.AppRunner(app, keepalive_timeout=doors.keepalive_s)
    await runner.setup()
    await DoorSite(runner, listener, doors, ssl_context=None).start()

- At most ``max_connections`` connections are held (``Doors``). Past that a new one is
  accepted and closed at once, counted and logged at most once a minute, so the backlog
  never fills with connections nobody will serve and the process never runs out of files
  (``open_doors`` checks the limit at start-up).
- A connection that has not sent a request's complete headers within ``header_timeout_s``
  of opening, or of the first byte of its next request when kept alive, is closed
  (``_Connection``). With TLS the handshake has the same bound.
- A kept-alive connection idle between requests is aiohttp's: its keep-alive timeout,
  lowered from aiohttp's 3,630 s to ``keepalive_s``. A connection that completed a request
  (``/healthz`` needs no token) may idle that long; one that never did, not.

``DoorSite`` accepts connections itself instead of giving the socket to
``loop.create_server``: asyncio's accept loop takes whatever the backlog holds, cannot
turn a connection away before its TLS handshake, and when the process is out of files
logs a traceback for every accept it retries (94 MB of log in 30 s, issue 25). Here every
accepted connection is either counted and served or closed, and running out of files is
one line a minute and a pause of the accepting.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import ssl
import time

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from coordinator.config import CoordinatorConfig
from coordinator.log_throttle import LogThrottle
from shared.logs import get_logger

log = get_logger("allot.coordinator.doors")

# Idle keep-alive connections: aiohttp keeps one for 3,630 s by default. 30 s is longer
# than aiohttp's own client keeps an idle pooled connection (15 s), so such a client
# rarely reuses one this server is closing.
KEEPALIVE_SECONDS = 30.0
# Files the process needs besides its connections: the store (SQLite and its journal, or
# etcd's channels), the listening socket, the event loop's own, log files, /proc reads.
FILE_HEADROOM = 256
# How long accepting pauses when accept() fails (out of files): asyncio's own pause.
ACCEPT_PAUSE_SECONDS = 1.0


class Doors:
    """The connections of one process: at most ``max_connections`` held, each owing its
    request headers within ``header_timeout_s``. One per process, shared by the sites it
    serves in turn (a standby's, then a leader's), so the cap counts them all."""

    def __init__(self, *, max_connections: int, header_timeout_s: float) -> None:
        if max_connections < 1 or header_timeout_s <= 0:
            raise ValueError("max_connections >= 1 and header_timeout_s > 0, please")
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.open = 0  # connections held now (TLS handshakes under way included)
        # Exact counts for the metrics; the log has one line a minute of each.
        self.refused = 0  # closed at once: max_connections were held
        self.header_timeouts = 0  # closed: no complete request headers in time
        self.accept_errors = 0  # accept() failed (out of files, most likely)
        self._refused_lines = LogThrottle()
        self._timeout_lines = LogThrottle()
        self._error_lines = LogThrottle()

    @property
    def keepalive_s(self) -> float:
        """aiohttp's keep-alive timeout: it also closes a connection that has sent no
        complete request by then, so it must not cut the header timeout short."""
        return max(KEEPALIVE_SECONDS, self.header_timeout_s)

    def admit(self) -> bool:
        """Whether a newly accepted connection may be held; False: close it."""
        if self.open < self.max_connections:
            self.open += 1
            return True
        self.refused += 1
        count = self._refused_lines.event(time.monotonic())
        if count is not None:
            log.warning(
                "connections refused: max_connections are open",
                refused=count,
                max_connections=self.max_connections,
            )
        return False

    def release(self) -> None:
        self.open -= 1

    def timed_out(self) -> None:
        self.header_timeouts += 1
        count = self._timeout_lines.event(time.monotonic())
        if count is not None:
            log.info(
                "connections closed: no complete request headers in time",
                closed=count,
                header_timeout_s=self.header_timeout_s,
            )

    def accept_failed(self, error: OSError) -> None:
        self.accept_errors += 1
        count = self._error_lines.event(time.monotonic())
        if count is not None:
            log.error(
                "cannot accept connections; pausing",
                failures=count,
                pause_s=ACCEPT_PAUSE_SECONDS,
                open=self.open,
                reason=error.strerror or error,
            )


def open_doors(config: CoordinatorConfig) -> Doors:
    return Doors(
        max_connections=fit_open_files(config.max_connections),
        header_timeout_s=config.header_timeout_seconds,
    )


def fit_open_files(max_connections: int) -> int:
    """The connection cap that fits this process's open-files limit.

    Connections past the limit would make accept() fail, so ``max_connections`` plus
    ``FILE_HEADROOM`` must fit. The soft limit is raised toward the hard one as far as
    that needs (any process may; Go's runtime does the same at start-up). When the hard
    limit is too low even so, the cap is lowered to fit, with one warning saying how to
    raise the limit: starting with a smaller cap serves everyone a lower cap would, where
    refusing to start would serve no one.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + FILE_HEADROOM
    if soft == resource.RLIM_INFINITY or wanted <= soft:
        return max_connections
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if wanted <= soft:
        return max_connections
    fitted = max(1, soft - FILE_HEADROOM)
    log.warning(
        "max_connections lowered to fit the open-files limit",
        max_connections=fitted,
        configured=max_connections,
        open_files_limit=soft,
        headroom=FILE_HEADROOM,
        fix="raise LimitNOFILE in the unit, or ulimit -n",
    )
    return fitted


class DoorSite(web.BaseSite):
    """An aiohttp site on a listening socket of the caller's (which it closes on stop),
    accepting connections itself (see the module's docstring); HTTPS with
    ``ssl_context``."""

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        doors: Doors,
        *,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = 128,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._sock = sock
        self._doors = doors
        self._loop = asyncio.get_running_loop()
        self._setting_up: set[asyncio.Task[None]] = set()  # TLS handshakes, mostly
        self._resume: asyncio.TimerHandle | None = None

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        host, port = self._sock.getsockname()[:2]
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    async def start(self) -> None:
        await super().start()
        self._sock.setblocking(False)
        self._sock.listen(self._backlog)
        self._loop.add_reader(self._sock.fileno(), self._accept)

    async def stop(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        for task in self._setting_up:
            task.cancel()
        await asyncio.gather(*self._setting_up, return_exceptions=True)
        await super().stop()

    def _accept(self) -> None:
        """Everything the backlog holds, up to ``backlog`` at a time (as asyncio does)."""
        for _ in range(self._backlog):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as error:  # out of files, most likely: pause, then try again
                self._doors.accept_failed(error)
                self._loop.remove_reader(self._sock.fileno())
                self._resume = self._loop.call_later(ACCEPT_PAUSE_SECONDS, self._accept_again)
                return
            if not self._doors.admit():
                conn.close()
                continue
            task = self._loop.create_task(self._set_up(conn))
            self._setting_up.add(task)
            task.add_done_callback(self._setting_up.discard)

    def _accept_again(self) -> None:
        self._resume = None
        self._loop.add_reader(self._sock.fileno(), self._accept)

    async def _set_up(self, conn: socket.socket) -> None:
        """Hand an admitted connection to aiohttp, after its TLS handshake if any."""
        server = self._runner.server
        assert server is not None  # BaseSite checked it
        connection = _Connection(server(), self._doors)
        tls = self._ssl_context
        try:
            await self._loop.connect_accepted_socket(
                lambda: connection,
                conn,
                ssl=tls,
                ssl_handshake_timeout=self._doors.header_timeout_s if tls else None,
            )
        except asyncio.CancelledError:
            connection.give_back()
            conn.close()
            raise
        except OSError as error:  # a failed or timed-out handshake: nothing to serve
            connection.give_back()
            conn.close()
            log.debug("connection dropped before it was served", reason=error)


class _Connection(asyncio.Protocol):
    """One connection: aiohttp's request handler inside, a deadline for request headers
    around it. The deadline is set when the connection opens and at the first byte of
    each later request, and cleared once aiohttp has parsed that request's headers."""

    def __init__(self, handler: RequestHandler, doors: Doors) -> None:
        self._handler = handler
        self._doors = doors
        self._held = True  # counted in doors.open until given back
        self._deadline: asyncio.TimerHandle | None = None
        self._requests_then = 0  # requests parsed when the deadline was set

    def give_back(self) -> None:
        """No longer count this connection (once, however often called)."""
        if self._held:
            self._held = False
            self._doors.release()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._handler.connection_made(transport)
        self._set_deadline()

    def data_received(self, data: bytes) -> None:
        handler = self._handler
        between_requests, parsed = _awaiting_request(handler), _requests_parsed(handler)
        handler.data_received(data)
        if self._deadline is None:
            if between_requests and _requests_parsed(handler) == parsed:
                self._set_deadline()  # the first bytes of a request, not all its headers
        elif _requests_parsed(handler) > self._requests_then:
            self._clear_deadline()

    def eof_received(self) -> None:
        self._handler.eof_received()  # None: the transport closes, as aiohttp's would

    def connection_lost(self, exc: Exception | None) -> None:
        self._clear_deadline()
        self._handler.connection_lost(exc)
        self.give_back()

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()

    def _set_deadline(self) -> None:
        self._requests_then = _requests_parsed(self._handler)
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self._doors.header_timeout_s, self._expire)

    def _clear_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if _requests_parsed(self._handler) == self._requests_then:
            self._doors.timed_out()
            self._handler.force_close()


# aiohttp (3.14) has no public word for where a connection's request handler stands.
# These two read it: the handler's count of requests whose headers it parsed, and the
# future it awaits the next request on (aiohttp's own keep-alive check reads the same).
# tests/coordinator/test_doors.py fails if a later aiohttp changes them.
def _requests_parsed(handler: RequestHandler) -> int:
    return handler._request_count


def _awaiting_request(handler: RequestHandler) -> bool:
    waiter = handler._waiter
    return waiter is not None and not waiter.done()
