"""msgspec encoders and decoders that know allot's own value types.

Every struct that crosses a process boundary (wire frames, HTTP bodies, store values)
is encoded here, so a ``CpuSet`` is always its kernel list string (``"0-3,8"``) on the
outside and always a validated ``CpuSet`` on the inside.
"""

from __future__ import annotations

from typing import Any

import msgspec

from shared.cpuset import CpuSet


def _enc_hook(value: object) -> object:
    if isinstance(value, CpuSet):
        return str(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def _dec_hook(type_: type, value: Any) -> object:
    if type_ is CpuSet:
        if not isinstance(value, str):
            raise ValueError(f"expected a CPU list string like '0-3,8', got {value!r}")
        return CpuSet.parse(value)  # a CpuSetError (ValueError) becomes a ValidationError
    raise NotImplementedError(f"cannot decode {type_.__name__}")


_json_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
_msgpack_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)


def to_json(value: object) -> bytes:
    return _json_encoder.encode(value)


def to_msgpack(value: object) -> bytes:
    return _msgpack_encoder.encode(value)


# The factories take any type expression (a struct, or a union of tagged structs, which
# mypy cannot express as ``type[T]``); callers annotate the decoder they keep, e.g.
# ``decoder: msgspec.json.Decoder[Node] = json_decoder(Node)``.
def json_decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(type_, dec_hook=_dec_hook)


def msgpack_decoder(type_: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(type_, dec_hook=_dec_hook)


def to_builtins(value: object) -> Any:
    """The JSON-ready form of a struct (dicts, lists, strings, numbers)."""
    return msgspec.to_builtins(value, enc_hook=_enc_hook)
