"""The agent socket fuzzed: random MessagePack frames, shaped like each frame type or not,
sent over real sockets to a live coordinator (the aiohttp app on port 0, its SQLite store)
while API requests run beside them.

Frames start from well-formed hello, heartbeat, status and error maps and are then bent:
values swapped for extremes (huge and negative integers, NaN and infinities, long strings,
big lists) or for values of the wrong type, fields dropped or added, unknown types, deep
nesting, bytes that are not MessagePack, text frames. Whatever arrives:

- the coordinator logs no unhandled exception (nothing at ERROR);
- each socket is kept, or closed with one of the codes the agent hub documents;
- no API request (list nodes, a plan, a deploy), beside the agents or after them,
  answers 500;
- the node records in memory are exactly those in the store.

The examples are fixed (derandomized) and few enough to take well under a minute.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgpack
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from coordinator.agent_hub import CLOSE_REPLACED
from shared.bounds import MAX_MEMORY
from shared.codec import to_builtins
from tests.coordinator.conftest import JOIN_TOKEN, NAMESPACE, Coordinator
from tests.inventories import inventories

EXAMPLES = 200
DOCUMENTED_CLOSES = {
    aiohttp.WSCloseCode.UNSUPPORTED_DATA,  # 1003 text frame
    aiohttp.WSCloseCode.INVALID_TEXT,  # 1007 malformed frame
    aiohttp.WSCloseCode.POLICY_VIOLATION,  # 1008 refused
    aiohttp.WSCloseCode.MESSAGE_TOO_BIG,  # 1009 frame too large
    CLOSE_REPLACED,  # 4000: a newer session of the same node said hello
}
FRAME_LIMIT = 64 * 1024  # the test coordinator's max_frame_bytes
NODES = [f"fuzz-{i}" for i in range(4)]  # few, so that sessions replace one another
_numbers = itertools.count()

# --- values ---------------------------------------------------------------------------------

extreme_ints = st.sampled_from(
    [-1, 0, -5, 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, MAX_MEMORY + 1]
)
ints = extreme_ints | st.integers(min_value=-(2**63), max_value=2**64 - 1)
extreme_floats = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, -1e308, 5e-324])
floats = extreme_floats | st.floats()
long_texts = st.sampled_from([254, 4097, 20_000]).map(lambda n: "x" * n)
texts = st.text(max_size=12) | long_texts | st.sampled_from(["", "\x00", "é" * 300])
scalars = st.none() | st.booleans() | ints | floats | texts | st.binary(max_size=16)
any_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=8,
)
big_lists = st.sampled_from([65, 1_000, 20_000]).flatmap(
    lambda n: st.sampled_from([["p"] * n, [0] * n, [{}] * n])
)


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


deep_values = st.integers(min_value=2, max_value=400).map(_nested)
hostile = ints | floats | texts | any_values | big_lists | deep_values


# --- frames ---------------------------------------------------------------------------------


def container_statuses() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"id": st.sampled_from(["c-1", "c-2"]), "state": st.sampled_from(["running", "exited"])},
        optional={
            "revision": st.integers(min_value=0, max_value=9),
            "exit_code": st.integers(min_value=0, max_value=255),
            "error": st.text(max_size=20),
            "drift": st.lists(st.sampled_from(["cpu_shares 2 -> 717"]), max_size=2),
            "drift_at": st.floats(min_value=0, max_value=2e9),
            "replacing": st.sampled_from(["", "pending", "done", "failed"]),
            "cpu_usage": st.floats(min_value=0, max_value=64),
            "memory_usage": st.integers(min_value=0, max_value=2**40),
        },
    )


def hellos(node: str) -> st.SearchStrategy[dict[str, Any]]:
    """Hellos the coordinator takes, mostly of healthy hosts with room for a container
    or two, so that what is bent in them matters to placement (NUMA nodes without memory
    of their own stay within any host's)."""
    roomy = st.builds(
        lambda inventory, memory: msgspec.structs.replace(
            inventory,
            memory=memory,
            numa_nodes=[msgspec.structs.replace(n, memory=0) for n in inventory.numa_nodes],
            problems=[],
        ),
        inventories(),
        st.integers(min_value=2**30, max_value=2**40),
    )
    return (roomy | roomy | inventories()).map(
        lambda inventory: {
            "type": "hello",
            "node": node,
            "token": JOIN_TOKEN,
            "protocol": 1,
            "inventory": to_builtins(inventory),
            "agent_version": "fuzz",
        }
    )


well_formed: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "heartbeat": st.fixed_dictionaries(
        {"type": st.just("heartbeat"), "applied_revision": st.integers(min_value=0, max_value=9)}
    ),
    "status": st.fixed_dictionaries(
        {
            "type": st.just("status"),
            "applied_revision": st.integers(min_value=0, max_value=9),
            "containers": st.lists(container_statuses(), max_size=2),
            "problems": st.lists(st.sampled_from(["docker: engine down"]), max_size=1),
        }
    ),
    "error": st.fixed_dictionaries(
        {"type": st.just("error"), "code": st.just("bad_desired"), "message": texts}
    ),
    "unknown": st.fixed_dictionaries({"type": texts, "payload": any_values}),
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a frame a value sits at: map keys and list positions."""
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:8]):
            yield from _paths(inner, (*prefix, index))


@st.composite
def bent(draw: st.DrawFn, frame: dict[str, Any]) -> dict[str, Any]:
    """``frame`` with one to three places changed: a number swapped for an extreme one,
    any value swapped for a hostile one, a field dropped, or a field added."""
    # Hypothesis favours the first of a list; a field is picked uniformly instead, and
    # each field as likely as any other, however long the lists it sits in.
    pick = draw(st.randoms(use_true_random=False)).choice
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = list(_paths(frame))[1:]
        action = draw(st.sampled_from(["number", "number", "swap", "drop", "add"]))
        if action == "number":
            paths = [path for path in paths if _number(_at(frame, path))]
        if not paths:
            continue
        kind = pick(sorted({_kind(path) for path in paths}))
        path = pick([path for path in paths if _kind(path) == kind])
        *where, last = path
        parent = _at(frame, tuple(where))
        if action in ("number", "swap"):
            parent[last] = draw(extreme_ints | extreme_floats if action == "number" else hostile)
        elif action == "drop" and isinstance(parent, dict) and last != "type":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(texts)] = draw(hostile)
    return frame


def _at(frame: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        frame = frame[step]
    return frame


def _kind(path: tuple[Any, ...]) -> str:
    """A path with its list positions left out: "inventory.cpus.[].numa"."""
    return ".".join("[]" if isinstance(step, int) else str(step) for step in path)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _packed(frame: dict[str, Any]) -> bytes:
    return bytes(msgpack.packb(frame))


def _deep_status(depth: int) -> bytes:
    """A status whose containers field is ``depth`` arrays deep: tiny, but very deep."""
    head = _packed({"type": "status", "applied_revision": 0})  # a map of two: make it three
    key = bytes(msgpack.packb("containers"))
    return bytes([head[0] + 1]) + head[1:] + key + b"\x91" * depth + b"\xc0"


Outgoing = bytes | str  # a binary frame, or a text frame


def frames_after_hello() -> st.SearchStrategy[Outgoing]:
    shaped = st.sampled_from(sorted(well_formed)).flatmap(lambda kind: well_formed[kind])
    oversized = {"type": "status", "applied_revision": 0, "problems": ["x" * FRAME_LIMIT]}
    fatal = st.one_of(
        st.integers(min_value=1_000, max_value=20_000).map(_deep_status),
        st.just(_packed(oversized)),
        st.binary(max_size=64),
        any_values.map(lambda value: bytes(msgpack.packb(value))),
        st.just('{"type": "heartbeat"}'),
    )
    # Mostly frames a session lives on after, so that later ones are acted on too.
    return st.one_of(
        shaped.map(_packed), shaped.map(_packed), shaped.flatmap(bent).map(_packed), fatal
    )


@dataclass
class Session:
    node: str
    frames: list[Outgoing]


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    node = draw(st.sampled_from(NODES))
    first = draw(
        st.one_of(
            hellos(node).map(_packed),
            hellos(node).flatmap(bent).map(_packed),
            hellos(node).flatmap(bent).map(_packed),  # twice: most first frames are hellos
            frames_after_hello(),
        )
    )
    more = draw(st.lists(frames_after_hello(), max_size=4))
    return Session(node, [first, *more])


@dataclass
class Scenario:
    sessions: list[Session]
    requests: list[str]


scenarios = st.builds(
    Scenario,
    st.lists(sessions(), min_size=1, max_size=3),
    st.lists(st.sampled_from(["nodes", "plan", "deploy"]), max_size=3),
)

# --- running one ----------------------------------------------------------------------------


async def _play(coordinator: Coordinator, session: Session) -> int | None:
    """Send the session's frames, then a probe: an unknown frame type, which a live
    session answers with an error frame. None if the socket was kept, else its close."""
    ws = await coordinator.connect()
    probe = f"probe-{next(_numbers)}"
    try:
        for frame in [*session.frames, _packed({"type": probe})]:
            if ws.closed:
                break
            try:
                await (ws.send_str(frame) if isinstance(frame, str) else ws.send_bytes(frame))
            except ConnectionError:
                break
        while True:
            message = await ws.receive(timeout=10)
            if message.type != aiohttp.WSMsgType.BINARY:
                return ws.close_code
            answer = msgpack.unpackb(message.data, strict_map_key=False)
            if answer.get("code") == "unknown_type" and probe in answer.get("message", ""):
                return None
    finally:
        await ws.close()


async def _request(coordinator: Coordinator, kind: str) -> tuple[str, int, Any]:
    if kind == "nodes":
        status, body = await coordinator.call("GET", "/v1/nodes")
    elif kind == "plan":
        plan = {"request": {"cpu": "0.1", "memory": "16Mi"}, "count": 1}
        status, body = await coordinator.call("POST", "/v1/plans", plan)
    else:
        spec = {
            "name": f"fuzz-{next(_numbers)}",
            "image": "busybox",
            "count": 1,
            "resources": {"cpu": "0.1", "memory": "16Mi"},
        }
        status, body = await coordinator.call(
            "POST", f"/v1/namespaces/{NAMESPACE}/deployments", spec
        )
    return kind, status, body


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def errors_logged() -> Iterator[_Errors]:
    """Every record at ERROR or above from any logger (allot's, aiohttp's, asyncio's)."""
    handler = _Errors()
    root, allot = logging.getLogger(), logging.getLogger("allot")
    propagate = allot.propagate
    allot.propagate = True
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    allot.propagate = propagate


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one coordinator for every example, on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(scenarios)
async def test_whatever_agents_send_harms_nobody(
    cluster: Coordinator, errors_logged: _Errors, scenario: Scenario
) -> None:
    played = asyncio.gather(*(_play(cluster, session) for session in scenario.sessions))
    asked = asyncio.gather(*(_request(cluster, kind) for kind in scenario.requests))
    closes, answers = await asyncio.gather(played, asked)
    await cluster.settled()
    answers += await asyncio.gather(*(_request(cluster, kind) for kind in ("plan", "deploy")))
    for code in closes:
        event(f"socket {'kept' if code is None else f'closed {code}'}")
    for kind, status, _ in answers:
        event(f"{kind} {status}")
    assert [r.getMessage() for r in errors_logged.records] == []
    assert all(code is None or code in DOCUMENTED_CLOSES for code in closes), closes
    for kind, status, body in answers:
        assert status < 500, (kind, status, body)
    await cluster.assert_nodes_match_store()
