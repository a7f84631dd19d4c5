"""The dashboard's login sessions: in memory, each with an expiry.

A session is a random id (the cookie's value) for the principal whose token logged in;
the token itself is never kept. Sessions live in this process only, so a restart of the
coordinator (or a takeover by another one) logs everyone out; they log in again.

    sessions = Sessions(lifetime_s=8 * 3600, clock=time.monotonic)
    session_id = sessions.open(principal)
    sessions.principal(session_id)   -> the principal, or None once expired or closed
    sessions.close(session_id)
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from coordinator.http.roles import Principal

DEFAULT_LIFETIME_S = 8 * 3600.0
# Only a valid token opens a session, but a script logging in in a loop must not grow
# the table without bound: past this many, the oldest session is closed first.
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class _Session:
    principal: Principal
    expires_at: float


class Sessions:
    def __init__(
        self,
        *,
        lifetime_s: float = DEFAULT_LIFETIME_S,
        clock: Callable[[], float],
        limit: int = MAX_SESSIONS,
    ) -> None:
        if lifetime_s <= 0 or limit < 1:
            raise ValueError(f"lifetime_s={lifetime_s} and limit={limit} must be positive")
        self._lifetime = lifetime_s
        self._clock = clock
        self._limit = limit
        self._open: dict[str, _Session] = {}  # in the order they were opened

    def __len__(self) -> int:
        return len(self._open)

    @property
    def lifetime_s(self) -> float:
        return self._lifetime

    def open(self, principal: Principal) -> str:
        """A new session for ``principal``; its id (unguessable: 256 random bits)."""
        now = self._clock()
        self._drop_expired(now)
        while len(self._open) >= self._limit:
            del self._open[next(iter(self._open))]
        session_id = secrets.token_urlsafe(32)
        self._open[session_id] = _Session(principal, now + self._lifetime)
        return session_id

    def principal(self, session_id: str) -> Principal | None:
        """Whose session ``session_id`` is, or None when it is unknown or expired."""
        session = self._open.get(session_id)
        if session is None:
            return None
        if self._clock() >= session.expires_at:
            del self._open[session_id]
            return None
        return session.principal

    def close(self, session_id: str) -> None:
        self._open.pop(session_id, None)

    def _drop_expired(self, now: float) -> None:
        """Sessions expire in the order they were opened, so the expired ones lead."""
        while self._open:
            first = next(iter(self._open))
            if self._open[first].expires_at > now:
                return
            del self._open[first]
