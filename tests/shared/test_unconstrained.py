"""shared.unconstrained: reading back records that today's constraints would refuse."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest
from msgspec import Meta

from shared.api.nodes import NodeRecord
from shared.codec import json_decoder, to_json
from shared.inventory import Inventory
from shared.unconstrained import StoredDecoder, unconstrained
from tests.builders import old_node_record


class Plain(msgspec.Struct, frozen=True):
    name: str
    count: int = 0


class Bounded(msgspec.Struct, frozen=True):
    count: Annotated[int, Meta(ge=1)]
    names: Annotated[list[Annotated[str, Meta(max_length=2)]], Meta(max_length=1)] = []
    inner: Plain | None = None
    renamed: Annotated[int, Meta(le=3)] = msgspec.field(default=0, name="other")


def test_a_record_that_fails_todays_constraints_still_loads_as_what_it_is() -> None:
    data = old_node_record(
        "old-node", memory=-5, hostname="h" * 1000, gpus=[], problems=["p"] * 100
    )
    with pytest.raises(msgspec.ValidationError):
        json_decoder(NodeRecord).decode(data)
    record = json_decoder(unconstrained(NodeRecord)).decode(data)
    assert isinstance(record, NodeRecord)
    assert isinstance(record.inventory, Inventory)
    assert record.inventory.memory == -5
    assert str(record.inventory.offered()) == "0-1"
    assert to_json(record) == data


def test_values_and_names_are_kept_but_constraints_dropped() -> None:
    loose = unconstrained(Bounded)
    decoded = msgspec.json.decode(b'{"count": -1, "names": ["abc", "d"], "other": 9}', type=loose)
    assert isinstance(decoded, Bounded)
    assert (decoded.count, decoded.names, decoded.renamed) == (-1, ["abc", "d"], 9)
    assert msgspec.json.decode(b'{"count": 2}', type=loose).names == []
    with pytest.raises(msgspec.ValidationError, match="required field `count`"):
        msgspec.json.decode(b"{}", type=loose)


def test_types_without_constraints_are_themselves() -> None:
    assert unconstrained(Plain) is Plain
    assert unconstrained(int) is int
    assert unconstrained(list[Plain]) == list[Plain]
    assert unconstrained(Annotated[int, Meta(ge=0)] | None) == int | None
    assert unconstrained(Bounded) is unconstrained(Bounded)


def test_a_stored_decoder_reads_by_todays_rules_and_says_when_it_could_not() -> None:
    decoder = StoredDecoder(Bounded)
    record, broken = decoder.decode(b'{"count": 2}')
    assert (record, broken) == (Bounded(count=2), None)
    assert type(record) is Bounded
    record, broken = decoder.decode(b'{"count": 0, "names": ["abc", "de"]}')
    assert isinstance(record, Bounded)
    assert (record.count, record.names) == (0, ["abc", "de"])
    assert isinstance(broken, msgspec.ValidationError)
    assert "Expected `int` >= 1" in str(broken)


def test_a_stored_decoder_still_refuses_what_is_not_the_type() -> None:
    with pytest.raises(msgspec.ValidationError):
        StoredDecoder(Bounded).decode(b'{"count": "two"}')
