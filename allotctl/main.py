"""``allotctl``: the operator's view of the coordinator.

    allotctl nodes                 every node            allotctl node NAME       one node
    allotctl resources             lease resources       allotctl resource ID     one, with leases
    allotctl quotas                every quota           allotctl quota NAME      one quota
    allotctl pools                 every pool            allotctl pool NAME       one pool
    allotctl pools simulate FILE [--plot OUT.png]        a what-if run of a timeline
    allotctl plan --cpu 1.7 --memory 512Mi --count 10 [--cpu-bind] [--strategy auto]
                                   where 10 such containers would go (commits nothing)

    allotctl deploy NS [--file web.toml] [--name web --image IMG --cpu 0.5 --memory 64Mi
                    --count 2 --cpu-bind --env K=V --label K=V ...] [--dry-run] [-- COMMAND ...]
                                   place a deployment; prints what went where (--dry-run:
                                   what would go where and what it would preempt)
    allotctl deployments NS        a namespace's     allotctl deployment NS NAME   one, in detail
    allotctl containers [--namespace --deployment --node --state --capacity over-quota]
    allotctl container ID          placement, limits, capacity label, observed state, history
    allotctl why ID|NS/NAME        why a container, or a deployment's, is pending (or not)
    allotctl realloc ID [--cpu +0.5] [--memory=-64Mi] [--cpu-limit ...] ...
                                   change a container's allocation live; prints its limits
    allotctl scale NS NAME COUNT   add containers beside the others, or remove the newest
    allotctl replace ID --image IMG [-- COMMAND ...]
                                   a new container in the old one's allocation
    allotctl delete deployment NS NAME
    allotctl delete container ID   stop it; a stand-in keeps its deployment's count
    allotctl events [--namespace --deployment --container --node --kind --since SEQ]
                                   why things happened: placed, refused, realloc, ...

    allotctl allocation NODE       what a node offers and what is allocated, core by core
    allotctl set-node NODE --mode delta|absolute [--core ID=PIECES] [--numa CORE=NUMA]
                    [--memory 64Gi] [--numa-memory NUMA=BYTES]
                                   change what a node offers; prints its allocation
    allotctl cordon NODE           no new containers there    allotctl uncordon NODE
    allotctl drain NODE            cordon, and move its containers to other nodes; those
                                   with no room stay pending (then it exits 3)

Every command takes ``--json`` to print the API's own JSON instead of tables. The server
and token come from ``--server``/``--token`` or ``ALLOT_SERVER``/``ALLOT_TOKEN``. A
refusal prints the API's message and the numbers behind it, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from allotctl import deployments, nodes
from allotctl.deployment_views import (
    container_details,
    containers_table,
    deleted_view,
    deployment_details,
    deployments_table,
    events_table,
    placed_table,
    realloc_view,
    replaced_view,
    why_view,
)
from allotctl.node_views import (
    allocation_view,
    cordoned_view,
    drain_left_pending,
    drained_view,
)
from allotctl.plot import PlotUnavailable, plot_simulation
from allotctl.user_terms import FlagNames, in_user_terms
from allotctl.views import (
    node_details,
    nodes_table,
    plan_tables,
    pool_details,
    pools_table,
    quota_details,
    quotas_table,
    resource_details,
    resources_tables,
    simulation_table,
)
from client.api import ApiClient, ApiClientError, quote

DEFAULT_SERVER = "http://127.0.0.1:7600"
SEPARATOR = "--"  # what follows it is a container's command (deploy, replace)

View = Callable[[bytes], str]


@dataclass(frozen=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    fetch: Callable[[ApiClient, argparse.Namespace], bytes]  # the API's JSON
    render: Callable[[bytes, argparse.Namespace], str]  # the same for a person
    takes_command: bool = False  # words after "--" are a container's command
    # Whether an answer says the work is not all done: the command then exits 3.
    incomplete: Callable[[bytes], bool] | None = None
    # The API's names for what the flags give (``user_terms``).
    flags: FlagNames = field(default_factory=dict)


def _shown(view: View) -> Callable[[bytes, argparse.Namespace], str]:
    """A view that needs nothing but the body."""
    return lambda body, args: view(body)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    return None


def _named(*names: str) -> Callable[[argparse.ArgumentParser], None]:
    """Positional arguments, in this order."""

    def add(parser: argparse.ArgumentParser) -> None:
        for name in names:
            parser.add_argument(name)

    return add


def _plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpu", required=True, help='cores per container, e.g. "1.7"')
    parser.add_argument("--memory", default="0", help='memory per container, e.g. "512Mi"')
    parser.add_argument("--count", type=int, required=True, help="containers to place")
    parser.add_argument("--strategy", choices=deployments.STRATEGIES, default="auto")
    parser.add_argument("--nodes-limit", type=int, default=0, help="strategy's node limit")
    parser.add_argument("--cpu-bind", action="store_true", help="exclusive cores (cpuset)")
    parser.add_argument(
        "--nodes-file", type=Path, help="JSON list of nodes to plan on instead of the cluster's"
    )


PLAN_FLAGS = {
    "$.request.cpu": "--cpu",
    "$.request.memory": "--memory",
    "$.count": "--count",
    "$.nodes_limit": "--nodes-limit",
    # the fields the request's checks name
    "cpu": "--cpu",
    "cpu_request": "--cpu",
    "memory": "--memory",
    "memory_request": "--memory",
}


def _plan(client: ApiClient, args: argparse.Namespace) -> bytes:
    body: dict[str, object] = {
        "request": {"cpu": args.cpu, "memory": args.memory, "cpu_bind": args.cpu_bind},
        "count": args.count,
        "strategy": args.strategy,
        "nodes_limit": args.nodes_limit,
    }
    if args.nodes_file is not None:
        body["nodes"] = json.loads(args.nodes_file.read_text())
    return client.post("/v1/plans", body)


def _pools_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", nargs="?", choices=["simulate"], help="simulate FILE: a what-if run"
    )
    parser.add_argument(
        "file", nargs="?", type=Path, help="JSON: total, timeline, and config, state, substep"
    )
    parser.add_argument("--plot", type=Path, help="with simulate: draw the integral pools (PNG)")


def _pools(client: ApiClient, args: argparse.Namespace) -> bytes:
    if args.action != "simulate":
        return client.get("/v1/pools")
    if args.file is None:
        raise ValueError("pools simulate needs a FILE")
    body = client.post("/v1/pools/simulate", json.loads(args.file.read_text()))
    if args.plot is not None:
        drawn = plot_simulation(json.loads(body)["steps"], args.plot)
        print(f"plotted {', '.join(drawn)} into {args.plot}", file=sys.stderr)
    return body


def _show_pools(body: bytes, args: argparse.Namespace) -> str:
    return simulation_table(body) if args.action == "simulate" else pools_table(body)


def _resource(client: ApiClient, args: argparse.Namespace) -> bytes:
    status = client.get(f"/v1/resources/{quote(args.id)}/status")
    leases = client.get(f"/v1/resources/{quote(args.id)}/leases")
    return b'{"status": %s, "leases": %s}' % (status, leases)


def _get(path: str) -> Callable[[ApiClient, argparse.Namespace], bytes]:
    return lambda client, args: client.get(path)


COMMANDS: dict[str, Command] = {
    "nodes": Command("list the nodes", _no_arguments, _get("/v1/nodes"), _shown(nodes_table)),
    "node": Command(
        "show one node in detail",
        _named("name"),
        lambda client, args: client.get(f"/v1/nodes/{quote(args.name)}"),
        _shown(node_details),
    ),
    "resources": Command(
        "list lease resources and their templates",
        _no_arguments,
        _get("/v1/resources"),
        _shown(resources_tables),
    ),
    "resource": Command(
        "show one lease resource with its leases",
        _named("id"),
        _resource,
        _shown(resource_details),
    ),
    "quotas": Command(
        "list the quotas: min, max, used and over-quota amounts",
        _no_arguments,
        _get("/v1/quotas"),
        _shown(quotas_table),
    ),
    "quota": Command(
        "show one quota",
        _named("name"),
        _get("/v1/quotas"),
        lambda body, args: quota_details(body, args.name),
    ),
    "pools": Command(
        "list the pools with shares and volumes; 'pools simulate FILE' runs a what-if",
        _pools_arguments,
        _pools,
        _show_pools,
    ),
    "pool": Command(
        "show one pool: config, share and introspection",
        _named("name"),
        lambda client, args: client.get(f"/v1/pools/{quote(args.name)}"),
        _shown(pool_details),
    ),
    "plan": Command(
        "show where containers would be placed (commits nothing)",
        _plan_arguments,
        _plan,
        _shown(plan_tables),
        flags=PLAN_FLAGS,
    ),
    "deploy": Command(
        "place a deployment (flags, a TOML/JSON file, or both; -- COMMAND ...)",
        deployments.deploy_arguments,
        deployments.deploy,
        _shown(placed_table),
        takes_command=True,
        flags=deployments.DEPLOY_FLAGS,
    ),
    "deployments": Command(
        "list a namespace's deployments",
        _named("namespace"),
        lambda client, args: client.get(deployments.deployments_path(args.namespace)),
        lambda body, args: deployments_table(body, args.namespace),
    ),
    "deployment": Command(
        "show one deployment with its containers",
        _named("namespace", "name"),
        lambda client, args: client.get(deployments.deployments_path(args.namespace, args.name)),
        _shown(deployment_details),
    ),
    "containers": Command(
        "list containers, filtered by namespace, deployment, node, state or capacity",
        deployments.containers_arguments,
        deployments.containers,
        _shown(containers_table),
    ),
    "container": Command(
        "show one container: placement, limits, label, observed state, history",
        _named("id"),
        lambda client, args: client.get(deployments.container_path(args.id)),
        _shown(container_details),
    ),
    "why": Command(
        "why a container (ID) or a deployment's containers (NAMESPACE/NAME) are pending",
        _named("target"),
        deployments.why,
        lambda body, args: why_view(body, args.target),
    ),
    "realloc": Command(
        "change a container's allocation live (signed changes); prints its new limits",
        deployments.realloc_arguments,
        deployments.realloc,
        _shown(realloc_view),
        flags=deployments.REALLOC_FLAGS,
    ),
    "scale": Command(
        "make a deployment hold COUNT containers: new ones placed, or the newest removed",
        deployments.scale_arguments,
        deployments.scale,
        _shown(deployment_details),
        flags=deployments.SCALE_FLAGS,
    ),
    "replace": Command(
        "replace a container by one with a new image (-- COMMAND ...) in the same allocation",
        deployments.replace_arguments,
        deployments.replace,
        lambda body, args: replaced_view(body, args.id),
        takes_command=True,
    ),
    "delete": Command(
        "delete a deployment (NAMESPACE NAME) and its containers, or one container (ID)",
        deployments.delete_arguments,
        deployments.delete,
        lambda body, args: deleted_view(body, args.kind, args.names),
    ),
    "events": Command(
        "list the events (why things happened), filtered; --since SEQ for the newer ones",
        deployments.events_arguments,
        deployments.events,
        _shown(events_table),
    ),
    "allocation": Command(
        "show what a node offers and what is allocated there, core by core",
        _named("node"),
        nodes.allocation,
        _shown(allocation_view),
    ),
    "set-node": Command(
        "change what a node offers (absolute or delta); prints its allocation",
        nodes.set_node_arguments,
        nodes.set_node,
        _shown(allocation_view),
    ),
    "cordon": Command(
        "let a node take no new containers",
        _named("node"),
        nodes.acting("cordon"),
        _shown(cordoned_view),
    ),
    "uncordon": Command(
        "let a cordoned node take containers again",
        _named("node"),
        nodes.acting("uncordon"),
        _shown(cordoned_view),
    ),
    "drain": Command(
        "cordon a node and move its containers to other nodes (exit 3: some pending)",
        _named("node"),
        nodes.acting("drain"),
        _shown(drained_view),
        incomplete=drain_left_pending,
    ),
}


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if not args.token:
        print("allotctl: no API token: pass --token or set ALLOT_TOKEN", file=sys.stderr)
        return 2
    command = COMMANDS[args.command]
    try:
        body = command.fetch(ApiClient(args.server, args.token), args)
        print(body.decode() if args.json else command.render(body, args))
    except ApiClientError as error:
        print(f"allotctl: {in_user_terms(error, args.server, command.flags)}", file=sys.stderr)
        return 1
    except (OSError, ValueError, LookupError, PlotUnavailable) as error:
        print(f"allotctl: {error}", file=sys.stderr)
        return 1
    return 3 if command.incomplete is not None and command.incomplete(body) else 0


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments; ``container_command`` holds the words after "--" (deploy's and
    replace's only).

    They are split off before argparse sees them: it would take a positional list after
    the command's own positionals for them, and then refuse the words after "--".
    """
    cut = argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)
    parser = _parser()
    args = parser.parse_args(argv[:cut])
    args.container_command = argv[cut + 1 :]
    if cut < len(argv) and not COMMANDS[args.command].takes_command:
        parser.error(f"{args.command} takes no command after {SEPARATOR}")
    return args


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
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help)
        command.arguments(sub)
        sub.add_argument("--json", action="store_true", help="print the API's JSON")
    return parser
