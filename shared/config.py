"""Configuration from a TOML file, then the environment, then command-line flags.

A program's settings are one msgspec struct whose fields carry their type, bounds and
description (``Annotated[int, Meta(ge=1, description=...)]``). Each later source
overrides the earlier ones:

    parser = argparse.ArgumentParser()
    add_flags(parser, AgentConfig)                      # --server, --reserved-cpus, ...
    args = parser.parse_args()
    config = load(AgentConfig, file=args.config, environ=os.environ,
                  env_prefix="ALLOT_AGENT_", flags=flag_values(args, AgentConfig))

On one line (a variable or a flag) a list is written ``a,b`` and a map ``a=1,b=2``.
An unknown key in the file, an unknown ``ALLOT_AGENT_*`` variable or a value of the
wrong type raises ``ConfigError`` naming the source and the key.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

C = TypeVar("C", bound=msgspec.Struct)


class ConfigError(Exception):
    """A setting that cannot be taken; the message names where it came from."""


def load(
    spec: type[C],
    *,
    file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    env_prefix: str = "",
    flags: Mapping[str, object] | None = None,
) -> C:
    fields = _field_types(spec)
    merged: dict[str, object] = {}
    source: dict[str, str] = {}

    def take(
        values: Mapping[str, object], origin: str, name_of: dict[str, str], joiner: str = " "
    ) -> None:
        for key, value in values.items():
            if key not in fields:
                known = ", ".join(sorted(fields))
                raise ConfigError(f"{origin}: unknown setting {name_of[key]!r} (known: {known})")
            merged[key] = value
            source[key] = f"{origin}{joiner}{name_of[key]}"

    if file is not None:
        table = _read_toml(file)
        take(table, f"config file {file}", {k: k for k in table}, joiner=": ")
    if environ and env_prefix:
        from_env = {
            var[len(env_prefix) :].lower(): var for var in environ if var.startswith(env_prefix)
        }
        for key, var in from_env.items():
            if key in fields and _file_only(fields[key]):
                raise ConfigError(f"environment variable {var}: {key} can only be set in a file")
        values = {
            key: _from_text(fields.get(key), environ[var], f"environment variable {var}")
            for key, var in from_env.items()
        }
        take(values, "environment variable", from_env)
    if flags:
        flag_names = {k: "--" + k.replace("_", "-") for k in flags}
        flag_values_ = {
            k: _from_text(fields.get(k), v, f"flag {flag_names[k]}") for k, v in flags.items()
        }
        take(flag_values_, "flag", flag_names)
    try:
        return msgspec.convert(merged, spec, strict=False)
    except msgspec.ValidationError as error:
        raise ConfigError(_explain(str(error), source)) from error


def add_flags(parser: argparse.ArgumentParser, spec: type[msgspec.Struct]) -> None:
    """One ``--kebab-case`` flag per setting; only flags given on the line override."""
    for name, info in _field_types(spec).items():
        if _file_only(info):
            continue
        flag = "--" + name.replace("_", "-")
        help_text = _description(info)
        if isinstance(_unwrap(info), msgspec.inspect.BoolType):
            parser.add_argument(
                flag,
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        else:
            parser.add_argument(flag, dest=name, default=argparse.SUPPRESS, help=help_text)


def flag_values(args: argparse.Namespace, spec: type[msgspec.Struct]) -> dict[str, object]:
    names = _field_types(spec).keys()
    return {k: v for k, v in vars(args).items() if k in names}


def _field_types(spec: type[msgspec.Struct]) -> dict[str, msgspec.inspect.Type]:
    info = msgspec.inspect.type_info(spec)
    assert isinstance(info, msgspec.inspect.StructType)
    return {field.name: field.type for field in info.fields}


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"cannot read config file {file}: {error.strerror}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {file} is not valid TOML: {error}") from error


def _from_text(info: msgspec.inspect.Type | None, value: object, origin: str) -> object:
    """Environment variables and flags write a list as comma-separated text
    (``a,b``) and a map as comma-separated ``key=value`` pairs (``a=1,b=2``)."""
    if info is None or not isinstance(value, str):
        return value
    kind = _unwrap(info)
    items = [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(kind, msgspec.inspect.ListType):
        return items
    if isinstance(kind, msgspec.inspect.DictType):
        pairs = [item.partition("=") for item in items]
        bad = [item for item, (_, sign, _) in zip(items, pairs, strict=True) if not sign]
        if bad:
            raise ConfigError(f"{origin}: {bad[0]!r} is not key=value (write a=1,b=2)")
        return {key.strip(): text.strip() for key, _, text in pairs}
    return value


def _explain(message: str, source: Mapping[str, str]) -> str:
    # msgspec ends its messages with "- at `$.key`"; name the source of that key instead.
    head, _, path = message.rpartition(" - at `$.")
    if head and path.endswith("`"):
        key = path[:-1].split(".")[0].split("[")[0]
        return f"{source.get(key, key)}: {head}"
    return message


def _file_only(info: msgspec.inspect.Type) -> bool:
    """Tables (structs, lists of structs) have no one-line form for a flag or a variable."""
    inner = _unwrap(info)
    if isinstance(inner, msgspec.inspect.ListType):
        inner = _unwrap(inner.item_type)
    return isinstance(inner, msgspec.inspect.StructType)


def _unwrap(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    return info.type if isinstance(info, msgspec.inspect.Metadata) else info


def _description(info: msgspec.inspect.Type) -> str | None:
    if isinstance(info, msgspec.inspect.Metadata) and info.extra_json_schema:
        description = info.extra_json_schema.get("description")
        return str(description) if description is not None else None
    return None
