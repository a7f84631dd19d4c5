"""The agent <-> coordinator wire protocol: typed frames encoded as MessagePack.

One websocket per agent at ``/v1/agent`` with subprotocol ``allot.v1``; every binary
frame is one MessagePack map whose ``type`` field names the frame:

    agent -> coordinator: hello, heartbeat, status, error
    coordinator -> agent: welcome, desired, error

    frame = decode_from_agent(data, max_bytes=DEFAULT_MAX_FRAME_BYTES)   # -> AgentFrame
    data = encode(Welcome(node="n1", lease_seconds=15.0, heartbeat_seconds=5.0))

Unknown fields are ignored (a newer peer may add some); an unknown ``type``, a field of
the wrong type, a frame that is not MessagePack or is larger than the limit raises
``ProtocolError`` with a ``code`` and a message that says what was wrong.
"""

from __future__ import annotations

import re
from typing import Generic, Literal, TypeVar

import msgspec

from shared.codec import msgpack_decoder, to_msgpack
from shared.inventory import Inventory

PROTOCOL_VERSION = 1
SUBPROTOCOL = "allot.v1"
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The Docker settings that enforce a container's allocation (placement spec §7)."""

    cpuset_cpus: str = ""
    cpuset_mems: str = ""
    cpu_shares: int = 0
    cpu_quota: int = -1
    cpu_period: int = 100_000
    mem_limit: int = 0
    memswap_limit: int = 0
    mem_reservation: int = 0


RestartPolicy = Literal["no", "on-failure", "always", "unless-stopped"]


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
    restart_policy: RestartPolicy = "no"
    capacity: str = ""  # "in-quota" or "over-quota" when a quota governs it
    extended: dict[str, int] = {}  # named extended resources it holds, e.g. example.com/fpga
    # The id of a container on this node that this one replaces (placement spec 10): the
    # agent stops that one, starts this one, and reports how the swap went in `replacing`.
    replaces: str = ""


class ContainerStatus(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    state: str  # as Docker reports it (created, running, exited, ...), or missing / refused
    namespace: str = ""
    deployment: str = ""
    capacity: str = ""
    limits: Limits = Limits()  # as read back from the engine
    revision: int = 0  # the desired revision last applied to this container
    started_at: str = ""  # Docker's State.StartedAt
    exit_code: int | None = None
    error: str = ""
    # The hand-made changes the agent last put back, e.g. "cpu_shares 2 -> 717" or
    # "recreated (removed outside allot)", and when (Unix time, the agent's clock): each
    # correction has its own time, so the same change put back twice is told apart.
    drift: list[str] = []
    drift_at: float = 0.0
    # For a container that replaces another: "pending" while the swap is under way, "done"
    # once it has run for the agent's settle time (the old one stays stopped), "failed"
    # when it could not run (it was removed, the old one started again; `error` says why).
    replacing: str = ""
    cpu_usage: float | None = None  # cores used, averaged since the previous report
    memory_usage: int | None = None  # bytes, as the container's cgroup counts them now


class Hello(msgspec.Struct, frozen=True, kw_only=True, tag="hello", tag_field="type"):
    node: str
    token: str
    protocol: int
    inventory: Inventory
    agent_version: str = ""
    applied_revision: int = 0
    containers: list[ContainerStatus] = []


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True, tag="heartbeat", tag_field="type"):
    applied_revision: int = 0


class Status(msgspec.Struct, frozen=True, kw_only=True, tag="status", tag_field="type"):
    applied_revision: int
    containers: list[ContainerStatus] = []
    problems: list[str] = []  # non-empty: the node is degraded, for these reasons


class Welcome(msgspec.Struct, frozen=True, kw_only=True, tag="welcome", tag_field="type"):
    node: str
    lease_seconds: float
    heartbeat_seconds: float
    revision: int = 0
    containers: list[DesiredContainer] = []  # the full desired state


class Desired(msgspec.Struct, frozen=True, kw_only=True, tag="desired", tag_field="type"):
    revision: int
    full: bool  # True: containers is the whole desired state; False: only what changed
    containers: list[DesiredContainer] = []
    removed: list[str] = []  # container ids no longer desired (with full=False)


class Error(msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="type"):
    code: str
    message: str


AgentFrame = Hello | Heartbeat | Status | Error
CoordinatorFrame = Welcome | Desired | Error
Frame = AgentFrame | CoordinatorFrame


class ProtocolError(Exception):
    """A frame that cannot be taken; ``code`` is one of ``frame_too_large``,
    ``not_msgpack``, ``unknown_type`` and ``invalid_frame``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
        except msgspec.DecodeError as error:
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
                "unknown_type", f"unknown frame type {kind!r}; expected one of {expected}"
            )
        return ProtocolError("invalid_frame", f"invalid frame: {text}")


# msgspec reports a bad tag as "Invalid value 'x' - at `$.type`" (or a missing one as
# "Object missing required field `type`"); both mean we cannot tell what the frame is.
_TYPE_TAG_PATH = re.compile(r"at `\$\.type`|required field `type`")


def _frame_type_of(data: bytes) -> object:
    try:
        raw = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    return raw.get("type") if isinstance(raw, dict) else None


_from_agent: _Direction[AgentFrame] = _Direction(
    msgpack_decoder(AgentFrame), ("hello", "heartbeat", "status", "error")
)
_from_coordinator: _Direction[CoordinatorFrame] = _Direction(
    msgpack_decoder(CoordinatorFrame), ("welcome", "desired", "error")
)


def decode_from_agent(data: bytes, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> AgentFrame:
    """A frame the coordinator received; raises ``ProtocolError``."""
    return _from_agent.decode(data, max_bytes)


def decode_from_coordinator(
    data: bytes, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> CoordinatorFrame:
    """A frame the agent received; raises ``ProtocolError``."""
    return _from_coordinator.decode(data, max_bytes)
