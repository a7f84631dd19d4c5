"""``allotctl``: the operator's view of the coordinator.

    allotctl nodes                 every node            allotctl node NAME       one node
    allotctl resources             lease resources       allotctl resource ID     one, with leases

Every command takes ``--json`` to print the API's own JSON instead of tables. The server
and token come from ``--server``/``--token`` or ``ALLOT_SERVER``/``ALLOT_TOKEN``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from coordinator.ctl.client import ApiClient, ApiClientError, quote
from coordinator.ctl.views import (
    node_details,
    nodes_table,
    resource_details,
    resources_tables,
)

DEFAULT_SERVER = "http://127.0.0.1:7600"

# command -> (what it reads from the API, how a person reads it)
Show = Callable[[ApiClient, argparse.Namespace], tuple[bytes, Callable[[bytes], str]]]


def _nodes(client: ApiClient, args: argparse.Namespace) -> tuple[bytes, Callable[[bytes], str]]:
    return client.get("/v1/nodes"), nodes_table


def _node(client: ApiClient, args: argparse.Namespace) -> tuple[bytes, Callable[[bytes], str]]:
    return client.get(f"/v1/nodes/{quote(args.name)}"), node_details


def _resources(client: ApiClient, args: argparse.Namespace) -> tuple[bytes, Callable[[bytes], str]]:
    return client.get("/v1/resources"), resources_tables


def _resource(client: ApiClient, args: argparse.Namespace) -> tuple[bytes, Callable[[bytes], str]]:
    status = client.get(f"/v1/resources/{quote(args.id)}/status")
    leases = client.get(f"/v1/resources/{quote(args.id)}/leases")
    return b'{"status": %s, "leases": %s}' % (status, leases), resource_details


COMMANDS: dict[str, tuple[Show, str, str | None]] = {
    "nodes": (_nodes, "list the nodes", None),
    "node": (_node, "show one node in detail", "name"),
    "resources": (_resources, "list lease resources and their templates", None),
    "resource": (_resource, "show one lease resource with its leases", "id"),
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.token:
        print("allotctl: no API token: pass --token or set ALLOT_TOKEN", file=sys.stderr)
        return 2
    show, _, _ = COMMANDS[args.command]
    try:
        body, render = show(ApiClient(args.server, args.token), args)
    except ApiClientError as error:
        print(f"allotctl: {error}", file=sys.stderr)
        return 1
    print(body.decode() if args.json else render(body))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="allotctl", description="Operate an allot cluster.")
    parser.add_argument(
        "--server",
        default=os.environ.get("ALLOT_SERVER", DEFAULT_SERVER),
        help=f"coordinator URL (env ALLOT_SERVER, default {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--token", default=os.environ.get("ALLOT_TOKEN", ""), help="API token (env ALLOT_TOKEN)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text, argument) in COMMANDS.items():
        command = commands.add_parser(name, help=help_text)
        if argument:
            command.add_argument(argument)
        command.add_argument("--json", action="store_true", help="print the API's JSON")
    return parser
