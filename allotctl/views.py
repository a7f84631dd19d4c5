"""How ``allotctl`` shows what the API returns: each view takes the response body (JSON)
and gives the text a person reads."""

from __future__ import annotations

import json
import time
from typing import Any

import msgspec

from client.answers import AnswerDecoder
from shared.api.leases import ResourceLeases, ResourceList, ResourceStatus, ResourceTemplate
from shared.api.nodes import NodeList, NodeView
from shared.api.plans import PlanResponse
from shared.api.quotas import QuotaSummary, QuotaView
from shared.inventory_text import describe_inventory
from shared.quantity import format_cpu, format_memory_approx
from shared.text import table


class ResourceView(msgspec.Struct):
    """What ``allotctl resource ID`` fetches: the resource's status and its leases."""

    status: ResourceStatus
    leases: ResourceLeases


_nodes = AnswerDecoder(NodeList)
_node = AnswerDecoder(NodeView)
_resources = AnswerDecoder(ResourceList)
_resource = AnswerDecoder(ResourceView)
_plan = AnswerDecoder(PlanResponse)
_quotas = AnswerDecoder(QuotaSummary)
_quota_view = AnswerDecoder(QuotaView)
_template = AnswerDecoder(ResourceTemplate)


def nodes_table(body: bytes) -> str:
    nodes = _nodes.decode(body).nodes
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
                _state(node),
                f"{len(inventory.offered())}/{len(inventory.online)}",
                inventory.core_count(),
                len(inventory.numa_nodes),
                format_memory_approx(inventory.memory),
                gpus,
                _pressure_cell(node),
                age(node.state_since),
                node.reason or "-",
            )
        )
    headers = [
        "NAME",
        "STATE",
        "CPUS",
        "CORES",
        "NUMA",
        "MEMORY",
        "GPUS",
        "PRESSURE",
        "SINCE",
        "REASON",
    ]
    return table(headers, rows)


def _state(node: NodeView) -> str:
    return f"{node.state},cordoned" if node.cordoned else node.state


def _pressure_cell(node: NodeView) -> str:
    """``72%,under`` for a node under CPU pressure, ``12%`` otherwise, ``-`` unknown."""
    pressure = node.pressure
    if pressure is None:
        return "-"
    return f"{pressure.avg10:.0f}%" + (",under" if pressure.under else "")


def _pressure_line(node: NodeView) -> str:
    """``under pressure for 2m: 72.0% (PSI some avg10; 65.3% over 60 s)``."""
    pressure = node.pressure
    if pressure is None:
        return "- (its agent has reported none)"
    state = "under pressure" if pressure.under else "not under pressure"
    if pressure.source == "psi":
        figure = f"{pressure.avg10:.1f}% (PSI some avg10"
        if pressure.avg60 is not None:
            figure += f"; {pressure.avg60:.1f}% over 60 s"
        figure += ")"
    else:
        figure = f"{pressure.avg10:.1f}% (CFS periods throttled)"
    return f"{state} for {age(pressure.since)}: {figure}"


def node_details(body: bytes) -> str:
    node = _node.decode(body)
    head = [
        ("name", node.name),
        ("state", f"{_state(node)} for {age(node.state_since)}"),
        ("reason", node.reason or "-"),
        ("registered", f"{timestamp(node.registered_at)} ({age(node.registered_at)} ago)"),
        ("agent", f"{node.agent_version or 'unknown version'} at {node.address or '?'}"),
        ("cpu pressure", _pressure_line(node)),
    ]
    return table(None, head) + "\n\n" + describe_inventory(node.inventory)


def resources_tables(body: bytes) -> str:
    listing = _resources.decode(body)
    if not listing.templates and not listing.resources:
        return "no resource templates are configured"
    templates = table(
        ["TEMPLATE", "KIND", "CAPACITY", "SAFE", "LEASE", "REFRESH", "LEARNING", "DESCRIPTION"],
        [
            (
                t.identifier_glob,
                t.algorithm.kind,
                amount(t.capacity),
                amount(t.safe_capacity),
                f"{t.algorithm.lease_length:g}s",
                f"{t.algorithm.refresh_interval:g}s",
                f"{t.learning_window:g}s",
                t.description or "-",
            )
            for t in listing.templates
        ],
    )
    if not listing.resources:
        return templates + "\n\nno resource has been requested yet"
    resources = table(
        ["RESOURCE", "TEMPLATE", "KIND", "CAPACITY", "HAS", "WANTS", "CLIENTS", "LEARNING"],
        [
            (
                r.resource_id,
                r.template or "-",
                r.kind,
                amount(r.capacity),
                amount(r.sum_has),
                amount(r.sum_wants),
                r.clients,
                "yes" if r.learning else "no",
            )
            for r in listing.resources
        ],
    )
    return templates + "\n\n" + resources


def template_view(body: bytes) -> str:
    """One resource template as a write answers it."""
    t = _template.decode(body)
    rows = [
        ("template", t.identifier_glob),
        ("algorithm", t.algorithm.kind),
        ("capacity", amount(t.capacity)),
        ("safe capacity", amount(t.safe_capacity)),
        ("lease", f"{t.algorithm.lease_length:g}s"),
        ("refresh", f"{t.algorithm.refresh_interval:g}s"),
        ("learning", f"{t.learning_window:g}s"),
        ("description", t.description or "-"),
    ]
    return table(None, rows)


def resource_details(body: bytes) -> str:
    view = _resource.decode(body)
    status = view.status
    head = table(
        None,
        [
            ("resource", status.resource_id),
            ("template", status.template or "- (no template matches any more)"),
            ("algorithm", status.kind),
            ("capacity", amount(status.capacity)),
            ("safe capacity", amount(status.safe_capacity)),
            ("leased (has)", amount(status.sum_has)),
            ("wanted", amount(status.sum_wants)),
            ("clients", str(status.clients)),
            ("lease", f"{status.lease_length:g}s, refreshed every {status.refresh_interval:g}s"),
            ("learning", "yes" if status.learning else "no"),
        ],
    )
    return head + "\n\n" + _leases_text(view.leases)


def _leases_text(view: ResourceLeases) -> str:
    """The leases shown by name ("-": the cluster's own clients), then the totals of
    those of other namespaces, which a namespace token sees only that way."""
    parts: list[str] = []
    if view.leases:
        now = time.time()
        rows = [
            (
                lease.namespace or "-",
                lease.client_id,
                amount(lease.has),
                amount(lease.wants),
                lease.subclients,
                lease.priority,
                f"{max(0.0, lease.expiry_time - now):.1f}s",
            )
            for lease in view.leases
        ]
        headers = ["NAMESPACE", "CLIENT", "HAS", "WANTS", "SUBCLIENTS", "PRIORITY", "EXPIRES IN"]
        parts.append(table(headers, rows))
    others = view.others
    if others.clients:
        parts.append(
            f"{others.clients} lease(s) of other namespaces, not shown:"
            f" has {amount(others.has)}, wants {amount(others.wants)}"
        )
    return "\n\n".join(parts) or "no leases"


def plan_tables(body: bytes) -> str:
    plan = _plan.decode(body)
    cpu = format_cpu(plan.cpu_pieces, share_base=plan.share_base)
    mode = "cpu-bind" if plan.cpu_bind else "memory mode (CFS quota on the shared pool)"
    memory = format_memory_approx(plan.memory) if plan.memory else "no memory bound"
    head = table(
        None,
        [
            ("request", f"{cpu} CPU + {memory} each, {mode}"),
            ("placing", f"{plan.count} with strategy {plan.strategy}"),
            ("capacity", f"{plan.capacity} more on {len(plan.nodes)} node(s)"),
            *(("left out", f"{name}: {why}") for name, why in sorted(plan.skipped_nodes.items())),
        ],
    )
    if not plan.nodes:
        return head + "\n\nno ready nodes to plan on"
    nodes = table(
        ["NODE", "CAPACITY", "EXISTING", "DEPLOY"],
        [(n.name, n.capacity, n.existing, n.deploy) for n in plan.nodes],
    )
    containers = [
        (
            node.name,
            index,
            c.docker.cpuset_cpus,
            "-" if c.fragment is None else f"{c.fragment} ({c.cores[c.fragment]} pieces)",
            "-" if c.numa is None else c.numa,
            c.docker.cpu_shares,
            "none" if c.docker.cpu_quota < 0 else c.docker.cpu_quota,
            format_memory_approx(c.docker.mem_limit) if c.docker.mem_limit else "-",
        )
        for node in plan.nodes
        for index, c in enumerate(node.containers, start=1)
    ]
    headers = ["NODE", "#", "CPUSET", "FRAGMENT", "NUMA", "SHARES", "QUOTA", "MEM LIMIT"]
    return f"{head}\n\n{nodes}\n\n{table(headers, containers)}"


def quotas_table(body: bytes) -> str:
    summary = _quotas.decode(body)
    if not summary.quotas:
        return "no quotas"
    rows = [
        (
            q.name,
            "composite" if q.kind == "CompositeElasticQuota" else "elastic",
            ",".join(q.namespaces),
            _amounts(q.min),
            "-" if q.max is None else _amounts(q.max),
            _amounts(q.status.used),
            _amounts(q.status.over_quota),
        )
        for q in summary.quotas
    ]
    headers = ["NAME", "KIND", "NAMESPACES", "MIN", "MAX", "USED", "OVER-QUOTA"]
    text = table(headers, rows)
    if summary.warnings:
        text += "\n\n" + "\n".join(f"warning: {warning}" for warning in summary.warnings)
    return text


def quota_details(body: bytes, name: str) -> str:
    """One quota, read from the listing (names are unique across both kinds)."""
    found = [q for q in _quotas.decode(body).quotas if q.name == name]
    if not found:
        raise LookupError(f"no quota named {name!r}")
    return _quota(found[0])


def quota_view(body: bytes) -> str:
    """One quota as a write answers it."""
    return _quota(_quota_view.decode(body))


def _quota(q: QuotaView) -> str:
    head = table(
        None,
        [
            ("name", q.name),
            ("kind", q.kind),
            ("namespaces", ", ".join(q.namespaces)),
        ],
    )
    resources = sorted({*q.min, *(q.max or {}), *q.status.used})
    rows = [
        (
            r,
            q.min.get(r, 0),
            "-" if q.max is None or r not in q.max else q.max[r],
            q.status.used.get(r, 0),
            q.status.over_quota.get(r, "-"),
        )
        for r in resources
    ]
    if not rows:
        return head + "\n\nno resources named: nothing guaranteed, no limit"
    return head + "\n\n" + table(["RESOURCE", "MIN", "MAX", "USED", "OVER-QUOTA"], rows)


def _amounts(amounts: dict[str, int | str]) -> str:
    """``cpu=1.5, memory=160Mi``: memory in binary units, the rest as the API gives it."""
    return ", ".join(f"{r}={_amount(r, v)}" for r, v in amounts.items()) or "-"


def _amount(resource: str, value: int | str) -> str:
    if resource == "memory" and isinstance(value, int):
        return format_memory_approx(value)
    return str(value)


def pools_table(body: bytes) -> str:
    listing = json.loads(body)
    rows = []
    for pool in listing["pools"]:
        config, spy = pool["config"], pool["introspection"]
        integral = config.get("integral_guarantees", {})
        share = pool["share"] or {}
        duration = spy.get("estimated_burst_usage_duration_seconds")
        rows.append(
            (
                pool["name"],
                config.get("parent") or ("-" if pool["name"] == "<root>" else "<root>"),
                integral.get("guarantee_type", "none"),
                f"{config.get('weight', 1.0):g}",
                _ratio(spy.get("specified_resource_flow_ratio")),
                _ratio(spy.get("specified_burst_ratio")),
                _ratio(share.get("total")),
                _ratio(spy.get("accumulated_resource_ratio_volume"), unit=" s"),
                "-" if duration is None else f"{duration:.0f}s",
            )
        )
    headers = ["POOL", "PARENT", "TYPE", "WEIGHT", "FLOW", "BURST", "SHARE", "VOLUME", "BURST FOR"]
    text = table(headers, rows)
    if listing["alerts"]:
        text += "\n\n" + "\n".join(f"alert: {alert}" for alert in listing["alerts"])
    return text


def pool_details(body: bytes) -> str:
    pool = json.loads(body)
    rows: list[tuple[str, object]] = [("pool", pool["name"])]
    rows += [(f"config {key}", json.dumps(value)) for key, value in pool["config"].items()]
    rows += [(f"share {key}", _ratio(value)) for key, value in (pool["share"] or {}).items()]
    rows += [(key, json.dumps(value)) for key, value in pool["introspection"].items()]
    rows += [(f"host {node}", _host(pressure)) for node, pressure in pool.get("hosts", {}).items()]
    return table(None, rows)


def _host(pressure: dict[str, Any] | None) -> str:
    """A host of the pool's containers: ``cpu pressure 72% (psi), under pressure``."""
    if pressure is None:
        return "cpu pressure unknown"
    state = "under pressure" if pressure["under"] else "not under pressure"
    return f"cpu pressure {pressure['avg10']:.0f}% ({pressure['source']}), {state}"


def simulation_table(body: bytes) -> str:
    steps = json.loads(body)["steps"]
    if not steps:
        return "the timeline made no steps"
    last = steps[-1]
    rows = [
        (
            name,
            pool["integral_guarantee_type"],
            _ratio(max(s["pools"][name]["total"] for s in steps)),
            _ratio(pool["total"]),
            _ratio(pool["volume"], unit=" s"),
        )
        for name, pool in sorted(last["pools"].items())
    ]
    head = f"{len(steps)} updates over {last['time'] - steps[0]['time'] + steps[0]['dt']:g} s"
    headers = ["POOL", "TYPE", "MAX SHARE", "LAST SHARE", "LAST VOLUME"]
    return head + "\n\n" + table(headers, rows)


def _ratio(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{unit}"


def amount(value: float | None) -> str:
    """A capacity as an operator reads it: '-' when unset, 'unlimited' for -1."""
    if value is None:
        return "-"
    if value == -1:
        return "unlimited"
    return f"{value:.6g}"


def age(since: float, now: float | None = None) -> str:
    """A duration as an operator reads it at a glance: 45s, 12m, 5h, 3d."""
    seconds = max(0, int((time.time() if now is None else now) - since))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
