"""Resource templates (spec section 8): how a resource is configured, checked as a list.

The coordinator's TOML ``[[resources]]`` entries and ``PUT /v1/resources/{glob}`` bodies
decode into ``ResourceTemplate``; ``validate_templates`` checks a whole ordered list
before it replaces the previous one (which stays in force on error).

    templates = msgspec.convert(toml["resources"], list[ResourceTemplate])
    validate_templates(templates)                       # raises TemplateError(code=...)
    template = match_template(templates, "db.write")    # None: answer 400
    table = table_for(template, started_at=now, learning=not restored)
    apply_template(table, new_template)                 # on reload; leases are kept

Matching: a template whose glob equals the resource id wins; otherwise the first in
list order whose glob matches under ``fnmatch.fnmatchcase`` (``*`` also matches ``/``
and ``.``). O(t) for t templates; fnmatch caches the compiled patterns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from coordinator.leases.table import LeaseTable
from shared.api.leases import Kind, ResourceTemplate

CATCH_ALL = "*"


class TemplateError(ValueError):
    """A template list broke a rule; ``code`` names the rule, ``glob`` the template."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        glob: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.glob = glob
        self.details = dict(details or {})


def _check_one(position: int, template: ResourceTemplate) -> None:
    glob = template.identifier_glob
    where = f"template {position} ({glob!r})"

    def fail(code: str, message: str, **details: Any) -> TemplateError:
        return TemplateError(
            code, f"{where}: {message}", glob=glob, details={"position": position, **details}
        )

    if not isinstance(glob, str) or not glob:
        raise fail("empty_glob", "identifier_glob must be a non-empty string")
    algorithm = template.algorithm
    try:
        Kind(algorithm.kind)
    except ValueError:
        raise fail(
            "unknown_kind",
            f"algorithm.kind = {algorithm.kind!r} is not one of {', '.join(Kind)}",
            field="algorithm.kind",
            value=str(algorithm.kind),
        ) from None
    numbers = {
        "capacity": template.capacity,
        "safe_capacity": template.safe_capacity,
        "algorithm.lease_length": algorithm.lease_length,
        "algorithm.refresh_interval": algorithm.refresh_interval,
        "algorithm.learning_mode_duration": algorithm.learning_mode_duration,
    }
    for field, value in numbers.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail("not_a_number", f"{field} = {value!r} must be a number", field=field)
        if not math.isfinite(value):
            raise fail("not_finite", f"{field} = {value!r} must be finite", field=field)
    if template.capacity < 0:
        raise fail(
            "negative_capacity",
            f"capacity = {template.capacity:g} must be >= 0",
            field="capacity",
            value=template.capacity,
        )
    safe = template.safe_capacity
    if safe is not None and safe < 0 and safe != -1:
        raise fail(
            "bad_safe_capacity",
            f"safe_capacity = {safe:g} must be >= 0, or -1 for unlimited",
            field="safe_capacity",
            value=safe,
        )
    if algorithm.refresh_interval < 1:
        raise fail(
            "refresh_interval_too_short",
            f"algorithm.refresh_interval = {algorithm.refresh_interval:g} s must be >= 1 s",
            field="algorithm.refresh_interval",
            value=algorithm.refresh_interval,
        )
    if algorithm.lease_length < algorithm.refresh_interval:
        raise fail(
            "lease_shorter_than_refresh",
            f"algorithm.lease_length = {algorithm.lease_length:g} s must be >="
            f" algorithm.refresh_interval = {algorithm.refresh_interval:g} s",
            field="algorithm.lease_length",
            value=algorithm.lease_length,
            refresh_interval=algorithm.refresh_interval,
        )
    duration = algorithm.learning_mode_duration
    if duration is not None and duration < 0:
        raise fail(
            "negative_learning_mode_duration",
            f"algorithm.learning_mode_duration = {duration:g} s must be >= 0",
            field="algorithm.learning_mode_duration",
            value=duration,
        )


def validate_templates(templates: Sequence[ResourceTemplate]) -> None:
    """Raise TemplateError for the first broken rule, in list order; else return.

    Rules: each template's values are in range (``_check_one``); no two templates share
    a glob; ``"*"``, if present, is the last. An empty list is valid (every resource
    then matches nothing). O(t).
    """
    seen: dict[str, int] = {}
    for position, template in enumerate(templates):
        _check_one(position, template)
        glob = template.identifier_glob
        if glob in seen:
            raise TemplateError(
                "duplicate_glob",
                f"template {position} ({glob!r}): identifier_glob is already used by"
                f" template {seen[glob]}",
                glob=glob,
                details={"position": position, "first": seen[glob]},
            )
        seen[glob] = position
    catch_all = seen.get(CATCH_ALL)
    if catch_all is not None and catch_all != len(templates) - 1:
        raise TemplateError(
            "catch_all_not_last",
            f"template {catch_all} ('*') must be the last of {len(templates)} templates",
            glob=CATCH_ALL,
            details={"position": catch_all, "templates": len(templates)},
        )


def match_template(
    templates: Sequence[ResourceTemplate], resource_id: str
) -> ResourceTemplate | None:
    """The template for ``resource_id``: its exact glob, else the first glob matching
    under ``fnmatch.fnmatchcase``, else None. O(t)."""
    for template in templates:
        if template.identifier_glob == resource_id:
            return template
    for template in templates:
        if fnmatchcase(resource_id, template.identifier_glob):
            return template
    return None


def table_for(template: ResourceTemplate, *, started_at: float, learning: bool) -> LeaseTable:
    """A new, empty lease table configured by ``template``.

    ``learning``: the coordinator started without persisted leases (spec section 6)."""
    algorithm = template.algorithm
    return LeaseTable(
        algorithm.kind,
        template.capacity,
        lease_length=algorithm.lease_length,
        refresh_interval=algorithm.refresh_interval,
        learning_mode_duration=template.learning_window,
        safe_capacity=template.safe_capacity,
        started_at=started_at,
        learning=learning,
    )


def apply_template(table: LeaseTable, template: ResourceTemplate) -> None:
    """Re-apply ``template`` to an existing table (reload): capacity, kind, intervals,
    learning window and safe capacity change; the leases stay. O(1)."""
    algorithm = template.algorithm
    table.reconfigure(
        algorithm.kind,
        template.capacity,
        lease_length=algorithm.lease_length,
        refresh_interval=algorithm.refresh_interval,
        learning_mode_duration=template.learning_window,
        safe_capacity=template.safe_capacity,
    )
