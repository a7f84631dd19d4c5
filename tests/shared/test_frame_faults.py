"""shared.frame_faults: where a refused frame is wrong, and the value found there."""

from __future__ import annotations

from typing import Annotated

import msgpack
import msgspec
import pytest
from msgspec import Meta

from shared.frame_faults import fault_of


class Inner(msgspec.Struct):
    memory: Annotated[int, Meta(ge=1)]


class Outer(msgspec.Struct):
    items: list[Inner]
    named: dict[str, Annotated[int, Meta(ge=0)]] = {}
    keys: dict[Annotated[str, Meta(max_length=3)], int] = {}
    text: Annotated[str, Meta(max_length=4)] = ""


decoder = msgspec.msgpack.Decoder(Outer)


def fault(value: object) -> str:
    data = bytes(msgpack.packb(value))
    with pytest.raises(msgspec.ValidationError) as refused:
        decoder.decode(data)
    return str(fault_of(data, refused.value))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"items": [{"memory": 1}, {"memory": -5}]}, "items[1].memory = -5: Expected `int` >= 1"),
        ({"items": "none"}, "items = 'none': Expected `array`, got `str`"),
        ({"items": [], "named": {"a": -1}}, "named[...]: Expected `int` >= 0"),
        ({"items": [], "keys": {"long": 1}}, "keys: a key: Expected `str` of length <= 3"),
        ({"items": [], "text": "x" * 200}, f"text = '{'x' * 76}...: Expected `str` of length <= 4"),
        ({"items": [{}]}, "items[0] = {}: Object missing required field `memory`"),
        ([1, 2], "frame: Expected `object`, got `array`"),
    ],
    ids=["nested", "wrong-type", "map-value", "map-key", "long-value", "missing", "not-a-map"],
)
def test_the_fault_names_the_field_and_the_value_found(value: object, expected: str) -> None:
    assert fault(value) == expected
