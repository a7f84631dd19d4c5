"""shared.protocol: typed MessagePack frames between agent and coordinator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from shared.cpuset import CpuSet
from shared.inventory import Cpu, Gpu, Inventory, MigDevice, NumaNode
from shared.protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    Attempt,
    ContainerStatus,
    Desired,
    DesiredContainer,
    Error,
    Frame,
    Heartbeat,
    Hello,
    Limits,
    ProtocolError,
    Status,
    Welcome,
    decode_from_agent,
    decode_from_coordinator,
    encode,
)

GiB = 1024**3
Decoder = Callable[[bytes], Frame]
AGENT_TYPES = "hello, heartbeat, status, error"
COORDINATOR_TYPES = "welcome, desired, error"


def from_agent(data: bytes) -> Frame:
    return decode_from_agent(data)


def from_coordinator(data: bytes) -> Frame:
    return decode_from_coordinator(data)


def packb(value: object) -> bytes:
    """A frame as any other MessagePack implementation would write it."""
    return bytes(msgpack.packb(value))


def unpackb(data: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = msgpack.unpackb(data, strict_map_key=False)
    return decoded


def two_socket_inventory() -> Inventory:
    """Two packages with SMT, two NUMA nodes, one A100 with MIG and one without."""
    cpus = [Cpu(id=i, core=i % 4 + 8 * (i // 8), package=i // 8, numa=i // 8) for i in range(16)]
    mig = [
        MigDevice(
            uuid="MIG-1b2c3d4e-0000-5555-aaaa-000000000001",
            profile="3g.40gb",
            gpu_instance_id=1,
            compute_instance_id=0,
            memory=40 * GiB,
        ),
        MigDevice(
            uuid="MIG-1b2c3d4e-0000-5555-aaaa-000000000002",
            profile="1g.10gb+me",
            gpu_instance_id=9,
            compute_instance_id=0,
            memory=10 * GiB,
        ),
    ]
    return Inventory(
        hostname="gpu-07.example",
        cpus=cpus,
        online=CpuSet.parse("0-15"),
        isolated=CpuSet.parse("15"),
        reserved=CpuSet.parse("0,8"),
        numa_nodes=[
            NumaNode(id=0, cpus=CpuSet.parse("0-7"), memory=64 * GiB, distances={0: 10, 1: 21}),
            NumaNode(id=1, cpus=CpuSet.parse("8-15"), memory=64 * GiB, distances={0: 21, 1: 10}),
        ],
        memory=128 * GiB,
        gpus=[
            Gpu(
                index=0,
                uuid="GPU-aaaaaaaa-1111-2222-3333-444444444444",
                name="NVIDIA A100-SXM4-80GB",
                memory=80 * GiB,
                pci_bus_id="0000:3b:00.0",
                numa=0,
                mig_enabled=True,
                mig_devices=mig,
            ),
            Gpu(
                index=1,
                uuid="GPU-bbbbbbbb-1111-2222-3333-444444444444",
                name="NVIDIA A100-SXM4-80GB",
                memory=80 * GiB,
                pci_bus_id="0000:af:00.0",
                numa=None,
                mig_enabled=False,
            ),
        ],
        driver_version="550.54.15",
        problems=["gpu 1: no NUMA affinity reported"],
    )


LIMITS = Limits(
    cpuset_cpus="1-3",
    cpuset_mems="0",
    cpu_shares=300,
    cpu_quota=150_000,
    mem_limit=2 * GiB,
    memswap_limit=2 * GiB,
    mem_reservation=GiB,
)
CONTAINER = DesiredContainer(
    id="c-1",
    image="registry.example/train:1.2",
    command=["python", "-m", "train", "--epochs=3"],
    env={"CUDA_VISIBLE_DEVICES": "0", "EMPTY": ""},
    labels={"allot.lease": "l-9"},
    limits=LIMITS,
    gpus=["MIG-1b2c3d4e-0000-5555-aaaa-000000000001"],
)
STATUSES = [
    ContainerStatus(id="c-1", state="running", limits=LIMITS),
    ContainerStatus(id="c-2", state="exited", exit_code=137, error="OOM killed"),
    ContainerStatus(
        id="c-3",
        state="failed",
        error="create failed: No such image: x (try 2 in a row; the next 2s after it)",
        attempt=Attempt(
            outcome="failed", reason="create failed: No such image: x", number=2, at=1.7e9
        ),
    ),
]

AGENT_FRAMES: list[tuple[str, Frame]] = [
    (
        "hello",
        Hello(
            node="gpu-07",
            token="t" * 32,
            protocol=1,
            inventory=two_socket_inventory(),
            agent_version="0.1.0",
            applied_revision=4,
            containers=STATUSES,
        ),
    ),
    ("hello-minimal", Hello(node="n", token="t", protocol=1, inventory=two_socket_inventory())),
    ("heartbeat", Heartbeat(applied_revision=12)),
    ("heartbeat-default", Heartbeat()),
    ("status", Status(applied_revision=5, containers=STATUSES, problems=["disk full"])),
    ("error", Error(code="bad_desired", message="image missing")),
]
COORDINATOR_FRAMES: list[tuple[str, Frame]] = [
    (
        "welcome",
        Welcome(
            node="gpu-07",
            lease_seconds=15.0,
            heartbeat_seconds=5.0,
            revision=3,
            containers=[CONTAINER],
        ),
    ),
    ("welcome-minimal", Welcome(node="n", lease_seconds=1.5, heartbeat_seconds=0.5)),
    ("desired-full", Desired(revision=7, full=True, containers=[CONTAINER])),
    ("desired-delta", Desired(revision=8, full=False, removed=["c-0"])),
    ("error", Error(code="lease_expired", message="node was lost")),
]


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame", [f for _, f in AGENT_FRAMES], ids=[name for name, _ in AGENT_FRAMES]
)
def test_agent_frames_round_trip(frame: Frame) -> None:
    decoded = decode_from_agent(encode(frame))
    assert decoded == frame
    assert type(decoded) is type(frame)


@pytest.mark.parametrize(
    "frame", [f for _, f in COORDINATOR_FRAMES], ids=[name for name, _ in COORDINATOR_FRAMES]
)
def test_coordinator_frames_round_trip(frame: Frame) -> None:
    decoded = decode_from_coordinator(encode(frame))
    assert decoded == frame
    assert type(decoded) is type(frame)


def test_inventory_cpusets_come_back_as_cpusets() -> None:
    frame = decode_from_agent(encode(AGENT_FRAMES[0][1]))
    assert isinstance(frame, Hello)
    assert isinstance(frame.inventory.online, CpuSet)
    assert frame.inventory.offered() == CpuSet.parse("1-7,9-14")
    assert frame.inventory.mig_device_count() == 2
    assert frame.inventory.core_count() == 8
    assert frame.inventory.package_count() == 2


# --- interoperability with the plain msgpack package -------------------------------------


def test_frame_written_by_plain_msgpack_decodes() -> None:
    data = packb(
        {
            "type": "desired",
            "revision": 9,
            "full": False,
            "containers": [
                {"id": "c-5", "image": "busybox", "limits": {"cpuset_cpus": "4-5", "cpu_quota": 5}}
            ],
            "removed": ["c-4"],
        }
    )
    assert decode_from_coordinator(data) == Desired(
        revision=9,
        full=False,
        containers=[
            DesiredContainer(
                id="c-5", image="busybox", limits=Limits(cpuset_cpus="4-5", cpu_quota=5)
            )
        ],
        removed=["c-4"],
    )


def test_a_desired_container_carries_its_identity_pool_and_restart_policy() -> None:
    container: dict[str, Any] = {
        "id": "c-6",
        "image": "busybox",
        "namespace": "team-a",
        "deployment": "web",
        "shared_pool": True,
        "gpus": ["GPU-1"],
        "restart_policy": "on-failure",
        "capacity": "over-quota",
    }
    data = packb({"type": "desired", "revision": 3, "full": True, "containers": [container]})
    frame = decode_from_coordinator(data)
    assert isinstance(frame, Desired)
    assert frame.containers == [DesiredContainer(**container)]


def test_a_desired_container_carries_its_stop_timeout_and_an_older_one_none() -> None:
    timed = {"id": "c-8", "image": "busybox", "stop_timeout_seconds": 2}
    older = {"id": "c-9", "image": "busybox"}  # from a coordinator without the field
    data = packb({"type": "desired", "revision": 3, "full": True, "containers": [timed, older]})
    frame = decode_from_coordinator(data)
    assert isinstance(frame, Desired)
    assert [c.stop_timeout_seconds for c in frame.containers] == [2, None]


@pytest.mark.parametrize("timeout", [-1, 3601, "10", 2.5])
def test_a_stop_timeout_out_of_bounds_is_an_invalid_frame(timeout: object) -> None:
    container = {"id": "c-10", "image": "busybox", "stop_timeout_seconds": timeout}
    data = packb({"type": "desired", "revision": 3, "full": True, "containers": [container]})
    with pytest.raises(ProtocolError) as raised:
        decode_from_coordinator(data)
    assert raised.value.code == "invalid_frame"
    assert "stop_timeout_seconds" in raised.value.message


def test_an_unknown_restart_policy_is_an_invalid_frame() -> None:
    container = {"id": "c-7", "image": "busybox", "restart_policy": "sometimes"}
    data = packb({"type": "desired", "revision": 3, "full": True, "containers": [container]})
    with pytest.raises(ProtocolError) as raised:
        decode_from_coordinator(data)
    assert raised.value.code == "invalid_frame"
    assert "restart_policy" in raised.value.message


def test_hello_written_by_plain_msgpack_parses_cpu_lists() -> None:
    data = packb(
        {
            "type": "hello",
            "node": "n1",
            "token": "secret",
            "protocol": 1,
            "inventory": {
                "hostname": "n1",
                "cpus": [{"id": 0, "core": 0, "package": 0, "numa": 0}],
                "online": "0",
                "isolated": "",
                "reserved": "",
                "numa_nodes": [{"id": 0, "cpus": "0", "memory": 1024, "distances": {0: 10}}],
                "memory": 1024,
            },
        }
    )
    frame = decode_from_agent(data)
    assert isinstance(frame, Hello)
    assert frame.inventory.online == CpuSet([0])
    assert frame.inventory.numa_nodes[0].distances == {0: 10}
    assert frame.inventory.gpus == []


def test_our_frame_read_by_plain_msgpack() -> None:
    hello = AGENT_FRAMES[0][1]
    raw = unpackb(encode(hello))
    assert raw["type"] == "hello"
    assert raw["node"] == "gpu-07"
    assert raw["protocol"] == 1
    assert raw["applied_revision"] == 4
    inventory = raw["inventory"]
    assert inventory["online"] == "0-15"
    assert inventory["isolated"] == "15"
    assert inventory["reserved"] == "0,8"
    assert inventory["numa_nodes"][1]["cpus"] == "8-15"
    assert inventory["numa_nodes"][1]["distances"] == {0: 21, 1: 10}
    assert inventory["gpus"][0]["mig_devices"][1]["profile"] == "1g.10gb+me"
    assert inventory["gpus"][1]["numa"] is None
    assert raw["containers"][1] == {
        "id": "c-2",
        "state": "exited",
        "namespace": "",
        "deployment": "",
        "capacity": "",
        "revision": 0,
        "started_at": "",
        "drift": [],
        "drift_at": 0.0,
        "replacing": "",
        "cpu_usage": None,
        "memory_usage": None,
        "attempt": None,
        "cpu_pressure": None,
        "limits": {
            "cpuset_cpus": "",
            "cpuset_mems": "",
            "cpu_shares": 0,
            "cpu_quota": -1,
            "cpu_period": 100_000,
            "mem_limit": 0,
            "memswap_limit": 0,
            "mem_reservation": 0,
        },
        "exit_code": 137,
        "error": "OOM killed",
    }


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (
            Heartbeat(applied_revision=2, acknowledged_revision=3),
            {
                "type": "heartbeat",
                "applied_revision": 2,
                "acknowledged_revision": 3,
                "wants_full": False,
            },
        ),
        (
            Welcome(node="n", lease_seconds=15.0, heartbeat_seconds=5.0),
            {
                "type": "welcome",
                "node": "n",
                "lease_seconds": 15.0,
                "heartbeat_seconds": 5.0,
                "revision": 0,
                "containers": [],
                "partial_statuses": False,
            },
        ),
        (Error(code="x", message="y"), {"type": "error", "code": "x", "message": "y"}),
        (
            Error(code="not_leader", message="a standby", leader="http://c2:7600"),
            {
                "type": "error",
                "code": "not_leader",
                "message": "a standby",
                "leader": "http://c2:7600",
            },
        ),
    ],
    ids=["heartbeat", "welcome", "error", "error-naming-the-leader"],
)
def test_encoded_frame_is_a_map_with_its_type(frame: Frame, expected: dict[str, Any]) -> None:
    assert unpackb(encode(frame)) == expected


def test_a_standby_naming_the_leader_is_understood_and_an_old_error_has_no_leader() -> None:
    named = packb({"type": "error", "code": "not_leader", "message": "m", "leader": "http://c:1"})
    assert decode_from_coordinator(named) == Error(
        code="not_leader", message="m", leader="http://c:1"
    )
    plain = packb({"type": "error", "code": "x", "message": "m"})
    assert decode_from_coordinator(plain) == Error(code="x", message="m", leader="")


def test_an_older_agent_acknowledges_nothing_and_lists_after_no_revision() -> None:
    """Protocol 1 without the start fence's fields: a plain peer's frames still decode,
    to the values that tell the coordinator not to wait for it nor trust its list."""
    assert decode_from_agent(packb({"type": "heartbeat", "applied_revision": 4})) == Heartbeat(
        applied_revision=4, acknowledged_revision=0
    )
    status = decode_from_agent(packb({"type": "status", "applied_revision": 4}))
    assert isinstance(status, Status)
    assert status.listed_after == 0
    said = packb({"type": "status", "applied_revision": 4, "listed_after": 9})
    assert decode_from_agent(said) == Status(applied_revision=4, listed_after=9)


def test_a_negative_acknowledged_revision_is_an_invalid_frame() -> None:
    data = packb({"type": "heartbeat", "acknowledged_revision": -1})
    with pytest.raises(ProtocolError) as caught:
        decode_from_agent(data)
    assert caught.value.code == "invalid_frame"
    assert "acknowledged_revision" in caught.value.message


def test_unknown_fields_are_ignored() -> None:
    data = packb(
        {
            "type": "heartbeat",
            "applied_revision": 3,
            "load_average": [0.5, 0.25],
            "future": {"nested": {"deeper": [1, "two", None]}},
        }
    )
    assert decode_from_agent(data) == Heartbeat(applied_revision=3)


def test_unknown_fields_nested_in_known_structs_are_ignored() -> None:
    data = packb(
        {
            "type": "status",
            "applied_revision": 1,
            "containers": [{"id": "c", "state": "running", "health": "ok"}],
        }
    )
    assert decode_from_agent(data) == Status(
        applied_revision=1, containers=[ContainerStatus(id="c", state="running")]
    )


# --- errors ------------------------------------------------------------------------------


def decode_error(decode: Decoder, data: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        decode(data)
    assert str(caught.value) == caught.value.message
    return caught.value


@pytest.mark.parametrize(
    ("decode", "frame", "type_repr", "expected_types"),
    [
        (from_agent, {"type": "bogus"}, "'bogus'", AGENT_TYPES),
        (from_coordinator, {"type": "bogus"}, "'bogus'", COORDINATOR_TYPES),
        (from_agent, {"type": "welcome", "node": "n"}, "'welcome'", AGENT_TYPES),
        (from_agent, {"type": "desired", "revision": 1, "full": True}, "'desired'", AGENT_TYPES),
        (from_coordinator, {"type": "hello"}, "'hello'", COORDINATOR_TYPES),
        (from_coordinator, {"type": "heartbeat"}, "'heartbeat'", COORDINATOR_TYPES),
        (
            from_coordinator,
            {"type": "status", "applied_revision": 1},
            "'status'",
            COORDINATOR_TYPES,
        ),
        (from_agent, {"applied_revision": 1}, "None", AGENT_TYPES),
        (from_coordinator, {}, "None", COORDINATOR_TYPES),
        (from_agent, {"type": 7}, "7", AGENT_TYPES),
        (from_agent, {"type": "HELLO"}, "'HELLO'", AGENT_TYPES),
    ],
    ids=[
        "unknown-to-coordinator",
        "unknown-to-agent",
        "welcome-to-coordinator",
        "desired-to-coordinator",
        "hello-to-agent",
        "heartbeat-to-agent",
        "status-to-agent",
        "missing-type",
        "empty-map",
        "type-not-a-string",
        "type-is-case-sensitive",
    ],
)
def test_unknown_type(
    decode: Decoder, frame: dict[str, object], type_repr: str, expected_types: str
) -> None:
    error = decode_error(decode, packb(frame))
    assert error.code == "unknown_type"
    assert error.message == f"unknown frame type {type_repr}; expected one of {expected_types}"


@pytest.mark.parametrize(
    ("decode", "frame", "path", "problem"),
    [
        (
            from_agent,
            {"type": "hello", "node": "n", "token": "t", "protocol": "1", "inventory": {}},
            "$.protocol",
            "Expected `int`, got `str`",
        ),
        (from_agent, {"type": "heartbeat", "applied_revision": 1.5}, "$.applied_revision", "int"),
        (
            from_agent,
            {"type": "status", "applied_revision": 1, "containers": [{"id": "c", "state": 3}]},
            "$.containers[0].state",
            "Expected `str`, got `int`",
        ),
        (from_agent, {"type": "status"}, "", "missing required field `applied_revision`"),
        (
            from_coordinator,
            {"type": "welcome", "node": "n", "lease_seconds": "15", "heartbeat_seconds": 5.0},
            "$.lease_seconds",
            "Expected `float`, got `str`",
        ),
        (
            from_coordinator,
            {"type": "desired", "revision": 1, "full": "yes"},
            "$.full",
            "Expected `bool`, got `str`",
        ),
    ],
    ids=[
        "protocol-as-string",
        "revision-as-float",
        "nested-field",
        "missing-field",
        "lease-as-string",
        "full-as-string",
    ],
)
def test_invalid_frame_names_the_field(
    decode: Decoder, frame: dict[str, object], path: str, problem: str
) -> None:
    error = decode_error(decode, packb(frame))
    assert error.code == "invalid_frame"
    assert error.message.startswith("invalid frame: ")
    assert problem in error.message
    if path:
        assert error.message.endswith(f"at `{path}`")


def test_bad_cpu_list_in_inventory_is_an_invalid_inventory() -> None:
    raw = unpackb(encode(AGENT_FRAMES[0][1]))
    raw["inventory"]["reserved"] = "3-1"
    error = decode_error(from_agent, packb(raw))
    assert error.code == "invalid_inventory"
    assert error.message.startswith("inventory.reserved = '3-1': ")
    assert "descending range" in error.message


@pytest.mark.parametrize("decode", [from_agent, from_coordinator], ids=["agent", "coordinator"])
@pytest.mark.parametrize(
    "value",
    [[1, 2, 3], "hello", 5, None, b"\x01"],
    ids=["array", "string", "int", "nil", "bin"],
)
def test_not_a_map_is_an_invalid_frame(decode: Decoder, value: object) -> None:
    error = decode_error(decode, packb(value))
    assert error.code == "invalid_frame"
    assert "Expected `object`" in error.message


@pytest.mark.parametrize("decode", [from_agent, from_coordinator], ids=["agent", "coordinator"])
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        b"\x81\xa4type",
        packb({"type": "error", "code": "c", "message": "m"}) + b"\x00",
        b"\x81\xa4type\xa5he\xffo",
    ],
    ids=["empty", "reserved-byte", "truncated", "trailing-bytes", "invalid-utf8"],
)
def test_not_msgpack(decode: Decoder, data: bytes) -> None:
    error = decode_error(decode, data)
    assert error.code == "not_msgpack"
    assert error.message.startswith("frame is not valid MessagePack: ")


@pytest.mark.parametrize(
    "decode",
    [decode_from_agent, decode_from_coordinator],
    ids=["agent", "coordinator"],
)
def test_oversized_frame_is_refused_before_decoding(decode: Callable[..., Frame]) -> None:
    garbage = b"\xc1" * 101  # would be "not_msgpack" if it were decoded at all
    with pytest.raises(ProtocolError) as caught:
        decode(garbage, max_bytes=100)
    assert caught.value.code == "frame_too_large"
    assert caught.value.message == "frame of 101 bytes exceeds the limit of 100"


def test_frame_exactly_at_the_limit_is_taken() -> None:
    data = encode(Heartbeat(applied_revision=1))
    assert decode_from_agent(data, max_bytes=len(data)) == Heartbeat(applied_revision=1)
    with pytest.raises(ProtocolError) as caught:
        decode_from_agent(data, max_bytes=len(data) - 1)
    assert caught.value.code == "frame_too_large"
    assert str(len(data)) in caught.value.message


def test_default_limit_applies() -> None:
    padded = packb({"type": "error", "code": "x", "message": "m" * DEFAULT_MAX_FRAME_BYTES})
    with pytest.raises(ProtocolError) as caught:
        decode_from_coordinator(padded)
    assert caught.value.code == "frame_too_large"
    assert f"limit of {DEFAULT_MAX_FRAME_BYTES}" in caught.value.message


def deeply_nested(depth: int) -> bytes:
    """A MessagePack value of ``depth`` one-element arrays around nil: tiny, but deep."""
    return b"\x91" * depth + b"\xc0"


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (from_agent, b"\x82\xa4type\xa9heartbeat\xa6future" + deeply_nested(5000)),
        (from_coordinator, b"\x82\xa6future" + deeply_nested(5000) + b"\xa4type\xa5bogus"),
        (from_agent, b"\x81\xa4type" + deeply_nested(5000)),
    ],
    ids=["deep-unknown-field", "deep-field-before-type", "deep-type-value"],
)
def test_deeply_nested_frame_is_a_protocol_error(decode: Decoder, data: bytes) -> None:
    # Five kilobytes, far below the frame limit: a peer must not be able to make the
    # decoder fail with anything but ProtocolError.
    error = decode_error(decode, data)
    assert error.code in {"invalid_frame", "unknown_type", "not_msgpack"}


# --- properties --------------------------------------------------------------------------

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
frame_like_maps = st.dictionaries(
    st.sampled_from(
        (
            "type",
            "node",
            "token",
            "protocol",
            "inventory",
            "applied_revision",
            "containers",
            "revision",
            "full",
            "removed",
            "code",
            "message",
            "lease_seconds",
            "heartbeat_seconds",
        )
    ),
    msgpack_values,
    max_size=6,
).flatmap(
    lambda body: st.sampled_from(
        ("hello", "heartbeat", "status", "welcome", "desired", "error", "other")
    ).map(lambda kind: {**body, "type": kind})
)


def outcome(decode: Decoder, data: bytes) -> str:
    """ "decoded", or the code of the ProtocolError; any other exception propagates."""
    try:
        decode(data)
    except ProtocolError as error:
        return error.code if error.message else "protocol error without a message"
    return "decoded"


def decodes_or_protocol_error(data: bytes) -> None:
    for decode in (from_agent, from_coordinator):
        assert outcome(decode, data) in {
            "decoded",
            "not_msgpack",
            "unknown_type",
            "invalid_frame",
            "invalid_inventory",
        }


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=256))
@example(b"\x81\xa1\x80\x01")  # a map whose key is not UTF-8
@example(b"\x82\xa1a\x01\xa1\x80\x01")  # ... after a key that is
def test_arbitrary_bytes_only_ever_raise_protocol_error(data: bytes) -> None:
    decodes_or_protocol_error(data)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(msgpack_values)
def test_arbitrary_msgpack_values_only_ever_raise_protocol_error(value: object) -> None:
    decodes_or_protocol_error(packb(value))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(frame_like_maps)
def test_frame_like_maps_only_ever_raise_protocol_error(frame: dict[str, object]) -> None:
    decodes_or_protocol_error(packb(frame))


def test_an_unknown_type_is_quoted_cut_short() -> None:
    error = decode_error(from_agent, packb({"type": "t" * 50_000}))
    assert error.code == "unknown_type"
    assert error.message == f"unknown frame type '{'t' * 76}...; expected one of {AGENT_TYPES}"
