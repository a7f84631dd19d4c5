"""Deployments and containers over HTTP.

    POST   /v1/namespaces/{ns}/deployments           admit, place, commit, push (201);
                                                     ?dry_run=true: what it would do (200)
    GET    /v1/namespaces/{ns}/deployments           the namespace's deployments
    GET    /v1/namespaces/{ns}/deployments/{name}    one, with its containers
    DELETE /v1/namespaces/{ns}/deployments/{name}    it and all its containers
    POST   /v1/namespaces/{ns}/deployments/{name}/scale   {"count": N}: add or remove
    GET    /v1/containers?namespace=&deployment=&node=&state=&capacity=
    GET    /v1/containers/{id}                       placement, limits, label, history
    PATCH  /v1/containers/{id}                       realloc by a delta, live (no restart)
    POST   /v1/containers/{id}/replace               {"image", "command"?}: a new container
                                                     in the same allocation
    DELETE /v1/containers/{id}
    GET    /v1/events?namespace=&deployment=&container=&node=&kind=&since=

A namespace token sees and changes only its namespaces (403 otherwise, nothing changes);
listing containers with it shows only its namespaces' containers. A refused deployment
answers with the reason (quota, capacity, invalid, conflict), the rule's code and the
numbers in ``details``. Creating and scaling name the ready nodes placement left out
because they are cordoned or cannot be used (``skipped_nodes``: node -> why), in the
answer or in the refusal's details.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import msgspec
from aiohttp import web
from msgspec import Meta

from coordinator.deployments.container_state import container_state
from coordinator.deployments.outcome import DeployOutcome, DeployRefused
from coordinator.deployments.service import DeploymentService
from coordinator.errors import ApiError, NotFound, Unprocessable
from coordinator.http.bodies import json_response, read_body
from coordinator.http.host_acks import hosts_acknowledged
from coordinator.http.roles import principal_of, require_namespace
from coordinator.keys import DEPLOYMENTS
from coordinator.placement import Delta
from shared.api.containers import CONTAINER_FILTERS, ContainerRecord, ContainerView
from shared.api.deployments import (
    MAX_COUNT,
    DeploymentRecord,
    DeploymentSpec,
    DeploymentView,
    DeployPreview,
    PlacedView,
)
from shared.api.events import EVENT_FILTERS
from shared.codec import json_decoder
from shared.container_spec import container_problems
from shared.resource_names import is_rfc1123_label

_decode_spec: msgspec.json.Decoder[DeploymentSpec] = json_decoder(DeploymentSpec)


class DeltaSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A realloc: signed changes ("-0.5", "256Mi"); ``cpu`` / ``memory`` change request
    and limit together."""

    cpu: str | int | float | None = None
    memory: str | int | None = None
    cpu_request: str | int | float = 0
    cpu_limit: str | int | float = 0
    memory_request: str | int = 0
    memory_limit: str | int = 0
    cpu_bind: bool | None = None
    soft_memory: bool | None = None


_decode_delta: msgspec.json.Decoder[DeltaSpec] = json_decoder(DeltaSpec)


class ScaleSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    count: Annotated[int, Meta(ge=0, le=MAX_COUNT)]


_decode_scale: msgspec.json.Decoder[ScaleSpec] = json_decoder(ScaleSpec)


class ReplaceSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    image: Annotated[str, Meta(min_length=1)]
    command: list[str] | None = None  # None: the old container's


_decode_replace: msgspec.json.Decoder[ReplaceSpec] = json_decoder(ReplaceSpec)


async def create_deployment(request: web.Request) -> web.Response:
    """201 with what was placed; with ``?dry_run=true``, 200 with what would be, nothing
    changed (a refusal is answered as the deploy would answer it)."""
    _check_filters(request, ("dry_run",))
    dry_run = _flag(request, "dry_run")
    namespace = _namespace(request)
    spec = await read_body(request, _decode_spec, "deployment")
    _check_container(spec.image, spec.command, spec.env, spec.labels)
    service = request.app[DEPLOYMENTS]
    with _skipped_named(service):
        if dry_run:
            outcome, preempted = await service.preview_deploy(namespace, spec)
            placed = _placed_view(service, outcome)
            fields = msgspec.structs.asdict(placed)
            return json_response(DeployPreview(**fields, dry_run=True, preempted=preempted))
        outcome = await service.deploy(namespace, spec)
    return json_response(_placed_view(service, outcome), status=201)


def _flag(request: web.Request, name: str) -> bool:
    """A true/false query parameter, false when absent; 400 for anything else."""
    value = request.query.get(name, "false")
    if value not in ("true", "false"):
        raise ApiError(f"{name} must be true or false, not {value[:20]!r}", code="invalid_request")
    return value == "true"


def _placed_view(service: DeploymentService, outcome: DeployOutcome) -> PlacedView:
    return PlacedView(
        deployment=outcome.deployment,
        containers=[container_view(service, record) for record in outcome.containers],
        skipped_nodes=service.skipped_nodes(),
    )


@contextlib.contextmanager
def _skipped_named(service: DeploymentService) -> Iterator[None]:
    """A refusal also names the nodes placement left out, if there are any."""
    try:
        yield
    except DeployRefused as refusal:
        if skipped := service.skipped_nodes():
            refusal.details["skipped_nodes"] = skipped
        raise


async def list_deployments(request: web.Request) -> web.Response:
    namespace = _namespace(request)
    service = request.app[DEPLOYMENTS]
    found = service.deployments(namespace)
    return json_response({"deployments": [deployment_view(service, d) for d in found]})


async def get_deployment(request: web.Request) -> web.Response:
    service, deployment = _deployment(request)
    return json_response(deployment_view(service, deployment))


async def scale_deployment(request: web.Request) -> web.Response:
    service, deployment = _deployment(request)
    body = await read_body(request, _decode_scale, "scale")
    key = (deployment.namespace, deployment.spec.name)
    with _skipped_named(service):
        outcome = await service.scale(*key, body.count)
    acknowledged = await hosts_acknowledged(request, _stopping_nodes(service, *key))
    view = _placed_view(service, outcome)
    return json_response(msgspec.structs.replace(view, hosts_acknowledged=acknowledged))


def _stopping_nodes(service: DeploymentService, namespace: str, name: str) -> set[str]:
    """The nodes the deployment's stopping containers are on: those a removal concerns."""
    return {record.node for record in service.stopping_of(namespace, name)}


async def delete_deployment(request: web.Request) -> web.Response:
    service, deployment = _deployment(request)
    key = (deployment.namespace, deployment.spec.name)
    removed = await service.delete_deployment(*key)
    acknowledged = await hosts_acknowledged(request, _stopping_nodes(service, *key))
    return json_response(
        {"deleted": key[1], "containers": removed, "hosts_acknowledged": acknowledged}
    )


async def list_events(request: web.Request) -> web.Response:
    """Newest last. A namespace token sees its namespaces' events only (not, say, a node
    that was lost, which belongs to no namespace)."""
    _check_filters(request, (*EVENT_FILTERS, "since"))
    since_text = request.query.get("since", "0")
    if not since_text.isdigit():
        raise ApiError(f"since {since_text!r} is not a sequence number", code="invalid_request")
    wanted = {key: request.query[key] for key in EVENT_FILTERS if key in request.query}
    principal = principal_of(request)
    found = [
        event
        for event in request.app[DEPLOYMENTS].events.events(since=int(since_text), **wanted)
        if principal.admin or principal.may_use(event.namespace)
    ]
    return json_response({"events": found})


async def list_containers(request: web.Request) -> web.Response:
    _check_filters(request, CONTAINER_FILTERS)
    principal = principal_of(request)
    service = request.app[DEPLOYMENTS]
    views = [
        container_view(service, record)
        for record in (*service.containers(), *service.all_pending())
        if principal.may_use(record.namespace)
    ]
    wanted = {key: request.query[key] for key in CONTAINER_FILTERS if key in request.query}
    chosen = [view for view in views if all(_field(view, k) == v for k, v in wanted.items())]
    return json_response({"containers": chosen})


async def get_container(request: web.Request) -> web.Response:
    service, record = _container(request)
    return json_response(container_view(service, record))


async def realloc_container(request: web.Request) -> web.Response:
    service, record = _container(request)
    body = await read_body(request, _decode_delta, "realloc")
    delta = Delta(**msgspec.structs.asdict(body))
    changed = await service.realloc(record.id, delta)
    return json_response(container_view(service, changed))


async def replace_container(request: web.Request) -> web.Response:
    service, record = _container(request)
    body = await read_body(request, _decode_replace, "replace")
    _check_container(body.image, body.command or [], {}, {})
    fresh = await service.replace(record.id, body.image, body.command)
    await hosts_acknowledged(request, {record.node})  # past the bound, only logged
    return json_response(container_view(service, fresh), status=201)


async def delete_container(request: web.Request) -> web.Response:
    """The container stops; a stand-in keeps its deployment's count, placed at once
    where there is room, else pending."""
    service, record = _container(request)
    done = await service.delete_container(record.id)
    stand_in = done.stand_ins[record.id]
    acknowledged = await hosts_acknowledged(request, {record.node})
    return json_response(
        {
            "deleted": record.id,
            "stand_in": stand_in,
            "node": done.placed.get(stand_in, ""),
            "pending": done.waiting.get(stand_in, ""),
            "hosts_acknowledged": acknowledged,
        }
    )


def _check_filters(request: web.Request, known: tuple[str, ...]) -> None:
    unknown = sorted(set(request.query) - set(known))
    if unknown:
        raise ApiError(
            f"unknown filter {', '.join(unknown)}",
            code="invalid_request",
            details={"filters": list(known)},
        )


def _check_container(
    image: str, command: list[str], env: dict[str, str], labels: dict[str, str]
) -> None:
    """422 ``invalid_container`` for what the agent would refuse or fail to create for
    ever. Checked here, with a message listing every problem, rather than in a
    ``__post_init__``, which would run again on every stored spec read back."""
    problems = container_problems(image, command, env, labels)
    if problems:
        raise Unprocessable(
            "invalid container: " + "; ".join(problems),
            code="invalid_container",
            details={"problems": problems},
        )


def _namespace(request: web.Request) -> str:
    """The path's namespace: 422 ``invalid_namespace`` unless it is a namespace name (an
    RFC 1123 label), 403 unless the token may act in it."""
    namespace = request.match_info["namespace"]
    if not is_rfc1123_label(namespace):
        raise Unprocessable(
            f"namespace {namespace[:100]!r} is not a namespace name (a-z, 0-9 and '-',"
            " starting and ending with a letter or digit, at most 63 characters)",
            code="invalid_namespace",
            details={"namespace": namespace[:100]},
        )
    require_namespace(request, namespace)
    return namespace


def _deployment(request: web.Request) -> tuple[DeploymentService, DeploymentRecord]:
    namespace, name = _namespace(request), request.match_info["name"]
    service = request.app[DEPLOYMENTS]
    deployment = service.deployment(namespace, name)
    if deployment is None:
        raise NotFound(f"no deployment {namespace}/{name}")
    return service, deployment


def _container(request: web.Request) -> tuple[DeploymentService, ContainerRecord]:
    container_id = request.match_info["id"]
    service = request.app[DEPLOYMENTS]
    record = service.container(container_id) or service.pending(container_id)
    # A container of a namespace the token may not use is as unknown to it as a missing one.
    if record is None or not principal_of(request).may_use(record.namespace):
        raise NotFound(f"no container {container_id}")
    return service, record


def container_view(service: DeploymentService, record: ContainerRecord) -> ContainerView:
    observed = service.observed(record.id)
    state, reason = container_state(record, observed)
    if state == "pending":
        reason = service.why_pending(record.id)
    return ContainerView(record=record, state=state, observed=observed, reason=reason)


def deployment_view(service: DeploymentService, deployment: DeploymentRecord) -> DeploymentView:
    key = (deployment.namespace, deployment.spec.name)
    mine = sorted(
        (*service.of_deployment(*key), *service.pending_of(*key), *service.stopping_of(*key)),
        key=lambda c: c.id,
    )
    containers = [container_view(service, c) for c in mine]
    return DeploymentView(deployment=deployment, containers=containers)


def _field(view: ContainerView, name: str) -> str:
    if name == "state":
        return view.state
    value: str = getattr(view.record, name)
    return value


def add_deployment_routes(app: web.Application) -> None:
    deployments = "/v1/namespaces/{namespace}/deployments"
    app.router.add_post(deployments, create_deployment)
    app.router.add_get(deployments, list_deployments)
    app.router.add_get(deployments + "/{name}", get_deployment)
    app.router.add_delete(deployments + "/{name}", delete_deployment)
    app.router.add_post(deployments + "/{name}/scale", scale_deployment)
    app.router.add_get("/v1/containers", list_containers)
    app.router.add_get("/v1/containers/{id}", get_container)
    app.router.add_patch("/v1/containers/{id}", realloc_container)
    app.router.add_delete("/v1/containers/{id}", delete_container)
    app.router.add_post("/v1/containers/{id}/replace", replace_container)
    app.router.add_get("/v1/events", list_events)
