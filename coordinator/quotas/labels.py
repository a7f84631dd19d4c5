"""Labels ``in-quota`` / ``over-quota`` (spec section 5).

Invariant: in the order of ``sort_key``, a quota's labels are a prefix of ``in-quota``
followed only by ``over-quota``, and the in-quota containers' requests together fit
within min_Q on every resource of M_Q (resources outside M_Q never matter).

    label_containers(quota, containers)      -> {"team-a/a1": "in-quota", ...}
    order_containers(containers)             -> the containers in labelling order

The order is total (ties listed): (1) ``created``, oldest first, as stored (float); (2)
``priority``, higher first; (3) the request vector, smaller first, compared
lexicographically over ``gpu-memory``, ``cpu``, ``memory``, then every other resource
name in code-point order, absent = 0; (4) ``namespace/name`` in code-point order. Keys
are unique, so (4) always decides. An empty min makes M_Q every resource with min 0:
a container is in-quota only while the running total is 0 everywhere (in practice,
everything is over-quota).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

from coordinator.quotas.model import Container, ParsedQuota, Quota
from coordinator.quotas.resources import (
    DEFAULT_GB_PER_GPU,
    Amounts,
    add_into,
    check_gb_per_gpu,
)
from coordinator.quotas.usage import Entry, counted, entry
from coordinator.quotas.validation import parse_quota
from shared.quantity import DEFAULT_SHARE_BASE
from shared.resources import CPU, GPU_MEMORY, MEMORY

IN_QUOTA = "in-quota"
OVER_QUOTA = "over-quota"
LEADING_RESOURCES = (GPU_MEMORY, CPU, MEMORY)
ZERO = Fraction(0)

SortKey = tuple[float, int, tuple[Fraction, ...], str]


def resource_order(requests: Iterable[Amounts]) -> list[str]:
    """``gpu-memory``, ``cpu``, ``memory``, then every other resource named in
    ``requests`` in code-point order: the order in which request vectors compare."""
    others: set[str] = set()
    for request in requests:
        others.update(request)
    others.difference_update(LEADING_RESOURCES)
    return [*LEADING_RESOURCES, *sorted(others)]


def sort_key(item: Entry, order: Sequence[str]) -> SortKey:
    """The labelling order's key of one container, given the shared ``resource_order``."""
    c = item.container
    vector = tuple(item.request.get(name, ZERO) for name in order)
    return (c.created, -c.priority, vector, c.key)


def ordered(entries: Sequence[Entry]) -> list[Entry]:
    """``entries`` in the labelling order. O(n log n * r)."""
    order = resource_order(e.request for e in entries)
    return sorted(entries, key=lambda e: sort_key(e, order))


def labels_of(quota: ParsedQuota, entries: Sequence[Entry]) -> dict[str, str]:
    """Q's labels for its counted ``entries``, in the labelling order.

    Walk the order adding each request to ``cum``: in-quota while cum[r] <= min_Q[r] for
    every r of M_Q. Once a container is over-quota every later one is too (cum only
    grows), so the walk stops adding. O(n log n * r).
    """
    labels: dict[str, str] = {}
    cum: Amounts = {}
    inside = True
    for item in ordered(entries):
        if inside:
            add_into(cum, item.request)
            if quota.min:
                inside = all(cum.get(name, ZERO) <= limit for name, limit in quota.min.items())
            else:
                inside = all(amount <= 0 for amount in cum.values())
        labels[item.key] = IN_QUOTA if inside else OVER_QUOTA
    return labels


def label_containers(
    quota: Quota,
    containers: Sequence[Container],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> dict[str, str]:
    """``namespace/name`` -> ``"in-quota"`` or ``"over-quota"`` for every counted container
    of ``quota``'s namespaces (from all of them: a CompositeElasticQuota is one pool), in
    the labelling order; other containers are absent (unlabelled).

    Postcondition: with ``keys = list(result)``, some i has ``result[keys[j]] ==
    "in-quota"`` exactly for j < i, and the requests of ``keys[:i]`` sum to <= min_Q on
    every resource of M_Q while those of ``keys[:i + 1]`` do not. Raises ``QuotaError``
    for an invalid quota, request or ``gb_per_gpu``. O(n log n * r).
    """
    check_gb_per_gpu(gb_per_gpu)
    parsed = parse_quota(quota, share_base=share_base)
    entries = counted(containers, parsed.namespaces, gb_per_gpu=gb_per_gpu, share_base=share_base)
    return labels_of(parsed, entries)


def order_containers(
    containers: Sequence[Container],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> list[Container]:
    """``containers`` (counted or not) in the labelling order of section 5, tie rules as in
    the module docstring. Raises ``QuotaError`` for an invalid request. O(n log n * r)."""
    check_gb_per_gpu(gb_per_gpu)
    entries = [entry(c, gb_per_gpu=gb_per_gpu, share_base=share_base) for c in containers]
    return [e.container for e in ordered(entries)]
