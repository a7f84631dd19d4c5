"""The coordinator's aiohttp application: routes, middlewares and long-lived resources.

Each resource is one ``cleanup_ctx`` generator (set up, yield, tear down), so they open
in order (store, registry, agent hub) and close in reverse. The application holds no
sockets; ``coordinator.main`` binds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import web

from coordinator.agent_hub import AgentHub
from coordinator.auth_failures import FailureBook
from coordinator.config import CoordinatorConfig
from coordinator.deployments.service import DeploymentService
from coordinator.http.auth import AGENT_PATH, AuthRefusals, api_tokens_middleware
from coordinator.http.cluster import add_routes, healthz
from coordinator.http.cluster import metrics as scrape
from coordinator.http.deployments import add_deployment_routes
from coordinator.http.errors import json_errors
from coordinator.http.lease_forward import LEASE_LINK, LeaseLink, forward
from coordinator.http.leases import add_lease_routes
from coordinator.http.node_admin import add_node_admin_routes
from coordinator.http.plans import add_plan_routes
from coordinator.http.pools import add_pool_routes
from coordinator.http.quotas import add_quota_routes
from coordinator.http.timing import request_timing
from coordinator.keys import (
    CONFIG,
    DEPLOYMENTS,
    HUB,
    LEASES,
    METRICS,
    POOLS,
    QUOTAS,
    REFUSALS,
    REGISTRY,
    STORE,
)
from coordinator.lease_worker import LeaseDoor
from coordinator.metrics import Metrics
from coordinator.metrics_deployments import DeploymentCollector
from coordinator.metrics_fleet import LeaderFleet
from coordinator.metrics_leases import LeaseCollector
from coordinator.metrics_nodes import NodeFigures
from coordinator.metrics_pools import PoolCollector
from coordinator.metrics_quotas import QuotaCollector
from coordinator.metrics_store import TimedStore
from coordinator.metrics_usage import ContainerUsage
from coordinator.openapi.document import add_openapi_routes
from coordinator.services.lease_service import LeaseService
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import Loaded, NodeRegistry
from coordinator.store import Store
from coordinator.store.opening import open_store
from coordinator.ui import add_dashboard
from coordinator.warm import WarmState
from shared.logs import get_logger

log = get_logger("allot.coordinator")

MAX_REQUEST_BYTES = 1024 * 1024


def make_app(
    config: CoordinatorConfig,
    store: Store | None = None,
    warm: WarmState | None = None,
    failures: FailureBook | None = None,
    leases: LeaseDoor | None = None,
) -> web.Application:
    """The application; on ``store`` if given (the elected leader's fenced store, which
    outlives the application), else on the store the settings choose; with the node
    records and deployments a standby kept current (``warm``), else read from the store;
    keeping its account of failed authentications in ``failures`` (a fresh book by
    default; a test that fails on purpose may give one that holds nothing back); with
    the lease API forwarded to the lease process behind ``leases`` if given, else served
    here."""
    app = _base_app(config, failures)
    app.cleanup_ctx.append(_store if store is None else _given_store(store))
    app.cleanup_ctx.append(_registry(None if warm is None else warm.nodes))
    if leases is None:
        app.cleanup_ctx.append(_leases)
        app.on_startup.append(_follow_leases_in_metrics)
        add_lease_routes(app)
    else:
        app.cleanup_ctx.append(_lease_link(leases))
        add_lease_routes(app, forward)
    app.cleanup_ctx.append(_quotas)
    app.cleanup_ctx.append(_pools)
    app.cleanup_ctx.append(_deployments(warm))
    app.cleanup_ctx.append(_agent_hub)
    app.on_startup.append(_follow_in_metrics)
    app.on_shutdown.append(_close_agent_sessions)
    add_routes(app)
    add_plan_routes(app)
    add_quota_routes(app)
    add_pool_routes(app)
    add_deployment_routes(app)
    add_node_admin_routes(app)
    add_openapi_routes(app)
    add_dashboard(app, config)
    app.router.add_get(AGENT_PATH, _agent_socket)
    return app


def make_lease_app(config: CoordinatorConfig, store: Store) -> web.Application:
    """The lease process's application (``lease_worker``): the lease API alone, on
    ``store``, with its health and its metrics."""
    app = _base_app(config, None)
    app.cleanup_ctx.append(_given_store(store))
    app.cleanup_ctx.append(_leases)
    app.on_startup.append(_follow_leases_in_metrics)
    add_lease_routes(app)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", scrape)
    return app


def _base_app(config: CoordinatorConfig, failures: FailureBook | None) -> web.Application:
    """An application with the coordinator's middlewares, settings and metrics."""
    metrics = Metrics(leader=True)
    refusals = AuthRefusals(metrics.auth_failures, failures)
    app = web.Application(
        middlewares=[
            request_timing(metrics.http_request_seconds),
            json_errors,
            api_tokens_middleware(config, refusals),
        ],
        client_max_size=MAX_REQUEST_BYTES,
    )
    app[CONFIG] = config
    app[METRICS] = metrics
    app[REFUSALS] = refusals
    return app


async def _agent_socket(request: web.Request) -> web.StreamResponse:
    return await request.app[HUB].handle(request)


async def _follow_in_metrics(app: web.Application) -> None:
    """The figures of every object, taken at each scrape (after the services loaded:
    on_startup runs once every cleanup_ctx has set up)."""
    config, metrics, deployments = app[CONFIG], app[METRICS], app[DEPLOYMENTS]
    fleet = LeaderFleet(app[REGISTRY], deployments)
    metrics.write(NodeFigures(fleet))
    metrics.follow(DeploymentCollector(fleet))
    metrics.write(ContainerUsage(fleet, series_per=config.metrics_container_series))
    metrics.follow(QuotaCollector(app[QUOTAS], deployments, share_base=config.share_base))
    metrics.follow(PoolCollector(app[POOLS]))


async def _follow_leases_in_metrics(app: web.Application) -> None:
    app[METRICS].follow(LeaseCollector(app[LEASES]))


async def _close_agent_sessions(app: web.Application) -> None:
    # on_shutdown runs before the server waits for open connections to finish, and
    # agent sockets never finish by themselves.
    await app[HUB].close_all()


async def _store(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    store = await open_store(config)
    log.info("store opened", store=config.store_location, revision=store.revision)
    app[STORE] = _timed(app, store)
    yield
    await store.close()


def _given_store(store: Store) -> Callable[[web.Application], AsyncIterator[None]]:
    async def given(app: web.Application) -> AsyncIterator[None]:
        app[STORE] = _timed(app, store)
        yield

    return given


def _timed(app: web.Application, store: Store) -> TimedStore:
    metrics = app[METRICS]
    return TimedStore(store, metrics.store_commit_seconds, metrics.store_commit_operations)


def _registry(loaded: list[Loaded] | None) -> Callable[[web.Application], AsyncIterator[None]]:
    async def registry(app: web.Application) -> AsyncIterator[None]:
        app[REGISTRY] = await NodeRegistry.load(
            app[STORE], lease_seconds=app[CONFIG].lease_seconds, loaded=loaded
        )
        yield

    return registry


async def _leases(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    service = await LeaseService.load(app[STORE], config.resources)
    app[LEASES] = service
    sweeper = asyncio.create_task(_sweep_leases(service, config.lease_sweep_seconds))
    yield
    await _stop(sweeper)
    await service.idle()  # what was accepted is committed before the store closes


def _lease_link(door: LeaseDoor) -> Callable[[web.Application], AsyncIterator[None]]:
    async def lease_link(app: web.Application) -> AsyncIterator[None]:
        metrics = app[METRICS]
        # Counted where the requests are decided; the lease process's figures are shown.
        metrics.registry.unregister(metrics.lease_requests)
        async with aiohttp.ClientSession() as session:
            link = LeaseLink(door, session)
            app[LEASE_LINK] = link
            metrics.write(link.families)
            following = asyncio.create_task(link.follow_metrics())
            yield
            await _stop(following)

    return lease_link


async def _quotas(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    app[QUOTAS] = await QuotaService.load(
        app[STORE], share_base=config.share_base, settings=config.quotas
    )
    yield


async def _pools(app: web.Application) -> AsyncIterator[None]:
    # Its state is stored by the deployments' sequencer, last when they stop.
    app[POOLS] = await PoolService.load(app[STORE], app[CONFIG].pools)
    yield


def _deployments(warm: WarmState | None) -> Callable[[web.Application], AsyncIterator[None]]:
    async def deployments(app: web.Application) -> AsyncIterator[None]:
        config = app[CONFIG]
        service = await DeploymentService.load(
            app[STORE],
            app[REGISTRY],
            app[QUOTAS],
            app[POOLS],
            share_base=config.share_base,
            books=None if warm is None else warm.books,
            fresh=None if warm is None else warm.fresh,
            pressure=config.pressure,
            timings=app[METRICS],
        )
        app[DEPLOYMENTS] = service
        # Labels as this version sets them, in case an older one wrote the store: before
        # serving on a cold start; after it on a takeover, which is to cost O(1), while
        # the first requests wait their turn behind it in the sequencer.
        relabelling = None
        if warm is None:
            await service.relabel()
        else:
            relabelling = asyncio.create_task(_relabel_after_takeover(service))
        releaser = asyncio.create_task(_release_lost(service, config.lost_node_grace_seconds))
        # Started here, not with the pools: an update reads the deployments' demands (it
        # failed with a KeyError until they were loaded, on a large store for seconds).
        updater = asyncio.create_task(_update_pools(app))
        scheduler = asyncio.create_task(service.schedule_pending(every=config.scheduler_seconds))
        yield
        await _stop(scheduler)
        await _stop(updater)
        await _stop(releaser)
        if relabelling is not None:
            await relabelling
        await _save_pool_state(service)
        await service.close()

    return deployments


async def _relabel_after_takeover(service: DeploymentService) -> None:
    try:
        await service.relabel()
    except Exception:  # a deposed leader's, say; the next leader relabels again
        log.exception("relabelling the containers after the takeover failed")


async def _save_pool_state(service: DeploymentService) -> None:
    """The pool tree's state, stored on stopping: a restart then credits only the time
    since this (``PoolService``)."""
    try:
        await service.save_pool_state()
    except Exception as error:  # a full disk, a deposed leader: the last state stored stands
        log.warning("pool state not saved on stopping", reason=error)


async def _release_lost(service: DeploymentService, grace: float) -> None:
    """Give up the containers of nodes lost for longer than the grace period."""
    every = max(0.1, min(5.0, grace / 10))
    while True:
        await asyncio.sleep(every)
        try:
            await service.release_lost(grace)
        except Exception:
            log.exception("releasing the containers of lost nodes failed; retrying")


async def _update_pools(app: web.Application) -> None:
    """The fair-share update every fair_share_update_period (or less often while one
    update's CPU would exceed ``UPDATE_CPU_SHARE`` of a core: ``PoolService.pause_after``),
    on the ready nodes' total and the pools' containers; the unbound containers' CPU
    weights (and quotas where a limit says so) then follow the shares, and the tree's
    state is stored when due. A failed store write leaves memory ahead of the store and
    is tried again at the next period (``PoolService``)."""
    service, registry = app[POOLS], app[REGISTRY]
    pause = service.update_period
    while True:
        await asyncio.sleep(pause)
        pause = service.update_period
        try:
            started = time.thread_time()
            total = registry.total()
            deployments = app[DEPLOYMENTS]
            shares = service.update(total, deployments.pool_demands(), deployments.pool_usages())
            spent = time.thread_time() - started
            spent += await deployments.follow_pool_shares(shares, total["cpu"])
            pause = service.pause_after(spent)
            if service.state_due():
                await deployments.save_pool_state()
        except Exception:
            log.exception("pool update failed; retrying at the next period")


async def _sweep_leases(service: LeaseService, every: float) -> None:
    """Drop expired leases of resources nobody asks about (requests drop their own)."""
    while True:
        await asyncio.sleep(every)
        try:
            await service.sweep()
        except Exception:
            log.exception("dropping expired leases failed; retrying")


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _agent_hub(app: web.Application) -> AsyncIterator[None]:
    hub = AgentHub(app[REGISTRY], app[CONFIG], app[METRICS], app[DEPLOYMENTS], app[REFUSALS])
    app[HUB] = hub
    watcher = asyncio.create_task(hub.watch_leases())
    publisher = asyncio.create_task(hub.publish_desired())
    yield
    await _stop(publisher)
    await _stop(watcher)
