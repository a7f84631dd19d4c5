"""Slow, obviously correct quota decisions, for the tests only.

- ``labels``: section 5 transcribed: a pairwise comparison written rule by rule, then,
  for each container, the sum of the requests up to and including it compared with
  min (O(n^2 * r));
- ``greedy_victims``: section 8.1 transcribed: every sum (used_B, the room on the node)
  recomputed from scratch at every step of the greedy and reprieve passes;
- ``victim_sets``: every *allowed* set of victims that makes room, found by trying all
  subsets of the candidates, keeping the minimal ones (small inputs only: 2^k sets).

A set S of candidates is allowed when, taking its members in candidate order, each
victim's quota B meets the rule's condition (R1: used_B > min_B, R2: used_B > min_B +
g_B, on some resource of M_B) at used_B minus the members of S taken before it.

    labels(quota, containers)                          == label_containers(quota, containers)
    greedy_victims(quotas, containers, p, free)        == preemption_victims(...)
    set(preemption_victims(...)) in victim_sets(...)   # when not None
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from coordinator.quotas.labels import OVER_QUOTA
from coordinator.quotas.model import Container, ParsedQuota, Quota
from coordinator.quotas.resources import Amounts, parse_request
from coordinator.quotas.usage import guaranteed_overquota, used
from coordinator.quotas.validation import parse_quota
from shared.resources import CPU, GPU_MEMORY, MEMORY

ZERO = Fraction(0)


def _request(c: Container, gb_per_gpu: int, share_base: int) -> Amounts:
    return parse_request(c.requests, gb_per_gpu=gb_per_gpu, share_base=share_base)


def _compare(a: tuple[Container, Amounts], b: tuple[Container, Amounts]) -> int:
    (ca, ra), (cb, rb) = a, b
    if ca.created != cb.created:  # 1. older first
        return -1 if ca.created < cb.created else 1
    if ca.priority != cb.priority:  # 2. higher priority first
        return -1 if ca.priority > cb.priority else 1
    others = sorted((set(ra) | set(rb)) - {GPU_MEMORY, CPU, MEMORY})
    for name in [GPU_MEMORY, CPU, MEMORY, *others]:  # 3. smaller request first
        x, y = ra.get(name, ZERO), rb.get(name, ZERO)
        if x != y:
            return -1 if x < y else 1
    ka, kb = f"{ca.namespace}/{ca.name}", f"{cb.namespace}/{cb.name}"  # 4. by name
    return (ka > kb) - (ka < kb)


def labels(
    quota: Quota, containers: Sequence[Container], gb_per_gpu: int = 16, share_base: int = 100
) -> dict[str, str]:
    """Section 5 literally: sort pairwise, then label each container by the sum of the
    requests of everything up to and including it."""
    q = parse_quota(quota, share_base=share_base)
    mine = [
        (c, _request(c, gb_per_gpu, share_base))
        for c in containers
        if c.running and c.namespace in q.namespaces
    ]
    mine.sort(key=functools.cmp_to_key(_compare))
    result: dict[str, str] = {}
    for i, (c, _) in enumerate(mine):
        cum: Amounts = {}
        for _, request in mine[: i + 1]:
            for name, amount in request.items():
                cum[name] = cum.get(name, ZERO) + amount
        m = list(q.min) if q.min else list(cum)
        inside = all(cum.get(r, ZERO) <= q.min.get(r, ZERO) for r in m)
        result[f"{c.namespace}/{c.name}"] = "in-quota" if inside else "over-quota"
    return result


@dataclass
class _Setup:
    """What sections 7 and 8.1 step 2 establish before any victim is chosen."""

    request: Amounts
    free: Amounts
    rule: str  # "R1" or "R2"
    quotas: dict[str, ParsedQuota]
    used: dict[str, Amounts]
    g: dict[str, dict[str, Fraction]]
    candidates: list[tuple[Container, Amounts, str]]  # (victim, request, quota), in order


def _setup(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    preemptor: Container,
    free: Mapping[str, Fraction],
    gb_per_gpu: int,
    now: float,
    recent: Sequence[Mapping[str, object]],
    cooldown_s: float,
    share_base: int,
) -> _Setup | list[str] | None:
    request = _request(preemptor, gb_per_gpu, share_base)
    free_ = dict(free)
    if all(request.get(r, ZERO) <= amount for r, amount in free_.items()):
        return []
    state = [c for c in containers if f"{c.namespace}/{c.name}" != preemptor.key]
    parsed = {q.name: parse_quota(q, share_base=share_base) for q in quotas}
    owner: dict[str, str] = {}
    for q in quotas:
        for ns in q.namespaces:
            owner.setdefault(ns, q.name)
    a_name = owner.get(preemptor.namespace)
    if a_name is None:
        return None
    a = parsed[a_name]
    used_by: dict[str, Amounts] = {}
    for q in quotas:
        amounts = used(q, state, gb_per_gpu, share_base=share_base)
        used_by[q.name] = {r: Fraction(v) for r, v in amounts.items()}
    for name, limit in a.max.items():
        wanted = request.get(name, ZERO)
        if wanted > 0 and used_by[a_name].get(name, ZERO) + wanted > limit:
            return None
    g = guaranteed_overquota(quotas, dict(used_by))
    after = {
        r: used_by[a_name].get(r, ZERO) + request.get(r, ZERO) for r in {*used_by[a_name], *request}
    }
    m_a = list(a.min) if a.min else list(after)
    if all(after.get(r, ZERO) <= a.min.get(r, ZERO) for r in m_a):
        rule = "R1"
    elif all(after.get(r, ZERO) <= a.min.get(r, ZERO) + g[a_name].get(r, ZERO) for r in m_a):
        rule = "R2"
    else:
        return None
    candidates: list[tuple[Container, Amounts, str]] = []
    for q in quotas:
        if q.name == a_name:
            continue
        blocked = cooldown_s > 0 and any(
            r["preemptor_quota"] == q.name
            and r["victim_quota"] == a_name
            and now < float(r["at"]) + cooldown_s  # type: ignore[arg-type]
            for r in recent
        )
        if blocked:
            continue
        label = labels(q, state, gb_per_gpu, share_base)
        for c in state:
            key = f"{c.namespace}/{c.name}"
            if (
                c.node == preemptor.node
                and preemptor.node is not None
                and label.get(key) == OVER_QUOTA
            ):
                candidates.append((c, _request(c, gb_per_gpu, share_base), q.name))

    # priority ascending, then newest first, then namespace/name descending
    def order(x: tuple[Container, Amounts, str], y: tuple[Container, Amounts, str]) -> int:
        cx, cy = x[0], y[0]
        if cx.priority != cy.priority:
            return -1 if cx.priority < cy.priority else 1
        if cx.created != cy.created:
            return -1 if cx.created > cy.created else 1
        kx, ky = cx.key, cy.key
        return (ky > kx) - (ky < kx)

    candidates.sort(key=functools.cmp_to_key(order))
    return _Setup(request, free_, rule, parsed, used_by, g, candidates)


def _may_yield(setup: _Setup, b: str, removed: Sequence[Amounts]) -> bool:
    q = setup.quotas[b]
    now = dict(setup.used[b])
    for request in removed:
        for r, amount in request.items():
            now[r] = now.get(r, ZERO) - amount
    m_b = list(q.min) if q.min else list(now)
    extra = setup.g[b] if setup.rule == "R2" else {}
    return any(now.get(r, ZERO) > q.min.get(r, ZERO) + extra.get(r, ZERO) for r in m_b)


def _fits(setup: _Setup, released: Sequence[Amounts]) -> bool:
    return all(
        setup.request.get(r, ZERO) <= amount + sum((v.get(r, ZERO) for v in released), ZERO)
        for r, amount in setup.free.items()
    )


def greedy_victims(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    preemptor: Container,
    free: Mapping[str, Fraction],
    gb_per_gpu: int = 16,
    now: float = 0.0,
    recent: Sequence[Mapping[str, object]] = (),
    cooldown_s: float = 30.0,
    share_base: int = 100,
) -> list[str] | None:
    """Section 8.1 step by step, every sum recomputed from scratch. ``free``: exact
    amounts (Fractions)."""
    setup = _setup(
        quotas, containers, preemptor, free, gb_per_gpu, now, recent, cooldown_s, share_base
    )
    if not isinstance(setup, _Setup):
        return setup
    taken: list[tuple[Container, Amounts, str]] = []
    for victim in setup.candidates:
        removed = [t[1] for t in taken if t[2] == victim[2]]
        if _may_yield(setup, victim[2], removed):
            taken.append(victim)
            if _fits(setup, [t[1] for t in taken]):
                break
    else:
        return None
    for victim in list(reversed(taken)):
        rest = [t for t in taken if t is not victim]
        if _fits(setup, [t[1] for t in rest]):
            taken = rest
    return [t[0].key for t in taken]


def victim_sets(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    preemptor: Container,
    free: Mapping[str, Fraction],
    gb_per_gpu: int = 16,
    now: float = 0.0,
    recent: Sequence[Mapping[str, object]] = (),
    cooldown_s: float = 30.0,
    share_base: int = 100,
) -> list[frozenset[str]] | None:
    """Every minimal allowed set of victims that makes room, by trying all subsets of the
    candidates, smallest first: ``[frozenset()]`` when P fits already, None when the
    rules forbid any preemption (unmanaged, max, R2(a)), ``[]`` when no allowed set makes
    room. O(2^k * k * r)."""
    setup = _setup(
        quotas, containers, preemptor, free, gb_per_gpu, now, recent, cooldown_s, share_base
    )
    if setup is None:
        return None
    if not isinstance(setup, _Setup):
        return [frozenset()]
    minimal: list[frozenset[str]] = []
    candidates = setup.candidates
    for size in range(1, len(candidates) + 1):
        for subset in itertools.combinations(candidates, size):  # in candidate order
            allowed = all(
                _may_yield(setup, v[2], [t[1] for t in subset[:i] if t[2] == v[2]])
                for i, v in enumerate(subset)
            )
            if not allowed or not _fits(setup, [v[1] for v in subset]):
                continue
            keys = frozenset(v[0].key for v in subset)
            if not any(m < keys for m in minimal):
                minimal.append(keys)
    return minimal
