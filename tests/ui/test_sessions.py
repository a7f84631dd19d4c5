"""The dashboard's sessions: opened for a principal, gone when closed or expired, and
never more than the limit."""

from __future__ import annotations

import pytest

from coordinator.http.roles import ADMIN, namespace_principal
from coordinator.ui.sessions import Sessions

TEAM_A = namespace_principal(["team-a"])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_its_principal_until_it_expires() -> None:
    clock = Clock()
    sessions = Sessions(lifetime_s=60.0, clock=clock)
    admin, team = sessions.open(ADMIN), sessions.open(TEAM_A)
    assert admin != team
    assert (sessions.principal(admin), sessions.principal(team)) == (ADMIN, TEAM_A)
    clock.now += 59.9
    assert sessions.principal(team) == TEAM_A
    clock.now += 0.1
    assert (sessions.principal(admin), sessions.principal(team)) == (None, None)
    assert len(sessions) == 0


def test_a_closed_or_unknown_session_is_nobody() -> None:
    sessions = Sessions(clock=Clock())
    opened = sessions.open(ADMIN)
    sessions.close(opened)
    sessions.close("never-opened")  # closing twice, or a forged id, changes nothing
    assert sessions.principal(opened) is None
    assert sessions.principal("") is None
    assert len(sessions) == 0


def test_opening_drops_the_expired_and_past_the_limit_the_oldest() -> None:
    clock = Clock()
    sessions = Sessions(lifetime_s=10.0, clock=clock, limit=3)
    first = sessions.open(ADMIN)
    clock.now += 5
    second, third = sessions.open(TEAM_A), sessions.open(TEAM_A)
    fourth = sessions.open(ADMIN)
    assert [sessions.principal(s) for s in (first, second, third, fourth)] == [
        None,
        TEAM_A,
        TEAM_A,
        ADMIN,
    ]
    clock.now += 10  # all three expire; opening one more drops them
    sessions.open(ADMIN)
    assert len(sessions) == 1


@pytest.mark.parametrize(("lifetime_s", "limit"), [(0.0, 10), (-1.0, 10), (60.0, 0)])
def test_settings_that_could_hold_no_session_are_refused(lifetime_s: float, limit: int) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Sessions(lifetime_s=lifetime_s, clock=Clock(), limit=limit)
