"""Who holds a lease, as one string for the engine and as a key in the store.

A lease's holder is a client id within a namespace. The cluster's own clients, those an
admin token asks for without naming a namespace, have the namespace ``""``. The engine
(``coordinator.leases``) keys leases by one string and knows nothing of namespaces, so
the service gives it ``holder_key``: the namespace, "/", the client id. A namespace is
``""`` or an RFC 1123 label, and neither holds a "/", so the first "/" ends the namespace
and every client id, slashes and all, comes back unchanged:

    holder_key("team-a", "web-7")                  -> "team-a/web-7"
    split_holder("/batch/2")                       -> ("", "batch/2")
    held_key("db.write", "team-a/web-7")           -> "/leases/held/db.write/team-a/web-7"
    parse_held_key("/leases/held/db.write/web-7")  -> HeldKey("db.write", "/web-7", legacy=True)

Store keys are ``/leases/held/<resource>/<namespace>/<client>``, each part
percent-encoded, so that no part holds a "/" (the cluster's namespace is the empty
part). A store written before leases had namespaces holds
``/leases/held/<resource>/<client>``: two parts where a key of now has three, so it is
told apart and read as the cluster's own client's. Percent-encoding the holder key as
one part would have kept two parts, and then an old client id "a/b" would read back as
client "b" of namespace "a".
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

CLUSTER_NAMESPACE = ""
HELD_PREFIX = "/leases/held/"


def holder_key(namespace: str, client_id: str) -> str:
    """The engine's key for ``client_id`` of ``namespace``. O(len)."""
    if "/" in namespace:
        raise ValueError(f"namespace {namespace!r} must not hold a '/'")
    return f"{namespace}/{client_id}"


def split_holder(holder: str) -> tuple[str, str]:
    """``(namespace, client_id)`` of a ``holder_key``; its inverse. O(len)."""
    namespace, slash, client_id = holder.partition("/")
    if not slash:
        raise ValueError(f"{holder!r} is not a holder key: it has no '/'")
    return namespace, client_id


@dataclass(frozen=True)
class HeldKey:
    """A lease's store key, read back."""

    resource_id: str
    holder: str  # a holder_key
    legacy: bool  # written before namespaces; ``held_key`` gives its key of now


def held_key(resource_id: str, holder: str) -> str:
    """The store key of ``holder``'s lease of ``resource_id``. O(len)."""
    namespace, client_id = split_holder(holder)
    parts = (resource_id, namespace, client_id)
    return HELD_PREFIX + "/".join(quote(part, safe="") for part in parts)


def parse_held_key(key: str) -> HeldKey:
    """What ``key`` (of now, or of a store before namespaces) names; the inverse of
    ``held_key``. ValueError if it is neither. O(len)."""
    if not key.startswith(HELD_PREFIX):
        raise ValueError(f"{key!r} is not a lease key: it does not start with {HELD_PREFIX}")
    parts = [unquote(part) for part in key.removeprefix(HELD_PREFIX).split("/")]
    if len(parts) == 2:
        resource_id, client_id = parts
        return HeldKey(resource_id, holder_key(CLUSTER_NAMESPACE, client_id), legacy=True)
    if len(parts) == 3:
        resource_id, namespace, client_id = parts
        return HeldKey(resource_id, holder_key(namespace, client_id), legacy=False)
    raise ValueError(f"{key!r} is not a lease key: it has {len(parts)} parts, not 2 or 3")
