"""The one error of the quota engine: a code naming the broken rule, the HTTP status the
quota spec gives that rule, a message with the numbers, and details listing every
offending item.

    raise QuotaError("max_below_min", "quota 'a': max.gpu-memory = 10 < min.gpu-memory = 40",
                     details={"quota": "a", "items": [{"resource": "gpu-memory", ...}]})
    error.status  -> 422

The service answers ``{"error": {"code": error.code, "message": error.message,
"details": error.details}}`` with ``error.status``; every value in ``details`` is a plain
JSON value (strings, integers, lists, dicts).
"""

from __future__ import annotations

from collections.abc import Mapping

# Spec section 3 (in the order the rules are checked), then the request and
# configuration rules of section 9 and the admission refusal of section 6.
STATUS: dict[str, int] = {
    # format rules of a quota: 422, checked first
    "invalid_name": 422,
    "empty_namespaces": 422,
    "duplicate_namespace": 422,
    "too_many_namespaces": 422,  # not in the spec's table: an ElasticQuota with 2+ namespaces
    "invalid_resource_name": 422,
    "malformed_mig_name": 422,
    "invalid_quantity": 422,
    "max_below_min": 422,
    # conflicts with the stored quotas: 409, checked after every format rule
    "quota_name_taken": 409,
    "namespace_has_elasticquota": 409,
    "namespace_in_composite": 409,
    # a container's request (section 9)
    "gpu_memory_not_requestable": 422,
    # admission (section 6); returned in an Admission, never raised by the engine
    "quota_max_exceeded": 403,
    # the engine's configuration (nvidia_gpu_resource_memory_gb, preemption_cooldown_s):
    # a coordinator fault, not the client's
    "invalid_config": 500,
}


class QuotaError(ValueError):
    """``code`` names the broken rule (a key of ``STATUS``), ``status`` is its HTTP status,
    ``message`` says what and where with the numbers, ``details`` lists every offender."""

    def __init__(
        self, code: str, message: str, *, details: Mapping[str, object] | None = None
    ) -> None:
        if code not in STATUS:
            raise ValueError(f"unknown quota error code {code!r}")
        super().__init__(message)
        self.code = code
        self.status = STATUS[code]
        self.message = message
        self.details: dict[str, object] = dict(details or {})

    def __repr__(self) -> str:
        return f"QuotaError({self.code!r}, {self.message!r})"
