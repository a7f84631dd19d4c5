"""Losing etcd members under a stream of writes: how long writes stop, what is refused,
and whether the coordinators' leader changes.

    .venv/bin/python bench/etcd_failover.py [--kills 10] [--writers 4] [--ttl 5] [--quorum]
                                            [--raft-leader] [--json FILE]

A local 3-member etcd cluster (``etcd_cluster``) in a new temporary directory (under
``--workdir``) and two real ``allot-coordinator`` processes on it (``leader_ttl_seconds =
--ttl``). ``--writers`` clients PUT elastic quotas to the leader back to back, each its
own namespace, over real HTTP. Steps and figures:

1. kills: ``--kills`` times, once the standby names the leader: the member the leader's
   requests go to is found (``ss``: the most bytes sent in half a second); unless
   ``--raft-leader``, etcd's raft leadership is first moved off it (``etcdctl
   move-leader``, and the member in use is found again), so the figure is the client's
   failover and not raft's election (at least etcd's election timeout,
   1 s by default). After ``BEFORE_SECONDS`` of writes it is killed (SIGKILL), writes go
   on for ``AFTER_SECONDS``, and it is started again and waits until it is healthy. Per
   kill: the longest gap between two accepted writes from ``BEFORE_SECONDS`` before the
   kill until the member is healthy again, the answers that were not 200 (by status and
   error code), and the leader changes (``no longer the leader`` in the coordinators'
   logs).
2. ``--quorum``: two members killed at once; for ``DOWN_SECONDS`` (while a write more
   is sent every ``PACE_SECONDS``, each to a namespace of its own) the answers to the
   writes sent meanwhile and to those in flight when quorum was lost (status and code),
   and the longest any of them waited for its answer; then one member is started again,
   and once it is healthy (quorum is back) the seconds until the next write is accepted
   (None: not within ``BACK_SECONDS``). The other member is started again at the end.
3. Once every write in flight is answered, each namespace's stored quota is read from
   the leader: it must be the last accepted write's, or that of a later write whose
   outcome is unknown (``unkept`` lists those that are not: nothing lost or doubled); and
   it must be what a fresh read of the store holds (``unlike_store`` lists those that are
   not: the leader's memory is not the store's).

Not part of ``make test`` as a benchmark; ``tests/e2e/test_etcd_failover.py`` runs it
and holds its figures to the issue's bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp
from etcd_cluster import EtcdCluster, etcd_missing
from fleet import Coordinator, Failed, etcd_settings, free_port
from yarl import URL

from coordinator.services.quota_service import QUOTA_PREFIX
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings

BEFORE_SECONDS = 1.0
MOVES = 5  # attempts to have the member in use not lead raft
AFTER_SECONDS = 2.0
DOWN_SECONDS = 3.0
PACE_SECONDS = 0.02  # between the writes sent while quorum is lost, besides the clients'
BACK_SECONDS = 30.0
STEP_DOWN = re.compile(r"no longer the leader")
UNKNOWN = {"outcome_unknown", "ClientOSError", "ServerDisconnectedError", "TimeoutError"}


@dataclass
class Write:
    namespace: str
    cpus: int  # the quota's max it asked for
    sent: float
    answered: float
    status: int  # 0: no HTTP answer
    code: str  # the error's code ("" for a 200), or the client's exception


@dataclass
class Kill:
    member: int
    raft_leader: bool  # the killed member was etcd's raft leader
    longest_gap_s: float
    accepted: int
    refused: dict[str, int]  # "503 outcome_unknown": how many
    leader_changes: int


@dataclass
class Quorum:
    refused: dict[str, int]  # the answers to writes sent while quorum was lost
    accepted_while_down: int
    in_flight: dict[str, int]  # the answers to writes in flight when it was lost
    longest_wait_s: float  # the longest a write answered while quorum was lost waited
    longest_sent_after_s: float  # the same, of the writes sent once it was lost
    # From quorum lost to the first write answered 503 store_unavailable; None: none was.
    refused_after_s: float | None
    # From quorum back (a member healthy again) to a write accepted; None: not within
    # BACK_SECONDS.
    back_after_s: float | None


@dataclass
class Figures:
    ttl: int
    writers: int
    kills: list[Kill] = field(default_factory=list)
    quorum: Quorum | None = None
    # Namespaces whose stored quota is not the last accepted write's (or a later one of
    # unknown outcome): an accepted write lost, or a refused one applied.
    unkept: list[str] = field(default_factory=list)
    # Namespaces whose quota the leader shows otherwise than a fresh read of the store:
    # the leader's memory is not the store's.
    unlike_store: list[str] = field(default_factory=list)


class Writers:
    """``count`` clients writing quotas to the leader back to back, and more sent at a
    pace on request (``paced``); every answer kept."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str, count: int) -> None:
        self.http = http
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.writes: list[Write] = []
        self._stopping = False
        self._tasks = [asyncio.create_task(self._write(f"bench-{i}")) for i in range(count)]

    async def _write(self, namespace: str) -> None:
        """Each write a max never written before, so that every accepted write is a
        commit: a write of the max already stored changes nothing and is answered at
        once, before any commit, which a cycle of 100 values met while quorum was lost
        and its loss not yet seen (4 such writes counted as accepted in one run)."""
        cpus = 0
        while not self._stopping:
            cpus += 1
            await self._once(namespace, cpus)

    async def paced(self, every: float) -> None:
        """A write every ``every`` seconds, each to a namespace of its own and sent without
        waiting for the one before, until cancelled: the back-to-back clients' writes
        often all wait in the one commit in flight, these arrive while it is."""
        for serial in itertools.count():
            self._tasks.append(asyncio.create_task(self._once(f"paced-{serial}", 1)))
            await asyncio.sleep(every)

    async def _once(self, namespace: str, cpus: int) -> None:
        body = {"namespace": namespace, "min": {"cpu": "1"}, "max": {"cpu": cpus}}
        sent = time.monotonic()
        status, code = 0, ""
        try:
            async with self.http.put(
                f"{self.url}/v1/elasticquotas/{namespace}",
                json=body,
                headers=self.headers,
                allow_redirects=False,
            ) as response:
                status = response.status
                if status == 307:  # sent on to a new leader: write there from now on
                    code = "sent to the leader"
                    leader = str(URL(response.headers["Location"]).origin())
                    if leader == self.url:  # a standby that names itself, for now
                        await asyncio.sleep(0.05)
                    self.url = leader
                else:
                    answer = await response.json(content_type=None)
                    code = "" if status == 200 else str(answer.get("error", {}).get("code"))
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            code = type(error).__name__
            await asyncio.sleep(0.05)
        self.writes.append(Write(namespace, cpus, sent, time.monotonic(), status, code))

    def between(self, start: float, end: float) -> list[Write]:
        return [w for w in self.writes if start <= w.answered <= end]

    async def close(self) -> None:
        """Once every write in flight is answered, so that each has its answer."""
        self._stopping = True
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def unkept(self, stored: dict[str, str]) -> list[str]:
        """The namespaces whose stored max (``stored``) is not what the writes say it
        must be: the last accepted write's, or that of a later one whose outcome is
        unknown (no answer, or ``503 outcome_unknown``)."""
        wrong = []
        for namespace in sorted({w.namespace for w in self.writes}):
            own = [w for w in self.writes if w.namespace == namespace]
            accepted = [i for i, w in enumerate(own) if w.status == 200]
            if not accepted:
                continue
            unknown = {w.cpus for w in own[accepted[-1] + 1 :] if w.code in UNKNOWN}
            if stored.get(namespace) not in {str(c) for c in {own[accepted[-1]].cpus, *unknown}}:
                wrong.append(namespace)
        return wrong


def longest_gap(writes: list[Write], start: float, end: float) -> float:
    """The longest time in [start, end] with no write accepted."""
    accepted = sorted(w.answered for w in writes if w.status == 200)
    marks = [start, *(t for t in accepted if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(marks))


def refusals(writes: list[Write]) -> dict[str, int]:
    return dict(Counter(f"{w.status} {w.code}" for w in writes if w.status != 200))


async def member_in_use(etcd: EtcdCluster, pid: int) -> int:
    """The member the process sends the most to over half a second: the one its writes
    go to. (Counting connections is not enough: a link keeps its channel to a member it
    moved away from, and reconnects it when the member comes back.)"""
    before = bytes_sent(etcd, pid)
    await asyncio.sleep(0.5)
    after = bytes_sent(etcd, pid)
    sent = Counter({member: after[member] - before.get(member, 0) for member in after})
    if not sent or sent.most_common(1)[0][1] <= 0:
        raise Failed("the leader sends nothing to any etcd member")
    return sent.most_common(1)[0][0]


def bytes_sent(etcd: EtcdCluster, pid: int) -> Counter[int]:
    """Bytes the process has sent on its open connections to each member (``ss -ti``:
    a line per socket, then a line of its TCP figures)."""
    ports = {m.client_port: i for i, m in enumerate(etcd.members)}
    lines = subprocess.run(
        ["ss", "-tinpH", "state", "established"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    sent: Counter[int] = Counter()
    member: int | None = None
    for line in lines:
        if not line[:1].isspace():
            peer = line.split()[3] if len(line.split()) > 3 else ""
            port = int(peer.rsplit(":", 1)[1]) if ":" in peer else 0
            member = ports.get(port) if f"pid={pid}," in line else None
        elif member is not None and (figure := re.search(r"bytes_sent:(\d+)", line)):
            sent[member] += int(figure.group(1))
    return sent


def leader_changes(coordinators: list[Coordinator]) -> int:
    return sum(len(STEP_DOWN.findall(c.log.read_text(errors="replace"))) for c in coordinators)


async def until_led(http: aiohttp.ClientSession, coordinators: list[Coordinator]) -> Coordinator:
    """The leader, once the other coordinator names it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answers = []
        for coordinator in coordinators:
            coordinator.check_alive()
            try:
                async with http.get(coordinator.url + "/readyz") as response:
                    answers.append((response.status, (await response.json()).get("leader")))
            except aiohttp.ClientError:
                answers.append((0, None))
        for index, (status, _) in enumerate(answers):
            if status == 200 and answers[1 - index][1] == coordinators[index].url:
                return coordinators[index]
        await asyncio.sleep(0.1)
    raise Failed("no leader named by the standby within 60 s")


async def kill_once(
    etcd: EtcdCluster,
    leader: Coordinator,
    coordinators: list[Coordinator],
    writers: Writers,
    *,
    raft_leader: bool,
) -> Kill:
    victim = await member_in_use(etcd, leader.pid)
    for _ in range(MOVES) if not raft_leader else ():
        if await asyncio.to_thread(etcd.leader) != victim:
            break
        # Moving raft leadership may move the client too (the member answers "no
        # leader" for a moment): find the member in use again.
        await asyncio.to_thread(etcd.lead_elsewhere, victim)
        victim = await member_in_use(etcd, leader.pid)
    leads = await asyncio.to_thread(etcd.leader) == victim
    changes = leader_changes(coordinators)
    await asyncio.sleep(BEFORE_SECONDS)
    killed = time.monotonic()
    etcd.kill(victim)
    await asyncio.sleep(AFTER_SECONDS)
    await asyncio.to_thread(etcd.restart, victim)
    end = time.monotonic()
    writes = writers.between(killed - BEFORE_SECONDS, end)
    return Kill(
        member=victim,
        raft_leader=leads,
        longest_gap_s=round(longest_gap(writes, killed - BEFORE_SECONDS, end), 3),
        accepted=sum(w.status == 200 for w in writes),
        refused=refusals(writes),
        leader_changes=leader_changes(coordinators) - changes,
    )


async def lose_quorum(etcd: EtcdCluster, writers: Writers) -> Quorum:
    down = [i for i, m in enumerate(etcd.members) if m.process is not None][:2]
    lost = time.monotonic()
    for index in down:
        etcd.kill(index)
    pacing = asyncio.create_task(writers.paced(PACE_SECONDS))
    await asyncio.sleep(DOWN_SECONDS)
    await asyncio.to_thread(etcd.restart, down[0])
    back = time.monotonic()
    first = None
    while first is None and time.monotonic() - back < BACK_SECONDS:
        await asyncio.sleep(0.01)
        accepted = [w.answered for w in writers.between(back, time.monotonic()) if w.status == 200]
        first = min(accepted, default=None)
    pacing.cancel()
    answered = writers.between(lost, back)
    while_down = [w for w in answered if w.sent >= lost]
    unavailable = [w.answered for w in answered if w.code == "store_unavailable"]
    await asyncio.to_thread(etcd.restart, down[1])
    return Quorum(
        refused=refusals(while_down),
        accepted_while_down=sum(w.status == 200 for w in while_down),
        in_flight=dict(Counter(f"{w.status} {w.code}" for w in answered if w.sent < lost)),
        longest_wait_s=round(max((w.answered - w.sent for w in answered), default=0.0), 3),
        longest_sent_after_s=round(max((w.answered - w.sent for w in while_down), default=0.0), 3),
        refused_after_s=round(min(unavailable) - lost, 3) if unavailable else None,
        back_after_s=None if first is None else round(first - back, 3),
    )


async def stored_maxima(http: aiohttp.ClientSession, url: str, token: str) -> dict[str, str]:
    """Each quota's max cpu, as the leader shows it."""
    headers = {"Authorization": f"Bearer {token}"}
    async with http.get(f"{url}/v1/quotas", headers=headers) as response:
        quotas = (await response.json())["quotas"]
    return {q["name"]: q["max"].get("cpu", "") for q in quotas}


async def read_maxima(endpoints: tuple[str, ...]) -> dict[str, str]:
    """Each quota's max cpu as the store holds it, read afresh (as a new leader would)."""
    store = await EtcdStore.open(EtcdSettings(endpoints=endpoints))
    try:
        stored = [json.loads(entry.value) for entry in await store.range(QUOTA_PREFIX)]
    finally:
        await store.close()
    return {q["name"]: str((q.get("max") or {}).get("cpu", "")) for q in stored}


def unlike(shown: dict[str, str], stored: dict[str, str]) -> list[str]:
    return sorted(n for n in shown.keys() | stored.keys() if shown.get(n) != stored.get(n))


async def run(args: argparse.Namespace, workdir: Path) -> Figures:
    etcd = EtcdCluster(workdir / "etcd")
    etcd.start()
    token = secrets.token_urlsafe(24)
    more = etcd_settings(etcd.endpoints) + f"leader_ttl_seconds = {args.ttl}\n"
    coordinators = []
    for index in range(2):
        directory = workdir / f"coordinator-{index}"
        directory.mkdir()
        coordinators.append(Coordinator(directory, free_port(), token, token, more))
    figures = Figures(ttl=args.ttl, writers=args.writers)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            for coordinator in coordinators:
                coordinator.start()
            leader = await until_led(http, coordinators)
            writers = Writers(http, leader.url, token, args.writers)
            try:
                for _ in range(args.kills):
                    leader = await until_led(http, coordinators)
                    kill = await kill_once(
                        etcd, leader, coordinators, writers, raft_leader=args.raft_leader
                    )
                    figures.kills.append(kill)
                    print(f"  kill -9 {kill}", flush=True)
                if args.quorum:
                    await until_led(http, coordinators)
                    figures.quorum = await lose_quorum(etcd, writers)
                    print(f"  quorum lost and back: {figures.quorum}", flush=True)
            finally:
                await writers.close()
            leader = await until_led(http, coordinators)
            shown = await stored_maxima(http, leader.url, token)
            figures.unkept = writers.unkept(shown)
            figures.unlike_store = unlike(shown, await read_maxima(etcd.endpoints))
            for coordinator in coordinators:
                if "Traceback" in coordinator.log.read_text(errors="replace"):
                    raise Failed(f"a traceback in {coordinator.log}")
    finally:
        for coordinator in coordinators:
            coordinator.stop()
        etcd.stop()
    return figures


def summary(figures: Figures) -> str:
    if not figures.kills:
        return "no kills"
    gaps = sorted(k.longest_gap_s for k in figures.kills)
    refused = sum(sum(k.refused.values()) for k in figures.kills)
    changes = sum(k.leader_changes for k in figures.kills)
    return (
        f"{len(gaps)} kills of the member in use: longest gap between accepted writes"
        f" min {gaps[0]:.2f} / median {gaps[len(gaps) // 2]:.2f} / max {gaps[-1]:.2f} s,"
        f" {refused} writes refused, {changes} leader changes;"
        f" quotas not as acknowledged: {figures.unkept or 'none'},"
        f" the leader's quotas unlike the store's: {figures.unlike_store or 'none'}"
    )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--writers", type=int, default=4, help="concurrent writing clients")
    parser.add_argument("--ttl", type=int, default=5, help="leader_ttl_seconds")
    parser.add_argument("--quorum", action="store_true", help="also lose quorum and regain it")
    parser.add_argument(
        "--raft-leader", action="store_true", help="do not move raft leadership off the victim"
    )
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where etcd goes")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep etcd's data and the logs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    missing = etcd_missing()
    if missing:
        print(f"etcd_failover: {missing}; run scripts/provision", file=sys.stderr)
        return 1
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    directory = Path(tempfile.mkdtemp(prefix="allot-failover-", dir=args.workdir))
    try:
        figures = asyncio.run(run(args, directory))
    except Failed as error:
        print(f"etcd_failover: {error}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"etcd_failover: etcd's data and the coordinators' logs are in {directory}")
        else:
            shutil.rmtree(directory)
    print(summary(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up as for Ctrl-C
    sys.exit(main())
