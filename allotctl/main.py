# PYTHON_ARGCOMPLETE_OK
"""``allotctl``: the operator's view of the coordinator.

    allotctl nodes                 every node            allotctl node NAME       one node
    allotctl node delete NAME      take a lost node off the books; its containers' stand-ins
                                   are placed elsewhere (a node not lost is refused)
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

    allotctl quota set NAME --namespace NS [--composite] [--min cpu=2] [--max memory=8Gi]
    allotctl pool set NAME [--parent P --weight 2 --strong-guarantee cpu=4 --limit cpu=8]
    allotctl resource set GLOB --capacity 100 --algorithm FAIR_SHARE --lease-length 60
                    --refresh-interval 10      (each also takes --file F: the API body)
    allotctl quota|pool|resource delete NAME
    allotctl apply -f FILE         the YAML documents of FILE (- for stdin): deployments,
                                   quotas, pools, templates; says created, configured or
                                   unchanged for each

    allotctl config set-context NAME --server URL [--server URL] [--token-file F]
                    [--ca-file F] [--use]
    allotctl config use-context NAME | get-contexts | view

Every command takes ``--json`` to print the API's own JSON instead of tables. The server,
token and CA come from a flag (``--server``, ``--token``, ``--ca-file``), else from
``ALLOT_SERVER``, ``ALLOT_TOKEN``, ``ALLOT_CA_FILE``, else from the context (``--context``,
``ALLOT_CONTEXT`` or the config file's current one: ``allotctl.config_file``). A refusal
prints the API's message and the numbers behind it, and exits 1; a usage or config error
exits 2. Output into a pipe closed early (``| head``) ends quietly.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import argcomplete

from allotctl import apply, bodies, deployments, nodes, writes
from allotctl.config_commands import config_arguments, run_config
from allotctl.config_file import ConfigError, config_path, load
from allotctl.connection import DEFAULT_SERVER, Flags, connection
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
    node_deleted_view,
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
    quota_view,
    quotas_table,
    resource_details,
    resources_tables,
    simulation_table,
    template_view,
)
from client.api import ApiClient, ApiClientError

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


def _node_view(body: bytes, args: argparse.Namespace) -> str:
    deleted = nodes.node_verb(args)[0] == nodes.DELETE
    return node_deleted_view(body) if deleted else node_details(body)


def _by_action(
    show: Callable[[bytes, argparse.Namespace], str], written: View
) -> Callable[[bytes, argparse.Namespace], str]:
    """The view of a ``writes`` command's answer: shown, set (``written``) or deleted."""

    def render(body: bytes, args: argparse.Namespace) -> str:
        verb, _ = writes.action(args)
        if verb == "delete":
            return writes.deleted(body)
        return written(body) if verb == "set" else show(body, args)

    return render


def _apply_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--file", required=True, help="YAML documents, each with kind and name; - for stdin"
    )


def _apply(client: ApiClient, args: argparse.Namespace) -> bytes:
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    documents = apply.read_documents(text, "stdin" if args.file == "-" else args.file)
    return json.dumps(apply.apply_all(client, documents)).encode()


def _get(path: str) -> Callable[[ApiClient, argparse.Namespace], bytes]:
    return lambda client, args: client.get(path)


COMMANDS: dict[str, Command] = {
    "nodes": Command("list the nodes", _no_arguments, _get("/v1/nodes"), _shown(nodes_table)),
    "node": Command(
        "show one node in detail; 'node delete NAME' takes a lost node off the books",
        nodes.node_arguments,
        nodes.node,
        _node_view,
    ),
    "resources": Command(
        "list lease resources and their templates",
        _no_arguments,
        _get("/v1/resources"),
        _shown(resources_tables),
    ),
    "resource": Command(
        "show one lease resource with its leases; set or delete its template",
        writes.target_arguments(
            "resource template", bodies.template_arguments, bodies.TEMPLATE_DESTS
        ),
        writes.resource,
        _by_action(_shown(resource_details), template_view),
        flags=bodies.TEMPLATE_FLAG_NAMES,
    ),
    "quotas": Command(
        "list the quotas: min, max, used and over-quota amounts",
        _no_arguments,
        _get("/v1/quotas"),
        _shown(quotas_table),
    ),
    "quota": Command(
        "show one quota; set or delete one",
        writes.target_arguments("quota", bodies.quota_arguments, bodies.QUOTA_DESTS),
        writes.quota,
        _by_action(lambda body, args: quota_details(body, args.target), quota_view),
        flags=bodies.QUOTA_FLAGS,
    ),
    "pools": Command(
        "list the pools with shares and volumes; 'pools simulate FILE' runs a what-if",
        _pools_arguments,
        _pools,
        _show_pools,
    ),
    "pool": Command(
        "show one pool: config, share and introspection; set or delete one",
        writes.target_arguments("pool", bodies.pool_arguments, bodies.POOL_DESTS),
        writes.pool,
        _by_action(_shown(pool_details), pool_details),
        flags=bodies.POOL_FLAGS,
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
    "apply": Command(
        "create or change what a YAML file describes (deployments, quotas, pools, templates)",
        _apply_arguments,
        _apply,
        lambda body, args: "\n".join(json.loads(body)),
    ),
}
CONFIG = "config"  # the command that reads and writes the config file, not the API
CLOSED_PIPE = 141  # as a shell reports a command that SIGPIPE ended: 128 + 13


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        code = _run(args)
        sys.stdout.flush()  # here, so that a closed pipe is seen while it can be quieted
    except BrokenPipeError:
        # As Python's documentation on SIGPIPE advises: the reader has gone, so nothing
        # more can be said; point stdout at /dev/null so the interpreter's own flush at
        # exit does not fail again and print a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_PIPE
    return code


def _run(args: argparse.Namespace) -> int:
    path = config_path()
    try:
        if args.command == CONFIG:
            print(run_config(args, path))
            return 0
        flags = Flags(
            server=args.server, token=args.token, ca_file=args.ca_file, context=args.context
        )
        target = connection(flags, load(path), path)
        client = ApiClient(target.server, target.token, ca_file=target.ca_file)
    except (ConfigError, ApiClientError, OSError) as error:
        print(f"allotctl: {error}", file=sys.stderr)
        return 2
    if not target.token:
        print(
            "allotctl: no API token: set ALLOT_TOKEN, give the context a token_file"
            " (allotctl config set-context), or pass --token",
            file=sys.stderr,
        )
        return 2
    command = COMMANDS[args.command]
    try:
        body = command.fetch(client, args)
        print(body.decode() if args.json else command.render(body, args))
    except ApiClientError as error:
        said = in_user_terms(error, target.server, command.flags, target.token_source)
        print(f"allotctl: {said}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # an OSError, but no error of the command's: ``main`` ends quietly
    except apply.Stopped as stopped:
        if stopped.done:
            print(json.dumps(stopped.done) if args.json else "\n".join(stopped.done))
        print(f"allotctl: {stopped}", file=sys.stderr)
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
    argcomplete.autocomplete(parser)  # answers the shell and exits when it is asking
    args = parser.parse_args(argv[:cut])
    args.container_command = argv[cut + 1 :]
    if cut < len(argv) and (args.command == CONFIG or not COMMANDS[args.command].takes_command):
        parser.error(f"{args.command} takes no command after {SEPARATOR}")
    return args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="allotctl", description="Operate an allot cluster.")
    parser.add_argument("--version", action="version", version=f"allotctl {_version()}")
    parser.add_argument(
        "--server",
        help="coordinator URL, or several comma-separated (env ALLOT_SERVER; else the"
        f" context's servers; default {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--token",
        help="API token (env ALLOT_TOKEN). Avoid it: other users see it in ps; put the token"
        " in a file and name it in a context (allotctl config set-context --token-file)",
    )
    parser.add_argument(
        "--ca-file",
        help="CA (PEM) that signed an https coordinator's certificate (env ALLOT_CA_FILE)",
    )
    parser.add_argument(
        "--context", help="the config file's context to use (env ALLOT_CONTEXT; else its current)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help)
        command.arguments(sub)
        sub.add_argument("--json", action="store_true", help="print the API's JSON")
    config_arguments(commands.add_parser(CONFIG, help="the contexts of the config file"))
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("allot")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout never installed
        return "unknown"
