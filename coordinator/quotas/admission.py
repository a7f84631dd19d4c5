"""Admission of a new container (spec section 6).

Invariant: a container of quota A is refused exactly when some resource r named in
max_A with r_P[r] > 0 has used_A[r] + r_P[r] > max_A[r]; nothing else is compared (no
Σmin, no other quota's unused min: an admitted container may use any free capacity).
An unmanaged container is always admitted and never labelled.

    admit(quotas, containers, candidate)
        -> Admission(admitted=True, capacity="over-quota", reason="...", quota="a")
    admit(quotas, containers, too_big)
        -> Admission(admitted=False, capacity=None, code="quota_max_exceeded", status=403, ...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from coordinator.quotas.labels import labels_of
from coordinator.quotas.model import Container, ParsedQuota, Quota
from coordinator.quotas.resources import (
    DEFAULT_GB_PER_GPU,
    Amounts,
    add_into,
    check_gb_per_gpu,
    format_amount,
    parse_request,
)
from coordinator.quotas.state import snapshot
from coordinator.quotas.usage import Entry
from shared.quantity import DEFAULT_SHARE_BASE

ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class Admission:
    """The decision on one new container.

    ``admitted``; ``capacity``: the label it gets once counted (``"in-quota"`` or
    ``"over-quota"``), None when it is refused or its namespace is unmanaged;
    ``reason``: one line with the numbers; ``quota``: the governing quota's name (None
    when unmanaged). A refusal carries ``code="quota_max_exceeded"``, ``status=403``
    and ``details={"quota", "kind", "items": [{"resource", "used", "request", "max"}]}``
    (amounts as ``format_amount`` gives them).
    """

    admitted: bool
    capacity: str | None
    reason: str
    quota: str | None = None
    code: str | None = None
    status: int | None = None
    details: dict[str, object] = field(default_factory=dict)


def max_exceeded(
    quota: ParsedQuota, used_q: Mapping[str, Fraction], request: Mapping[str, Fraction]
) -> list[dict[str, object]]:
    """Every resource r named in max_Q with request[r] > 0 and used_Q[r] + request[r] >
    max_Q[r], with its numbers, in max's order; [] when the request is within max. O(r)."""
    items: list[dict[str, object]] = []
    for name, limit in quota.max.items():
        wanted = request.get(name, ZERO)
        if wanted > 0 and used_q.get(name, ZERO) + wanted > limit:
            items.append(
                {
                    "resource": name,
                    "used": format_amount(name, used_q.get(name, ZERO)),
                    "request": format_amount(name, wanted),
                    "max": format_amount(name, limit),
                }
            )
    return items


def describe_exceeded(items: Sequence[Mapping[str, object]]) -> str:
    """``"gpu-memory used 40 + request 10 > max 45, ..."`` for ``max_exceeded`` items."""
    return ", ".join(
        f"{i['resource']} used {i['used']} + request {i['request']} > max {i['max']}" for i in items
    )


def _fit_line(quota: ParsedQuota, used_q: Amounts, request: Amounts) -> str:
    names = quota.m_resources(used_q, request)
    return ", ".join(
        f"{name} used {format_amount(name, used_q.get(name, ZERO))}"
        f" + request {format_amount(name, request.get(name, ZERO))}"
        f" vs min {format_amount(name, quota.min.get(name, ZERO))}"
        for name in names
    )


def admit(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    candidate: Container,
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
    previous: Mapping[str, object] | None = None,
) -> Admission:
    """Decide on ``candidate`` (section 6) against the state ``quotas`` (a valid set) and
    ``containers`` (the whole state; a container with the candidate's key is ignored).

    ``previous``: for a container already admitted whose requests change (a realloc),
    the requests it held. The max rule then weighs only the resources it grows, so a
    change that lowers or keeps its use is always admitted, even where a lowered max
    leaves the quota above it.

    Postconditions: refused (``quota_max_exceeded``, 403) iff the max rule above fails,
    listing every exceeded resource; otherwise admitted with ``capacity`` = the label
    ``label_containers`` gives the candidate once it is counted (its ``created`` and
    ``priority`` place it in the order). Unmanaged: admitted, ``capacity`` None. The
    inputs are not modified. Raises ``QuotaError`` for an invalid request, quota or
    ``gb_per_gpu``. O(n log n * r) for the quota's n containers.
    """
    check_gb_per_gpu(gb_per_gpu)
    field = f"container {candidate.key} requests"
    request = parse_request(
        candidate.requests, gb_per_gpu=gb_per_gpu, share_base=share_base, field=field
    )
    weighed = request
    if previous is not None:
        held = parse_request(previous, gb_per_gpu=gb_per_gpu, share_base=share_base, field=field)
        weighed = {
            name: amount for name, amount in request.items() if amount > held.get(name, ZERO)
        }
    state = snapshot(
        quotas, containers, gb_per_gpu=gb_per_gpu, share_base=share_base, exclude=candidate.key
    )
    quota = state.quota_of(candidate.namespace)
    if quota is None:
        return Admission(
            True,
            None,
            f"namespace {candidate.namespace!r} is unmanaged: admitted without quota checks",
        )
    used_a = state.used[quota.name]
    exceeded = max_exceeded(quota, used_a, weighed)
    if exceeded:
        return _refusal(quota, exceeded)
    labels = labels_of(quota, [*state.members[quota.name], Entry(candidate, request)])
    capacity = labels[candidate.key]
    return Admission(
        True,
        capacity,
        f"admitted {capacity} in {quota.kind} {quota.name!r} ({_fit_line(quota, used_a, request)})",
        quota=quota.name,
    )


def first_refused(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    candidates: Sequence[Container],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> tuple[int, Admission] | None:
    """The first of ``candidates`` (new containers, admitted in turn) that the max rule
    refuses, with its refusal; None when every one is admitted.

    Equivalent to: for each i, ``admit(quotas, [*containers, *candidates[:i]],
    candidates[i])``, stopping at the first refusal -- but the state is parsed once and
    each candidate adds its request to its quota's used, so a deployment of k containers
    costs O(n * r + k * r), not O(k * n log n * r) (the labels ``admit`` also gives are
    not computed). Raises ``QuotaError`` as ``admit`` does.
    """
    check_gb_per_gpu(gb_per_gpu)
    state = snapshot(quotas, containers, gb_per_gpu=gb_per_gpu, share_base=share_base)
    for index, candidate in enumerate(candidates):
        quota = state.quota_of(candidate.namespace)
        if quota is None:
            continue
        field = f"container {candidate.key} requests"
        request = parse_request(
            candidate.requests, gb_per_gpu=gb_per_gpu, share_base=share_base, field=field
        )
        used_a = state.used[quota.name]
        exceeded = max_exceeded(quota, used_a, request)
        if exceeded:
            return index, _refusal(quota, exceeded)
        if candidate.running:
            add_into(used_a, request)
    return None


def _refusal(quota: ParsedQuota, exceeded: list[dict[str, object]]) -> Admission:
    return Admission(
        False,
        None,
        f"{quota.kind} {quota.name!r}: max exceeded: {describe_exceeded(exceeded)}",
        quota=quota.name,
        code="quota_max_exceeded",
        status=403,
        details={"quota": quota.name, "kind": quota.kind, "items": exceeded},
    )
