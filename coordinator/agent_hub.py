"""The agent websocket ``/v1/agent``: one session per connected agent.

A session: the agent's credential (the join token, or with a client CA its client
certificate: ``agent_identity``) is checked before the upgrade (401 otherwise, which
closes the connection, held back for a source that keeps failing: ``AuthRefusals``); the
first frame must be ``hello`` within ``hello_timeout_seconds``, from a sender that may
be the node it names; the node is registered and persisted (a decision on the
deployments' sequencer, with the capacity a changed inventory moves:
``deployments.registration``), then answered with ``welcome`` carrying the node's whole
desired state and its heartbeat pace; afterwards ``heartbeat`` renews the node's lease
and says which desired revision the agent acknowledged (``host_acks``: a removal's
answer waits for it) and ``status`` updates its health and what its containers are
doing; the drift, restarts and failed tries a status reports are events, each once
(``agent_reports``). The welcome says the coordinator takes partial statuses: after a
session's first status, which lists every container, an agent may send only what
changed, and the session keeps what its agent holds (``status_listing``), so a report
costs what it names, not what the node holds. After every change of a node's containers
the node's agent is sent what changed since the revision it was last sent (``desired``,
a delta: ``desired_feed``), or the whole state when its heartbeat asks for it
(``wants_full``).
The heartbeat interval stretches as the fleet grows, so the fleet stays under
``max_heartbeats_per_second`` (``heartbeat_pace``): each welcome carries the pace of the
moment, and when the fleet outgrows it every connected agent is sent the longer one (in
a delta), its node's lease stretched first. A newer session for the same node replaces
the older one, whose frames are no longer acted on. When a lease expires the node is
marked lost and its socket, if one is still open, is closed, so a node always comes back
through a fresh ``hello``.

An agent is untrusted input. Every frame is checked as it is decoded (ranges, lengths,
and the rules between an inventory's fields), and a frame that fails changes nothing: a
refused hello registers no node and leaves a node registered before as it was (and its
session, if it has one, open); a refused frame in a session ends only that session. Each
refusal is answered with an ``error`` frame (code and message) before the close, counted
in ``allot_agent_protocol_errors_total{code}`` and logged; one that names a node is also
a ``refused`` event of that node.

Close codes: 1007 malformed frame, 1003 text frame, 1008 refused (token, a node the
certificate does not name, protocol version, node name, invalid inventory, no hello),
1009 frame too large (aiohttp), 1001 coordinator going away, 4000 replaced by a newer
session, 4001 lease expired.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from aiohttp import WSCloseCode, WSMsgType, web

from coordinator.agent_identity import AgentAuthorizer, AgentRefusal
from coordinator.agent_reports import ATTEMPTS, DRIFT, ReportedOnce
from coordinator.config import CoordinatorConfig
from coordinator.deployments.service import DeploymentService
from coordinator.desired_feed import DesiredFeed
from coordinator.errors import ApiError, Unauthorized
from coordinator.heartbeat_pace import Pacer
from coordinator.host_acks import HostAcks
from coordinator.http.auth import BEARER_HINT, AuthRefusals
from coordinator.loop_turns import let_waiting_run
from coordinator.metrics import Metrics
from coordinator.services.events import Note
from coordinator.services.nodes import node_name_problem
from coordinator.services.registry import NodeRegistry
from coordinator.status_listing import Listing
from shared.api.nodes import NodeHealth
from shared.logs import get_logger
from shared.protocol import (
    PROTOCOL_VERSION,
    SUBPROTOCOL,
    AgentFrame,
    Error,
    Heartbeat,
    Hello,
    HelloHead,
    InvalidInventory,
    ProtocolError,
    Status,
    Welcome,
    decode_from_agent,
    encode,
)

log = get_logger("allot.coordinator.agents")

CLOSE_REPLACED = 4000
CLOSE_LEASE_EXPIRED = 4001
PUBLISH_SLICE = 100  # nodes sent their desired state between two turns of the loop


@dataclass(eq=False)
class _Session:
    ws: web.WebSocketResponse
    feed: DesiredFeed  # what its agent holds of the node's desired state, and its pace
    # The containers its agent holds, by its statuses in this session (full and partial).
    listing: Listing = field(default_factory=Listing)


class AgentHub:
    def __init__(
        self,
        registry: NodeRegistry,
        config: CoordinatorConfig,
        metrics: Metrics,
        deployments: DeploymentService,
        refusals: AuthRefusals,
    ):
        self._registry = registry
        self._refusals = refusals
        self._deployments = deployments
        deployments.subscribe(self.mark_desired)
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._config = config
        self._authorizer = AgentAuthorizer(
            join_token=config.join_token, client_ca=bool(config.tls_client_ca_file)
        )
        self._metrics = metrics
        self._sessions: dict[str, _Session] = {}
        self._pacer = Pacer(
            heartbeat_seconds=config.heartbeat_seconds,
            lease_seconds=config.lease_seconds,
            max_per_second=config.max_heartbeats_per_second,
        )
        self._pace_the_loaded_fleet()
        self.acks = HostAcks(bound_seconds=config.removal_ack_seconds)
        logged = deployments.events.events()
        self._reports = [ReportedOnce(logged, DRIFT), ReportedOnce(logged, ATTEMPTS)]

    def _pace_the_loaded_fleet(self) -> None:
        """A coordinator that starts (or takes over) with live nodes in its store paces
        for them at once: their agents were told a stretched lease and retry within a
        quarter of it, so each node's fresh lease is the pace of that fleet, not the base
        one; and as they come back they are welcomed at that pace, with no re-pace each
        time the returning fleet outgrows the one before."""
        live = [r.name for r in self._registry.all() if r.state != NodeHealth.LOST]
        pace, grew = self._pacer.pace_for(agents=len(live))
        if grew:
            for name in live:
                self._registry.stretch_lease(name, pace.lease_seconds)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        problem = self._authorizer.admission_problem(request)
        if problem is not None:
            kind = "client_certificate" if self._config.tls_client_ca_file else "join_token"
            await self._refusals.refused(kind, request.remote or "")
            hint = None if self._config.tls_client_ca_file else BEARER_HINT
            raise Unauthorized(problem, details=hint)
        certified = self._authorizer.certified(request)
        offered = request.headers.get("Sec-WebSocket-Protocol", "")
        if SUBPROTOCOL not in (p.strip() for p in offered.split(",")):
            raise ApiError(
                f"the agent socket speaks websocket subprotocol {SUBPROTOCOL!r}; offer it",
                details={"offered": offered},
            )
        # No websocket-level heartbeat: the node's lease is the one liveness rule, and a
        # socket whose lease ends is closed by watch_leases, half-open or not.
        ws = web.WebSocketResponse(
            protocols=(SUBPROTOCOL,), max_msg_size=self._config.max_frame_bytes
        )
        await ws.prepare(request)
        self._metrics.agent_connections.inc()
        try:
            await self._serve(ws, request.remote or "", certified)
        finally:
            self._metrics.agent_connections.dec()
            await ws.close()
        return ws

    async def watch_leases(self) -> None:
        """Mark nodes lost as their leases end, until cancelled."""
        tick = min(1.0, max(0.05, self._registry.lease_seconds / 10))
        while True:
            await asyncio.sleep(tick)
            try:
                lost = await self._deployments.expire_leases(
                    release=self._config.lost_node_grace_seconds == 0
                )
            except Exception:  # not committed: the registry keeps those nodes due
                log.exception("marking expired nodes lost failed; retrying")
                continue
            for record in lost:
                await self._deployments.report_pressure(record.name, None)  # no longer known
                session = self._sessions.pop(record.name, None)
                self.acks.disconnected(record.name)
                if session is not None:
                    await session.ws.close(code=CLOSE_LEASE_EXPIRED, message=b"lease expired")

    async def _record(self, notes: list[Note]) -> None:
        """Events of what the hub saw (a node lost, an agent refused), a decision of their
        own; one that cannot be committed is logged, and what it tells goes on."""
        try:
            await self._deployments.record(notes)
        except Exception as error:
            log.warning("events not recorded", kinds=",".join(n.kind for n in notes), error=error)

    def mark_desired(self, nodes: set[str]) -> None:
        """These nodes' desired state moved (a commit): ``publish_desired`` sends it."""
        self._dirty |= nodes
        self._wake.set()

    async def publish_desired(self) -> None:
        """Send each connected node that was marked what its agent lacks of its desired
        state and pace (``desired_feed``), until cancelled. Off the commit path: the
        answer to a request waits for its commit, never for websockets, and nodes marked
        again while a round of sends is under way get one send for all of those marks. A
        node not connected gets its state in its next welcome."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            for count, node in enumerate(sorted(dirty), 1):
                session = self._sessions.get(node)
                if session is not None:
                    await self._send_desired(node, session)
                if count % PUBLISH_SLICE == 0:
                    await let_waiting_run()  # requests and heartbeats in between

    async def _send_desired(self, node: str, session: _Session) -> None:
        revision, containers = self._deployments.desired(node)
        frame = session.feed.frame(revision, containers, self._pacer.pace)
        if frame is None:
            return
        if frame.lease_seconds is not None:  # covered before the agent slows down
            self._registry.stretch_lease(node, frame.lease_seconds)
        try:
            await session.ws.send_bytes(encode(frame))
        except Exception as error:  # its session ends on its own; others go on
            log.info("desired state not sent", node=node, error=repr(error))

    async def close_all(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for node in sessions:
            self.acks.disconnected(node)
        for session in sessions.values():
            await session.ws.close(
                code=WSCloseCode.GOING_AWAY, message=b"coordinator shutting down"
            )

    async def _serve(
        self, ws: web.WebSocketResponse, address: str, certified: frozenset[str] | None
    ) -> None:
        hello = await self._await_hello(ws, address, certified)
        if hello is None:
            return
        name = hello.node
        _, record = await self._deployments.hello(
            name, inventory=hello.inventory, address=address, agent_version=hello.agent_version
        )
        older = self._sessions.get(name)
        pace, grew = self._pacer.pace_for(agents=len(self._sessions) + (older is None))
        # From here to the welcome's bytes nothing awaits, so no delta reaches the agent
        # before the welcome its feed starts from.
        revision, containers = self._deployments.desired(name)
        session = _Session(ws, DesiredFeed(revision, containers, pace))
        self._sessions[name] = session
        self.acks.connected(name, acknowledges=hello.acknowledges)
        self._registry.stretch_lease(name, pace.lease_seconds)
        welcome = Welcome(
            node=name,
            lease_seconds=pace.lease_seconds,
            heartbeat_seconds=pace.heartbeat_seconds,
            revision=revision,
            containers=containers,
            partial_statuses=True,
        )
        await ws.send_bytes(encode(welcome))
        if grew:
            log.info(
                "heartbeat interval stretched",
                agents=len(self._sessions),
                heartbeat_s=round(pace.heartbeat_seconds, 2),
                lease_s=round(pace.lease_seconds, 2),
            )
            self.mark_desired(set(self._sessions))  # each is sent the longer pace
        if older is not None:
            log.warning("agent session replaced", node=name, address=address)
            await older.ws.close(code=CLOSE_REPLACED, message=b"replaced by a newer session")
        log.info("agent connected", node=name, address=address, state=record.state)
        try:
            while (frame := await self._receive(ws, name, address)) is not None:
                if self._sessions.get(name) is session:  # a replaced session's words count no more
                    await self._dispatch(name, frame)
        finally:
            if self._sessions.get(name) is session:
                del self._sessions[name]
                self.acks.disconnected(name)
        log.info("agent disconnected", node=name, address=address, code=ws.close_code)

    async def _await_hello(
        self, ws: web.WebSocketResponse, address: str, certified: frozenset[str] | None
    ) -> Hello | None:
        try:
            async with asyncio.timeout(self._config.hello_timeout_seconds):
                frame = await self._receive(ws, None, address, certified)
        except TimeoutError:
            await self._refuse(ws, "no_hello", "no hello frame in time", address)
            return None
        if frame is None:
            return None
        if not isinstance(frame, Hello):
            await self._refuse(ws, "expected_hello", "the first frame must be hello", address)
            return None
        refusal = self._sender_refusal(frame, certified)
        if refusal is not None:
            await self._refuse_sender(ws, refusal, address)
            return None
        return frame

    def _sender_refusal(
        self, hello: HelloHead, certified: frozenset[str] | None
    ) -> AgentRefusal | None:
        """Why the sender of ``hello`` may not register, or None."""
        if hello.protocol != PROTOCOL_VERSION:
            return AgentRefusal(
                code="protocol_version",
                message=f"agent speaks protocol {hello.protocol}, coordinator {PROTOCOL_VERSION}",
            )
        refusal = self._authorizer.hello_refusal(hello, certified)
        if refusal is not None:
            return refusal
        problem = node_name_problem(hello.node)
        if problem is not None:
            return AgentRefusal(code="invalid_node_name", message=problem)
        return None

    async def _receive(
        self,
        ws: web.WebSocketResponse,
        name: str | None,
        address: str,
        certified: frozenset[str] | None = None,
    ) -> AgentFrame | None:
        """The next frame to act on, or None once the session is over.

        An unknown frame type is answered with an error and skipped (a newer agent may
        send one); anything else that cannot be taken ends the session with a reason. A
        hello's inventory is judged only once its sender passed (``_sender_refusal``, with
        ``certified`` the names the sender's certificate allows).
        """
        while True:
            message = await ws.receive()
            if message.type == WSMsgType.BINARY:
                try:
                    frame = decode_from_agent(message.data, max_bytes=self._config.max_frame_bytes)
                except InvalidInventory as error:
                    refusal = None if name else self._sender_refusal(error.sender, certified)
                    if refusal is not None:
                        await self._refuse_sender(ws, refusal, address)
                    else:
                        node = name or error.sender.node
                        await self._refuse(ws, error.code, error.message, address, node=node)
                    return None
                except ProtocolError as error:
                    if error.code != "unknown_type":
                        close = WSCloseCode.INVALID_TEXT
                        await self._refuse(ws, error.code, error.message, address, name, close)
                        return None
                    self._metrics.protocol_errors.labels(code=error.code).inc()
                    log.warning("agent frame skipped", node=name, code=error.code, reason=error)
                    await _send_error(ws, error.code, error.message)
                    continue
                self._metrics.agent_frames.labels(type=type(frame).__name__.lower()).inc()
                return frame
            if message.type == WSMsgType.TEXT:
                why, close = "binary MessagePack frames only", WSCloseCode.UNSUPPORTED_DATA
                await self._refuse(ws, "text_frame", why, address, name, close)
                return None
            if message.type == WSMsgType.ERROR:
                self._metrics.protocol_errors.labels(code="socket_error").inc()
                log.warning("agent socket error", node=name, reason=message.data)
            return None  # closing, closed or failed

    async def _dispatch(self, name: str, frame: AgentFrame) -> None:
        if isinstance(frame, Heartbeat):
            self._registry.heartbeat(name)
            self.acks.acknowledged(name, frame.acknowledged_revision)
            if frame.wants_full:
                log.info("agent asked for its whole desired state", node=name)
                self._sessions[name].feed.want_full()
                self.mark_desired({name})
        elif isinstance(frame, Status):
            await self._take_status(name, frame)
        elif isinstance(frame, Error):
            log.warning("agent reported an error", node=name, code=frame.code, reason=frame.message)
        else:
            log.warning("agent said hello twice; ignored", node=name)

    async def _take_status(self, name: str, frame: Status) -> None:
        """A status frame, whole or partial: its work follows the containers it names,
        whatever the node holds (``status_listing`` keeps what the agent holds)."""
        session = self._sessions[name]  # this frame's: current until the first await
        self._registry.heartbeat(name)
        await self._deployments.report_problems(name, frame.problems)
        listed = session.listing.take(frame)
        if listed is None:
            await self._partial_before_full(name, session)
        self._deployments.observe(name, frame, listed)
        await self._deployments.report_pressure(name, frame.pressure)
        # Drift put back, restarts and failed tries: each an event, once.
        record_of = self._deployments.container
        gone = frame.gone if frame.partial else None
        notes = [
            note
            for reports in self._reports
            for note in reports.new_notes(name, frame.containers, record_of, gone)
        ]
        if notes:
            await self._deployments.record(notes)

    async def _partial_before_full(self, name: str, session: _Session) -> None:
        """A partial status with no full one before it in the session: the agent breaks
        the protocol (its session's first status is full). Its containers are observed,
        but nothing is let go on it, not even what it names gone, since what the agent
        holds is not known until a full status comes (at the latest its periodic full
        report); the agent is told why."""
        code, message = "partial_before_full", "a partial status before any full one"
        self._metrics.protocol_errors.labels(code=code).inc()
        log.warning("agent status taken without releases", node=name, code=code, reason=message)
        await _send_error(session.ws, code, message)

    async def _refuse_sender(
        self, ws: web.WebSocketResponse, refusal: AgentRefusal, address: str
    ) -> None:
        await self._refuse(ws, refusal.code, refusal.message, address, node=refusal.node)

    async def _refuse(
        self,
        ws: web.WebSocketResponse,
        code: str,
        message: str,
        address: str,
        node: str | None = None,
        close: int = WSCloseCode.POLICY_VIOLATION,
    ) -> None:
        """Count, log, and tell the agent why before closing its socket; a refusal that
        names a node is an event of that node too. A wrong join token is an
        authentication failure: logged at most once a minute per address, and held back
        for an address that keeps failing."""
        self._metrics.protocol_errors.labels(code=code).inc()
        if code == Unauthorized.code:
            await self._refusals.refused("join_token", address)
        else:
            log.warning("agent refused", node=node, address=address, code=code, reason=message)
        if node:
            note = Note("refused", f"{code}: {message}", node=node)
            await self._record([note])
        await _send_error(ws, code, message)
        await ws.close(code=close, message=code.encode())


async def _send_error(ws: web.WebSocketResponse, code: str, message: str) -> None:
    """Tell the agent why, if it is still there to hear it."""
    with contextlib.suppress(ConnectionError):
        await ws.send_bytes(encode(Error(code=code, message=message)))
