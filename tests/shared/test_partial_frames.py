"""Partial statuses on the wire, as a plain MessagePack peer writes and reads them: a
status without the fields (an older agent) is a full one, a welcome without the field
(an older coordinator) takes none, and the gone ids are checked like every other field."""

from __future__ import annotations

import msgpack
import pytest

from shared.protocol import (
    MAX_CONTAINERS,
    ContainerStatus,
    ProtocolError,
    Status,
    Welcome,
    decode_from_agent,
    decode_from_coordinator,
    encode,
)
from tests.shared.test_protocol import packb


def test_a_plain_peer_sends_a_partial_status() -> None:
    data = packb(
        {
            "type": "status",
            "applied_revision": 7,
            "listed_after": 7,
            "partial": True,
            "containers": [{"id": "c-2", "state": "exited", "exit_code": 1}],
            "gone": ["c-1"],
        }
    )
    assert decode_from_agent(data) == Status(
        applied_revision=7,
        listed_after=7,
        partial=True,
        containers=[ContainerStatus(id="c-2", state="exited", exit_code=1)],
        gone=["c-1"],
    )


def test_an_older_agents_status_is_a_full_listing() -> None:
    data = packb({"type": "status", "applied_revision": 1, "containers": []})
    frame = decode_from_agent(data)
    assert isinstance(frame, Status)
    assert (frame.partial, frame.gone) == (False, [])


def test_our_partial_status_reads_back_in_plain_msgpack() -> None:
    frame = Status(applied_revision=2, partial=True, gone=["a", "b"])
    decoded = msgpack.unpackb(encode(frame))
    assert (decoded["type"], decoded["partial"], decoded["gone"]) == ("status", True, ["a", "b"])
    assert decoded["containers"] == []


def test_the_welcome_says_whether_partial_statuses_are_taken() -> None:
    said = Welcome(node="n", lease_seconds=3.0, heartbeat_seconds=1.0, partial_statuses=True)
    assert msgpack.unpackb(encode(said))["partial_statuses"] is True
    older = packb({"type": "welcome", "node": "n", "lease_seconds": 3.0, "heartbeat_seconds": 1.0})
    frame = decode_from_coordinator(older)
    assert isinstance(frame, Welcome)
    assert frame.partial_statuses is False


@pytest.mark.parametrize(
    ("gone", "problem"),
    [
        ([1], "Expected `str`"),
        (["x" * 1000], "length <= "),
        (["c"] * (MAX_CONTAINERS + 1), f"length <= {MAX_CONTAINERS}"),
        ("c-1", "Expected `array`"),
    ],
    ids=["not-a-string", "long-id", "too-many", "not-a-list"],
)
def test_bad_gone_ids_are_an_invalid_frame_naming_the_field(gone: object, problem: str) -> None:
    data = packb({"type": "status", "applied_revision": 1, "partial": True, "gone": gone})
    with pytest.raises(ProtocolError) as caught:
        decode_from_agent(data)
    assert caught.value.code == "invalid_frame"
    assert problem in caught.value.message
    assert "gone" in caught.value.message
