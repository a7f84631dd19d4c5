"""The arguments of the node administration commands, and the request each makes:
``node`` (show one, or ``node delete NAME``), ``allocation``, ``set-node`` (SetNode,
absolute or delta), ``cordon``, ``uncordon`` and ``drain``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from allotctl.deployments import key_value
from client.api import ApiClient, quote

Value = TypeVar("Value")
MODES = ("absolute", "delta")
# SetNode's maps: the flag, its field in the API body, its metavar and its value's type.
CAPACITY_MAPS: tuple[tuple[str, str, str, Callable[[str], object]], ...] = (
    ("core", "cores", "ID=PIECES", int),
    ("numa", "numa", "CORE=NUMA", int),
    ("numa-memory", "numa_memory", "NUMA=BYTES", str),
)


def node_path(name: str, action: str) -> str:
    return f"/v1/nodes/{quote(name)}/{action}"


DELETE = "delete"


def node_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="{NAME,delete}", help="the node to show")
    parser.add_argument("name", nargs="?", help="with delete: the lost node to take away")


def node_verb(args: argparse.Namespace) -> tuple[str, str]:
    """("show", NAME) or ("delete", NAME); anything else is a usage error."""
    if args.target != DELETE:
        if args.name is not None:
            raise ValueError(f"{args.name!r}: expected NAME or delete NAME")
        return "show", args.target
    if args.name is None:
        raise ValueError("delete needs a NAME")
    return DELETE, args.name


def node(client: ApiClient, args: argparse.Namespace) -> bytes:
    verb, name = node_verb(args)
    path = f"/v1/nodes/{quote(name)}"
    return client.delete(path) if verb == DELETE else client.get(path)


def allocation(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.get(node_path(args.node, "allocation"))


def acting(action: str) -> Callable[[ApiClient, argparse.Namespace], bytes]:
    """A POST of nothing to the node's ``action``: cordon, uncordon, drain."""
    return lambda client, args: client.post(node_path(args.node, action), {})


def set_node_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "delta adds to what the node offers (a negative change shrinks it: --memory=-1Gi);"
        " absolute replaces each field given. Never below what is allocated."
    )
    parser.add_argument("node")
    parser.add_argument("--mode", choices=MODES, required=True)
    for flag, _, metavar, value in CAPACITY_MAPS:
        parser.add_argument(
            f"--{flag}",
            action="append",
            type=id_pair(value, metavar),
            default=[],
            metavar=metavar,
            help="repeatable",
        )
    parser.add_argument("--memory", help='bytes or a quantity: "64Gi"')
    parser.add_argument(
        "--cpu-overcommit",
        metavar="RATIO",
        help="how far unbound containers' CPU requests may oversell the shared pool, in"
        ' either mode: "1" (none, the default) to "100"',
    )


def set_node(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.patch(node_path(args.node, "capacity"), capacity(args))


def capacity(args: argparse.Namespace) -> dict[str, Any]:
    """The PATCH body: the mode and the fields given."""
    given = {field: getattr(args, flag.replace("-", "_")) for flag, field, *_ in CAPACITY_MAPS}
    fields: dict[str, Any] = {field: dict(pairs) for field, pairs in given.items() if pairs}
    if args.memory is not None:
        fields["memory"] = args.memory
    if args.cpu_overcommit is not None:
        fields["cpu_overcommit"] = args.cpu_overcommit
    if not fields:
        flags = ", ".join(f"--{flag}" for flag, *_ in CAPACITY_MAPS)
        raise ValueError(
            f"set-node changes nothing: give one of {flags}, --memory, --cpu-overcommit"
        )
    return {"mode": args.mode, **fields}


def id_pair(value: Callable[[str], Value], metavar: str) -> Callable[[str], tuple[int, Value]]:
    """An argparse type for ``ID=VALUE``: a whole-number id and ``value`` of the rest."""

    def parse(text: str) -> tuple[int, Value]:
        try:
            key, raw = key_value(text)
            return int(key), value(raw)
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"expected {metavar}, got {text!r}") from None

    return parse
