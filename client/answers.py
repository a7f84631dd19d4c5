"""How a client reads the coordinator's answers: as the structs of ``shared.api``, which the
coordinator encodes them with, less any field this version does not know.

    nodes = AnswerDecoder(NodeList)
    nodes.decode(ApiClient(server, token).get("/v1/nodes")).nodes[0].state  -> NodeHealth.READY

A newer coordinator may add fields to its answers. A struct ignores a field it does not
know, except the structs the coordinator also reads as request bodies, which refuse one,
as they must there: ``DeploymentSpec`` and its ``ResourcesSpec``, ``ResourceTemplate`` and
its ``Algorithm``. Echoed in an answer, a field added to one of them would make the whole
answer unreadable. So an answer that the type refuses is read again: decoded as plain
JSON, every object the type reads as a struct loses the keys the struct has no field for,
and what is left is decoded by the type, with the same checks as ever. Values are still
checked: a node state, strategy or algorithm kind this version does not know is refused,
as a change of the API's schema.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec
import msgspec.inspect as mi

from shared.codec import json_decoder, to_json

T = TypeVar("T")
# The types read from a JSON array whose items are all of one type.
_ARRAYS = (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)


class AnswerDecoder(Generic[T]):
    """Decodes an answer's body as a ``T``, ignoring the fields ``T`` does not have, at any
    depth. An answer this version reads as it is costs one plain decode; one that a strict
    struct refuses is read again, pruned, which costs up to five plain decodes (5,000
    deployments of two containers each, 8.7 MB, a field added to the last spec: 2.7 s
    against 0.5 s), and only against a newer coordinator."""

    def __init__(self, type_: type[T]) -> None:
        self._info = mi.type_info(type_)
        self._decoder: msgspec.json.Decoder[T] = json_decoder(type_)

    def decode(self, body: bytes) -> T:
        try:
            return self._decoder.decode(body)
        except msgspec.ValidationError:
            known = _known(msgspec.json.decode(body), self._info)
            return self._decoder.decode(to_json(known))


def _known(value: Any, found: mi.Type) -> Any:
    """``value`` (plain JSON) without the keys of the objects that ``found`` reads as a
    struct and that struct has no field for, at any depth. A value of another shape than
    ``found`` reads is left as it is, for the decoder to refuse."""
    if isinstance(found, mi.Metadata):
        return _known(value, found.type)
    if isinstance(found, mi.StructType) and isinstance(value, dict):
        fields = {field.encode_name: field.type for field in found.fields}
        kept = {key: _known(item, fields[key]) for key, item in value.items() if key in fields}
        if found.tag_field is not None and found.tag_field in value:
            kept[found.tag_field] = value[found.tag_field]
        return kept
    if isinstance(found, mi.DictType) and isinstance(value, dict):
        return {key: _known(item, found.value_type) for key, item in value.items()}
    if isinstance(found, _ARRAYS) and isinstance(value, list):
        return [_known(item, found.item_type) for item in value]
    if isinstance(found, mi.UnionType):
        # A union holds at most one type read from a JSON object, unless its structs are
        # tagged; then the tag says which.
        readers = [member for member in found.types if _reads(member, value)]
        if len(readers) == 1:
            return _known(value, readers[0])
    return value


def _reads(found: mi.Type, value: Any) -> bool:
    """Whether ``found`` reads ``value``'s JSON shape (an object or an array), and, for a
    tagged struct, its tag."""
    if isinstance(found, mi.Metadata):
        return _reads(found.type, value)
    if isinstance(value, list):
        return isinstance(found, _ARRAYS)
    if not isinstance(value, dict):
        return False
    if isinstance(found, mi.StructType):
        return found.tag_field is None or value.get(found.tag_field) == found.tag
    return isinstance(found, mi.DictType)
