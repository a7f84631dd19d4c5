"""Elastic quotas (docs: the quota spec): pure engine, no I/O, no clock (time passed in).

- ``errors``: ``QuotaError`` with ``code``, ``status``, ``message``, ``details``;
- ``resources``: resource names, exact quantities, ``gpu_memory_gb``, JSON amounts;
- ``model``: ``Quota``, ``Container``, ``PreemptionRecord`` (frozen msgspec structs);
- ``validation``: ``validate_quotas`` (section 3), ``parse_quota``, ``canonical_quota``;
- ``usage``: ``used``, ``overquota_amount``, ``total_min``, ``total_unused_min``,
  ``guaranteed_overquota`` (sections 4 and 7);
- ``labels``: ``label_containers``, ``order_containers`` (section 5);
- ``admission``: ``admit`` -> ``Admission`` (section 6), ``first_refused`` for many;
- ``preemption``: ``preemption_victims``, ``plan_preemption`` -> ``Preemption``,
  ``choose_node`` (sections 7 and 8);
- ``reference``: slow, literal versions for the tests.

Invariants: every amount is an exact ``Fraction`` (cpu in cores, memory in bytes,
gpu-memory in GB, devices in units), never a float, never rounded; a
CompositeElasticQuota is one pool, counted once in every cluster-wide sum; a quota's
labels are a prefix of in-quota containers in the labelling order; no in-quota container
and no container of the preemptor's own quota is ever a victim. Containers are named
``namespace/name`` (``Container.key``) in every result.

    validate_quotas([*stored, Quota("team-a", ["team-a"], {"gpu-memory": 40})])
    gpu_memory_gb({"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 2})         -> 42
    used(quota, containers)                       -> {"gpu-memory": Fraction(40)}
    label_containers(quota, containers)           -> {"team-a/a1": "in-quota", ...}
    admit(quotas, containers, candidate)          -> Admission(True, "over-quota", ...)
    preemption_victims(quotas, containers, p, {"gpu-memory": 0})   -> ["team-b/b4"]
"""

from coordinator.quotas.admission import Admission, admit, first_refused
from coordinator.quotas.errors import STATUS, QuotaError
from coordinator.quotas.labels import IN_QUOTA, OVER_QUOTA, label_containers, order_containers
from coordinator.quotas.model import COMPOSITE, ELASTIC, Container, PreemptionRecord, Quota
from coordinator.quotas.preemption import (
    Preemption,
    choose_node,
    cooldown_protects,
    plan_preemption,
    preemption_victims,
)
from coordinator.quotas.resources import (
    DEFAULT_GB_PER_GPU,
    encode_amounts,
    format_amount,
    gpu_memory_gb,
    parse_request,
)
from coordinator.quotas.usage import (
    guaranteed_overquota,
    overquota_amount,
    total_min,
    total_unused_min,
    used,
    used_by_shapes,
)
from coordinator.quotas.validation import canonical_quota, parse_quota, validate_quotas

__all__ = [
    "COMPOSITE",
    "DEFAULT_GB_PER_GPU",
    "ELASTIC",
    "IN_QUOTA",
    "OVER_QUOTA",
    "STATUS",
    "Admission",
    "Container",
    "Preemption",
    "PreemptionRecord",
    "Quota",
    "QuotaError",
    "admit",
    "canonical_quota",
    "choose_node",
    "cooldown_protects",
    "encode_amounts",
    "first_refused",
    "format_amount",
    "gpu_memory_gb",
    "guaranteed_overquota",
    "label_containers",
    "order_containers",
    "overquota_amount",
    "parse_quota",
    "parse_request",
    "plan_preemption",
    "preemption_victims",
    "total_min",
    "total_unused_min",
    "used",
    "used_by_shapes",
    "validate_quotas",
]
