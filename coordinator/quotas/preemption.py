"""Preemption on one node (spec sections 7 and 8): the rules R1-R4 and victim selection.

Invariants of a result with victims, for preemptor P of quota A (g taken before P is
counted and before any victim is removed):
- every victim is counted, on P's node, labelled ``over-quota``, of a quota B != A, and
  not protected by the cool-down (R3, R4);
- R1 (used_A + r_P <= min_A on M_A): each victim was taken while used_B > min_B on some
  resource of M_B; R2: (a) used_A + r_P <= min_A + g_A on every resource of M_A, and
  each victim was taken while used_B > min_B + g_B on some resource of M_B;
- so after the preemption used_A <= min_A + g_A on M_A (<= min_A under R1);
- P fits in ``free`` plus what the victims release, and no single victim can be spared
  (the set is minimal by inclusion; a smaller set may exist).

    preemption_victims(quotas, containers, p, {"gpu-memory": 0})  -> ["team-b/b4"]
    plan = plan_preemption(quotas, containers, p, free, now=t)      # the same, with reasons
    plan.victims, plan.rule, plan.reason, plan.records(t)
    choose_node({"n1": plan1, "n2": plan2})                          -> "n2"

Candidate order (ties listed): priority ascending, then ``created`` descending (newest
first), then ``namespace/name`` descending. The greedy pass takes each candidate whose
quota still meets the rule's condition at the current used_B (victims already taken
subtracted) until P fits; the reprieve pass then puts back, most recently taken first,
every victim P fits without.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from coordinator.quotas.admission import describe_exceeded, max_exceeded
from coordinator.quotas.labels import OVER_QUOTA, labels_of
from coordinator.quotas.model import Container, ParsedQuota, PreemptionRecord, Quota
from coordinator.quotas.resources import (
    DEFAULT_GB_PER_GPU,
    Amounts,
    add_into,
    check_cooldown,
    check_gb_per_gpu,
    collect_amounts,
    fits,
    format_amount,
    parse_request,
    raise_first,
)
from coordinator.quotas.state import Snapshot, snapshot
from coordinator.quotas.usage import Entry, guaranteed
from shared.quantity import DEFAULT_SHARE_BASE

ZERO = Fraction(0)
R1 = "R1"
R2 = "R2"
FREE_ORDER = ("invalid_resource_name", "malformed_mig_name", "invalid_quantity")


@dataclass(frozen=True, slots=True)
class Preemption:
    """The decision for one preemptor on one node.

    ``victims``: keys in the order taken; ``[]`` when the preemptor fits already; None
    when the rules allow no preemption there or no allowed set makes room. ``rule``:
    ``"R1"`` or ``"R2"`` once a rule applies. ``reason``: one line with the numbers.
    ``quota``: A's name. ``victim_quotas``: victim key -> its quota, ``victim_priorities``
    in the order taken. ``guaranteed``: g of every quota (before the preemption), for the
    events.
    """

    victims: list[str] | None
    reason: str
    rule: str | None = None
    quota: str | None = None
    victim_quotas: dict[str, str] = field(default_factory=dict)
    victim_priorities: tuple[int, ...] = ()
    guaranteed: dict[str, Amounts] = field(default_factory=dict)

    def records(self, now: float) -> list[PreemptionRecord]:
        """The cool-down records to store with this preemption (section 8.3): one per
        quota losing a container, in the order of its first victim."""
        if not self.victims or self.quota is None:
            return []
        victim_quotas = dict.fromkeys(self.victim_quotas[v] for v in self.victims)
        return [
            PreemptionRecord(at=now, preemptor_quota=self.quota, victim_quota=b)
            for b in victim_quotas
        ]


def cooldown_protects(
    recent: Sequence[Mapping[str, object]],
    preemptor_quota: str,
    victim_quota: str,
    *,
    now: float,
    cooldown_s: float,
) -> bool:
    """True when a container of ``preemptor_quota`` may not preempt one of
    ``victim_quota`` now: some record says ``victim_quota`` preempted ``preemptor_quota``
    at t with now < t + cooldown_s. ``cooldown_s == 0`` disables the cool-down. O(len)."""
    if cooldown_s <= 0:
        return False
    return any(
        record["preemptor_quota"] == victim_quota
        and record["victim_quota"] == preemptor_quota
        and now < float(record["at"]) + cooldown_s  # type: ignore[arg-type]
        for record in recent
    )


def _numbers(
    names: Sequence[str], left: Mapping[str, Fraction], right: Mapping[str, Fraction]
) -> str:
    return ", ".join(
        f"{n} {format_amount(n, left.get(n, ZERO))} vs {format_amount(n, right.get(n, ZERO))}"
        for n in names
    )


def _condition(
    rule: str, quota: ParsedQuota, used_q: Mapping[str, Fraction], g_q: Mapping[str, Fraction]
) -> bool:
    """B may still yield a victim: used_B > min_B (R1) or > min_B + g_B (R2) on some
    resource of M_B."""
    bonus = g_q if rule == R2 else {}
    return any(
        used_q.get(name, ZERO) > quota.min.get(name, ZERO) + bonus.get(name, ZERO)
        for name in quota.m_resources(used_q)
    )


def _candidates(
    state: Snapshot,
    a: ParsedQuota,
    node: str | None,
    recent: Sequence[Mapping[str, object]],
    now: float,
    cooldown_s: float,
) -> list[tuple[Entry, ParsedQuota]]:
    """Step 3: the counted over-quota containers on ``node`` of quotas B != A that the
    cool-down does not protect, in candidate order."""
    found: list[tuple[Entry, ParsedQuota]] = []
    if node is None:
        return found
    for name, b in state.quotas.items():
        if name == a.name:
            continue
        members = state.members[name]
        if not any(e.container.node == node for e in members):
            continue
        if cooldown_protects(recent, a.name, name, now=now, cooldown_s=cooldown_s):
            continue
        labels = labels_of(b, members)
        found.extend(
            (e, b) for e in members if e.container.node == node and labels[e.key] == OVER_QUOTA
        )
    # Two stable sorts: namespace/name descending, then priority ascending and newest first.
    found.sort(key=lambda pair: pair[0].key, reverse=True)
    found.sort(key=lambda pair: (pair[0].container.priority, -pair[0].container.created))
    return found


def parse_free(free: Mapping[str, object], *, share_base: int) -> Amounts:
    """What is free on the node as exact amounts (Fractions taken as they are; numbers and
    quantity strings parsed like a quota's). ``QuotaError`` for a bad name or amount."""
    problems: dict[str, list[dict[str, object]]] = {}
    parsed = collect_amounts(
        free, field="free", share_base=share_base, problems=problems, fractions_allowed=True
    )
    raise_first(problems, FREE_ORDER, subject="invalid free")
    return parsed


def plan_preemption(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    preemptor: Container,
    free: Mapping[str, object],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    now: float = 0.0,
    recent: Sequence[Mapping[str, object]] = (),
    cooldown_s: float = 30.0,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> Preemption:
    """Section 8.1 for ``preemptor`` on the node ``preemptor.node``, with the reasons.

    ``containers`` is the whole state (used, labels and g come from all of it; a
    container with the preemptor's key is ignored: the preemptor is not counted yet).
    ``free``: resource -> what is free on the node (unnamed: unconstrained). Steps:
    1. P fits in ``free``: ``victims == []``.
    2. None if P is unmanaged, would exceed max_A, or within_min fails and R2(a) fails.
    3.-6. candidates, greedy pass, reprieve pass (module docstring); None when the
       candidates run out before P fits.
    The module docstring states the postconditions. The inputs are not modified.
    Raises ``QuotaError`` for an invalid request, free map, quota or configuration.
    O(n log n * r) for n containers (labels of the quotas present on the node), plus
    O(k * f) for k candidates and f resources in ``free``.
    """
    check_gb_per_gpu(gb_per_gpu)
    cooldown = check_cooldown(cooldown_s)
    request = parse_request(
        preemptor.requests,
        gb_per_gpu=gb_per_gpu,
        share_base=share_base,
        field=f"container {preemptor.key} requests",
    )
    room = parse_free(free, share_base=share_base)
    node = preemptor.node
    # 1. It fits as things stand.
    if fits(request, room):
        return Preemption([], f"fits on node {node} without preemption")
    state = snapshot(
        quotas, containers, gb_per_gpu=gb_per_gpu, share_base=share_base, exclude=preemptor.key
    )
    a = state.quota_of(preemptor.namespace)
    # 2. The rules that forbid any preemption.
    if a is None:
        return Preemption(
            None, f"namespace {preemptor.namespace!r} is unmanaged: it preempts nothing (R3)"
        )
    used_a = state.used[a.name]
    exceeded = max_exceeded(a, used_a, request)
    if exceeded:
        return Preemption(
            None,
            f"{a.kind} {a.name!r}: max exceeded: {describe_exceeded(exceeded)}",
            quota=a.name,
        )
    g = guaranteed(list(state.quotas.values()), state.used)
    g_a = g[a.name]
    after: Amounts = dict(used_a)
    add_into(after, request)
    m_a = a.m_resources(after)
    if all(after.get(r, ZERO) <= a.min.get(r, ZERO) for r in m_a):
        rule = R1
        numbers = _numbers(m_a, after, a.min)
        why = f"R1: used + request within min of {a.kind} {a.name!r} ({numbers})"
    else:
        entitlement: Amounts = dict(a.min)
        add_into(entitlement, g_a)
        numbers = _numbers(m_a, after, entitlement)
        if not all(after.get(r, ZERO) <= entitlement.get(r, ZERO) for r in m_a):
            return Preemption(
                None,
                f"R2(a) fails: used + request above min + guaranteed over-quota of"
                f" {a.kind} {a.name!r} ({numbers})",
                rule=R2,
                quota=a.name,
                guaranteed=g,
            )
        rule = R2
        why = f"R2: used + request within min + g of {a.kind} {a.name!r} ({numbers})"
    # 3. Candidates.
    candidates = _candidates(state, a, node, recent, now, cooldown)
    # 4. Greedy pass: take while the victim's quota still meets the rule, until P fits.
    used_now = {name: dict(amounts) for name, amounts in state.used.items()}
    released: Amounts = dict(room)
    taken: list[tuple[Entry, ParsedQuota]] = []
    for item, b in candidates:
        if not _condition(rule, b, used_now[b.name], g[b.name]):
            continue
        taken.append((item, b))
        add_into(used_now[b.name], item.request, -1)
        for name in released:
            released[name] += item.request.get(name, ZERO)
        if fits(request, released):
            break
    else:
        short = [r for r, amount in released.items() if request.get(r, ZERO) > amount]
        return Preemption(
            None,
            f"{why}; no room on node {node}: {len(taken)} of {len(candidates)} over-quota"
            f" candidates allowed, still short of {_numbers(short, released, request)}"
            f" (free after them vs request)",
            rule=rule,
            quota=a.name,
            guaranteed=g,
        )
    # 5. Reprieve pass: most recently taken first, put back every victim P fits without.
    spared = [False] * len(taken)
    for index in reversed(range(len(taken))):
        request_v = taken[index][0].request
        without = {name: amount - request_v.get(name, ZERO) for name, amount in released.items()}
        if fits(request, without):
            released = without
            spared[index] = True
    kept = [pair for pair, back in zip(taken, spared, strict=True) if not back]
    # 6. The victims in the order taken.
    return Preemption(
        [item.key for item, _ in kept],
        f"{why}; {len(kept)} victim(s) on node {node}",
        rule=rule,
        quota=a.name,
        victim_quotas={item.key: b.name for item, b in kept},
        victim_priorities=tuple(item.container.priority for item, _ in kept),
        guaranteed=g,
    )


def preemption_victims(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    preemptor: Container,
    free: Mapping[str, object],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    now: float = 0.0,
    recent: Sequence[Mapping[str, object]] = (),
    cooldown_s: float = 30.0,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> list[str] | None:
    """The victims (``namespace/name`` keys, in the order taken) that make room for
    ``preemptor`` on ``preemptor.node``; ``[]`` when it fits already; None when the rules
    allow no preemption there. Equivalent to: ``plan_preemption(...).victims``.
    ``recent``: past preemptions ``{"at", "preemptor_quota", "victim_quota"}``; a
    ``preemptor.node`` of None has no containers. Raises ``QuotaError`` for an invalid
    request. Cost as ``plan_preemption``."""
    return plan_preemption(
        quotas,
        containers,
        preemptor,
        free,
        gb_per_gpu,
        now,
        recent,
        cooldown_s,
        share_base=share_base,
    ).victims


def choose_node(plans: Mapping[str, Preemption]) -> str | None:
    """Section 8.2: among the nodes whose plan has victims (not None), the one with (1) the
    lowest highest-victim priority, (2) the fewest victims, (3) the lowest sum of victim
    priorities, (4) the smallest node name; a node needing no victim wins outright.
    None when no node qualifies. O(m * k)."""
    ranked = [
        (
            bool(plan.victims),
            max(plan.victim_priorities, default=0),
            len(plan.victim_priorities),
            sum(plan.victim_priorities),
            node,
        )
        for node, plan in plans.items()
        if plan.victims is not None
    ]
    return min(ranked)[-1] if ranked else None
