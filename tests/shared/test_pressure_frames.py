"""The CPU pressure fields of the status frame, as a plain MessagePack peer writes them:
optional, so a status without them (an older agent) still decodes, and checked like
every other field."""

from __future__ import annotations

import math

import msgpack
import pytest

from shared.protocol import (
    ContainerStatus,
    CpuPressure,
    ProtocolError,
    Status,
    decode_from_agent,
    encode,
)
from tests.shared.test_protocol import packb


def test_a_plain_peer_reports_node_and_container_pressure() -> None:
    data = packb(
        {
            "type": "status",
            "applied_revision": 3,
            "containers": [{"id": "c-1", "state": "running", "cpu_pressure": 12.5}],
            "pressure": {"source": "psi", "avg10": 61.25, "avg60": 40.0},
        }
    )
    assert decode_from_agent(data) == Status(
        applied_revision=3,
        containers=[ContainerStatus(id="c-1", state="running", cpu_pressure=12.5)],
        pressure=CpuPressure(source="psi", avg10=61.25, avg60=40.0),
    )


def test_an_older_agent_without_pressure_still_talks() -> None:
    data = packb(
        {"type": "status", "applied_revision": 1, "containers": [{"id": "c", "state": "running"}]}
    )
    frame = decode_from_agent(data)
    assert isinstance(frame, Status)
    assert frame.pressure is None
    assert frame.containers[0].cpu_pressure is None


def test_our_pressure_reads_back_in_plain_msgpack() -> None:
    frame = Status(applied_revision=2, pressure=CpuPressure(source="throttling", avg10=7.0))
    decoded = msgpack.unpackb(encode(frame))
    assert decoded["pressure"] == {"source": "throttling", "avg10": 7.0, "avg60": None}


@pytest.mark.parametrize(
    ("pressure", "problem"),
    [
        ({"source": "psi", "avg10": 100.5}, "<= 100"),
        ({"source": "psi", "avg10": -1.0}, ">= 0"),
        ({"source": "psi", "avg10": math.nan}, "Expected `float`"),
        ({"source": "load", "avg10": 1.0}, "Invalid enum value 'load'"),
        ({"source": "psi"}, "missing required field `avg10`"),
    ],
    ids=["above-100", "negative", "nan", "unknown-source", "no-avg10"],
)
def test_a_bad_pressure_is_an_invalid_frame_naming_the_field(
    pressure: dict[str, object], problem: str
) -> None:
    data = packb({"type": "status", "applied_revision": 1, "pressure": pressure})
    with pytest.raises(ProtocolError) as caught:
        decode_from_agent(data)
    assert caught.value.code == "invalid_frame"
    assert problem in caught.value.message
    assert "pressure" in caught.value.message
