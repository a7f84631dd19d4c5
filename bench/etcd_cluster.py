"""A real 3-member etcd cluster on free loopback ports, for the tests and the benchmarks
of the etcd store (the tests import it as ``bench.etcd_cluster``, the benchmarks, run as
scripts from this folder, as ``etcd_cluster``).

    cluster = EtcdCluster(directory)    # three members, each with its data and log in it
    cluster.start()                     # returns once every member is healthy
    cluster.endpoints                   # ("127.0.0.1:41021", ...)
    cluster.kill(0); cluster.restart(0) # a crash (SIGKILL), and the member rejoining

``scripts/provision`` installs Debian's etcd-server. Every member runs with transaction
limits raised the way the README tells operators (``ETCD_FLAGS``), unless told a
``max_txn_ops`` of its own (the tests of commits made in steps give it a small one).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What allot needs of etcd: one transaction per deployment, however large, and room for
# the history of 100,000 containers between compactions (README).
MAX_TXN_OPS = 10_000
ETCD_FLAGS = (
    "--max-request-bytes=33554432",
    "--quota-backend-bytes=8589934592",
)
START_SECONDS = 30.0


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


class EtcdCluster:
    def __init__(self, root: Path, size: int = 3, *, max_txn_ops: int = MAX_TXN_OPS) -> None:
        self.max_txn_ops = max_txn_ops
        ports = free_ports(2 * size)
        self.members = [
            Member(f"m{i}", ports[2 * i], ports[2 * i + 1], root / f"m{i}") for i in range(size)
        ]
        self._initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(m.endpoint for m in self.members)

    def start(self) -> None:
        for member in self.members:
            self._launch(member, state="new")
        for member in self.members:
            self._wait_healthy(member)

    def kill(self, index: int) -> None:
        """SIGKILL one member, as a crash would."""
        process = self.members[index].process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.members[index].process = None

    def pause(self, index: int) -> None:
        """SIGSTOP one member: its connections stay open and nothing on them is answered,
        as with a host that hangs or a network that drops packets."""
        process = self.members[index].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)

    def resume(self, index: int) -> None:
        process = self.members[index].process
        assert process is not None
        process.send_signal(signal.SIGCONT)

    def restart(self, index: int) -> None:
        """Start a killed member again on its data; it rejoins the cluster."""
        member = self.members[index]
        self._launch(member, state="existing")
        self._wait_healthy(member)

    def leader(self) -> int:
        """The index of the member that is raft leader now."""
        for index, member in enumerate(self.members):
            if member.process is None:
                continue
            status = _etcdctl(member.endpoint, "endpoint", "status", "-w", "json")[0]["Status"]
            if status["leader"] == status["header"]["member_id"]:
                return index
        raise AssertionError("no member of the etcd cluster says it leads")

    def lead_elsewhere(self, index: int) -> None:
        """If member ``index`` is raft leader, hand raft leadership to another member
        (``etcdctl move-leader``), so that killing ``index`` costs no raft election."""
        leader = self.leader()
        if leader != index:
            return
        other = next(i for i, m in enumerate(self.members) if i != index and m.process)
        status = _etcdctl(self.members[other].endpoint, "endpoint", "status", "-w", "json")
        member_id = int(status[0]["Status"]["header"]["member_id"])
        _etcdctl(self.members[leader].endpoint, "move-leader", f"{member_id:x}", json_out=False)

    def stop(self) -> None:
        for member in self.members:
            if member.process is not None:
                member.process.terminate()
                member.process.wait(timeout=10)
                member.process = None

    def _launch(self, member: Member, *, state: str) -> None:
        member.directory.mkdir(parents=True, exist_ok=True)
        log = (member.directory / "etcd.log").open("ab")
        client_url = f"http://{member.endpoint}"
        member.process = subprocess.Popen(
            [
                "etcd",
                f"--name={member.name}",
                f"--data-dir={member.directory / 'data'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={member.peer_url}",
                f"--initial-advertise-peer-urls={member.peer_url}",
                f"--initial-cluster={self._initial}",
                f"--initial-cluster-state={state}",
                "--initial-cluster-token=allot-tests",
                f"--max-txn-ops={self.max_txn_ops}",
                *ETCD_FLAGS,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def _wait_healthy(self, member: Member) -> None:
        deadline = time.monotonic() + START_SECONDS
        url = f"http://{member.endpoint}/health"
        while time.monotonic() < deadline:
            assert member.process is not None
            if member.process.poll() is not None:
                raise EtcdUnavailable(
                    f"etcd member {member.name} exited with {member.process.returncode};"
                    f" its log: {member.directory / 'etcd.log'}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if json.load(answer).get("health") == "true":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise EtcdUnavailable(
            f"etcd member {member.name} was not healthy within {START_SECONDS:g}s;"
            f" its log: {member.directory / 'etcd.log'}"
        )


class EtcdUnavailable(Exception):
    pass


def etcd_missing() -> str | None:
    """Why etcd cannot be started here, or None."""
    if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
        return "etcd or etcdctl is not installed"
    return None


def _etcdctl(endpoint: str, *args: str, json_out: bool = True) -> Any:
    out = subprocess.run(
        ["etcdctl", f"--endpoints={endpoint}", *args],
        check=True,
        capture_output=True,
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
    ).stdout
    return json.loads(out) if json_out else out


def free_ports(count: int) -> list[int]:
    """Ports free now on 127.0.0.1 (each socket is held until all are picked)."""
    sockets = []
    try:
        for _ in range(count):
            held = socket.socket()
            held.bind(("127.0.0.1", 0))
            sockets.append(held)
        return [held.getsockname()[1] for held in sockets]
    finally:
        for held in sockets:
            held.close()
