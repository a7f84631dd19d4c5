"""Choosing the coordinator to connect to among several: the list in turn, and the
leader a standby names."""

from __future__ import annotations

import pytest

from shared.servers import Servers

A, B, C = "http://a:7600", "http://b:7600", "http://c:7600"


def test_one_server_is_always_the_one() -> None:
    servers = Servers([A])
    servers.failed()
    servers.follow("")
    assert servers.current == A


def test_failures_go_round_the_list() -> None:
    servers = Servers([A, B, C])
    seen = [servers.current]
    for _ in range(3):
        servers.failed()
        seen.append(servers.current)
    assert seen == [A, B, C, A]


def test_a_named_leader_in_the_list_is_next_and_the_round_goes_on_from_it() -> None:
    servers = Servers([A, B, C])
    servers.follow(C)
    assert servers.current == C
    servers.failed()
    assert servers.current == A


def test_a_named_leader_outside_the_list_is_tried_once_then_the_list_again() -> None:
    servers = Servers([A, B])
    servers.failed()
    servers.follow("http://elsewhere:7600")
    assert servers.current == "http://elsewhere:7600"
    servers.failed()
    assert servers.current == B


@pytest.mark.parametrize("leader", ["", A], ids=["no-leader-known", "names-itself"])
def test_a_standby_that_names_no_other_sends_the_agent_round_the_list(leader: str) -> None:
    servers = Servers([A, B])
    servers.follow(leader)
    assert servers.current == B


def test_no_server_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Servers([])
