"""The values the quota engine reads: ``Quota``, ``Container`` and the cool-down record.

Both structs are frozen msgspec structs, so the service can decode them from JSON, store
them and serve them as they are. Their quantity maps hold what the user wrote
(``int | float | str``) until ``canonical_quota`` rewrites a quota's maps in the stored
form: ``cpu`` as a decimal string of cores ("1.7", "2"), every other resource as an
integer (``memory`` in bytes, ``gpu-memory`` in GB, devices and extended resources in
units), and ``composite`` resolved to a boolean:

    {"name": "team-a", "namespaces": ["team-a"],
     "min": {"cpu": "1.7", "memory": 536870912, "gpu-memory": 40}, "max": null,
     "composite": false}

The engine never trusts these maps: every function parses them exactly (``ParsedQuota``
and ``resources.parse_request``) and raises ``QuotaError`` for a bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypedDict

import msgspec

from coordinator.quotas.resources import Amounts

ELASTIC = "ElasticQuota"
COMPOSITE = "CompositeElasticQuota"


class Quota(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An ElasticQuota (one namespace) or a CompositeElasticQuota (one pool shared by
    several namespaces).

    ``min``: resource -> guaranteed quantity (absent: 0; empty: nothing guaranteed).
    ``max``: resource -> limit (absent resource: unlimited; None or empty: no limit).
    ``composite``: None means "a CompositeElasticQuota when there is more than one
    namespace"; the service sets it from the endpoint (``/v1/elasticquotas`` -> False,
    ``/v1/compositeelasticquotas`` -> True). Quantities are ``int | float | str`` as
    written; after ``canonical_quota``, ``str`` for cpu and ``int`` for everything else.
    """

    name: str
    namespaces: list[str]
    min: dict[str, Any]
    max: dict[str, Any] | None = None
    composite: bool | None = None

    @property
    def is_composite(self) -> bool:
        """``composite`` when given, else whether it names more than one namespace."""
        if self.composite is not None:
            return self.composite
        return len(self.namespaces) > 1

    @property
    def kind(self) -> str:
        """``"CompositeElasticQuota"`` or ``"ElasticQuota"``."""
        return COMPOSITE if self.is_composite else ELASTIC


class Container(msgspec.Struct, frozen=True):
    """A container as the quota engine sees it.

    ``requests``: resource -> quantity as submitted (never ``gpu-memory``: it is derived).
    ``priority``: an integer, higher is more important. ``created``: the creation time in
    seconds at full resolution. ``running``: it is *counted* -- it holds an allocation on
    a node (placed and starting, running, paused, exited but restarting); a pending
    container is not. ``node``: where its allocation is (the candidate node for a
    preemptor). Identified everywhere by ``key`` = ``"namespace/name"``, which must be
    unique in a state.
    """

    name: str
    namespace: str
    requests: dict[str, Any]
    priority: int = 0
    created: float = 0.0
    running: bool = True
    node: str | None = None

    @property
    def key(self) -> str:
        """``"namespace/name"``: the container's identity in every result of the engine."""
        return f"{self.namespace}/{self.name}"


class PreemptionRecord(TypedDict):
    """A past preemption (section 8.3): a container of ``preemptor_quota`` preempted one of
    ``victim_quota`` at time ``at``. Plain dicts of this shape are accepted."""

    at: float
    preemptor_quota: str
    victim_quota: str


@dataclass(frozen=True, slots=True)
class ParsedQuota:
    """A quota after its format rules passed: exact amounts, kind resolved.

    ``min`` / ``max``: resource -> ``Fraction`` in the resource's unit (cpu in cores);
    ``max`` is empty when there is no limit. M_Q is ``min``'s keys, or every resource
    (each with min 0) when ``min`` is empty: see ``m_resources``.
    """

    name: str
    namespaces: tuple[str, ...]
    composite: bool
    min: Amounts
    max: Amounts

    @property
    def kind(self) -> str:
        return COMPOSITE if self.composite else ELASTIC

    def m_resources(self, *others: Mapping[str, Fraction]) -> list[str]:
        """The resources of M_Q that matter for amounts ``others``: ``min``'s keys, or,
        when ``min`` is empty, every resource named in ``others`` (their min is 0)."""
        if self.min:
            return list(self.min)
        names: dict[str, None] = {}
        for amounts in others:
            names.update(dict.fromkeys(amounts))
        return list(names)
