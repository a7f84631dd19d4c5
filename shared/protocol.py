"""The agent <-> coordinator wire protocol: typed frames encoded as MessagePack.

One websocket per agent at ``/v1/agent`` with subprotocol ``allot.v1``; every binary
frame is one MessagePack map whose ``type`` field names the frame:

    agent -> coordinator: hello, heartbeat, status, error
    coordinator -> agent: welcome, desired, error

    frame = decode_from_agent(data, max_bytes=DEFAULT_MAX_FRAME_BYTES)   # -> AgentFrame
    data = encode(Welcome(node="n1", lease_seconds=15.0, heartbeat_seconds=5.0))

Unknown fields are ignored (a newer peer may add some); an unknown ``type``, a field of
the wrong type or out of its range (``shared.bounds``), a frame that is not MessagePack or
is larger than the limit raises ``ProtocolError`` with a ``code`` and a message that says
what was wrong. A hello whose inventory breaks a rule, of its types or between its fields
(``shared.inventory_rules``), raises ``InvalidInventory``: a hello from the agent side is
consistent by construction.
"""

from __future__ import annotations

import re
from typing import Annotated, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

from shared.bounds import (
    INT64_MAX,
    MAX_CPUS,
    MAX_MEMORY,
    Message,
    Messages,
    Name,
    Revision,
    shown,
)
from shared.codec import msgpack_decoder, to_msgpack
from shared.frame_faults import FrameFault, fault_of
from shared.inventory import Inventory
from shared.inventory_rules import inventory_violations, summary
from shared.restart_policy import DEFAULT_RESTART_POLICY, RestartPolicy

PROTOCOL_VERSION = 1
SUBPROTOCOL = "allot.v1"
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_CONTAINERS = 10_000  # container statuses in one report

# What Docker takes and reports for a limit: a 64-bit integer, -1 for "no limit".
DockerInt = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
Cores = Annotated[float, Meta(ge=0, le=MAX_CPUS)]  # refuses NaN and infinities too
UsedBytes = Annotated[int, Meta(ge=0, le=MAX_MEMORY)]
ExitCode = Annotated[int, Meta(ge=-(2**31), le=2**32 - 1)]
SwapState = Literal["", "pending", "done", "failed"]
# Seconds since 1970 on the agent's clock, 0 when it does not say; an event's time, so no
# NaN, infinity, or date before 1970 or after the year 2500.
UnixTime = Annotated[float, Meta(ge=0, le=16_725_225_600)]
# How long a container has to stop on SIGTERM before it is killed, as Docker's own
# default (10 s) and bounded so a typo cannot hold a node's removals for days.
DEFAULT_STOP_TIMEOUT_SECONDS = 10
MAX_STOP_TIMEOUT_SECONDS = 3600
StopTimeout = Annotated[int, Meta(ge=0, le=MAX_STOP_TIMEOUT_SECONDS)]
Percent = Annotated[float, Meta(ge=0, le=100)]  # refuses NaN and infinities too
PressureSource = Literal["psi", "throttling"]


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The Docker settings that enforce a container's allocation (placement spec §7)."""

    cpuset_cpus: str = ""
    cpuset_mems: str = ""
    cpu_shares: DockerInt = 0
    cpu_quota: DockerInt = -1
    cpu_period: DockerInt = 100_000
    mem_limit: DockerInt = 0
    memswap_limit: DockerInt = 0
    mem_reservation: DockerInt = 0


class DesiredContainer(msgspec.Struct, frozen=True, kw_only=True):
    """One container the coordinator wants on the node.

    ``id``, ``namespace`` and ``deployment`` are its identity and become Docker labels;
    image, command, env, labels, gpus and restart policy are fixed for the container's
    life (a change means a new container); ``limits``, ``shared_pool`` and ``capacity``
    may change and are applied in place.
    """

    id: str
    image: str
    namespace: str = ""
    deployment: str = ""
    command: list[str] = []
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    limits: Limits = Limits()
    # True for a container without bound cores: it runs on the node's shared pool (the
    # offered CPUs no bound container uses) and limits.cpuset_cpus is not used.
    shared_pool: bool = False
    gpus: list[str] = []  # GPU or MIG device UUIDs
    restart_policy: RestartPolicy = DEFAULT_RESTART_POLICY  # as shared.restart_policy means it
    capacity: str = ""  # "in-quota" or "over-quota" when a quota governs it
    extended: dict[str, int] = {}  # named extended resources it holds, e.g. example.com/fpga
    # The id of a container on this node that this one replaces (placement spec 10): the
    # agent stops that one, starts this one, and reports how the swap went in `replacing`.
    replaces: str = ""
    # Seconds it has to stop before it is killed, its deployment's; None (from a
    # coordinator that does not send it) means the agent's own stop_timeout_seconds.
    stop_timeout_seconds: StopTimeout | None = None
    # The leaf pool of a container without bound cores ("" for a bound one, or from a
    # coordinator that does not send it). An agent on Docker's cgroupfs driver makes such a
    # container under its pool's cgroup on the node (``shared.pool_cgroups``), weighted
    # with the sum of its members' ``limits.cpu_shares``, each member keeping its own
    # inside; an agent that does not know the field runs the containers side by side,
    # each weighted by its own ``limits.cpu_shares``, as before.
    pool: str = ""  # any pool name the tree takes: not bounded like a Name


AttemptOutcome = Literal["restarted", "failed"]


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """The agent's last try to get a container running: a restart of one that should run
    and did not (``restarted``), or a create or start the engine refused (``failed``,
    ``reason`` its explanation). ``number`` counts the tries in a row (the crash loop);
    ``at`` is the agent's time of it, so the same reason twice is told apart."""

    outcome: AttemptOutcome
    reason: Message
    number: Annotated[int, Meta(ge=1, le=INT64_MAX)]
    at: UnixTime


class ContainerStatus(msgspec.Struct, frozen=True, kw_only=True):
    id: Name
    # As Docker reports it (created, running, exited, ...), or, for a desired container
    # Docker does not hold: missing (not made yet), refused (the agent will not make it),
    # failed (the engine refused to make it; ``error`` says why), waiting (bound to CPUs
    # another container is still leaving; ``error`` names it).
    state: Name
    namespace: Name = ""
    deployment: Name = ""
    capacity: Name = ""
    limits: Limits = Limits()  # as read back from the engine
    # The desired revision that last changed this container, once applied: a revision
    # that left it as it was does not move it.
    revision: Revision = 0
    started_at: Name = ""  # Docker's State.StartedAt
    exit_code: ExitCode | None = None
    error: Message = ""
    # The hand-made changes the agent last put back, e.g. "cpu_shares 2 -> 717" or
    # "recreated (removed outside allot)", and when (Unix time, the agent's clock): each
    # correction has its own time, so the same change put back twice is told apart.
    drift: Messages = []
    drift_at: UnixTime = 0.0
    # For a container that replaces another: "pending" while the swap is under way, "done"
    # once it has run for the agent's settle time (the old one stays stopped), "failed"
    # when it could not run (it was removed, the old one started again; `error` says why).
    replacing: SwapState = ""
    cpu_usage: Cores | None = None  # cores used, averaged since the previous report
    memory_usage: UsedBytes | None = None  # bytes, as the container's cgroup counts them now
    attempt: Attempt | None = None  # the last try to get it running, while in a crash loop
    # How much it waits for CPU, in percent: under cgroup v2 its cgroup's PSI ("some
    # avg10" of cpu.pressure), else the share of its CFS periods it was throttled in since
    # the previous report. None when the agent cannot tell (or is older).
    cpu_pressure: Percent | None = None


ContainerStatuses = Annotated[list[ContainerStatus], Meta(max_length=MAX_CONTAINERS)]
ContainerIds = Annotated[list[Name], Meta(max_length=MAX_CONTAINERS)]


class HelloHead(msgspec.Struct, frozen=True, kw_only=True, tag="hello", tag_field="type"):
    """Who says hello, which the coordinator checks before what the hello says."""

    node: str  # checked by the coordinator's node name rule, which says why
    token: str
    protocol: int


class Hello(HelloHead, frozen=True, kw_only=True, tag="hello", tag_field="type"):
    inventory: Inventory
    agent_version: Name = ""
    applied_revision: Revision = 0
    containers: ContainerStatuses = []
    # True: this agent acknowledges the desired revisions it takes in (a heartbeat's
    # ``acknowledged_revision``); the coordinator waits for that before it answers a
    # removal. An agent that does not say so is not waited for.
    acknowledges: bool = False


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True, tag="heartbeat", tag_field="type"):
    """Renews the node's lease; also sent at once each time ``acknowledged_revision``
    moves."""

    applied_revision: Revision = 0
    # The newest desired revision the agent holds such that no create or start of a
    # container it leaves out is under way, and none will begin (agent.runtime.start_fence).
    acknowledged_revision: Revision = 0
    # True: the agent could not apply a desired delta (its ``since`` was not the revision
    # the agent holds) and asks for the whole desired state. An older coordinator ignores
    # it; it sends whole states only.
    wants_full: bool = False


class CpuPressure(msgspec.Struct, frozen=True, kw_only=True):
    """How much the node's tasks wait for CPU, in percent of wall time.

    ``psi``: the kernel's pressure stall information (``/proc/pressure/cpu``), ``avg10``
    and ``avg60`` its "some" averages over 10 and 60 s. ``throttling`` (a kernel without
    PSI): the share of the containers' CFS periods in which they were throttled
    (``nr_throttled`` / ``nr_periods`` of their ``cpu.stat``) since the previous sample,
    as ``avg10``; ``avg60`` is then None."""

    source: PressureSource
    avg10: Percent
    avg60: Percent | None = None


class Status(msgspec.Struct, frozen=True, kw_only=True, tag="status", tag_field="type"):
    """What the node's agent holds and how it is doing.

    A full status (``partial`` False, the default, all an older agent sends) lists every
    container the agent holds in ``containers``: one it leaves out is not there. A partial
    status (only to a coordinator whose welcome said ``partial_statuses``) is what changed
    since the last status the agent sent in this session: ``containers`` holds the
    containers new since then or whose status changed in more than their measurements
    (``cpu_usage``, ``memory_usage``, ``cpu_pressure``), and ``gone`` names those that
    status listed and Docker no longer holds. A container in neither is as that status
    (and, for its measurements, the last full one) said. So the coordinator's work for a
    report follows the change, not the node's size. The first status of a session is
    full, and so is one at least every ``full_report_seconds`` of the agent. The other
    fields mean the same in both: they are always whole.
    """

    applied_revision: Revision
    containers: ContainerStatuses = []
    problems: Messages = []  # non-empty: the node is degraded, for these reasons
    # The revision the agent had acknowledged when it began the look at Docker that
    # ``containers`` shows: a container that revision leaves out and ``containers`` does
    # not list is gone for good, whatever else on the node fails. 0: not said.
    listed_after: Revision = 0
    # None from an agent that cannot read it, or is older than the field.
    pressure: CpuPressure | None = None
    partial: bool = False  # True: only what changed since the last status sent (above)
    gone: ContainerIds = []  # with partial: the ids listed before that Docker no longer holds


# A heartbeat interval or a lease length, in seconds: above 0, at most a day.
PaceSeconds = Annotated[float, Meta(gt=0, le=86_400)]


class Welcome(msgspec.Struct, frozen=True, kw_only=True, tag="welcome", tag_field="type"):
    node: str
    lease_seconds: float  # this node's: it grows with the heartbeat interval
    heartbeat_seconds: float  # stretched with the fleet (coordinator.heartbeat_pace)
    revision: int = 0
    containers: list[DesiredContainer] = []  # the full desired state
    # True: this coordinator takes partial statuses (``Status.partial``). An older one
    # does not say so, and its agents send it full ones only.
    partial_statuses: bool = False


class Desired(msgspec.Struct, frozen=True, kw_only=True, tag="desired", tag_field="type"):
    revision: int
    full: bool  # True: containers is the whole desired state; False: only what changed
    containers: list[DesiredContainer] = []
    removed: list[str] = []  # container ids no longer desired (with full=False)
    # With full=False: the revision this delta applies to. An agent that holds another
    # asks for the whole state (``Heartbeat.wants_full``). None from an older coordinator.
    since: Revision | None = None
    # A longer heartbeat interval and lease for this node, as the fleet grew; None: as
    # before. A delta may carry only these (no container changed). An older agent ignores
    # them and keeps the welcome's interval, which the coordinator's lease still covers.
    heartbeat_seconds: PaceSeconds | None = None
    lease_seconds: PaceSeconds | None = None


class Error(
    msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="type", omit_defaults=True
):
    code: Name
    message: Message
    # With ``code`` NOT_LEADER: the leader's URL ("" while the standby knows none). Left
    # out when empty, so the frames of protocol 1 are unchanged; an agent that does not
    # know the field ignores it and tries again later.
    leader: Message = ""


NOT_LEADER = "not_leader"  # a standby coordinator's answer to an agent

AgentFrame = Hello | Heartbeat | Status | Error
CoordinatorFrame = Welcome | Desired | Error
Frame = AgentFrame | CoordinatorFrame


class ProtocolError(Exception):
    """A frame that cannot be taken; ``code`` is one of ``frame_too_large``,
    ``not_msgpack``, ``unknown_type``, ``invalid_frame`` and ``invalid_inventory``.
    ``fault`` says where a frame that decodes as MessagePack is wrong, when it is."""

    def __init__(self, code: str, message: str, fault: FrameFault | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fault = fault


class InvalidInventory(ProtocolError):
    """A hello whose inventory breaks a rule; the message names the field, the value and
    the rule. ``sender`` is who said hello, so that is checked (and named) first."""

    def __init__(self, message: str, sender: HelloHead) -> None:
        super().__init__("invalid_inventory", message)
        self.sender = sender


def encode(frame: Frame) -> bytes:
    return to_msgpack(frame)


F = TypeVar("F")


class _Direction(Generic[F]):
    """Decodes the frames one side may receive, and names them in errors."""

    def __init__(self, decoder: msgspec.msgpack.Decoder[F], tags: tuple[str, ...]) -> None:
        self._decoder = decoder
        self._tags = tags

    def decode(self, data: bytes, max_bytes: int) -> F:
        if len(data) > max_bytes:
            raise ProtocolError(
                "frame_too_large", f"frame of {len(data)} bytes exceeds the limit of {max_bytes}"
            )
        try:
            return self._decoder.decode(data)
        except msgspec.ValidationError as error:
            raise self._explain(data, error) from error
        except (msgspec.DecodeError, UnicodeDecodeError) as error:  # a str not UTF-8
            raise ProtocolError(
                "not_msgpack", f"frame is not valid MessagePack: {error}"
            ) from error
        except RecursionError:
            # A few kilobytes of nested arrays reach the interpreter's recursion limit.
            raise ProtocolError("invalid_frame", "frame is nested too deeply") from None

    def _explain(self, data: bytes, error: msgspec.ValidationError) -> ProtocolError:
        text = str(error)
        if _TYPE_TAG_PATH.search(text):
            kind = _frame_type_of(data)
            expected = ", ".join(self._tags)
            return ProtocolError(
                "unknown_type", f"unknown frame type {shown(kind)}; expected one of {expected}"
            )
        return ProtocolError("invalid_frame", f"invalid frame: {text}", fault_of(data, error))


# msgspec reports a bad tag as "Invalid value 'x' - at `$.type`" (or a missing one as
# "Object missing required field `type`"); both mean we cannot tell what the frame is.
_TYPE_TAG_PATH = re.compile(r"at `\$\.type`|required field `type`")


def _frame_type_of(data: bytes) -> object:
    try:
        raw = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return raw.get("type") if isinstance(raw, dict) else None


_from_agent: _Direction[AgentFrame] = _Direction(
    msgpack_decoder(AgentFrame), ("hello", "heartbeat", "status", "error")
)
_from_coordinator: _Direction[CoordinatorFrame] = _Direction(
    msgpack_decoder(CoordinatorFrame), ("welcome", "desired", "error")
)


_decode_sender: msgspec.msgpack.Decoder[HelloHead] = msgpack_decoder(HelloHead)


def decode_from_agent(data: bytes, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> AgentFrame:
    """A frame the coordinator received; raises ``ProtocolError``, and
    ``InvalidInventory`` for a hello that is well-formed but for its inventory."""
    try:
        frame = _from_agent.decode(data, max_bytes)
    except ProtocolError as error:
        if error.fault is None or not _in_inventory(error.fault.path):
            raise
        try:
            sender = _decode_sender.decode(data)
        except msgspec.ValidationError:
            raise error from None  # who sent it is malformed too: a malformed frame
        raise InvalidInventory(str(error.fault), sender) from error
    if isinstance(frame, Hello) and (violations := inventory_violations(frame.inventory)):
        raise InvalidInventory(summary(violations), frame)
    return frame


def inventory_refusal(inventory: Inventory) -> str | None:
    """Why a coordinator would refuse a hello carrying ``inventory`` (the message of its
    ``invalid_inventory`` error), or None: for an agent to check what it would send."""
    hello = Hello(node="check", token="", protocol=PROTOCOL_VERSION, inventory=inventory)
    data = encode(hello)
    try:
        decode_from_agent(data, max_bytes=len(data))
    except InvalidInventory as error:
        return error.message
    return None


def _in_inventory(path: str) -> bool:
    return path == "inventory" or path.startswith(("inventory.", "inventory["))


def decode_from_coordinator(
    data: bytes, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> CoordinatorFrame:
    """A frame the agent received; raises ``ProtocolError``."""
    return _from_coordinator.decode(data, max_bytes)
