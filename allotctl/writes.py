"""``allotctl quota|pool|resource``: show one, or write it with ``set`` and ``delete``.

    allotctl quota NAME                     show it
    allotctl quota set NAME --namespace team-a --min cpu=2 --max cpu=4 [--file F]
    allotctl quota delete NAME

``set`` sends the whole object (a PUT): a field neither in ``--file`` nor given by a flag
takes the API's default. So an object named ``set`` or ``delete`` is shown by the list
commands (``allotctl quotas``), not by this one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from allotctl.bodies import (
    pool_body,
    pool_path,
    quota_body,
    quota_path,
    template_body,
    template_path,
)
from client.api import ApiClient

ACTIONS = ("set", "delete")


def target_arguments(
    noun: str, write_flags: Callable[[argparse.ArgumentParser], None], dests: tuple[str, ...]
) -> Callable[[argparse.ArgumentParser], None]:
    """``NAME`` to show, or ``set NAME`` / ``delete NAME``, with the flags of ``set``
    (``write_flags``, whose destinations are ``dests``)."""

    def add(parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(set_only=("file", *dests))
        parser.add_argument("target", metavar="{NAME,set,delete}", help=f"the {noun} to show")
        parser.add_argument("name", nargs="?", help=f"with set or delete: the {noun}")
        parser.add_argument(
            "--file", type=Path, help="with set: YAML or JSON with the API body (flags win)"
        )
        write_flags(parser)

    return add


def action(args: argparse.Namespace) -> tuple[str, str]:
    """("show", NAME), ("set", NAME) or ("delete", NAME); a flag of set given to the
    others is refused rather than ignored."""
    if args.target not in ACTIONS:
        if args.name is not None:
            raise ValueError(f"{args.name!r}: expected NAME, set NAME or delete NAME")
        verb, name = "show", args.target
    elif args.name is None:
        raise ValueError(f"{args.target} needs a NAME")
    else:
        verb, name = args.target, args.name
    given = [dest for dest in args.set_only if getattr(args, dest) not in (None, [], False)]
    if verb != "set" and given:
        raise ValueError(f"--{given[0].replace('_', '-')} is a flag of set, not of {verb}")
    return verb, name


def deleted(body: bytes) -> str:
    """What a delete printed: ``deleted pool 'batch'``."""
    gone = json.loads(body)
    return f"deleted {gone['kind']} {gone['name']!r}"


def _deleted(kind: str, name: str) -> bytes:
    return json.dumps({"kind": kind, "name": name}).encode()


def quota(client: ApiClient, args: argparse.Namespace) -> bytes:
    verb, name = action(args)
    if verb == "set":
        kind, body = quota_body(args)
        return client.put(quota_path(kind, name), body)
    listing = client.get("/v1/quotas")
    if verb == "show":
        return listing
    kinds = [q["kind"] for q in json.loads(listing)["quotas"] if q["name"] == name]
    if not kinds:
        raise LookupError(f"no quota named {name!r}")
    client.delete(quota_path(kinds[0], name))
    return _deleted(kinds[0], name)


def pool(client: ApiClient, args: argparse.Namespace) -> bytes:
    verb, name = action(args)
    if verb == "set":
        return client.put(pool_path(name), pool_body(args))
    if verb == "show":
        return client.get(pool_path(name))
    client.delete(pool_path(name))
    return _deleted("pool", name)


def resource(client: ApiClient, args: argparse.Namespace) -> bytes:
    verb, name = action(args)
    if verb == "set":
        return client.put(template_path(name), template_body(args))
    if verb == "show":
        status = client.get(f"{template_path(name)}/status")
        leases = client.get(f"{template_path(name)}/leases")
        return b'{"status": %s, "leases": %s}' % (status, leases)
    client.delete(template_path(name))
    return _deleted("resource template", name)
