"""Typed keys for what the application holds (``app[REGISTRY]``)."""

from __future__ import annotations

from aiohttp import web

from coordinator.agent_hub import AgentHub
from coordinator.config import CoordinatorConfig
from coordinator.deployments.service import DeploymentService
from coordinator.http.auth import AuthRefusals
from coordinator.metrics import Metrics
from coordinator.metrics_store import TimedStore
from coordinator.services.lease_service import LeaseService
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRegistry

CONFIG = web.AppKey("config", CoordinatorConfig)
METRICS = web.AppKey("metrics", Metrics)
STORE = web.AppKey("store", TimedStore)
REGISTRY = web.AppKey("registry", NodeRegistry)
HUB = web.AppKey("hub", AgentHub)
LEASES = web.AppKey("leases", LeaseService)
QUOTAS = web.AppKey("quotas", QuotaService)
POOLS = web.AppKey("pools", PoolService)
DEPLOYMENTS = web.AppKey("deployments", DeploymentService)
REFUSALS = web.AppKey("refusals", AuthRefusals)
