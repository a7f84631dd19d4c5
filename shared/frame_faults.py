"""Where msgspec found a wrong value in a frame (or a stored record), and what it was.

msgspec says what it expected and where ("Expected `int` >= 1 - at `$.inventory.memory`")
but not what it found; the peer's operator needs both, so the value is looked up in the
frame itself:

    fault = fault_of(data, error)
    fault.path                 -> "inventory.memory"
    str(fault)                 -> "inventory.memory = -5: Expected `int` >= 1"

Only called for a frame already refused, so decoding it a second time costs nothing that
matters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from shared.bounds import shown

# "<what> - at `$.a.b[3]`", or "<what> - at `key` in `$.a`" for a bad key of a map.
_LOCATED = re.compile(r"(?P<what>.*) - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[([0-9]+|\.\.\.)\]")
_NOT_FOUND = object()


@dataclass(frozen=True)
class FrameFault:
    """``path``: dotted, without msgspec's ``$.`` ("" for the frame itself); ``what``:
    msgspec's words; ``value``: what the frame holds there, if it could be found."""

    path: str
    what: str
    value: object = _NOT_FOUND

    def __str__(self) -> str:
        where = self.path or "frame"
        if self.value is _NOT_FOUND:
            return f"{where}: {self.what}"
        return f"{where} = {shown(self.value)}: {self.what}"


def fault_of(
    data: bytes,
    error: msgspec.ValidationError,
    decode: Callable[[bytes], object] = msgspec.msgpack.decode,
) -> FrameFault:
    """The fault ``error`` reports in the ``data`` it was raised for: MessagePack, or
    what ``decode`` reads (``msgspec.json.decode`` for a stored record)."""
    located = _LOCATED.fullmatch(str(error))
    if located is None:
        return FrameFault("", str(error))
    path = located["path"].removeprefix(".")
    if located["key"]:
        return FrameFault(path, "a key: " + located["what"])
    return FrameFault(path, located["what"], _value_at(decode, data, located["path"]))


def _value_at(decode: Callable[[bytes], object], data: bytes, path: str) -> object:
    try:
        value = decode(data)
    except (msgspec.DecodeError, RecursionError):
        return _NOT_FOUND
    for name, index in _STEP.findall(path):
        if name and isinstance(value, dict) and name in value:
            value = value[name]
        elif index.isdigit() and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:  # a map's value ("[...]": msgspec does not say which key)
            return _NOT_FOUND
    return value
