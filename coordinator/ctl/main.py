"""``allotctl``: ``nodes`` (a table of every node) and ``node NAME`` (one in detail).

The server and token come from ``--server``/``--token`` or ``ALLOT_SERVER``/``ALLOT_TOKEN``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import msgspec

from coordinator.ctl.client import ApiClient, ApiClientError, quote
from coordinator.nodes import NodeRecord
from shared.codec import json_decoder
from shared.inventory_text import describe_inventory
from shared.quantity import format_memory_approx
from shared.text import table

DEFAULT_SERVER = "http://127.0.0.1:7600"


class NodeList(msgspec.Struct):
    nodes: list[NodeRecord]


_decode_nodes: msgspec.json.Decoder[NodeList] = json_decoder(NodeList)
_decode_node: msgspec.json.Decoder[NodeRecord] = json_decoder(NodeRecord)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.token:
        print("allotctl: no API token: pass --token or set ALLOT_TOKEN", file=sys.stderr)
        return 2
    client = ApiClient(args.server, args.token)
    try:
        if args.command == "nodes":
            body = client.get("/v1/nodes")
            text = body.decode() if args.json else nodes_table(_decode_nodes.decode(body).nodes)
        else:
            body = client.get(f"/v1/nodes/{quote(args.name)}")
            text = body.decode() if args.json else node_details(_decode_node.decode(body))
    except ApiClientError as error:
        print(f"allotctl: {error}", file=sys.stderr)
        return 1
    print(text)
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
    nodes = commands.add_parser("nodes", help="list the nodes")
    nodes.add_argument("--json", action="store_true", help="print the API's JSON")
    node = commands.add_parser("node", help="show one node in detail")
    node.add_argument("name")
    node.add_argument("--json", action="store_true", help="print the API's JSON")
    return parser


def nodes_table(nodes: list[NodeRecord]) -> str:
    if not nodes:
        return "no nodes have registered yet"
    rows = []
    for node in nodes:
        inventory = node.inventory
        gpus = str(len(inventory.gpus))
        if inventory.mig_device_count():
            gpus += f" (MIG {inventory.mig_device_count()})"
        rows.append(
            (
                node.name,
                node.state,
                f"{len(inventory.offered())}/{len(inventory.online)}",
                inventory.core_count(),
                len(inventory.numa_nodes),
                format_memory_approx(inventory.memory),
                gpus,
                age(node.state_since),
                node.reason or "-",
            )
        )
    headers = ["NAME", "STATE", "CPUS", "CORES", "NUMA", "MEMORY", "GPUS", "SINCE", "REASON"]
    return table(headers, rows)


def node_details(node: NodeRecord) -> str:
    head = [
        ("name", node.name),
        ("state", f"{node.state} for {age(node.state_since)}"),
        ("reason", node.reason or "-"),
        ("registered", f"{_timestamp(node.registered_at)} ({age(node.registered_at)} ago)"),
        ("agent", f"{node.agent_version or 'unknown version'} at {node.address or '?'}"),
    ]
    return table(None, head) + "\n\n" + describe_inventory(node.inventory)


def age(since: float, now: float | None = None) -> str:
    """A duration as an operator reads it at a glance: 45s, 12m, 5h, 3d."""
    seconds = max(0, int((time.time() if now is None else now) - since))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
