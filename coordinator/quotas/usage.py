"""Used resources and the cluster-wide sums (spec sections 4 and 7).

Invariants: used_Q is computed by one function (``usage_of``) for status, labels,
admission and preemption; the cluster-wide sums iterate over *quotas*, so a
CompositeElasticQuota counts once however many namespaces it has; every amount is an
exact ``Fraction`` and the guaranteed over-quotas of a resource add up to exactly its
unused min (or are all 0 when no quota has a min for it).

    used(quota, containers)                       -> {"gpu-memory": Fraction(40), ...}
    used_by_shapes(quota, [(requests, 12), ...])  -> the same, from counted requests
    overquota_amount(quota, used(quota, containers))  -> {"gpu-memory": Fraction(30)}
    total_min(quotas)                             -> {"gpu-memory": Fraction(80)}
    total_unused_min(quotas, used_by_quota)       -> {"gpu-memory": Fraction(30)}
    guaranteed_overquota(quotas, used_by_quota)   -> {"a": {"gpu-memory": Fraction(15)}, ...}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from coordinator.quotas.errors import QuotaError
from coordinator.quotas.model import Container, ParsedQuota, Quota
from coordinator.quotas.resources import (
    DEFAULT_GB_PER_GPU,
    Amounts,
    add_into,
    check_gb_per_gpu,
    parse_request,
)
from coordinator.quotas.validation import parse_quota
from shared.quantity import DEFAULT_SHARE_BASE

ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class Entry:
    """A counted container with its parsed request (``gpu-memory`` derived)."""

    container: Container
    request: Amounts

    @property
    def key(self) -> str:
        return self.container.key


def entry(container: Container, *, gb_per_gpu: int, share_base: int) -> Entry:
    """``container`` with its request parsed; ``QuotaError`` names the container."""
    request = parse_request(
        container.requests,
        gb_per_gpu=gb_per_gpu,
        share_base=share_base,
        field=f"container {container.key} requests",
    )
    return Entry(container, request)


def counted(
    containers: Iterable[Container],
    namespaces: Iterable[str],
    *,
    gb_per_gpu: int,
    share_base: int,
    exclude: str | None = None,
) -> list[Entry]:
    """The counted (``running``) containers of ``namespaces``, in input order, requests
    parsed; the container whose key is ``exclude`` is left out. O(n * r)."""
    wanted = frozenset(namespaces)
    return [
        entry(c, gb_per_gpu=gb_per_gpu, share_base=share_base)
        for c in containers
        if c.running and c.namespace in wanted and c.key != exclude
    ]


def usage_of(quota: ParsedQuota, entries: Iterable[Entry]) -> Amounts:
    """used_Q: per resource, the sum of the requests of ``entries``; every resource of
    min_Q is present (0 when nothing uses it), then every resource requested, in order of
    first appearance. O(n * r)."""
    total: Amounts = dict.fromkeys(quota.min, ZERO)
    for item in entries:
        add_into(total, item.request)
    return total


def used(
    quota: Quota,
    containers: Sequence[Container],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> dict[str, Fraction | Decimal]:
    """used_Q (section 4): per resource, the sum of the requests (``gpu-memory`` derived)
    of the counted containers of ``quota``'s namespaces.

    Keys: every resource of min_Q (0 when unused), then every resource a counted
    container requests. Every value is an exact ``Fraction`` (cpu in cores, memory in
    bytes, gpu-memory in GB); the annotation keeps the published signature. Raises
    ``QuotaError`` for an invalid quota, request or ``gb_per_gpu``. O(n * r).
    """
    check_gb_per_gpu(gb_per_gpu)
    parsed = parse_quota(quota, share_base=share_base)
    entries = counted(containers, parsed.namespaces, gb_per_gpu=gb_per_gpu, share_base=share_base)
    result: dict[str, Fraction | Decimal] = dict(usage_of(parsed, entries))
    return result


def used_by_shapes(
    quota: Quota,
    shapes: Iterable[tuple[Mapping[str, object], int]],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> dict[str, Fraction]:
    """``used`` from the requests of the counted containers of ``quota``'s namespaces
    given as (requests, how many containers ask for them): equal to ``used`` over those
    containers (keys in another order at most). O(shapes * r), whatever their count."""
    check_gb_per_gpu(gb_per_gpu)
    total: Amounts = dict.fromkeys(parse_quota(quota, share_base=share_base).min, ZERO)
    for requests, count in shapes:
        request = parse_request(requests, gb_per_gpu=gb_per_gpu, share_base=share_base)
        add_into(total, {name: amount * count for name, amount in request.items()})
    return total


def exact(value: object) -> Fraction:
    """An amount given by a caller (Fraction, int, Decimal, or a float taken as its
    shortest decimal) as a ``Fraction``; ``TypeError`` for anything else."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool) or not isinstance(value, int | Decimal | float):
        raise TypeError(f"expected an exact amount, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"expected a finite amount, got {value!r}")
        return Fraction(Decimal(repr(value)))
    if isinstance(value, Decimal) and not value.is_finite():
        raise TypeError(f"expected a finite amount, got {value!r}")
    return Fraction(value)


def exact_amounts(amounts: Mapping[str, object] | None) -> Amounts:
    """``exact`` over a map (None: empty)."""
    return {name: exact(value) for name, value in (amounts or {}).items()}


def overquota_of(quota: ParsedQuota, used_q: Mapping[str, Fraction]) -> Amounts:
    """max(0, used_Q[r] - min_Q[r]) for every r of M_Q (every used resource when min_Q is
    empty). O(r)."""
    return {
        name: max(ZERO, used_q.get(name, ZERO) - quota.min.get(name, ZERO))
        for name in quota.m_resources(used_q)
    }


def overquota_amount(
    quota: Quota, used_q: Mapping[str, object], *, share_base: int = DEFAULT_SHARE_BASE
) -> dict[str, Fraction]:
    """The over-quota amount GET shows (section 2): max(0, used[r] - min[r]) for each
    resource r of M_Q -- min's resources, or every used resource when min is empty.
    ``used_q`` is ``used(quota, ...)`` (any exact numbers). O(r)."""
    return overquota_of(parse_quota(quota, share_base=share_base), exact_amounts(used_q))


def sum_min(quotas: Iterable[ParsedQuota]) -> Amounts:
    """Σ_i min_i[r], each quota once."""
    total: Amounts = {}
    for quota in quotas:
        add_into(total, quota.min)
    return total


def unused_min(quotas: Iterable[ParsedQuota], used_by_quota: Mapping[str, Amounts]) -> Amounts:
    """unused[r] = Σ_i max(0, min_i[r] - used_i[r]), each quota once; a resource is present
    when some quota has a min for it."""
    total: Amounts = {}
    for quota in quotas:
        used_q = used_by_quota.get(quota.name, {})
        for name, minimum in quota.min.items():
            total[name] = total.get(name, ZERO) + max(ZERO, minimum - used_q.get(name, ZERO))
    return total


def guaranteed(
    quotas: Sequence[ParsedQuota], used_by_quota: Mapping[str, Amounts]
) -> dict[str, Amounts]:
    """g for every quota on parsed inputs (see ``guaranteed_overquota``). O(q * r)."""
    sums = sum_min(quotas)
    unused = unused_min(quotas, used_by_quota)
    result: dict[str, Amounts] = {}
    for quota in quotas:
        shares: Amounts = {}
        for name, total in sums.items():
            minimum = quota.min.get(name, ZERO)
            shares[name] = minimum * unused[name] / total if total else ZERO
        result[quota.name] = shares
    return result


def parse_all(quotas: Sequence[Quota], share_base: int) -> list[ParsedQuota]:
    """Every quota parsed (``QuotaError`` for a format rule), names checked unique."""
    parsed = [parse_quota(q, share_base=share_base) for q in quotas]
    names = [q.name for q in parsed]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise QuotaError(
            "quota_name_taken",
            f"quota names must be unique in a set of quotas: {', '.join(twice)}",
            details={"items": [{"name": n} for n in twice]},
        )
    return parsed


def total_min(
    quotas: Sequence[Quota], *, share_base: int = DEFAULT_SHARE_BASE
) -> dict[str, Fraction]:
    """Σmin per resource over ``quotas``, each quota once (a CompositeElasticQuota is
    one pool, not one per namespace): what ``allotctl quotas`` compares with the
    cluster's capacity. O(q * r)."""
    return sum_min(parse_all(quotas, share_base))


def total_unused_min(
    quotas: Sequence[Quota],
    used_by_quota: Mapping[str, Mapping[str, object]],
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> dict[str, Fraction]:
    """unused[r] = Σ_i max(0, min_i[r] - used_i[r]) over ``quotas``, each once; present
    for every resource some quota has a min for. ``used_by_quota``: quota name -> used
    (a missing quota uses nothing). O(q * r)."""
    parsed = parse_all(quotas, share_base)
    return unused_min(parsed, {n: exact_amounts(u) for n, u in used_by_quota.items()})


def guaranteed_overquota(
    quotas: Sequence[Quota],
    used_by_quota: Mapping[str, Mapping[str, object]],
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> dict[str, dict[str, Fraction]]:
    """g (section 7) for every quota: quota name -> resource -> exact ``Fraction``.

    Equivalent to, for each quota A and each resource r some quota has a min for:
    ``g[A][r] = min_A[r] / Σ_i min_i[r] * Σ_i max(0, min_i[r] - used_i[r])`` (0 when
    Σ_i min_i[r] = 0), sums over ``quotas``, each counted once. A resource no quota has
    a min for is absent (its g is 0). Nothing is floored or rounded:
    ``Σ_A g[A][r] == unused[r]`` exactly whenever Σ_i min_i[r] > 0.

    ``used_by_quota``: quota name -> used (Fraction, int or Decimal values; a missing
    quota or resource is 0), taken before the preemptor is counted and before any victim
    is removed. Raises ``QuotaError`` for an invalid quota or a name used twice.
    O(q * r).
    """
    parsed = parse_all(quotas, share_base)
    return guaranteed(parsed, {n: exact_amounts(u) for n, u in used_by_quota.items()})
