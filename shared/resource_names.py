"""Resource names (quota spec sections 2, 3 and 9), shared by the coordinator and the agent.

is_rfc1123_label("team-a")                         -> True
resource_name_problem("nvidia.com/mig-3G.40GB")   -> "malformed_mig_name"
resource_name_problem("example.com/fpga")         -> None
extended_name_problem("nvidia.com/gpu")           -> "is discovered on the host, ..."
mig_memory_gb("nvidia.com/mig-1g.10gb")           -> 10
"""

from __future__ import annotations

import re
from typing import Annotated

from msgspec import Meta

from shared.resources import CPU, GPU_MEMORY, MEMORY

NVIDIA_GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
BARE_NAMES = frozenset({CPU, MEMORY, GPU_MEMORY})

RFC1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
# The same rule for msgspec and JSON Schema, which search for a pattern rather than match
# it whole. Python's ``$`` also matches just before a final newline, so ``(?!\n)`` follows
# it; in JSON Schema's ECMAScript dialect ``$`` is the very end and the lookahead is moot.
RFC1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$(?!\n)"
Rfc1123Label = Annotated[str, Meta(pattern=RFC1123_LABEL_PATTERN, max_length=63)]
_EXTENDED_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
_MIG = re.compile(r"nvidia\.com/mig-([1-9][0-9]*)g\.([1-9][0-9]*)gb(?:\+me)?")


def is_rfc1123_label(name: object) -> bool:
    """True when ``name`` is a string of at most 63 characters matching
    ``[a-z0-9]([-a-z0-9]*[a-z0-9])?`` (quota and namespace names). O(len(name))."""
    return isinstance(name, str) and len(name) <= 63 and RFC1123_LABEL.fullmatch(name) is not None


def _is_dns_subdomain(domain: str) -> bool:
    return len(domain) <= 253 and all(
        len(label) <= 63 and RFC1123_LABEL.fullmatch(label) for label in domain.split(".")
    )


def resource_name_problem(name: object) -> str | None:
    """None for a valid resource name, else the code of the rule it breaks.

    Valid: ``cpu``, ``memory``, ``gpu-memory``, or ``<domain>/<name>`` with a lower-case
    DNS subdomain and a name ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`` of at most 63
    characters. A name starting with ``nvidia.com/mig-`` must be exactly
    ``nvidia.com/mig-<N>g.<M>gb`` with an optional ``+me`` (N, M positive, no leading
    zero), else ``malformed_mig_name``. O(len(name)).
    """
    if not isinstance(name, str):
        return "invalid_resource_name"
    if name in BARE_NAMES:
        return None
    if name.startswith(MIG_PREFIX):
        return None if _MIG.fullmatch(name) else "malformed_mig_name"
    domain, slash, rest = name.partition("/")
    if not slash or not _is_dns_subdomain(domain):
        return "invalid_resource_name"
    if len(rest) > 63 or _EXTENDED_NAME.fullmatch(rest) is None:
        return "invalid_resource_name"
    return None


def extended_name_problem(name: str) -> str | None:
    """None when ``name`` may name an extended resource -- a valid ``<domain>/<name>``
    that is not an NVIDIA GPU or MIG device (those are discovered on the host, never
    configured or requested by name) -- else why not, for a message. O(len(name))."""
    if name == NVIDIA_GPU or name.startswith(MIG_PREFIX):
        return "is discovered on the host, not an extended resource (ask for gpus or mig)"
    if name in BARE_NAMES or resource_name_problem(name) is not None:
        return (
            "is not <domain>/<name> (a lower-case DNS subdomain, then a name of"
            " A-Z, a-z, 0-9, '-', '_', '.' of at most 63 characters)"
        )
    return None


def mig_memory_gb(name: str) -> int | None:
    """M, the GB of one device of the MIG profile ``name``; None when it is no MIG name."""
    match = _MIG.fullmatch(name)
    return int(match.group(2)) if match else None
