"""Validation of quotas (spec section 3): the format rules of one quota (422), then the
conflicts of the quota being written with the stored ones (409).

Invariant: a set of quotas that passed ``validate_quotas`` one write at a time has unique
names across both kinds, and every namespace is governed by at most one quota.

    validate_quotas([*stored, new])          # raises QuotaError(code, status, details)
    parsed = parse_quota(new)                # exact amounts; raises on a format rule
    stored_form = canonical_quota(new)       # cpu "1.7", memory 536870912, gpu-memory 40

Rules, in the order they are checked; an error names the first broken rule and its
details list every offending item of that rule:

    invalid_name, empty_namespaces, duplicate_namespace, too_many_namespaces,
    invalid_resource_name, malformed_mig_name, invalid_quantity, max_below_min   (422)
    quota_name_taken, namespace_has_elasticquota, namespace_in_composite         (409)

``too_many_namespaces`` is not in the spec's table: an ElasticQuota (``composite=False``)
naming two or more namespaces has no rule there, and is refused under this code.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from coordinator.quotas.model import ParsedQuota, Quota
from coordinator.quotas.resources import (
    Amounts,
    collect_amounts,
    format_amount,
    plain,
    raise_first,
)
from shared.quantity import DEFAULT_SHARE_BASE, exact_decimal
from shared.resource_names import is_rfc1123_label
from shared.resources import CPU

FORMAT_ORDER = (
    "invalid_name",
    "empty_namespaces",
    "duplicate_namespace",
    "too_many_namespaces",
    "invalid_resource_name",
    "malformed_mig_name",
    "invalid_quantity",
    "max_below_min",
)
CONFLICT_ORDER = ("quota_name_taken", "namespace_has_elasticquota", "namespace_in_composite")

Problems = dict[str, list[dict[str, object]]]


def _namespaces(quota: Quota, problems: Problems) -> list[str]:
    raw: object = quota.namespaces
    if not isinstance(raw, list | tuple):
        problems.setdefault("invalid_name", []).append({"field": "namespaces", "value": plain(raw)})
        return []
    names: list[str] = []
    seen: set[str] = set()
    for index, name in enumerate(raw):
        if not is_rfc1123_label(name):
            problems.setdefault("invalid_name", []).append(
                {"field": f"namespaces[{index}]", "value": plain(name)}
            )
            continue
        if name in seen:
            problems.setdefault("duplicate_namespace", []).append(
                {"field": f"namespaces[{index}]", "namespace": name}
            )
            continue
        seen.add(name)
        names.append(name)
    if not raw:
        problems.setdefault("empty_namespaces", []).append({"field": "namespaces", "count": 0})
    elif not quota.is_composite and len(raw) > 1:
        problems.setdefault("too_many_namespaces", []).append(
            {"field": "namespaces", "count": len(raw)}
        )
    return names


def parse_quota(quota: Quota, *, share_base: int = DEFAULT_SHARE_BASE) -> ParsedQuota:
    """``quota`` with exact amounts, or ``QuotaError`` for the first broken format rule.

    Postcondition: names are RFC 1123 labels, there is at least one namespace and none
    twice (one for an ElasticQuota), every resource name and quantity is valid, and
    ``max[r] >= min[r]`` for every r named in both. Details name the quota and list every
    offending item of the rule. O(n + r) for n namespaces and r resources.
    """
    problems: Problems = {}
    if not is_rfc1123_label(quota.name):
        problems.setdefault("invalid_name", []).append(
            {"field": "name", "value": plain(quota.name)}
        )
    namespaces = _namespaces(quota, problems)
    minimum = collect_amounts(quota.min, field="min", share_base=share_base, problems=problems)
    maximum = collect_amounts(quota.max, field="max", share_base=share_base, problems=problems)
    for name in minimum:  # items in the order written, as everywhere
        if name in maximum and maximum[name] < minimum[name]:
            problems.setdefault("max_below_min", []).append(
                {
                    "resource": name,
                    "min": format_amount(name, minimum[name]),
                    "max": format_amount(name, maximum[name]),
                }
            )
    subject = f"{quota.kind} {quota.name!r}"
    raise_first(
        problems,
        FORMAT_ORDER,
        subject=subject,
        extra={"quota": plain(quota.name), "kind": quota.kind},
    )
    return ParsedQuota(quota.name, tuple(namespaces), quota.is_composite, minimum, maximum)


def _stored_value(name: str, value: Fraction) -> int | str:
    # Parsed quantities are finite decimals (cpu) or whole numbers (everything else).
    if name == CPU:
        text = exact_decimal(value)
        assert text is not None  # a parsed cpu value is a finite decimal
        return text
    return format_amount(name, value)


def _stored(amounts: Amounts) -> dict[str, int | str]:
    return {name: _stored_value(name, value) for name, value in amounts.items()}


def canonical_quota(quota: Quota, *, share_base: int = DEFAULT_SHARE_BASE) -> Quota:
    """``quota`` in its stored form, after its format rules (``parse_quota``; raises
    ``QuotaError``): cpu as a decimal string of cores, every other quantity as an
    integer in its unit, ``composite`` a boolean, ``max`` None kept as None. Parsing the
    result gives the same amounts: ``parse_quota(canonical_quota(q)) == parse_quota(q)``.
    O(n + r)."""
    parsed = parse_quota(quota, share_base=share_base)
    return Quota(
        parsed.name,
        list(parsed.namespaces),
        _stored(parsed.min),
        None if quota.max is None else _stored(parsed.max),
        parsed.composite,
    )


def validate_quotas(quotas: Sequence[Quota], *, share_base: int = DEFAULT_SHARE_BASE) -> None:
    """Check the write of ``quotas[-1]`` against the stored ``quotas[:-1]``; return None or
    raise ``QuotaError`` (``.code``, ``.status``, ``.message``, ``.details``).

    The format rules (422) of the quota being written come first (``parse_quota``); the
    stored quotas are not re-checked for format. Then the conflicts (409): a stored quota
    with the same name and the same kind is the previous version of the one being
    written and is ignored (so the caller may pass the store's contents as they are);
    any other stored quota must not have the same name (``quota_name_taken``) nor govern
    one of its namespaces (``namespace_has_elasticquota`` when it is an ElasticQuota,
    ``namespace_in_composite`` when it is a CompositeElasticQuota). An empty sequence is
    valid. O(N) for N namespaces in all.
    """
    if not quotas:
        return
    *stored, new = quotas
    parsed = parse_quota(new, share_base=share_base)
    others = [q for q in stored if not (q.name == new.name and q.is_composite == parsed.composite)]
    governing: dict[str, list[Quota]] = {}
    for other in others:
        for namespace in dict.fromkeys(other.namespaces):
            governing.setdefault(namespace, []).append(other)
    problems: Problems = {}
    for other in others:
        if other.name == new.name:
            problems.setdefault("quota_name_taken", []).append(
                {"name": other.name, "kind": other.kind}
            )
    for namespace in parsed.namespaces:
        for other in governing.get(namespace, []):
            code = "namespace_in_composite" if other.is_composite else "namespace_has_elasticquota"
            problems.setdefault(code, []).append(
                {"namespace": namespace, "quota": other.name, "kind": other.kind}
            )
    raise_first(
        problems,
        CONFLICT_ORDER,
        subject=f"{parsed.kind} {parsed.name!r}",
        extra={"quota": parsed.name, "kind": parsed.kind},
    )
