"""What a node offers and holds, and what the admin's levers on it answer:
``/v1/nodes/{name}/allocation``, ``.../capacity``, ``.../cordon``, ``.../uncordon``,
``.../drain`` and ``DELETE /v1/nodes/{name}`` (``coordinator.http.node_admin``)."""

from __future__ import annotations

import msgspec


class Allocation(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    cordoned: bool
    share_base: int
    cores: dict[int, int]  # core id -> pieces offered
    used: dict[int, int]  # core id -> pieces allocated
    memory: int
    memory_used: int
    numa: dict[int, int] | None
    numa_memory: dict[int, int] | None
    shared_pool: list[int]
    containers: list[str]  # those a namespace token may see: its namespaces' only
    version: int
    extended: dict[str, int] = {}  # named extended resource -> units offered
    extended_used: dict[str, int] = {}  # -> units its containers hold
    other_containers: int = 0  # other namespaces' containers there: counted, not named
    # The shared pool's CPU, in pieces: its cores' pieces, those times cpu_overcommit (what
    # unbound containers may request in all), and what they request.
    shared_cpu: int = 0
    cpu_overcommit: str = "1"
    shared_limit: int = 0
    unbound_cpu: int = 0


class Cordoned(msgspec.Struct, frozen=True):
    """What cordon, uncordon and drain answer, built as a plain dict."""

    node: str
    cordoned: bool
    # Drain's: the containers released from the node; each one's stand-in (a new id);
    # the stand-ins placed (-> node) and those left pending (-> why).
    released: list[str] = []
    stand_ins: dict[str, str] = {}
    placed: dict[str, str] = {}
    pending: dict[str, str] = {}


class NodeDeleted(msgspec.Struct, frozen=True):
    """What deleting a (lost) node answers: its containers released as drain's are."""

    node: str
    deleted: bool
    released: list[str] = []
    stand_ins: dict[str, str] = {}
    placed: dict[str, str] = {}
    pending: dict[str, str] = {}
