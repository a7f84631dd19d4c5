"""shared.codec: a CpuSet is its kernel list string outside and a CpuSet inside."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec
import pytest

from shared.codec import json_decoder, msgpack_decoder, to_builtins, to_json, to_msgpack
from shared.cpuset import CpuSet


class Placement(msgspec.Struct, frozen=True):
    name: str
    cpus: CpuSet
    spares: list[CpuSet] = []
    by_node: dict[str, CpuSet] = {}


SAMPLE = Placement(
    name="web",
    cpus=CpuSet.parse("0-3,8"),
    spares=[CpuSet(), CpuSet([12])],
    by_node={"n1": CpuSet.parse("4-5")},
)


class Format(NamedTuple):
    encode: Callable[[object], bytes]  # ours, with the CpuSet hook
    plain_encode: Callable[[object], bytes]  # msgspec's own, without hooks
    decoder: Callable[[Any], Any]  # ours: a decoder for the given type


FORMATS = [
    pytest.param(Format(to_json, msgspec.json.encode, json_decoder), id="json"),
    pytest.param(Format(to_msgpack, msgspec.msgpack.encode, msgpack_decoder), id="msgpack"),
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_struct_with_cpusets_round_trips(fmt: Format) -> None:
    data = fmt.encode(SAMPLE)
    decoded = fmt.decoder(Placement).decode(data)
    assert decoded == SAMPLE
    assert isinstance(decoded.cpus, CpuSet)
    # The outside form is exactly what a hook-less encoder writes for the string form.
    assert data == fmt.plain_encode(to_builtins(SAMPLE))


def test_json_form_holds_the_list_string() -> None:
    assert json.loads(to_json(SAMPLE)) == {
        "name": "web",
        "cpus": "0-3,8",
        "spares": ["", "12"],
        "by_node": {"n1": "4-5"},
    }


def test_msgpack_form_holds_the_list_string() -> None:
    assert msgspec.msgpack.decode(to_msgpack(SAMPLE))["cpus"] == "0-3,8"


def test_decoding_accepts_any_valid_spelling_of_the_list() -> None:
    decoded = json_decoder(Placement).decode(b'{"name": "x", "cpus": "8, 0-3"}')
    assert decoded.cpus == CpuSet([0, 1, 2, 3, 8])


@pytest.mark.parametrize(
    ("document", "path", "complaint"),
    [
        ({"name": "x", "cpus": "3-1"}, "$.cpus", "descending range"),
        ({"name": "x", "cpus": "zero"}, "$.cpus", "is not a CPU list"),
        ({"name": "x", "cpus": 5}, "$.cpus", "expected a CPU list string"),
        ({"name": "x", "cpus": "0", "spares": ["1", "1-"]}, "$.spares[1]", "is not a CPU list"),
        ({"name": "x", "cpus": "0", "by_node": {"n2": "a"}}, "$.by_node[...]", "is not a CPU list"),
    ],
    ids=["descending", "word", "not-a-string", "in-a-list", "in-a-dict"],
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_cpu_list_is_a_validation_error_naming_the_path(
    fmt: Format, document: dict[str, object], path: str, complaint: str
) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        fmt.decoder(Placement).decode(fmt.plain_encode(document))
    assert complaint in str(caught.value)
    assert str(caught.value).endswith(f"at `{path}`")


def test_to_builtins_gives_json_ready_values() -> None:
    assert to_builtins(SAMPLE) == {
        "name": "web",
        "cpus": "0-3,8",
        "spares": ["", "12"],
        "by_node": {"n1": "4-5"},
    }


def test_to_builtins_of_a_bare_cpuset() -> None:
    assert to_builtins(CpuSet([3, 1, 2])) == "1-3"


def test_unknown_types_are_refused_when_encoding() -> None:
    class Opaque:
        pass

    with pytest.raises(NotImplementedError, match="cannot encode Opaque"):
        to_json({"x": Opaque()})
    with pytest.raises(NotImplementedError, match="cannot encode Opaque"):
        to_builtins([Opaque()])
