"""The agent's link to the coordinator: connect, hello, welcome, heartbeats, reconnect.

    run_link(config, inventory, runtime, metrics)    # until cancelled

One attempt opens the websocket (wss:// for an https server, verified against
``tls_ca_file``, with the node's client certificate if it has one) with the join token,
sends ``hello`` with the inventory and the containers the runtime sees, and waits for
``welcome``, which says how long the node's lease is, how often to send heartbeats, and
the node's whole desired state. Every ``desired`` frame after it goes to the runtime: a
delta whose ``since`` is not the revision the runtime holds is not applied, and a
heartbeat asks for the whole state instead (``wants_full``). A desired frame may also
stretch the heartbeat interval and the lease as the fleet grows. Every change of the
runtime's report beyond its usage figures goes back as a ``status`` frame (only what
changed, when the welcome says the coordinator takes partial statuses; the session's
first is whole), and the whole report at least every ``full_report_seconds``
(``report_pace``); each time the runtime
acknowledges a newer desired revision (``start_fence``) a heartbeat says so at once.
The session lasts until the socket closes or nothing at all (not even a pong to the
agent's websocket pings) has arrived for a lease length.
After any failure the next attempt waits a capped, fully jittered exponential backoff;
a welcome resets it. The welcome's lease length also caps it (a quarter of the lease,
``LEASE_SHARE_OF_BACKOFF``), so an agent that lost its session always tries again well
before its node could be marked lost; and an agent whose session ended watches
the coordinators' ``/readyz`` while it waits (``agent.leader_watch``) and goes back at
once when one answers as the leader, instead of sleeping out its delay. After etcd lost
and regained its quorum the agent was back 14.3 s after the new leader answered, with
its delay grown to 11 s (a node is lost after 15 s); it is now back within half a
second.

With several coordinators (``server`` lists them; on etcd one leads, the others stand
by) an attempt that finds no answer moves on to the next one in the list, and a standby
answers with an ``error`` frame ``not_leader`` naming the leader, which the next attempt
goes to at once (after the backoff only if it was sent on in vain twice in a row).

State changes are logged once; a failure repeated with the same reason is logged at
debug so a long outage does not flood the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import time
from dataclasses import dataclass

import aiohttp

from agent.config import AgentConfig
from agent.leader_watch import leader_answering
from agent.metrics import AgentMetrics
from agent.report_pace import ReportPace
from agent.runtime.reconciler import Runtime
from shared.backoff import Backoff
from shared.inventory import Inventory
from shared.logs import get_logger
from shared.protocol import (
    NOT_LEADER,
    PROTOCOL_VERSION,
    SUBPROTOCOL,
    Desired,
    Error,
    Heartbeat,
    Hello,
    ProtocolError,
    Welcome,
    decode_from_coordinator,
    encode,
)
from shared.sdnotify import notify
from shared.servers import Servers, agent_socket_url

log = get_logger("allot.agent")

AGENT_VERSION = importlib.metadata.version("allot")
WELCOME_TIMEOUT_SECONDS = 10.0
# Bounds connecting and the upgrade; an established websocket is not limited by it.
HANDSHAKE_TIMEOUT = aiohttp.ClientTimeout(total=30.0)
# The longest reconnect delay, as a share of the node's lease: at least four tries before
# the coordinator would mark the node lost, should /readyz not be reachable.
LEASE_SHARE_OF_BACKOFF = 0.25


@dataclass
class _Pace:
    """How often this session heartbeats and how long the node's lease is: the welcome's,
    stretched by later desired frames as the fleet grows."""

    heartbeat_seconds: float
    lease_seconds: float


class Refused(Exception):
    """The coordinator turned this agent away (token, protocol version, node name)."""


class NotLeader(Exception):
    """The coordinator is a standby; ``leader`` is the leader's URL ("": not known)."""

    def __init__(self, leader: str) -> None:
        super().__init__(f"a standby; the leader is {leader or 'not known yet'}")
        self.leader = leader


async def run_link(
    config: AgentConfig, inventory: Inventory, runtime: Runtime, metrics: AgentMetrics
) -> None:
    """Keep this node registered with the coordinator until cancelled; ``metrics`` says
    whether a session is registered now (``allot_agent_connected``)."""
    backoff = Backoff(initial=config.backoff_initial_seconds, cap=config.backoff_max_seconds)
    servers = Servers(config.servers)
    last_failure = ""
    sent_on = 0  # attempts in a row that a standby sent elsewhere
    # A session began and ended, and no attempt the watch sent to a leader has failed
    # since: the next wait may end when a leader answers. A leader that answers /readyz
    # and still fails the attempt (refused, a store it cannot write) is tried again only
    # after the full delay, so it is never hammered at the watch's pace.
    follow_leader = False
    log.info("connecting to coordinator", url=",".join(config.servers), node=config.name)
    connector = aiohttp.TCPConnector(ssl=config.tls_context() or True)
    async with aiohttp.ClientSession(timeout=HANDSHAKE_TIMEOUT, connector=connector) as http:
        while True:
            failure, report = "", log.warning
            url = servers.current
            try:
                ended = await _session(http, config, url, inventory, runtime, backoff, metrics)
            except NotLeader as standby:
                servers.follow(standby.leader)
                sent_on += 1
                log.info("coordinator is a standby", url=url, leader=standby.leader or "unknown")
                if sent_on < 2:
                    continue
                failure = f"{url} is a standby and sends this agent on to {servers.current}"
            except Refused as error:
                failure, report = f"refused: {error}", log.error
            except (aiohttp.ClientError, OSError, TimeoutError, ProtocolError) as error:
                failure = f"{url}: {_describe(error)}"
                servers.failed()
                sent_on = 0
            else:
                sent_on = 0
                follow_leader = True
                log.warning("disconnected from coordinator", url=url, reason=ended)
                notify(f"STATUS=disconnected ({ended}); reconnecting")
            delay = backoff.next_delay()
            if failure and failure != last_failure:
                report(
                    "cannot register with coordinator", reason=failure, retry_in_s=round(delay, 1)
                )
                notify(f"STATUS=cannot register: {failure}")
            elif failure:
                log.debug("still cannot register", reason=failure, retry_in_s=round(delay, 1))
            last_failure = failure
            if follow_leader:
                follow_leader = not await _followed_leader(http, servers, config.servers, delay)
            else:
                await asyncio.sleep(delay)


async def _followed_leader(
    http: aiohttp.ClientSession, servers: Servers, urls: list[str], delay: float
) -> bool:
    """Wait at most ``delay``: until a coordinator answers as the leader, with ``servers``
    then pointing at it (True), or to the end (False)."""
    leader = await leader_answering(http, dict.fromkeys([servers.current, *urls]), within=delay)
    if leader is None:
        return False
    if leader != servers.current:
        servers.follow(leader)
    return True


async def _session(
    http: aiohttp.ClientSession,
    config: AgentConfig,
    url: str,
    inventory: Inventory,
    runtime: Runtime,
    backoff: Backoff,
    metrics: AgentMetrics,
) -> str:
    """One connection: returns why a registered session ended; raises if none began."""
    try:
        ws = await http.ws_connect(
            agent_socket_url(url),
            protocols=(SUBPROTOCOL,),
            headers={"Authorization": f"Bearer {config.join_token}"},
            max_msg_size=config.max_frame_bytes,
        )
    except aiohttp.WSServerHandshakeError as error:
        if error.status == 401:
            raise Refused(
                "the coordinator does not accept this agent's credential (401): the join"
                " token, or the client certificate it asks for (tls_cert_file)"
            ) from error
        raise
    async with ws:
        seen = runtime.report()
        hello = Hello(
            node=config.name,
            token=config.join_token,
            protocol=PROTOCOL_VERSION,
            inventory=inventory,
            agent_version=AGENT_VERSION,
            applied_revision=seen.applied_revision,
            containers=seen.containers,
            acknowledges=True,
        )
        await ws.send_bytes(encode(hello))
        welcome = await _await_welcome(ws, config)
        retries = backoff.attempts
        backoff.reset()
        backoff.cap_at(welcome.lease_seconds * LEASE_SHARE_OF_BACKOFF)
        log.info(
            "registered with coordinator",
            node=welcome.node,
            url=url,
            lease_s=welcome.lease_seconds,
            heartbeat_s=welcome.heartbeat_seconds,
            retries=retries,
        )
        notify(f"STATUS=registered with {url} as {welcome.node}")
        runtime.set_desired(welcome.revision, welcome.containers, full=True, welcome=True)
        pace = _Pace(welcome.heartbeat_seconds, welcome.lease_seconds)
        helpers = [
            asyncio.create_task(_heartbeats(ws, runtime, pace)),
            asyncio.create_task(_reports(ws, runtime, _report_pace(config, welcome))),
            asyncio.create_task(_acknowledgements(ws, runtime)),
        ]
        metrics.set_connected(True)
        try:
            return await _follow(ws, config, runtime, pace)
        finally:
            metrics.set_connected(False)
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)


async def _await_welcome(ws: aiohttp.ClientWebSocketResponse, config: AgentConfig) -> Welcome:
    async with asyncio.timeout(WELCOME_TIMEOUT_SECONDS):
        message = await ws.receive()
    if message.type != aiohttp.WSMsgType.BINARY:
        raise ConnectionError(f"the coordinator closed the socket before welcome ({ws.close_code})")
    frame = decode_from_coordinator(message.data, max_bytes=config.max_frame_bytes)
    if isinstance(frame, Error) and frame.code == NOT_LEADER:
        raise NotLeader(frame.leader)
    if isinstance(frame, Error):
        raise Refused(f"{frame.message} ({frame.code})")
    if not isinstance(frame, Welcome):
        raise ProtocolError("invalid_frame", f"expected welcome, got {type(frame).__name__}")
    return frame


async def _follow(
    ws: aiohttp.ClientWebSocketResponse, config: AgentConfig, runtime: Runtime, pace: _Pace
) -> str:
    """Read the coordinator's frames until the session ends; returns why it ended."""
    last_error = ""
    while True:
        try:
            message = await ws.receive(timeout=pace.lease_seconds)
        except TimeoutError:
            return f"nothing heard from the coordinator for {pace.lease_seconds:g}s"
        if message.type != aiohttp.WSMsgType.BINARY:
            detail = f": {last_error}" if last_error else ""
            return f"socket closed with code {ws.close_code}{detail}"
        try:
            frame = decode_from_coordinator(message.data, max_bytes=config.max_frame_bytes)
        except ProtocolError as error:
            log.warning("coordinator frame refused", code=error.code, reason=error.message)
            await ws.send_bytes(encode(Error(code=error.code, message=error.message)))
            if error.code != "unknown_type":
                return f"invalid frame from the coordinator: {error.message}"
            continue
        if isinstance(frame, Error):
            last_error = f"{frame.message} ({frame.code})"
            log.warning("coordinator reported an error", code=frame.code, reason=frame.message)
        elif isinstance(frame, Desired):
            await _take_desired(ws, runtime, pace, frame)
        else:
            log.debug("repeated welcome ignored")


async def _take_desired(
    ws: aiohttp.ClientWebSocketResponse, runtime: Runtime, pace: _Pace, frame: Desired
) -> None:
    """Hand ``frame`` to the runtime, or ask for the whole state when it is a delta on
    another revision than the one the runtime holds; take its longer pace."""
    if frame.heartbeat_seconds is not None and frame.lease_seconds is not None:
        if frame.heartbeat_seconds != pace.heartbeat_seconds:
            log.info(
                "heartbeat interval stretched",
                heartbeat_s=round(frame.heartbeat_seconds, 2),
                lease_s=round(frame.lease_seconds, 2),
            )
        pace.heartbeat_seconds, pace.lease_seconds = frame.heartbeat_seconds, frame.lease_seconds
    held = runtime.desired_revision
    if not frame.full and frame.since is not None and frame.since != held:
        log.warning(
            "desired delta not applied; asking for the whole state",
            revision=frame.revision,
            since=frame.since,
            held=held,
        )
        await ws.send_bytes(encode(_heartbeat(runtime, wants_full=True)))
        return
    log.debug(
        "desired state received",
        revision=frame.revision,
        full=frame.full,
        containers=len(frame.containers),
        removed=len(frame.removed),
    )
    runtime.set_desired(frame.revision, frame.containers, full=frame.full, removed=frame.removed)


async def _heartbeats(ws: aiohttp.ClientWebSocketResponse, runtime: Runtime, pace: _Pace) -> None:
    """A heartbeat frame renews the node's lease; the websocket ping beside it is
    answered with a pong, which is how the agent hears that the coordinator is alive
    (the coordinator sends nothing else while all is well)."""
    with contextlib.suppress(ConnectionError):
        while not ws.closed:
            await ws.send_bytes(encode(_heartbeat(runtime)))
            await ws.ping()
            await asyncio.sleep(pace.heartbeat_seconds)


async def _acknowledgements(ws: aiohttp.ClientWebSocketResponse, runtime: Runtime) -> None:
    """A heartbeat at once each time the acknowledged revision moves: the coordinator
    holds the answer to a removal until it hears it."""
    seen = 0
    with contextlib.suppress(ConnectionError):
        while not ws.closed:
            seen, _ = await runtime.next_acknowledgement(seen)
            await ws.send_bytes(encode(_heartbeat(runtime)))


def _heartbeat(runtime: Runtime, *, wants_full: bool = False) -> Heartbeat:
    return Heartbeat(
        applied_revision=runtime.report().applied_revision,
        acknowledged_revision=runtime.acknowledged_revision,
        wants_full=wants_full,
    )


def _report_pace(config: AgentConfig, welcome: Welcome) -> ReportPace:
    """A fresh pace for this session (so its first report is whole), partial reports
    between full ones when the coordinator said it takes them."""
    return ReportPace(full_every=config.full_report_seconds, partial=welcome.partial_statuses)


async def _reports(ws: aiohttp.ClientWebSocketResponse, runtime: Runtime, pace: ReportPace) -> None:
    """The runtime's report now, then each time it changes beyond its measurements (only
    what changed, to a coordinator that takes partial reports), and the whole of it
    whenever the full report is due (``report_pace``)."""
    seen = -1
    with contextlib.suppress(ConnectionError):
        while not ws.closed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pace.wait(now=time.monotonic()) if seen >= 0 else None):
                    seen, _ = await runtime.next_report(seen)
            report = runtime.report()
            now = time.monotonic()
            if pace.due(report, now=now):
                frame = pace.frame(report, now=now)
                await ws.send_bytes(encode(frame))
                pace.sent(report, now=time.monotonic(), partial=frame.partial)


def _describe(error: BaseException) -> str:
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return (
            f"the coordinator's TLS certificate does not verify against tls_ca_file"
            f" ({error.certificate_error})"
        )
    if isinstance(error, aiohttp.WSServerHandshakeError):
        return f"the coordinator answered the upgrade with HTTP {error.status} {error.message}"
    if isinstance(error, TimeoutError):
        return "no welcome in time"
    if isinstance(error, ProtocolError):
        return f"invalid frame from the coordinator: {error.message}"
    return str(error) or type(error).__name__
