"""What a deployment decision gives back: the containers placed, or a refusal (reason,
rule code, kind and the numbers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from coordinator.errors import ApiError
from coordinator.placement import PlacementError
from shared.api.containers import ContainerRecord
from shared.api.deployments import DeploymentRecord
from shared.resource_names import extended_name_problem

Kind = Literal["conflict", "forbidden", "invalid"]


class DeployRefused(ApiError):
    """A decision that cannot be made; nothing changed. ``reason`` is quota, capacity,
    pool, invalid or conflict (also in ``details``); ``kind`` as for every refusal
    (``coordinator.errors``): conflict, forbidden or invalid."""

    def __init__(
        self, reason: str, code: str, message: str, kind: Kind, details: dict[str, object]
    ) -> None:
        super().__init__(message, code=code, details={"reason": reason, **details})
        self.reason = reason
        self.kind = kind


@dataclass(frozen=True)
class DeployOutcome:
    deployment: DeploymentRecord
    containers: list[ContainerRecord]


def refused_by_placement(reason: str, error: PlacementError, kind: Kind) -> DeployRefused:
    details: dict[str, object] = {
        k: v for k, v in error.details.items() if isinstance(v, str | int | float | bool)
    }
    return DeployRefused(reason, error.kind, error.message, kind, details)


def refused_by_kind(error: PlacementError) -> DeployRefused:
    """A bad request is invalid; anything else the node cannot take is a conflict
    (reason capacity): ``below_allocation``, ``insufficient_resource``."""
    if error.kind == "invalid_request":
        return refused_by_placement("invalid", error, "invalid")
    return refused_by_placement("capacity", error, "conflict")


def check_extended_names(extended: Mapping[str, int]) -> None:
    """``DeployRefused`` (invalid, ``invalid_resource_name``) naming every requested extended
    resource whose name breaks the rule, and why."""
    problems = {name: extended_name_problem(name) for name in sorted(extended)}
    bad = {name: problem for name, problem in problems.items() if problem is not None}
    if bad:
        said = "; ".join(f"{name!r} {problem}" for name, problem in bad.items())
        raise DeployRefused(
            "invalid",
            "invalid_resource_name",
            f"extended resources: {said}",
            "invalid",
            {"resources": bad},
        )
