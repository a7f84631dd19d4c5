"""The API bodies of the quota, pool and resource-template writes, from a file and flags,
and the API paths they go to. ``allotctl quota|pool|resource set`` and ``allotctl apply``
both build their requests here.

A body is read from ``--file`` (YAML or JSON: YAML reads JSON too) and the flags given
are laid over it: a flag's scalar replaces the file's value, a flag's ``K=V`` pairs add
to the file's map.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import yaml

from allotctl.deployments import key_value
from client.api import quote
from shared.api.leases import Kind

_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.[0-9]*|\.[0-9]+)")
ELASTIC = "ElasticQuota"
COMPOSITE = "CompositeElasticQuota"
ALGORITHMS: tuple[str, ...] = tuple(Kind)


def quota_path(kind: str, name: str) -> str:
    return f"/v1/{kind.lower()}s/{quote(name)}"


def pool_path(name: str) -> str:
    return f"/v1/pools/{quote(name)}"


def template_path(glob: str) -> str:
    return f"/v1/resources/{quote(glob)}"


def read_body_file(path: Path | None) -> dict[str, Any]:
    """The object in ``path`` (YAML or JSON); {} when no file is given."""
    if path is None:
        return {}
    try:
        body = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"--file {path}: not YAML or JSON: {error}") from None
    if not isinstance(body, dict):
        raise ValueError(f"--file {path}: expected an object with the API body's fields")
    return body


def _amounts(given: list[tuple[str, str]]) -> dict[str, Any]:
    """``cpu=2``, ``memory=4Gi``: a plain decimal number as a number (pools take only
    numbers), anything else as written ("500m", "4Gi"; "nan" and "1e3" too, for the API
    to refuse or read as a quantity)."""
    return {name: _number_or_text(value) for name, value in given}


def _number_or_text(text: str) -> int | float | str:
    if _WHOLE.fullmatch(text):
        return int(text)
    return float(text) if _DECIMAL.fullmatch(text) else text


def _lay_over(body: dict[str, Any], field: str, values: dict[str, Any]) -> None:
    if not values:
        return
    base = body.get(field) or {}
    if not isinstance(base, dict):
        raise ValueError(f"--file: {field} must be a map, not {base!r}")
    body[field] = base | values


# -- quotas ---------------------------------------------------------------------------


def quota_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="the namespace it governs; repeat with --composite for several",
    )
    parser.add_argument(
        "--composite",
        action="store_true",
        help="a CompositeElasticQuota, shared by its namespaces (else an ElasticQuota)",
    )
    for bound, said in (("min", "guaranteed"), ("max", "at most")):
        parser.add_argument(
            f"--{bound}",
            action="append",
            type=key_value,
            default=[],
            metavar="RESOURCE=AMOUNT",
            help=f"{said}, e.g. cpu=2 or memory=4Gi; repeatable",
        )


QUOTA_DESTS = ("namespace", "composite", "min", "max")
QUOTA_FLAGS = {
    "$.namespace": "--namespace",
    "$.namespaces": "--namespace",
    "$.min": "--min",
    "$.max": "--max",
    "min": "--min",
    "max": "--max",
}


def quota_body(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The quota's kind and its PUT body."""
    body = read_body_file(args.file)
    composite = args.composite or "namespaces" in body
    if args.namespace:
        if composite:
            body.pop("namespace", None)
            body["namespaces"] = list(args.namespace)
        elif len(args.namespace) > 1:
            raise ValueError("--namespace given more than once: that needs --composite")
        else:
            body["namespace"] = args.namespace[0]
    _lay_over(body, "min", _amounts(args.min))
    _lay_over(body, "max", _amounts(args.max))
    return (COMPOSITE if composite else ELASTIC), body


# -- pools ----------------------------------------------------------------------------


def pool_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parent", help="the parent pool (default: the root)")
    parser.add_argument("--weight", type=float, help="share among its siblings (default 1)")
    parser.add_argument(
        "--namespace", action="append", default=[], help="a namespace it serves; repeatable"
    )
    for flag, what in (("strong-guarantee", "guaranteed"), ("limit", "at most")):
        parser.add_argument(
            f"--{flag}",
            action="append",
            type=key_value,
            default=[],
            metavar="RESOURCE=AMOUNT",
            help=f"{what}, e.g. cpu=4; repeatable (integral guarantees: --file)",
        )


POOL_DESTS = ("parent", "weight", "namespace", "strong_guarantee", "limit")
POOL_FLAGS = {
    "parent": "--parent",
    "weight": "--weight",
    "namespaces": "--namespace",
    "strong_guarantee_resources": "--strong-guarantee",
    "resource_limits": "--limit",
}


def pool_body(args: argparse.Namespace) -> dict[str, Any]:
    body = read_body_file(args.file)
    if args.parent is not None:
        body["parent"] = args.parent
    if args.weight is not None:
        body["weight"] = args.weight
    if args.namespace:
        body["namespaces"] = list(args.namespace)
    _lay_over(body, "strong_guarantee_resources", _amounts(args.strong_guarantee))
    _lay_over(body, "resource_limits", _amounts(args.limit))
    return body


# -- resource templates ---------------------------------------------------------------

# The flags of a template's fields, and of its algorithm's.
TEMPLATE_FLAGS = ("capacity", "safe_capacity", "description")
ALGORITHM_FLAGS = ("lease_length", "refresh_interval", "learning_mode_duration")


def template_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--capacity", type=float, help="what there is to lease")
    parser.add_argument("--algorithm", choices=ALGORITHMS, help="how capacity is shared")
    parser.add_argument("--lease-length", type=float, metavar="SECONDS")
    parser.add_argument("--refresh-interval", type=float, metavar="SECONDS")
    parser.add_argument(
        "--learning-mode-duration", type=float, metavar="SECONDS", help="default: lease length"
    )
    parser.add_argument(
        "--safe-capacity", type=float, help="given when leases cannot be had (-1: unlimited)"
    )
    parser.add_argument("--description")


TEMPLATE_DESTS = (*TEMPLATE_FLAGS, "algorithm", *ALGORITHM_FLAGS)
TEMPLATE_FLAG_NAMES = {
    **{f"$.{field}": "--" + field.replace("_", "-") for field in TEMPLATE_FLAGS},
    **{f"$.algorithm.{field}": "--" + field.replace("_", "-") for field in ALGORITHM_FLAGS},
    "$.algorithm": "--algorithm",
    "$.algorithm.kind": "--algorithm",
}


def template_body(args: argparse.Namespace) -> dict[str, Any]:
    body = read_body_file(args.file)
    body |= {f: getattr(args, f) for f in TEMPLATE_FLAGS if getattr(args, f) is not None}
    algorithm = {f: getattr(args, f) for f in ALGORITHM_FLAGS if getattr(args, f) is not None}
    if args.algorithm is not None:
        algorithm["kind"] = args.algorithm
    _lay_over(body, "algorithm", algorithm)
    return body
