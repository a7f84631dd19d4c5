"""Properties over random small states (hypothesis), with the slow references:

- labels are a prefix of in-quota in the labelling order, equal to the reference's, and
  the in-quota containers fit within min;
- Σ_A g_A[r] never exceeds the total unused min (equals it when Σmin[r] > 0);
- no victim is in-quota, unmanaged, of the preemptor's quota or off its node; after the
  preemption the preemptor's quota is within min + g (within min under R1) and it fits;
- victims equal those of the literal greedy transcription, and form one of the minimal
  allowed sets an exhaustive search over subsets finds (None whenever it finds none);
- every amount is an exact Fraction; no input is ever modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from coordinator.quotas import (
    Container,
    Quota,
    admit,
    guaranteed_overquota,
    label_containers,
    order_containers,
    overquota_amount,
    parse_quota,
    parse_request,
    plan_preemption,
    total_unused_min,
    used,
)
from coordinator.quotas import reference as ref
from tests.coordinator.quotas.states import (
    Case,
    any_cases,
    cases,
    containers,
    quota_sets,
    unchanged,
)

EXAMPLES = settings(max_examples=150)


def usage(quotas: list[Quota], state: list[Container]) -> dict[str, dict[str, Fraction]]:
    result: dict[str, dict[str, Fraction]] = {}
    for q in quotas:
        amounts = used(q, state)
        assert all(type(v) is Fraction for v in amounts.values())
        result[q.name] = {r: Fraction(v) for r, v in amounts.items()}
    return result


def governing(quotas: list[Quota], namespace: str) -> Quota | None:
    return next((q for q in quotas if namespace in q.namespaces), None)


def m_of(quota: Quota, *amounts: Mapping[str, Fraction]) -> list[str]:
    minimum = parse_quota(quota).min
    return list(minimum) if minimum else sorted({r for a in amounts for r in a})


@EXAMPLES
@given(quota_sets(), containers(count=10))
def test_labels_are_a_prefix_that_fits_within_min(
    quotas: list[Quota], state: list[Container]
) -> None:
    for quota in quotas:
        labels = label_containers(quota, state)
        assert labels == ref.labels(quota, state)
        mine = [c for c in state if c.running and c.namespace in quota.namespaces]
        ordered = [c.key for c in order_containers(mine)]
        assert list(labels) == ordered
        values = [labels[k] for k in ordered]
        inside = values.count("in-quota")
        assert values == ["in-quota"] * inside + ["over-quota"] * (len(values) - inside)
        total: dict[str, Fraction] = {}
        for c in mine:
            if labels[c.key] == "in-quota":
                for r, v in parse_request(c.requests).items():
                    total[r] = total.get(r, Fraction(0)) + v
        minimum = parse_quota(quota).min
        assert all(total.get(r, 0) <= minimum.get(r, 0) for r in m_of(quota, total))


@EXAMPLES
@given(quota_sets(), containers(count=10))
def test_guaranteed_overquota_shares_exactly_the_unused_min(
    quotas: list[Quota], state: list[Container]
) -> None:
    used_by = usage(quotas, state)
    g = guaranteed_overquota(quotas, used_by)
    unused = total_unused_min(quotas, used_by)
    for r, amount in unused.items():
        shares = [g[q.name].get(r, Fraction(0)) for q in quotas]
        assert all(type(s) is Fraction and s >= 0 for s in shares)
        sum_min = sum((parse_quota(q).min.get(r, Fraction(0)) for q in quotas), Fraction(0))
        assert sum(shares) <= amount
        assert sum(shares) == (amount if sum_min > 0 else 0)
    for q in quotas:
        over = overquota_amount(q, used_by[q.name])
        assert all(type(v) is Fraction and v >= 0 for v in over.values())


@EXAMPLES
@given(quota_sets(), containers(), st.data())
def test_admission_gives_the_label_it_will_have(
    quotas: list[Quota], state: list[Container], data: st.DataObject
) -> None:
    candidate = data.draw(cases()).preemptor
    with unchanged(quotas, state, candidate):
        decision = admit(quotas, state, candidate)
    quota = governing(quotas, candidate.namespace)
    if quota is None:
        assert (decision.admitted, decision.capacity) == (True, None)
        return
    if not decision.admitted:
        assert decision.code == "quota_max_exceeded"
        return
    counted = [*state, replace(candidate, running=True)]
    assert decision.capacity == label_containers(quota, counted)[candidate.key]


def _check_victims(case: Case, victims: list[str], rule: str | None) -> None:
    quotas, state, p = case.quotas, case.containers, case.preemptor
    a = governing(quotas, p.namespace)
    by_key = {c.key: c for c in state}
    labels: dict[str, str] = {}
    for q in quotas:
        labels |= label_containers(q, state)
    assert len(set(victims)) == len(victims)
    for key in victims:
        victim = by_key[key]
        b = governing(quotas, victim.namespace)
        assert a is not None  # R3: an unmanaged preemptor takes nothing
        assert b is not None  # R3: nor an unmanaged victim
        assert b.name != a.name  # R3: nor one of its own quota
        assert victim.running
        assert victim.node == p.node
        assert labels[key] == "over-quota"  # never an in-quota container
    if not victims:
        return
    assert a is not None
    # After the preemption: P fits, and A is within min + g (g from before), min under R1.
    request = parse_request(p.requests)
    released = dict(case.free)
    for key in victims:
        for r, v in parse_request(by_key[key].requests).items():
            if r in released:
                released[r] += v
    assert all(request.get(r, 0) <= v for r, v in released.items())
    used_by = usage(quotas, state)
    g = guaranteed_overquota(quotas, used_by)[a.name]
    minimum = parse_quota(a).min
    after = dict(used_by[a.name])
    for r, v in request.items():
        after[r] = after.get(r, Fraction(0)) + v
    for r in m_of(a, after):
        bound = minimum.get(r, Fraction(0)) + (0 if rule == "R1" else g.get(r, Fraction(0)))
        assert after.get(r, 0) <= bound


@settings(max_examples=400)
@given(any_cases)
def test_victims_follow_the_rules(case: Case) -> None:
    with unchanged(case):
        plan = plan_preemption(
            case.quotas,
            case.containers,
            case.preemptor,
            case.free,
            now=case.now,
            recent=case.recent,
        )
    if plan.victims is not None:
        _check_victims(case, plan.victims, plan.rule)
    for amounts in plan.guaranteed.values():
        assert all(type(v) is Fraction for v in amounts.values())


@settings(max_examples=400)
@given(any_cases)
def test_victims_against_the_references(case: Case) -> None:
    args = (case.quotas, case.containers, case.preemptor, case.free)
    options = {"now": case.now, "recent": case.recent}
    fast = plan_preemption(*args, now=case.now, recent=case.recent).victims
    # The literal transcription of section 8.1 takes exactly the same victims.
    assert fast == ref.greedy_victims(*args, **options)  # type: ignore[arg-type]
    # The exhaustive search: every allowed set of candidates that makes room, minimal ones.
    sets = ref.victim_sets(*args, **options)  # type: ignore[arg-type]
    if sets is None:  # the rules forbid preemption here
        assert fast is None
    elif sets == [frozenset()]:  # fits already
        assert fast == []
    elif not sets:  # no allowed set makes room
        assert fast is None
    elif fast is not None:
        # Minimal by inclusion: one of the minimal allowed sets, never a superset of one.
        assert frozenset(fast) in sets
        assert len(fast) >= min(len(s) for s in sets)
    # fast None with sets found: the greedy's fixed order is not a search; a victim taken
    # early can stop its quota from yielding a more useful one (spec 8.1: "a smaller set
    # may exist"). The literal greedy above agrees with it.
