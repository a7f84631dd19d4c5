"""Which coordinator to talk to next, among several (coordinators on etcd): for the
agent, ``allotctl`` and the lease client.

    servers = Servers(["http://c1:7600", "http://c2:7600", "http://c3:7600"])
    servers.current                  # where the next attempt goes
    servers.failed()                 # no answer there: the next one in the list
    servers.follow("http://c2:7600") # a standby named the leader: go there next

    split_servers("http://c1:7600, http://c2:7600/")   # a setting's list of them

A leader named by a standby need not be in the list (an address the operator did not
write down); once it fails, the rotation resumes where it left off.
"""

from __future__ import annotations


class Servers:
    def __init__(self, urls: list[str]) -> None:
        if not urls:
            raise ValueError("at least one coordinator URL is needed")
        self._urls = urls
        self._index = 0
        self._leader = ""  # a leader named by a standby, tried before the list

    @property
    def current(self) -> str:
        return self._leader or self._urls[self._index]

    @property
    def count(self) -> int:
        return len(self._urls)

    def failed(self) -> None:
        """The current server gave no usable answer: try the next one."""
        if self._leader:
            self._leader = ""
        else:
            self._index = (self._index + 1) % len(self._urls)

    def follow(self, leader: str) -> None:
        """A standby named ``leader`` (or none: "") as the one to talk to."""
        if not leader or leader == self.current:
            self.failed()
        elif leader in self._urls:
            self._leader = ""
            self._index = self._urls.index(leader)
        else:
            self._leader = leader


def split_servers(text: str) -> list[str]:
    """The base URLs of a comma-separated list, without blanks or trailing slashes."""
    return [url.strip().rstrip("/") for url in text.split(",") if url.strip()]


def agent_socket_url(server: str) -> str:
    """The websocket URL of the agent socket of the coordinator at ``server``."""
    base = server.rstrip("/")
    return "ws" + base.removeprefix("http") + "/v1/agent"
