"""How ``allotctl`` shows deployments, containers and events: each view takes the API's
answer (JSON of the ``ContainerView`` / ``DeploymentView`` / ``Event`` structs) and gives
the text a person reads.

A container bound to cores (cpu-bind) shows its cpuset; one without bound cores runs on
its node's shared pool, whose CPUs change as bound containers come and go, so its
cpuset at placement is shown only in its details.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from allotctl.views import age, timestamp
from client.answers import AnswerDecoder
from shared.api.containers import ContainerList, ContainerRecord, ContainerView
from shared.api.deployments import (
    Deleted,
    DeploymentList,
    DeploymentSpec,
    DeploymentView,
    DeployPreview,
)
from shared.api.events import EventList
from shared.protocol import Limits
from shared.quantity import format_memory, format_memory_approx
from shared.text import table

_container = AnswerDecoder(ContainerView)
_containers = AnswerDecoder(ContainerList)
_deployment = AnswerDecoder(DeploymentView)
_placed = AnswerDecoder(DeployPreview)
_deployments = AnswerDecoder(DeploymentList)
_deleted = AnswerDecoder(Deleted)
_events = AnswerDecoder(EventList)

COLUMNS: dict[str, Callable[[ContainerView], object]] = {
    "ID": lambda view: view.record.id,
    "NAMESPACE": lambda view: view.record.namespace,
    "DEPLOYMENT": lambda view: view.record.deployment,
    "NODE": lambda view: view.record.node,
    "STATE": lambda view: view.state,
    "CAPACITY": lambda view: view.record.capacity or "-",
    "CPUSET": lambda view: view.record.limits.cpuset_cpus if view.record.cpu_bind else "shared",
    "SHARES": lambda view: view.record.limits.cpu_shares,
    "QUOTA": lambda view: quota(view.record.limits),
    "MEMORY": lambda view: memory(view.record.limits),
    "REASON": lambda view: view.reason or "-",
}
PLACED = ["ID", "NODE", "CAPACITY", "CPUSET", "SHARES", "QUOTA", "MEMORY"]
IN_DEPLOYMENT = [
    "ID",
    "NODE",
    "STATE",
    "CAPACITY",
    "CPUSET",
    "SHARES",
    "QUOTA",
    "MEMORY",
    "REASON",
]
LISTED = ["ID", "NAMESPACE", "DEPLOYMENT", *IN_DEPLOYMENT[1:]]
EVENT_SUBJECT = ("namespace", "deployment", "container", "node")  # "-" when it has none


def placed_table(body: bytes) -> str:
    """What ``deploy`` placed where (or, in a dry run, would place, and what it would
    preempt), and the nodes it left out because they cannot be used."""
    view = _placed.decode(body)
    deployment = view.deployment
    done = "would deploy" if view.dry_run else "deployed"
    head = f"{done} {deployment.namespace}/{deployment.spec.name}: "
    lines = [head + f"{len(view.containers)} container(s)", "", containers_of(view, PLACED)]
    if view.dry_run:
        lines += ["", f"would preempt: {', '.join(view.preempted) or 'nothing'}"]
        lines.append("(a dry run: nothing was changed)")
    if view.skipped_nodes:
        lines.append("")
        lines += [
            f"node {name} left out: {why}" for name, why in sorted(view.skipped_nodes.items())
        ]
    return "\n".join(lines)


def deployments_table(body: bytes, namespace: str) -> str:
    views = _deployments.decode(body).deployments
    if not views:
        return f"no deployments in namespace {namespace}"
    rows = [
        (
            view.deployment.spec.name,
            view.deployment.spec.image,
            view.deployment.spec.count,
            view.deployment.spec.resources.cpu,
            _quantity(view.deployment.spec.resources.memory),
            _yes(view.deployment.spec.cpu_bind),
            view.deployment.spec.strategy,
            f"{sum(v.state == 'running' for v in view.containers)}"
            f"/{sum(v.state != 'stopping' for v in view.containers)}",
        )
        for view in views
    ]
    headers = ["NAME", "IMAGE", "COUNT", "CPU", "MEMORY", "CPU-BIND", "STRATEGY", "RUNNING/TOTAL"]
    return table(headers, rows)


def deployment_details(body: bytes) -> str:
    view = _deployment.decode(body)
    deployment, spec = view.deployment, view.deployment.spec
    head = table(
        None,
        [
            ("deployment", f"{deployment.namespace}/{spec.name}"),
            ("image", spec.image),
            ("command", shlex.join(spec.command) or "- (the image's)"),
            ("count", f"{spec.count}: {states(view.containers)}"),
            *_resources(spec),
            ("strategy", _strategy(spec)),
            ("pool", spec.pool or "- (the namespace's)"),
            ("priority", spec.priority),
            ("restart policy", spec.restart_policy),
            ("stop timeout", f"{spec.stop_timeout_seconds}s"),
            ("env", pairs(spec.env)),
            ("labels", pairs(spec.labels)),
            ("created", f"{timestamp(deployment.created)} ({age(deployment.created)} ago)"),
        ],
    )
    if not view.containers:
        return head + "\n\nno containers"
    return head + "\n\n" + containers_of(view, IN_DEPLOYMENT)


def containers_table(body: bytes) -> str:
    views = _containers.decode(body).containers
    if not views:
        return "no containers"
    return _table(views, LISTED)


def container_details(body: bytes) -> str:
    view = _container.decode(body)
    record = view.record
    head = table(
        None,
        [
            ("id", record.id),
            ("deployment", f"{record.namespace}/{record.deployment}"),
            ("node", record.node),
            ("image", record.image),
            ("command", shlex.join(record.command) or "- (the image's)"),
            ("capacity", record.capacity or "- (no quota governs it)"),
            *limits_rows(record),
            ("holds", _holds(record)),
            *_swap(record),
            *_stopping(record),
            *_observed(view),
            ("restart policy", record.restart_policy),
            ("pool", record.pool),
            ("priority", record.priority),
            ("env", pairs(record.env)),
            ("labels", pairs(record.labels)),
            ("created", f"{timestamp(record.created)} ({age(record.created)} ago)"),
        ],
    )
    if not record.history:
        return head
    history = table(
        ["AT", "EVENT", "DETAIL"],
        [(timestamp(entry.at), entry.event, entry.detail) for entry in record.history],
    )
    return head + "\n\n" + history


def realloc_view(body: bytes) -> str:
    """A container's limits after a realloc."""
    record = _container.decode(body).record
    rows = [("container", f"{record.id} on {record.node}"), *limits_rows(record)]
    return table(None, rows)


def replaced_view(body: bytes, old: str) -> str:
    """The container that took over ``old``'s allocation: its id, node, image and limits."""
    record = _container.decode(body).record
    rows = [
        ("replaced", old),
        ("container", f"{record.id} on {record.node}"),
        ("image", record.image),
        ("command", shlex.join(record.command) or "- (the image's)"),
        *limits_rows(record),
    ]
    return table(None, rows)


def events_table(body: bytes, now: float | None = None) -> str:
    """Oldest first, as the API lists them; AGE is counted back from ``now``."""
    found = _events.decode(body).events
    if not found:
        return "no events"
    headers = ["SEQ", "AGE", "KIND", *(field.upper() for field in EVENT_SUBJECT), "REASON"]
    rows = [
        (
            event.sequence,
            age(event.at, now),
            event.kind,
            *(getattr(event, field) or "-" for field in EVENT_SUBJECT),
            event.reason,
        )
        for event in found
    ]
    return table(headers, rows)


def deleted_view(body: bytes, kind: str, names: list[str]) -> str:
    """``names`` as given to ``delete``: a deployment's namespace and name, or an id."""
    deleted = _deleted.decode(body)
    if kind == "container":
        where = f"on {deleted.node}" if deleted.node else f"pending: {deleted.pending}"
        return f"deleted container {deleted.deleted}; its stand-in {deleted.stand_in} is {where}"
    removed = ", ".join(deleted.containers) or "-"
    count = len(deleted.containers)
    return (
        f"deleted deployment {names[0]}/{deleted.deleted} and its {count} container(s): {removed}"
    )


def limits_rows(record: ContainerRecord) -> list[tuple[str, object]]:
    """A container's requests and the Docker limits that enforce them."""
    limits, requests = record.limits, record.requests.items()
    if record.cpu_bind:
        cpuset = f"{limits.cpuset_cpus} (bound)"
    else:
        cpuset = f"the node's shared pool ({limits.cpuset_cpus or '-'} when placed)"
    return [
        ("requests", pairs({k: _quantity(v) if k == "memory" else v for k, v in requests})),
        ("cpuset", cpuset),
        ("cpu shares", limits.cpu_shares),
        ("cpu quota", quota(limits)),
        ("memory", _memory_limits(limits)),
    ]


def containers_of(view: DeploymentView, headers: list[str]) -> str:
    return _table(view.containers, headers) if view.containers else "no containers"


def states(views: Sequence[ContainerView]) -> str:
    """``2 running, 1 pending``: how many containers are in each state; those stopping,
    which their deployment no longer counts, after a semicolon (``...; 2 stopping``)."""
    counted = Counter(view.state for view in views if view.state != "stopping")
    text = ", ".join(f"{n} {state}" for state, n in sorted(counted.items())) or "none placed"
    stopping = sum(view.state == "stopping" for view in views)
    return f"{text}; {stopping} stopping" if stopping else text


def why_view(body: bytes, target: str) -> str:
    """Why a container is in its state, or a deployment's containers are in theirs: one
    line each, pending ones with the reason."""
    if "/" not in target:
        return _why_line(_container.decode(body))
    view = _deployment.decode(body)
    spec = view.deployment.spec
    head = f"{view.deployment.namespace}/{spec.name} counts {spec.count}: {states(view.containers)}"
    return "\n".join([head, *(f"  {_why_line(v)}" for v in view.containers)])


def _why_line(view: ContainerView) -> str:
    record = view.record
    if view.state == "pending":
        return f"{record.id} is pending: {view.reason or '-'}"
    detail = f" ({view.reason})" if view.reason else ""
    return f"{record.id} is {view.state} on {record.node}{detail}"


def quota(limits: Limits) -> str:
    """The CFS quota per period in microseconds, as Docker takes it; "none" unbounded."""
    return "none" if limits.cpu_quota < 0 else f"{limits.cpu_quota}/{limits.cpu_period}"


def memory(limits: Limits) -> str:
    """The hard limit, or the reservation of a soft-memory container; "-" for neither."""
    if limits.mem_limit:
        return format_memory(limits.mem_limit)
    if limits.mem_reservation:
        return f"soft {format_memory(limits.mem_reservation)}"
    return "-"


def _holds(record: ContainerRecord) -> str:
    """The devices and extended resources the container holds on its node."""
    held = [*record.gpus, *(f"{name}={n}" for name, n in sorted(record.extended.items()))]
    return ", ".join(held) or "-"


def pairs(values: Mapping[str, object]) -> str:
    return ", ".join(f"{key}={value}" for key, value in values.items()) or "-"


def _table(views: Sequence[ContainerView], headers: list[str]) -> str:
    return table(headers, [[COLUMNS[header](view) for header in headers] for view in views])


def _resources(spec: DeploymentSpec) -> list[tuple[str, object]]:
    resources = spec.resources
    cpu = f"{resources.cpu} per container"
    if resources.cpu_limit is not None:
        cpu += f", limit {resources.cpu_limit}"
    if spec.cpu_bind:
        cpu += ", bound cores (cpu-bind)"
    memory = f"{_quantity(resources.memory)} per container"
    if resources.memory_limit is not None:
        memory += f", limit {_quantity(resources.memory_limit)}"
    if spec.soft_memory:
        memory += ", soft (reserved, not limited)"
    return [("cpu", cpu), ("memory", memory)]


def _strategy(spec: DeploymentSpec) -> str:
    if not spec.nodes_limit:
        return spec.strategy
    return f"{spec.strategy}, on {spec.nodes_limit} node(s) at most"


def _swap(record: ContainerRecord) -> list[tuple[str, object]]:
    """A replace under way, seen from either side; nothing otherwise."""
    if record.replaces:
        return [("replacing", f"{record.replaces} (until this one has run for a while)")]
    if record.replaced_by:
        return [("replaced by", f"{record.replaced_by} (stopped, kept until the swap ends)")]
    return []


def _stopping(record: ContainerRecord) -> list[tuple[str, object]]:
    """Why a container no longer desired is stopping, and what it still holds."""
    if not record.stopping:
        return []
    held = f"its allocation stays on {record.node} until its agent reports it removed"
    return [("stopping", f"{record.stopping}; {held}")]


def _observed(view: ContainerView) -> list[tuple[str, object]]:
    """The container's state and why, then what the node's agent last reported: the
    engine's state, the last try to get it running, the limits the engine holds, what the
    container uses, how much it waits for CPU (its pressure), drift."""
    state = ("state", f"{view.state}: {view.reason}" if view.reason else view.state)
    observed = view.observed
    if observed is None:
        return [state]
    text = observed.state
    if observed.started_at:
        text += f", started {observed.started_at}"
    if observed.exit_code is not None:
        text += f", exit code {observed.exit_code}"
    attempt = observed.attempt
    tried = f"{attempt.outcome} {timestamp(attempt.at)}: {attempt.reason}" if attempt else "-"
    held = observed.limits
    engine = f"cpuset {held.cpuset_cpus or '-'}, shares {held.cpu_shares}"
    engine += f", quota {quota(held)}, memory {_memory_limits(held)}"
    cpu = "-" if observed.cpu_usage is None else f"{observed.cpu_usage:.2f} cores"
    memory = "-" if observed.memory_usage is None else format_memory_approx(observed.memory_usage)
    waits = "-" if observed.cpu_pressure is None else f"{observed.cpu_pressure:.1f}%"
    return [
        state,
        ("engine state", text),
        ("last attempt", tried),
        ("engine holds", engine),
        ("uses", f"cpu {cpu}, memory {memory}"),
        ("cpu pressure", waits),
        ("revision", observed.revision),
        ("drift", "; ".join(observed.drift) or "-"),
    ]


def _memory_limits(limits: Limits) -> str:
    if not limits.mem_limit:
        reserved = limits.mem_reservation
        return f"no limit, {format_memory(reserved)} reserved" if reserved else "no limit"
    return (
        f"limit {format_memory(limits.mem_limit)}, with swap"
        f" {format_memory(limits.memswap_limit)}, reserved {format_memory(limits.mem_reservation)}"
    )


def _quantity(value: object) -> object:
    """Memory as written ("64Mi"), or bytes shown in their largest exact unit."""
    if isinstance(value, int) and not isinstance(value, bool):
        return format_memory(value) if value else "-"
    return value


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
