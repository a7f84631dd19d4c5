"""The arguments of the deployment, container and event commands, and the request each
makes.

``deploy`` reads the API body (a DeploymentSpec) from a TOML or JSON file, from flags, or
both: a flag wins over the file's value, ``--env``/``--label``/``--extended`` add to the
file's maps, and the words after ``--`` replace the file's command.
"""

from __future__ import annotations

import argparse
import json
import tomllib
import urllib.parse
from pathlib import Path
from typing import Any, get_args

from client.api import ApiClient, quote
from shared.api.containers import CONTAINER_FILTERS
from shared.api.deployments import MAX_COUNT, Strategy
from shared.api.events import EVENT_FILTERS
from shared.restart_policy import RestartPolicy

STRATEGIES: tuple[str, ...] = get_args(Strategy)
RESTART_POLICIES: tuple[str, ...] = get_args(RestartPolicy)
CAPACITY_LABELS = ("in-quota", "over-quota")

# Flags that set a DeploymentSpec field of the same name, and those that set one of
# its ``resources``.
SPEC_FLAGS = (
    "name",
    "image",
    "count",
    "cpu_bind",
    "soft_memory",
    "strategy",
    "nodes_limit",
    "pool",
    "priority",
    "restart_policy",
    "stop_timeout_seconds",
)
RESOURCE_FLAGS = ("cpu", "memory", "cpu_limit", "memory_limit")
# A realloc's signed changes, and the switches it may flip.
DELTA_FLAGS = ("cpu", "memory", "cpu_request", "cpu_limit", "memory_request", "memory_limit")
DELTA_SWITCHES = ("cpu_bind", "soft_memory")
DELETABLE = {"deployment": "NAMESPACE NAME", "container": "ID"}
COUNT_CAP = f"at most {MAX_COUNT}: a deployment holds up to {MAX_COUNT} containers"


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


# The API's names for what each command's flags give (``allotctl.user_terms``): the request
# body's JSON paths, and the fields the coordinator's checks of a quantity name.
DEPLOY_FLAGS = {
    **{f"$.{field}": _flag(field) for field in SPEC_FLAGS},
    **{f"$.resources.{field}": _flag(field) for field in RESOURCE_FLAGS},
    "$.stop_timeout_seconds": "--stop-timeout",  # shorter than the field's name
    "$.resources": "--cpu",  # the one field resources must have
    "$.resources.extended": "--extended",
    "cpu_request": "--cpu",
    "memory_request": "--memory",
    "cpu_limit": "--cpu-limit",
    "memory_limit": "--memory-limit",
}
REALLOC_FLAGS = {f"$.{field}": _flag(field) for field in (*DELTA_FLAGS, *DELTA_SWITCHES)}
SCALE_FLAGS = {"$.count": "COUNT"}


def deployments_path(namespace: str, name: str = "") -> str:
    path = f"/v1/namespaces/{quote(namespace)}/deployments"
    return f"{path}/{quote(name)}" if name else path


def container_path(container_id: str) -> str:
    return f"/v1/containers/{quote(container_id)}"


# -- deploy ----------------------------------------------------------------------------


def deploy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "Words after -- are the container's command: ... --image busybox -- sleep 60"
    parser.add_argument("namespace")
    parser.add_argument(
        "--file", type=Path, help="TOML or JSON with the API body's fields (flags win)"
    )
    parser.add_argument("--name", help="the deployment's name")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what the deploy would do (where, labels, preemptions, or the refusal);"
        " change nothing",
    )
    parser.add_argument("--image")
    parser.add_argument("--cpu", help='cores per container: "1.7", "500m", 2')
    parser.add_argument("--memory", help='memory per container: "512Mi"')
    parser.add_argument("--cpu-limit", help="cores a container may use (default: --cpu)")
    parser.add_argument("--memory-limit", help="memory a container may use (default: --memory)")
    parser.add_argument("--count", type=int, help=f"containers to place (default 1; {COUNT_CAP})")
    parser.add_argument(
        "--cpu-bind", action=argparse.BooleanOptionalAction, help="exclusive cores (cpuset)"
    )
    parser.add_argument(
        "--soft-memory",
        action=argparse.BooleanOptionalAction,
        help="reserve the memory instead of limiting to it",
    )
    parser.add_argument("--strategy", choices=STRATEGIES)
    parser.add_argument("--nodes-limit", type=int, help="the strategy's node limit")
    parser.add_argument("--pool", help="default: the namespace's pool")
    parser.add_argument("--priority", type=int)
    parser.add_argument("--restart-policy", choices=RESTART_POLICIES)
    parser.add_argument(
        "--stop-timeout",
        dest="stop_timeout_seconds",
        type=int,
        metavar="SECONDS",
        help="seconds a container has to stop on SIGTERM before it is killed (default 10)",
    )
    parser.add_argument(
        "--extended",
        action="append",
        type=name_count,
        default=[],
        metavar="NAME=COUNT",
        help="units of an extended resource per container, e.g. example.com/fpga=1; repeatable",
    )
    for flag in ("env", "label"):
        parser.add_argument(
            f"--{flag}",
            action="append",
            type=key_value,
            default=[],
            metavar="K=V",
            help="repeatable",
        )


def deploy(client: ApiClient, args: argparse.Namespace) -> bytes:
    query = "?dry_run=true" if args.dry_run else ""
    return client.post(deployments_path(args.namespace) + query, deployment_spec(args))


def why(client: ApiClient, args: argparse.Namespace) -> bytes:
    """The container ``ID``, or the deployment ``NAMESPACE/NAME``, with its containers."""
    namespace, slash, name = args.target.partition("/")
    if slash:
        return client.get(deployments_path(namespace, name))
    return client.get(container_path(args.target))


def deployment_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The API body: the file's fields, with the flags given laid over them."""
    spec = read_spec(args.file) if args.file is not None else {}
    spec |= _given(args, SPEC_FLAGS)
    _lay_over(spec, "resources", _given(args, RESOURCE_FLAGS))
    _lay_over(spec, "resources.extended", dict(args.extended))
    _lay_over(spec, "env", dict(args.env))
    _lay_over(spec, "labels", dict(args.label))
    if args.container_command:
        spec["command"] = args.container_command
    return spec


def read_spec(path: Path) -> dict[str, Any]:
    """A deployment file: TOML (``*.toml``) or JSON (``*.json``) holding one object."""
    if path.suffix not in (".toml", ".json"):
        raise ValueError(f"{path}: a deployment file is .toml or .json")
    text = path.read_text()
    try:
        spec = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError as error:  # TOMLDecodeError and JSONDecodeError both are
        raise ValueError(f"{path}: {error}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: expected an object with the deployment's fields")
    return spec


def name_count(text: str) -> tuple[str, int]:
    name, equals, count = text.partition("=")
    if not name or not equals or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=COUNT, got {text!r}")
    return name, int(count)


def key_value(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return key, value


def _given(args: argparse.Namespace, fields: tuple[str, ...]) -> dict[str, Any]:
    """The flags among ``fields`` that were given (argparse leaves the others None)."""
    return {field: getattr(args, field) for field in fields if getattr(args, field) is not None}


def _lay_over(spec: dict[str, Any], path: str, values: dict[str, Any]) -> None:
    """``values`` over the table at ``path`` (dotted for a nested one: ``resources.extended``)."""
    if not values:
        return
    *parents, field = path.split(".")
    table = spec
    for name in parents:
        table = table.setdefault(name, {})
        if not isinstance(table, dict):
            raise ValueError(f"{name} in the deployment file must be a table, not {table!r}")
    base = table.get(field, {})
    if not isinstance(base, dict):
        raise ValueError(f"{path} in the deployment file must be a table, not {base!r}")
    table[field] = base | values


# -- containers, scale, replace, realloc, delete ---------------------------------------


def containers_arguments(parser: argparse.ArgumentParser) -> None:
    for name in CONTAINER_FILTERS:
        choices = CAPACITY_LABELS if name == "capacity" else None
        parser.add_argument(f"--{name}", choices=choices, help=f"only containers of this {name}")


def containers(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.get(containers_path(args))


def containers_path(args: argparse.Namespace) -> str:
    return _filtered("/v1/containers", _given(args, CONTAINER_FILTERS))


def scale_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("namespace")
    parser.add_argument("name")
    parser.add_argument(
        "count", type=int, help=f"containers the deployment holds in all ({COUNT_CAP})"
    )


def scale(client: ApiClient, args: argparse.Namespace) -> bytes:
    path = deployments_path(args.namespace, args.name) + "/scale"
    return client.post(path, {"count": args.count})


def replace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "Words after -- are the new command (default: the old container's)."
    parser.add_argument("id")
    parser.add_argument("--image", required=True, help="the new container's image")


def replace(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.post(container_path(args.id) + "/replace", replacement(args))


def replacement(args: argparse.Namespace) -> dict[str, Any]:
    """The API body: the image, and the command only when words follow "--"."""
    body: dict[str, Any] = {"image": args.image}
    if args.container_command:
        body["command"] = args.container_command
    return body


def realloc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = 'Changes are signed; write a negative quantity as --memory="-64Mi".'
    parser.add_argument("id")
    parser.add_argument("--cpu", help='change request and limit: "+0.5", "-0.25"')
    parser.add_argument("--memory", help='change request and limit: "+256Mi"')
    parser.add_argument("--cpu-request")
    parser.add_argument("--cpu-limit")
    parser.add_argument("--memory-request")
    parser.add_argument("--memory-limit")
    parser.add_argument("--cpu-bind", action=argparse.BooleanOptionalAction)
    parser.add_argument("--soft-memory", action=argparse.BooleanOptionalAction)


def realloc(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.patch(container_path(args.id), realloc_delta(args))


def realloc_delta(args: argparse.Namespace) -> dict[str, Any]:
    """The PATCH body. A "+" is dropped: the API reads an unsigned change as a growth."""
    changes = {field: value.removeprefix("+") for field, value in _given(args, DELTA_FLAGS).items()}
    delta = changes | _given(args, DELTA_SWITCHES)
    if not delta:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in DELTA_FLAGS)
        raise ValueError(f"realloc changes nothing: give one of {flags}")
    return delta


def delete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=DELETABLE)
    parser.add_argument(
        "names", nargs="+", metavar="NAME", help="deployment: NAMESPACE NAME; container: ID"
    )


def delete(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.delete(deletion_path(args.kind, args.names))


def deletion_path(kind: str, names: list[str]) -> str:
    expected = DELETABLE[kind]
    if len(names) != len(expected.split()):
        raise ValueError(f"usage: allotctl delete {kind} {expected}")
    return container_path(names[0]) if kind == "container" else deployments_path(*names)


# -- events ----------------------------------------------------------------------------


def events_arguments(parser: argparse.ArgumentParser) -> None:
    for name in EVENT_FILTERS:
        parser.add_argument(f"--{name}", help=f"only events of this {name}")
    parser.add_argument(
        "--since", type=int, metavar="SEQ", help="only events after this sequence number"
    )


def events(client: ApiClient, args: argparse.Namespace) -> bytes:
    return client.get(events_path(args))


def events_path(args: argparse.Namespace) -> str:
    return _filtered("/v1/events", _given(args, (*EVENT_FILTERS, "since")))


def _filtered(path: str, wanted: dict[str, Any]) -> str:
    return path + (f"?{urllib.parse.urlencode(wanted)}" if wanted else "")
