"""``allot-coordinator tls ca|cert``: make the certificates of a cluster without a PKI.

allot-coordinator tls ca --dir /etc/allot/tls
allot-coordinator tls cert --dir /etc/allot/tls --server coord.example 10.0.0.5
allot-coordinator tls cert --dir /etc/allot/tls --node gpu-7
allot-coordinator tls cert --dir /etc/allot/tls --client
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coordinator.tls_files import (
    CA_DAYS,
    LEAF_DAYS,
    TlsFileError,
    client_leaf,
    make_ca,
    make_leaf,
    node_leaf,
    server_leaf,
)


def tls_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="allot-coordinator tls",
        description="Make a CA and the certificates it signs, as PEM files in one directory"
        " (keys mode 0600). An existing file is replaced only with --force.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    ca = commands.add_parser(
        "ca", help="a new CA: DIR/ca.pem and DIR/ca-key.pem (keep the key off the hosts)"
    )
    _common(ca, CA_DAYS)
    cert = commands.add_parser("cert", help="a certificate signed by the CA in DIR")
    _common(cert, LEAF_DAYS)
    kind = cert.add_mutually_exclusive_group(required=True)
    kind.add_argument(
        "--server",
        nargs="+",
        metavar="HOST",
        help="the coordinator's: DIR/server.pem, valid for each HOST (DNS name or IP address)",
    )
    kind.add_argument(
        "--node", metavar="NAME", help="an agent's: DIR/node-NAME.pem, registers as NAME only"
    )
    kind.add_argument(
        "--client", action="store_true", help="an API client's: DIR/client.pem, no node"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "ca":
            written = make_ca(args.dir, days=args.days, force=args.force)
        else:
            if args.server:
                leaf = server_leaf(args.server)
            elif args.node is not None:
                leaf = node_leaf(args.node)
            else:
                leaf = client_leaf()
            written = make_leaf(args.dir, leaf, days=args.days, force=args.force)
    except TlsFileError as error:
        print(f"allot-coordinator tls {args.command}: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


def _common(parser: argparse.ArgumentParser, days: int) -> None:
    parser.add_argument("--dir", type=Path, required=True, help="where the files are")
    parser.add_argument(
        "--days", type=int, default=days, help=f"valid this many days (default {days})"
    )
    parser.add_argument("--force", action="store_true", help="replace files that exist")
