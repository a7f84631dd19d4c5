"""Quotas as the API shows them, with their status: ``/v1/quotas``
(``coordinator.services.quota_service`` builds them)."""

from __future__ import annotations

import msgspec


class QuotaStatus(msgspec.Struct, frozen=True, kw_only=True):
    used: dict[str, int | str]
    over_quota: dict[str, int | str]  # max(0, used - min) per resource of min


class QuotaView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kind: str  # "ElasticQuota" or "CompositeElasticQuota"
    namespaces: list[str]
    min: dict[str, int | str]
    max: dict[str, int | str] | None
    status: QuotaStatus


class QuotaSummary(msgspec.Struct, frozen=True, kw_only=True):
    quotas: list[QuotaView]
    total_min: dict[str, int | str]  # each quota once
    capacity: dict[str, int | str]  # what the ready nodes offer
    warnings: list[str]  # guarantees the cluster cannot honour all at once
