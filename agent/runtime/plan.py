"""What to do to make a node's containers match the desired state: a pure function.

    work = plan(desired, observed, applied, host)

``desired`` is the coordinator's state for this node, ``observed`` what Docker holds under
this node's labels, ``applied`` the settings the agent last set on each container it made
or adopted and has not removed since (kept across restarts). The result has one ``Work``
per container id that needs anything, sorted by id; its actions run in order, and
different containers' work is independent.

The rules (a container without an ``allot.id`` label is never touched):
- a container no longer desired, or a second one with the same id, is removed;
- a desired container that is missing is created and started, unless it asks for a GPU
  this node does not have or for a label in allot's own namespace (refused);
- one whose fixed spec (``allot.spec``) differs is removed and made anew;
- one whose limits differ is updated in place; one holding a memory limit that is no
  longer wanted is removed and made anew, since Docker cannot remove that limit in place;
- drift is a hand-made change the agent puts back: a limit that differs from the value
  the agent set while the coordinator still wants that value, or a container the agent
  had (``applied``) that is gone (removed outside allot: it is made anew). ``Work.drift``
  notes each such change, e.g. "cpu_shares 2 -> 717" or "recreated (removed outside
  allot)"; a work with notes is one correction;
- one never started is started; an exited one whose restart policy says it runs again
  (``shared.restart_policy``) is started again (``Start.restart``), and a missing one
  created, at the pace of its crash loop (``restarts``; every creation and restart is a
  try): a try not yet due is a problem with the time it is due (``Work.retry_at``). One
  that ran to completion is left exited. Docker's own restart policy is never used. One
  whose last start failed because the engine kept an object of its last run is made anew
  at its next try (``KEPT_FROM_LAST_RUN``).

A desired container N that ``replaces`` O (placement spec 10) is a swap, and O, though not
desired, is kept until the swap ends:
- while O runs and N does not exist, O is stopped; once O is down, N is created;
- once N has run for ``settle_seconds``, O is removed: the swap is done;
- if N exits (or its creation failed: ``failed``), N is removed and O started again,
  and N is not made again while the desired state stays the same.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

import msgspec

from agent.runtime.labels import PREFIX, spec_digest
from agent.runtime.restarts import CrashLoop, RestartRules, describe, due
from agent.runtime.settings import Settings
from shared.cpuset import CpuSet, docker_cpuset
from shared.inventory import Inventory
from shared.protocol import DesiredContainer, Limits
from shared.restart_policy import runs_again


@dataclass(frozen=True)
class Host:
    offered: CpuSet  # CPUs the node offers for placement
    online: CpuSet
    memory_nodes: CpuSet  # NUMA nodes with memory
    devices: frozenset[str]  # GPU and MIG device UUIDs

    @classmethod
    def of(cls, inventory: Inventory) -> Host:
        devices = {gpu.uuid for gpu in inventory.gpus}
        devices.update(mig.uuid for gpu in inventory.gpus for mig in gpu.mig_devices)
        memory_nodes = CpuSet(node.id for node in inventory.numa_nodes if node.memory > 0)
        return cls(
            offered=inventory.offered(),
            online=inventory.online,
            memory_nodes=memory_nodes or CpuSet([0]),
            devices=frozenset(devices),
        )

    def settings(self, limits: Limits) -> Settings:
        return Settings.of(limits, online=self.online, memory_nodes=self.memory_nodes)


@dataclass(frozen=True)
class Observed:
    """One container as Docker reports it."""

    docker_id: str
    id: str  # allot.id
    spec: str  # allot.spec
    state: str  # created, running, paused, restarting, removing, exited, dead
    limits: Limits
    created: str  # Docker's Created timestamp (ISO 8601, so it sorts as text)
    started_at: str = ""  # Docker's StartedAt (ISO 8601, UTC)
    exit_code: int | None = None  # once it exited (None for a dead one that does not say)
    # Seconds it has to stop before it is killed, as set when it was made (Docker's
    # StopTimeout); None when it was made without one.
    stop_timeout: int | None = None
    bound: bool = False  # made bound to its CPUs (``allot.bound``), not on the shared pool
    cgroup_parent: str = ""  # Docker's CgroupParent: a pool's cgroup, or "" (Docker's default)


@dataclass(frozen=True)
class Create:
    """Create the container and start it."""

    container: DesiredContainer
    settings: Settings
    recreated: str = ""  # why a container the agent had is made anew; "" for a first one


@dataclass(frozen=True)
class Start:
    docker_id: str
    reason: str
    restart: bool = False  # it ran and exited: a try of its crash loop


@dataclass(frozen=True)
class Update:
    docker_id: str
    settings: Settings
    changes: dict[str, str]  # field -> "old -> new"
    # Those of ``changes`` that put back a hand-made change (the rest follow the desired state).
    drift: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stop:
    docker_id: str
    reason: str
    stop_timeout: int | None = None  # seconds before it is killed; None: the agent's default


@dataclass(frozen=True)
class Remove:
    docker_id: str
    reason: str
    stop_timeout: int | None = None  # seconds before it is killed; None: the agent's default


Action = Create | Start | Update | Stop | Remove


@dataclass(frozen=True)
class Work:
    id: str
    actions: tuple[Action, ...] = ()
    problem: str = ""  # why the desired state cannot be met, for the container's status
    swap_failed: str = ""  # a replacing container that could not run: why
    drift: tuple[str, ...] = ()  # the hand-made changes these actions put back
    retry_at: float | None = None  # the next try is not due before then (Unix time)


@dataclass(frozen=True)
class Swaps:
    """What the planner needs to know of swaps beyond Docker: the time (epoch seconds),
    how long a replacing container must run before the old one goes, and the replacing
    containers that already failed (id -> why)."""

    now: float = 0.0
    settle_seconds: float = 0.0
    failed: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Retries:
    """What the planner needs to know of crash loops: the time (Unix time), the backoff
    rules, and each container's loop (id -> its tries in a row)."""

    now: float = 0.0
    rules: RestartRules = field(default_factory=RestartRules)
    loops: Mapping[str, CrashLoop] = field(default_factory=dict)

    def wait(self, container_id: str, spec: str, why: str) -> Work | None:
        """The work of a container whose next try is not due yet, not running because of
        ``why`` or, if it failed, its last try's failure; None when the try is due."""
        loop = self.loops.get(container_id)
        at = due(loop, spec, self.rules)
        if loop is None or at <= self.now:
            return None
        problem = describe(loop.failure or why, loop, self.rules)
        return Work(container_id, problem=problem, retry_at=at)


def plan(
    desired: Mapping[str, DesiredContainer],
    observed: Iterable[Observed],
    applied: Mapping[str, Settings],
    host: Host,
    swaps: Swaps | None = None,
    retries: Retries | None = None,
) -> list[Work]:
    swaps = swaps or Swaps()
    retries = retries or Retries()
    targets = target_settings(desired, host, still_bound(desired, observed, host))
    by_id: dict[str, list[Observed]] = defaultdict(list)
    for container in observed:
        if container.id and container.state != "removing":  # no allot.id: not ours
            by_id[container.id].append(container)
    replaced = {c.replaces for c in desired.values() if c.replaces and c.replaces not in desired}
    work = []
    for container_id in sorted(by_id.keys() | desired.keys()):
        wanted = desired.get(container_id)
        if wanted is None:
            if container_id in replaced:
                continue  # its replacing container's swap decides
            leftovers = keeper_first(by_id[container_id])
            removals = tuple(_remove(None, c, "no longer desired") for c in leftovers)
            work.append(Work(container_id, removals))
            continue
        ranked = keeper_first(by_id[container_id])
        kept, extra = (ranked[0], ranked[1:]) if ranked else (None, [])
        duplicates = tuple(_remove(wanted, c, "duplicate") for c in extra)
        one = _work_for(
            wanted, kept, targets[container_id], applied.get(container_id), host, retries
        )
        if wanted.replaces in replaced:
            old = keeper_first(by_id[wanted.replaces])
            one, for_old = _swap(wanted, kept, old[0] if old else None, one, swaps)
            if for_old.actions:
                work.append(for_old)
        if duplicates or one.actions or one.problem or one.swap_failed or one.retry_at:
            work.append(replace(one, actions=duplicates + one.actions))
    return work


def _swap(
    wanted: DesiredContainer, new: Observed | None, old: Observed | None, usual: Work, swaps: Swaps
) -> tuple[Work, Work]:
    """The work of a swap (module docstring): for the replacing container, whose work
    would otherwise be ``usual``, and for the one it replaces."""
    old_id = wanted.replaces
    failed = swaps.failed.get(wanted.id)
    if failed is None and new is not None and new.state in ("exited", "dead", "restarting"):
        failed = f"it did not keep running ({new.state})"
    if failed is not None:
        gone = (_remove(wanted, new, "replace failed"),) if new is not None else ()
        down = old is not None and old.state != "running"
        back = (Start(old.docker_id, "its replacement failed"),) if old and down else ()
        return (
            Work(wanted.id, gone, f"replace failed: {failed}", swap_failed=failed),
            Work(old_id, back),
        )
    if new is None:
        if old is not None and old.state == "running":
            return Work(wanted.id), Work(old_id, (_stop(old, f"replaced by {wanted.id}"),))
        return usual, Work(old_id)
    ran = _epoch(new.started_at)
    settled = new.state == "running" and ran is not None and swaps.now - ran >= swaps.settle_seconds
    if settled and old is not None:
        return usual, Work(old_id, (_remove(None, old, f"replaced by {wanted.id}"),))
    if old is not None and old.state == "running":
        return usual, Work(old_id, (_stop(old, f"replaced by {wanted.id}"),))
    return usual, Work(old_id)


def _remove(wanted: DesiredContainer | None, container: Observed, reason: str) -> Remove:
    """The removal of ``container``, given the time to stop that its desired record says,
    or else the one it was made with."""
    timeout = wanted.stop_timeout_seconds if wanted is not None else None
    return Remove(container.docker_id, reason, _or(timeout, container.stop_timeout))


def _stop(container: Observed, reason: str) -> Stop:
    return Stop(container.docker_id, reason, container.stop_timeout)


def _or(first: int | None, second: int | None) -> int | None:
    return second if first is None else first


_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z")


def _epoch(stamp: str) -> float | None:
    """Epoch seconds of a Docker timestamp ("2026-11-24T16:08:16.961234567Z"); None when
    it is not one (Python's parser takes at most microseconds, Docker gives nanoseconds)."""
    found = _STAMP.fullmatch(stamp)
    if found is None:
        return None
    whole = datetime.fromisoformat(found[1] + "+00:00").timestamp()
    return whole + float(found[2] or 0)


def target_settings(
    desired: Mapping[str, DesiredContainer], host: Host, leaving: CpuSet | None = None
) -> dict[str, Settings]:
    """Each desired container's settings, shared-pool containers on the current pool,
    which also leaves out the CPUs of bound containers still running that are no longer
    desired (``leaving``, from ``still_bound``)."""
    pool = docker_cpuset(shared_pool(desired.values(), host, leaving or CpuSet()))
    return {
        container_id: host.settings(
            msgspec.structs.replace(container.limits, cpuset_cpus=pool)
            if container.shared_pool
            else container.limits
        )
        for container_id, container in desired.items()
    }


def still_bound(
    desired: Mapping[str, DesiredContainer], observed: Iterable[Observed], host: Host
) -> CpuSet:
    """The CPUs of bound containers no longer desired that still run: until they are gone
    the coordinator keeps their CPUs for them, and the shared pool stays off them."""
    cpus = CpuSet()
    for container in observed:
        running = container.state in ("running", "restarting", "paused")
        if container.bound and running and container.id not in desired:
            cpus |= host.settings(container.limits).cpuset_cpus
    return cpus


def shared_pool(
    desired: Iterable[DesiredContainer], host: Host, leaving: CpuSet | None = None
) -> CpuSet:
    """The offered CPUs no bound container uses (nor ``leaving``); all of them when that
    leaves none. A refused bound container still counts: the coordinator gave it those
    CPUs, and one already running (say, its GPU went away) keeps running on them."""
    bound = CpuSet(leaving or ())
    for container in desired:
        if not container.shared_pool:
            bound |= CpuSet.parse(container.limits.cpuset_cpus) & host.offered
    return (host.offered - bound) or host.offered


def refusal(container: DesiredContainer, host: Host) -> str:
    """Why the container cannot be created on this host; "" when it can."""
    missing = [uuid for uuid in container.gpus if uuid not in host.devices]
    if missing:
        have = ", ".join(sorted(host.devices)) or "none"
        return f"refused: GPU {', '.join(missing)} is not on this node (it has: {have})"
    reserved = sorted(name for name in container.labels if name.startswith(PREFIX))
    if reserved:
        return f"refused: label {', '.join(reserved)} is reserved for allot"
    return ""


REMOVED_OUTSIDE = "removed outside allot"
NO_IN_PLACE_REMOVAL = "Docker cannot remove a memory limit in place"
KEPT_FROM_LAST_RUN = "the engine kept its last run and refuses to start it again"


def _work_for(
    wanted: DesiredContainer,
    kept: Observed | None,
    target: Settings,
    applied: Settings | None,
    host: Host,
    retries: Retries,
) -> Work:
    spec = spec_digest(wanted)
    if kept is None or kept.spec != spec:
        waiting = retries.wait(wanted.id, spec, "missing") if kept is None else None
        return waiting or _creation(wanted, kept, target, applied, host)
    restart = _restart(wanted, kept, retries)
    kept_run = _kept_from_last_run(retries.loops.get(wanted.id))
    if restart.actions and kept_run and not refusal(wanted, host):
        return Work(wanted.id, _anew(wanted, kept, target, KEPT_FROM_LAST_RUN))
    work = _work_on(wanted, kept, target, applied, host, restart.actions)
    return replace(work, problem=work.problem or restart.problem, retry_at=restart.retry_at)


def _restart(wanted: DesiredContainer, kept: Observed, retries: Retries) -> Work:
    """The start of a container that is not running: one never started, or one exited
    that is to run again (once its crash loop lets it: else the wait)."""
    if kept.state == "created":
        return Work(wanted.id, (Start(kept.docker_id, "never started"),))
    if kept.state not in ("exited", "dead") or not runs_again(
        wanted.restart_policy, kept.exit_code
    ):
        return Work(wanted.id)
    why = "died" if kept.exit_code is None else f"exited with code {kept.exit_code}"
    waiting = retries.wait(wanted.id, kept.spec, why)
    if waiting is not None:
        return waiting
    return Work(wanted.id, (Start(kept.docker_id, why, restart=True),))


def _work_on(
    wanted: DesiredContainer,
    kept: Observed,
    target: Settings,
    applied: Settings | None,
    host: Host,
    start: tuple[Action, ...],
) -> Work:
    """The work on a container of the desired fixed spec: its limits, then ``start``."""
    current = host.settings(kept.limits)
    if current == target:
        return Work(wanted.id, start)
    stuck = target.unsettable_from(current)
    if stuck:
        problem = f"cannot remove {', '.join(stuck)} in place; the container keeps it"
        return Work(wanted.id, start, problem)
    changes = target.changes_from(current)
    hand_made = _hand_made(changes, target, applied)
    drift = tuple(f"{name} {change}" for name, change in hand_made.items())
    if target.removed_only_by_recreating(current):
        why_not = refusal(wanted, host)
        if why_not:
            problem = f"{NO_IN_PLACE_REMOVAL}, and the container cannot be made anew: {why_not}"
            return Work(wanted.id, start, problem)
        anew = _anew(wanted, kept, target, NO_IN_PLACE_REMOVAL)
        if drift:
            drift = (*drift, _recreated(NO_IN_PLACE_REMOVAL))
        return Work(wanted.id, anew, drift=drift)
    update = Update(kept.docker_id, target, changes, hand_made)
    return Work(wanted.id, (update, *start), drift=drift)


def _anew(
    wanted: DesiredContainer, kept: Observed, target: Settings, why: str
) -> tuple[Action, ...]:
    """Remove ``kept`` and make the container anew: a new Docker container (a new id)."""
    remove = _remove(wanted, kept, f"to be made anew: {why}")
    return (remove, Create(wanted, target, recreated=why))


def _kept_from_last_run(loop: CrashLoop | None) -> bool:
    """True when the last try to start the container failed because the engine's runtime
    still holds an object of its last run (containerd's task or its shim's directory,
    runc's state), as after the engine was restarted while the container was being
    stopped. Such a start never succeeds; a container made anew has a new id, for which
    nothing was kept."""
    return loop is not None and _KEPT_OBJECT.search(loop.failure) is not None


_KEPT_OBJECT = re.compile(
    r"^start failed: .*(already exists|with id exists|failed to start shim: mkdir .*: file exists)"
)


def _creation(
    wanted: DesiredContainer,
    kept: Observed | None,
    target: Settings,
    applied: Settings | None,
    host: Host,
) -> Work:
    """The work for a container that is missing (``kept`` None) or whose fixed spec
    changed. One the agent had (``applied``) and finds missing was removed outside allot."""
    why_not = refusal(wanted, host)
    if why_not:
        return Work(wanted.id, problem=why_not)
    if kept is not None:
        return Work(wanted.id, (_remove(wanted, kept, "spec changed"), Create(wanted, target)))
    if applied is None:
        return Work(wanted.id, (Create(wanted, target),))
    create = Create(wanted, target, recreated=REMOVED_OUTSIDE)
    return Work(wanted.id, (create,), drift=(_recreated(REMOVED_OUTSIDE),))


def _recreated(why: str) -> str:
    return f"recreated ({why})"


def _hand_made(
    changes: dict[str, str], target: Settings, applied: Settings | None
) -> dict[str, str]:
    """Of ``changes``, those that put back a hand-made change: fields whose target is
    the value the agent last set. A field whose target moved may have been changed by
    hand as well, but the new desired value explains the difference."""
    if applied is None:
        return {}
    return {
        name: change
        for name, change in changes.items()
        if getattr(applied, name) == getattr(target, name)
    }


def restarted(work: Work) -> Start | None:
    """The start of ``work`` that is a restart, if it has one."""
    return next((a for a in work.actions if isinstance(a, Start) and a.restart), None)


def tries(work: Work) -> bool:
    """True when ``work`` tries to get its container running: a creation or a restart."""
    return restarted(work) is not None or any(isinstance(a, Create) for a in work.actions)


def keeper_first(containers: list[Observed]) -> list[Observed]:
    """Of several containers with one id, the one to keep first: running, then newest."""
    newest_first = sorted(containers, key=lambda c: (c.created, c.docker_id), reverse=True)
    return sorted(newest_first, key=lambda c: c.state != "running")
