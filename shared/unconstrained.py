"""A type less its value constraints, for reading back what an older version wrote.

    decoder = json_decoder(unconstrained(NodeRecord))
    record = decoder.decode(stored)        # memory -5 and all: still a NodeRecord

The wire types declare the ranges of their values (``Annotated[int, Meta(ge=1)]``), so a
peer's frame is checked as it is decoded. A record that an older coordinator stored passed
the checks of its day; one that fails today's must still load (a coordinator that cannot
start helps nobody) and is judged by today's rules once it is loaded.

``unconstrained(T)`` drops every ``Meta`` from ``T``, all the way down. A struct becomes a
subclass of itself with the same fields, unconstrained, so what is decoded is still a
``T``: ``isinstance`` holds and its methods work. It is not *equal* to a ``T`` with the
same values (msgspec compares the types too), which is why a caller decodes with the
strict type first and falls back to this one only for a record that fails.
"""

from __future__ import annotations

import functools
import operator
import types
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

import msgspec

from shared.codec import json_decoder

_made: dict[type, type] = {}


def unconstrained(type_: Any) -> Any:
    """``type_`` with every ``Annotated`` constraint removed, recursively. O(size of the
    type); a struct's subclass is made once and kept."""
    origin, args = get_origin(type_), get_args(type_)
    if origin is Annotated:
        return unconstrained(args[0])
    if origin is Union or origin is types.UnionType:
        return functools.reduce(operator.or_, map(unconstrained, args))
    if origin is not None and origin is not Literal and args:
        return origin[tuple(unconstrained(arg) for arg in args)]
    if isinstance(type_, type) and issubclass(type_, msgspec.Struct):
        if type_ not in _made:
            _made[type_] = _unconstrained_struct(type_)
        return _made[type_]
    return type_


def _unconstrained_struct(cls: type[msgspec.Struct]) -> type:
    """``cls`` itself when none of its fields has a constraint, else its subclass."""
    infos = msgspec.structs.fields(cls)
    if all(unconstrained(info.type) == info.type for info in infos):
        return cls
    fields = []
    for info in infos:
        if info.default is not msgspec.NODEFAULT:
            default = msgspec.field(default=info.default, name=info.encode_name)
        elif info.default_factory is not msgspec.NODEFAULT:
            default = msgspec.field(default_factory=info.default_factory, name=info.encode_name)
        else:
            default = msgspec.field(name=info.encode_name)
        fields.append((info.name, unconstrained(info.type), default))
    # Keyword-only, so that a required field may follow one with a default: the decoder,
    # the only maker of these, passes every field by name.
    return msgspec.defstruct(
        cls.__name__, fields, bases=(cls,), module=cls.__module__, kw_only=True
    )


T = TypeVar("T")


class StoredDecoder(Generic[T]):
    """Reads a record of type ``T`` back from the store: by today's rules, or, for one an
    older version wrote that breaks them, by ``unconstrained(T)`` -- never refusing it.

        record, broken = decoder.decode(value)    # broken: the ValidationError, or None
    """

    def __init__(self, type_: type[T]) -> None:
        self._strict: msgspec.json.Decoder[T] = json_decoder(type_)
        self._lenient: msgspec.json.Decoder[T] = json_decoder(unconstrained(type_))

    def decode(self, value: bytes) -> tuple[T, msgspec.ValidationError | None]:
        try:
            return self._strict.decode(value), None
        except msgspec.ValidationError as error:
            return self._lenient.decode(value), error
