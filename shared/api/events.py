"""The decisions users ask "why?" about, as the API shows them: ``GET /v1/events``.
The coordinator keeps and stores them (``coordinator.services.events``)."""

from __future__ import annotations

import msgspec

# The query parameters that filter ``GET /v1/events``, besides ``since``.
EVENT_FILTERS = ("namespace", "deployment", "container", "node", "kind")


class Event(msgspec.Struct, frozen=True, kw_only=True):
    sequence: int
    # When it happened: when decided, or for what an agent reports (drift, restarted,
    # failed) when the agent did it.
    at: float
    # admitted, placed, refused, realloc, deleted, released, drift, restarted, failed, lost,
    # pressure and relieved (a node entering and leaving CPU pressure)
    kind: str
    reason: str
    namespace: str = ""
    deployment: str = ""
    container: str = ""
    node: str = ""


class EventList(msgspec.Struct, frozen=True):
    """``GET /v1/events``, which the coordinator builds as a plain dict; oldest first."""

    events: list[Event]
