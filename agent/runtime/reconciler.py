"""The reconcile loop: level-triggered, it makes Docker match the desired state.

    runtime = Runtime(engine, host, options, metrics=metrics)
    task = asyncio.create_task(runtime.run())   # until cancelled
    runtime.set_desired(revision, containers, full=True)
    status = runtime.report()                   # what the coordinator is told
    figures = runtime.container_figures()       # what Prometheus is told (agent.metrics)

A pass works in bounded steps (``steps``): it observes this node's containers, plans
(``plan.plan``) from the newest desired state it holds, carries one step out, containers
in parallel and each container's actions in order, reports what Docker then holds, and
plans again, until nothing is left to do. Right before each create or start the container
is checked against the newest desired state, so a container whose record is gone is never
started; each desired state is acknowledged once no create or start of a container it
leaves out is at the engine (``start_fence``), and each report says which acknowledged
revision its look at Docker came after (``listed_after``). Containers no longer desired
are removed in the background, ``REMOVALS_AT_ONCE`` at a time, each with its own stop
timeout (its deployment's, else the agent's ``stop_timeout_seconds``); each removal that
ends wakes a pass. A pass runs on every desired-state push, on every Docker event of this
node's containers, when a container's next try in its crash loop is due (``restarts``),
and at least every ``resync_seconds``. Until the coordinator has sent a desired state the
agent only observes: it never removes a container it has not been told about. When the
engine is down the node reports the problem and passes are retried with a capped backoff
until it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.metrics import AgentMetrics, ContainerFigures
from agent.runtime.applied_file import AppliedSettings
from agent.runtime.atomic_write import QuietWriter
from agent.runtime.docker_engine import (
    DockerEngine,
    DockerRefused,
    EngineUnavailable,
    Inspected,
    NotWanted,
)
from agent.runtime.events import follow_events
from agent.runtime.figures import Usage, figures_of
from agent.runtime.labels import spec_digest
from agent.runtime.plan import (
    Action,
    Create,
    Host,
    Observed,
    Remove,
    Retries,
    Start,
    Stop,
    Swaps,
    Update,
    Work,
    plan,
    restarted,
    shared_pool,
    still_bound,
    target_settings,
    tries,
)
from agent.runtime.pool_cgroups import (
    PoolWeigher,
    group_weights,
    grouping,
    new_parent,
    pool_weigher,
)
from agent.runtime.pressure import DEFAULT_PSI_FILE, PressureGauge, SamplePair, container_pressure
from agent.runtime.restarts import CrashLoop, RestartRules, after_try, describe, ended
from agent.runtime.settings import Settings
from agent.runtime.start_fence import StartFence
from agent.runtime.state_file import AgentState, LastReconcile
from agent.runtime.steps import WAITING, Step, next_step
from agent.runtime.usage import Sample, cpu_cores, sample
from shared.backoff import Backoff
from shared.bounds import MAX_MESSAGES, clipped
from shared.codec import to_json
from shared.cpuset import CpuSet
from shared.logs import get_logger
from shared.protocol import (
    Attempt,
    ContainerStatus,
    CpuPressure,
    DesiredContainer,
    Status,
    SwapState,
)
from shared.quantity import format_memory
from shared.sdnotify import notify

log = get_logger("allot.agent.runtime")
EVENT_STREAM_RETRY_SECONDS = 1.0
# A container's usage is measured at most this often: passes that follow each other
# closely (a burst of Docker events) would otherwise give a CPU rate over a few ms.
USAGE_SAMPLE_SECONDS = 1.0
SWAP_POLL_SECONDS = 0.5  # how often passes run while a swap waits for its settle time
# Removals under way at once: each may wait out its container's stop timeout (a stop is
# mostly waiting), and the engine's thread pool (docker_engine.WORKERS) keeps room beside
# them for the rest. In the churn bench (bench/churn.py: 45 containers deaf to SIGTERM,
# 10 s stop timeout, rounds 2 s apart) 8 at once caught up in 47.9 s, 16 at once in 18.8 s.
REMOVALS_AT_ONCE = 16
RUNNING_STATES = frozenset({"running", "restarting", "paused"})


@dataclass(frozen=True)
class RuntimeOptions:
    node: str
    state_path: Path
    applied_path: Path  # what the agent last set on each container, kept across restarts
    resync_seconds: float = 10.0
    stop_timeout_seconds: int = 10
    watchdog_seconds: float | None = None  # ping interval when systemd asked for one
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 30.0
    node_problems: Sequence[str] = ()  # from discovery (e.g. NVML), reported with ours
    replace_settle_seconds: float = 5.0  # a replacement runs this long before the old one goes
    restarts: RestartRules = field(default_factory=RestartRules)  # the crash-loop backoff
    # The PSI file the node's CPU pressure is read from; None: from throttling only.
    cpu_pressure_file: Path | None = DEFAULT_PSI_FILE


@dataclass(frozen=True)
class _Correction:
    """Hand-made changes the agent put back in one go, and when (Unix time)."""

    notes: list[str]
    at: float


@dataclass
class _Pass:
    """What one reconcile pass did, per container."""

    errors: dict[str, str] = field(default_factory=dict)
    actions: int = 0
    engine_down: str = ""  # the engine stopped answering during the pass
    held: bool = False  # a bound container still waits for its CPUs at the end


class Runtime:
    def __init__(
        self,
        engine: DockerEngine,
        host: Host,
        options: RuntimeOptions,
        *,
        clock: Callable[[], float] = time.time,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self.engine = engine
        self.host = host
        self.options = options
        self._clock = clock
        self._metrics = metrics or AgentMetrics()
        self._metrics.follow_containers(self.container_figures)
        self._metrics.follow_pressure(self.node_pressure)
        self._desired: dict[str, DesiredContainer] | None = None
        self._revision = 0
        self._applied_revision = 0
        # Per container: the desired revision that last changed it, as applied, and the
        # desired container as of that revision (``_settle``).
        self._container_revision: dict[str, int] = {}
        self._settled_as: dict[str, DesiredContainer] = {}
        self._applied = AppliedSettings(options.applied_path)
        self._drift: dict[str, _Correction] = {}  # per container: the last one
        self._problems: dict[str, str] = {}  # per container: refusal or failure, logged once
        self._observed: list[Inspected] = []
        # The revision the agent had acknowledged when the look at Docker that
        # ``_observed`` holds began, and that of the latest look (``_observe``).
        self._observed_after = 0
        self._look_after = 0
        self._fence = StartFence(self._still_desired)
        self._samples: dict[str, Sample] = {}  # per running container: its last usage sample
        self._usage: dict[str, Usage] = {}  # per running container: cores, bytes, pressure
        self._gauge = PressureGauge(options.cpu_pressure_file)
        self._pressure: CpuPressure | None = None  # the node's, at the last sample
        self._failed_swaps: dict[str, str] = {}  # replacing container -> why it failed
        self._loops: dict[str, CrashLoop] = {}  # per container: its tries in a row
        self._restarts: dict[str, int] = {}  # per container: times started again
        self._attempts: dict[
            str, Attempt
        ] = {}  # per container in a loop: its last restart or failure
        self._next_try: float | None = None  # the earliest try not yet due (Unix time)
        self._docker_problem = ""
        # The pools' cgroups (``pool_cgroups``): the engine's cgroup driver, None until the
        # engine said it, and how they are weighted under it (None: not grouped).
        self._driver: str | None = None
        self._pools: PoolWeigher | None = None
        self._cgroup_problems: list[str] = []
        self._state_writer = QuietWriter("cannot write the agent state for allot-agent status")
        self._adopted = False
        self._last_pass: LastReconcile | None = None
        self._wake = asyncio.Event()
        self._removals_at_once = asyncio.Semaphore(REMOVALS_AT_ONCE)
        self._removing: dict[str, asyncio.Task[None]] = {}  # Docker id -> its removal
        # Docker ids removed that the last observation may still show: not removed twice.
        self._removed: set[str] = set()
        self._report = self._build_report()
        self._report_version = 0
        self._report_changed = asyncio.Condition()
        self.reconciled = asyncio.Event()  # set after the first full reconcile

    # -- what the coordinator says -------------------------------------------------

    def set_desired(
        self,
        revision: int,
        containers: Iterable[DesiredContainer],
        *,
        full: bool,
        removed: Iterable[str] = (),
        welcome: bool = False,
    ) -> None:
        """Take a desired state: the whole of it (``full``) or the changed containers.
        Within a session revisions only grow, so an older one is ignored; a ``welcome``
        is taken whatever its revision, since it is the coordinator's word on connecting
        (one whose store was reset starts again from revision 0)."""
        if not welcome and self._desired is not None and revision < self._revision:
            log.warning("stale desired state ignored", revision=revision, current=self._revision)
            return
        desired = {} if full or self._desired is None else dict(self._desired)
        for container_id in removed:
            desired.pop(container_id, None)
        for container in containers:
            desired[container.id] = container
        self._desired, self._revision = desired, revision
        self._fence.received(revision)
        self._wake.set()

    @property
    def desired_revision(self) -> int | None:
        """The revision of the desired state held; None until one arrives."""
        return None if self._desired is None else self._revision

    async def next_acknowledgement(self, seen: int) -> tuple[int, int]:
        """``(version, revision)``: the newest desired revision acknowledged, once its
        version is past ``seen``: no create or start of a container that revision leaves
        out is under way, and none will begin (``start_fence``)."""
        return await self._fence.next(seen)

    @property
    def acknowledged_revision(self) -> int:
        return self._fence.acknowledged or 0

    # -- what the agent reports ----------------------------------------------------

    def report(self) -> Status:
        return self._report

    async def next_report(self, seen: int) -> tuple[int, Status]:
        """The report once its version is past ``seen`` (at once if it already is)."""
        async with self._report_changed:
            await self._report_changed.wait_for(lambda: self._report_version > seen)
            return self._report_version, self._report

    # -- the loop ------------------------------------------------------------------

    async def run(self) -> None:
        backoff = Backoff(
            initial=self.options.backoff_initial_seconds, cap=self.options.backoff_max_seconds
        )
        self._applied.load()
        events = asyncio.create_task(self._follow_events())
        try:
            while True:
                self._wake.clear()
                healthy = await self._pass()
                delay = self.options.resync_seconds
                if self._swapping():
                    delay = min(delay, SWAP_POLL_SECONDS)  # to see its settle time pass
                if self._next_try is not None:
                    delay = min(delay, max(0.0, self._next_try - self._clock()))
                if healthy:
                    if backoff.attempts:  # the engine is back: its outage was no crash
                        self._loops.clear()
                    backoff.reset()
                else:
                    delay = backoff.next_delay()
                self._ping_watchdog()
                await self._sleep(delay)
        finally:
            tasks = [events, *self._removing.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _sleep(self, delay: float) -> None:
        """Until woken or ``delay`` passes, pinging the watchdog meanwhile."""
        deadline = time.monotonic() + delay
        ping = self.options.watchdog_seconds
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, ping) if ping else left):
                    await self._wake.wait()
                    return
            self._ping_watchdog()

    def _ping_watchdog(self) -> None:
        if self.options.watchdog_seconds:
            notify("WATCHDOG=1")

    async def _follow_events(self) -> None:
        """Keep reading the engine's events; a broken stream is opened again. A pass is
        woken when the stream ends (the engine may be gone) and when it opens again (the
        engine is back), not by each failed try to open it: while the engine is away,
        passes keep to their backoff, and its return is seen within a retry's time."""
        while True:
            with contextlib.suppress(EngineUnavailable):
                await follow_events(self.engine.client, self.options.node, self._wake.set)
                self._wake.set()
            await asyncio.sleep(EVENT_STREAM_RETRY_SECONDS)

    # -- one pass ------------------------------------------------------------------

    async def _pass(self) -> bool:
        """One reconcile pass; False when the engine could not be used."""
        started = time.monotonic()
        desired, revision = self._desired, self._revision
        outcome = _Pass()
        work: list[Work] = []
        done: set[str] = set()  # the containers this pass acted on
        try:
            observed = await self._observe()
            await self._learn_grouping()
            self._note_adoption(observed)
            while desired is not None:
                await self._weigh_pool_cgroups(desired, observed)
                work = self._plan(desired, observed)
                step = self._next_step(desired, work, observed, done)
                work = [replace(one, problem=step.held.get(one.id, one.problem)) for one in work]
                self._remove_in_background(step)
                if not step.works:
                    outcome.held = bool(step.held)
                    break
                acted = list(step.works)
                await self._carry_out(acted, outcome)
                done.update(one.id for one in acted)
                self._note_failed_swaps(desired, acted, outcome)
                self._note_tries(desired, acted, outcome)
                observed = await self._observe()
                await self._report_step(observed)
                desired, revision = self._desired, self._revision
            waits = [one.retry_at for one in work if one.retry_at is not None]
            self._next_try = min(waits, default=None)
        except EngineUnavailable as error:
            self._engine_down(str(error))
            await self._publish()
            return False
        self._engine_up()
        self._note_exits(observed)
        self._keep(observed)
        self._measure(observed)
        if desired is not None:
            self._record_problems(desired, work, outcome)
            self._settle(desired, revision, outcome)
            took = time.monotonic() - started
            self._metrics.reconciled(took)
            self._last_pass = LastReconcile(
                at=self._clock(),
                duration_ms=round(took * 1000, 1),
                actions=outcome.actions,
                failures=len(outcome.errors),
            )
            if not self.reconciled.is_set():
                self.reconciled.set()
                log.info("first reconcile done", revision=revision, containers=len(desired))
                notify("READY=1", f"STATUS=reconciled revision {revision}")
        await self._publish()
        return True

    async def _report_step(self, observed: list[Inspected]) -> None:
        """What a step changed, reported at once rather than at the end of the pass: a
        container gone early frees its resources in the coordinator's books early."""
        self._note_exits(observed)
        self._keep(observed)
        await self._publish()

    async def _observe(self) -> list[Inspected]:
        """Docker's containers of this node, noting the revision acknowledged before the
        look began: a container that revision leaves out and the look does not show is
        gone for good, since no create or start of it was under way or could begin."""
        self._look_after = self.acknowledged_revision
        return await self.engine.observe()

    def _keep(self, observed: list[Inspected]) -> None:
        """``observed``, the latest look, is what the agent now reports."""
        self._observed, self._observed_after = observed, self._look_after

    def _targets(
        self, desired: dict[str, DesiredContainer], observed: list[Inspected]
    ) -> dict[str, Settings]:
        """As the planner sees them: the pool also off the CPUs of leaving bound ones."""
        seen = [one.observed for one in observed]
        return target_settings(desired, self.host, still_bound(desired, seen, self.host))

    def _plan(self, desired: dict[str, DesiredContainer], observed: list[Inspected]) -> list[Work]:
        swaps = self._swaps(desired)
        seen = [one.observed for one in observed]
        retries = self._retries(seen)
        return plan(desired, seen, self._applied.settings, self.host, swaps, retries)

    async def _learn_grouping(self) -> None:
        """Whether and how containers are grouped by pool, from the engine's cgroup driver,
        asked once (``EngineUnavailable`` when the engine does not answer: asked again)."""
        if self._driver is not None:
            return
        self._driver = await self.engine.cgroup_driver()
        self._pools = pool_weigher(self._driver)
        if self._pools is None:
            reason = "each container weighted by itself under this driver and cgroup version"
            log.info("no pool cgroups", cgroup_driver=self._driver, reason=reason)
        else:
            log.info("pool cgroups", cgroup_driver=self._driver, reason="a cgroup per pool")

    @property
    def _grouped_by(self) -> str:
        """The driver that names the pools' cgroups; "" when containers are not grouped."""
        return self._pools.driver if self._pools is not None else ""

    async def _weigh_pool_cgroups(
        self, desired: dict[str, DesiredContainer], observed: list[Inspected]
    ) -> None:
        """Weight the pools' cgroups before the work is planned and done: a member about to
        be made counts in its cgroup's weight before it starts."""
        if self._pools is None:
            return
        seen = [one.observed for one in observed]
        grouped = grouping(desired, seen, node=self.options.node, driver=self._pools.driver)
        problems = await self._pools.apply(group_weights(desired, grouped))
        for problem in set(problems) - set(self._cgroup_problems):
            log.warning("pool cgroup not weighted", reason=problem)
        self._cgroup_problems = problems

    def _next_step(
        self,
        desired: dict[str, DesiredContainer],
        work: list[Work],
        observed: list[Inspected],
        done: set[str],
    ) -> Step:
        """The next step (``steps``). A bound container waits for its CPUs while another
        container runs on them that is not to stay there: one no longer desired (until
        it is removed) or one whose CPUs change (a shared-pool container, until it is
        updated); a container already where it is to be never holds one up."""
        targets = self._targets(desired, observed)
        leaving: dict[str, CpuSet] = {}
        for one in observed:
            if not one.observed.id or one.observed.state not in RUNNING_STATES:
                continue  # not allot's (it never leaves), or not running
            cpus = self.host.settings(one.observed.limits).cpuset_cpus
            target = targets.get(one.observed.id)
            if target is None or target.cpuset_cpus != cpus:
                leaving[one.observed.id] = cpus
        bound = {
            container_id: targets[container_id].cpuset_cpus
            for container_id, container in desired.items()
            if not container.shared_pool
        }
        self._removed &= {one.observed.docker_id for one in observed}
        removing = self._removing.keys() | self._removed
        return next_step(work, desired.keys(), leaving, bound, removing=removing, done=done)

    def _remove_in_background(self, step: Step) -> None:
        for container_id, removal in step.removals:
            task = asyncio.create_task(self._remove(container_id, removal))
            self._removing[removal.docker_id] = task

    async def _remove(self, container_id: str, removal: Remove) -> None:
        """Remove a container no longer desired, once one of the REMOVALS_AT_ONCE places
        is free, unless it is desired again by then; the pass that follows sees the
        outcome. A failed removal is tried again at the next resync, not at once."""
        try:
            async with self._removals_at_once:
                if container_id in (self._desired or {}):
                    return
                await self._act(container_id, removal)
            self._removed.add(removal.docker_id)
            self._wake.set()
        except DockerRefused as error:
            log.warning("container not removed", id=container_id, reason=str(error))
        except EngineUnavailable:
            pass  # the next pass finds the engine down and says so
        finally:
            del self._removing[removal.docker_id]

    def _measure(self, observed: list[Inspected]) -> None:
        """Sample each running container's usage, at most every USAGE_SAMPLE_SECONDS:
        CPU as cores used since its previous sample, memory as it is now, CPU pressure;
        and with them the node's CPU pressure."""
        now = time.monotonic()
        running = {one.observed.id: one.pid for one in observed if one.pid > 0}
        for container_id in self._samples.keys() - running.keys():
            del self._samples[container_id]
            self._usage.pop(container_id, None)
        sampled: list[SamplePair] = []
        for container_id, pid in running.items():
            previous = self._samples.get(container_id)
            if previous is not None and now - previous.at < USAGE_SAMPLE_SECONDS:
                continue
            current = sample(pid, at=now)
            cores = cpu_cores(previous, current)
            self._samples[container_id] = current
            self._usage[container_id] = (
                None if cores is None else round(cores, 3),
                current.memory,
                container_pressure(previous, current),
            )
            sampled.append((previous, current))
        if sampled or not running:  # else every container was sampled less than 1 s ago
            self._pressure = self._gauge.node(sampled)

    def _retries(self, observed: list[Observed]) -> Retries:
        """The planner's view of crash loops; a loop whose container has run long enough
        since its last try is over."""
        now, rules = self._clock(), self.options.restarts
        running = {one.id for one in observed if one.state == "running"}
        for container_id, loop in list(self._loops.items()):
            if ended(loop, container_id in running, now, rules):
                del self._loops[container_id]
                self._attempts.pop(container_id, None)
        return Retries(now=now, rules=rules, loops=dict(self._loops))

    def _note_tries(
        self, desired: dict[str, DesiredContainer], work: list[Work], outcome: _Pass
    ) -> None:
        """Count each try to get a container running in its crash loop. A restart and a
        try the engine refused are the container's last attempt, which its status reports
        (the coordinator makes an event of each); a refused try's error says the pace."""
        now, rules = self._clock(), self.options.restarts
        for one in work:
            wanted = desired.get(one.id)
            if wanted is None or not tries(one):
                continue
            error = outcome.errors.get(one.id, "")
            loop = after_try(self._loops.get(one.id), spec_digest(wanted), now, error)
            self._loops[one.id] = loop
            restart = restarted(one)
            if error:
                outcome.errors[one.id] = described = describe(error, loop, rules)
                self._attempts[one.id] = Attempt(
                    outcome="failed", reason=clipped(described), number=loop.tries, at=now
                )
            elif restart is not None:
                reason = f"started again: {restart.reason} ({loop.tries} tries in a row)"
                self._attempts[one.id] = Attempt(
                    outcome="restarted", reason=clipped(reason), number=loop.tries, at=now
                )

    def _swaps(self, desired: dict[str, DesiredContainer]) -> Swaps:
        """The planner's view of swaps; failures are forgotten once the coordinator no
        longer asks for that swap."""
        self._failed_swaps = {
            cid: why
            for cid, why in self._failed_swaps.items()
            if cid in desired and desired[cid].replaces
        }
        return Swaps(
            now=self._clock(),
            settle_seconds=self.options.replace_settle_seconds,
            failed=dict(self._failed_swaps),
        )

    def _swapping(self) -> bool:
        """A swap waits for its settle time (one done or failed waits for nothing)."""
        return any(self._replacing(c) == "pending" for c in (self._desired or {}).values())

    def _note_failed_swaps(
        self, desired: dict[str, DesiredContainer], work: list[Work], outcome: _Pass
    ) -> None:
        """A replacing container that exited, or could not be created or started, fails
        its swap: the next pass removes it and starts the old one again (right away)."""
        failed = {one.id: one.swap_failed for one in work if one.swap_failed}
        for container_id, error in outcome.errors.items():
            wanted = desired.get(container_id)
            if wanted is not None and wanted.replaces:
                failed.setdefault(container_id, error)
        for container_id, why in failed.items():
            if container_id not in self._failed_swaps:
                old = desired[container_id].replaces
                log.warning("replace failed", id=container_id, old=old, error=why)
                self._failed_swaps[container_id] = why
                self._wake.set()

    def _replacing(self, wanted: DesiredContainer | None) -> SwapState:
        """How the swap of a replacing container stands: pending, done or failed."""
        if wanted is None or not wanted.replaces:
            return ""
        if wanted.id in self._failed_swaps:
            return "failed"
        states = {one.observed.id: one.observed.state for one in self._observed}
        done = states.get(wanted.id) == "running" and wanted.replaces not in states
        return "done" if done else "pending"

    def _note_adoption(self, observed: list[Inspected]) -> None:
        if self._adopted:
            return
        self._adopted = True
        ids = sorted(one.observed.id for one in observed)
        log.info(f"adopted {len(ids)} containers", ids=",".join(ids) or "-")

    def _note_exits(self, observed: list[Inspected]) -> None:
        """Log each container that exited since the last look, but one being removed
        (its removal says so)."""
        before = {one.observed.docker_id: one.observed.state for one in self._observed}
        for one in observed:
            if one.observed.docker_id in self._removing:
                continue
            was = before.get(one.observed.docker_id)
            exit_code = one.observed.exit_code
            if was in ("running", "restarting") and exit_code is not None:
                log.warning("container exited", id=one.observed.id, exit_code=exit_code)

    async def _carry_out(self, work: list[Work], outcome: _Pass) -> None:
        """Each container's actions in order, containers side by side."""
        await asyncio.gather(*(self._work(one, outcome) for one in work))
        if outcome.engine_down:
            raise EngineUnavailable(outcome.engine_down)

    async def _work(self, work: Work, outcome: _Pass) -> None:
        for action in work.actions:
            outcome.actions += 1
            try:
                await self._act(work.id, action)
            except NotWanted:
                log.info("start skipped: no longer desired", id=work.id, action=_verb(action))
                return
            except DockerRefused as error:
                outcome.errors[work.id] = f"{_verb(action)} failed: {error}"
                return
            except EngineUnavailable as error:
                outcome.engine_down = str(error)
                return
        if work.drift:
            self._drift[work.id] = _Correction(list(work.drift), at=self._clock())
            self._metrics.drift_corrected()

    def _record_problems(
        self, desired: dict[str, DesiredContainer], work: list[Work], outcome: _Pass
    ) -> None:
        """Each container's current problem, logged when it first appears."""
        planned = {one.id: one.problem for one in work}
        for container_id in desired:
            problem = outcome.errors.get(container_id) or planned.get(container_id, "")
            if problem and self._problems.get(container_id) != problem:
                log.warning("container not as desired", id=container_id, reason=problem)
            if problem:
                self._problems[container_id] = problem
            else:
                self._problems.pop(container_id, None)

    def _still_desired(self, container_id: str) -> bool:
        """True when the newest desired state wants ``container_id`` to run: it has its
        record, or the record of a container that replaces it (a failed swap's old one)."""
        desired = self._desired or {}
        return container_id in desired or any(c.replaces == container_id for c in desired.values())

    def _stop_timeout(self, timeout: int | None) -> int:
        return self.options.stop_timeout_seconds if timeout is None else timeout

    async def _act(self, container_id: str, action: Action) -> None:
        # Creates and starts go to the engine only if the newest desired state still wants
        # the container at that moment (their gates: ``start_fence``); one left created is
        # removed by the next pass.
        if isinstance(action, Create):
            timeout = self._stop_timeout(action.container.stop_timeout_seconds)
            with self._fence.starting(container_id) as gate:
                parent = new_parent(
                    action.container, node=self.options.node, driver=self._grouped_by
                )
                docker_id = await self.engine.create(
                    action.container,
                    action.settings,
                    stop_timeout=timeout,
                    cgroup_parent=parent,
                    gate=gate,
                )
            with self._fence.starting(container_id) as gate:
                await self.engine.start(docker_id, gate=gate)
            if action.recreated:
                described = _describe(action.settings)
                log.warning(
                    "container recreated", id=container_id, reason=action.recreated, **described
                )
            else:
                log.info("container started", id=container_id, **_describe(action.settings))
        elif isinstance(action, Start):
            with self._fence.starting(container_id) as gate:
                await self.engine.start(action.docker_id, gate=gate)
            if action.restart:
                self._restarts[container_id] = self._restarts.get(container_id, 0) + 1
                log.warning("container started again", id=container_id, reason=action.reason)
            else:
                log.info("container started", id=container_id, reason=action.reason)
        elif isinstance(action, Stop):
            await self.engine.stop(
                action.docker_id, stop_timeout=self._stop_timeout(action.stop_timeout)
            )
            log.info("container stopped", id=container_id, reason=action.reason)
        elif isinstance(action, Update):
            await self.engine.update(action.docker_id, action.settings)
            wanted = {k: v for k, v in action.changes.items() if k not in action.drift}
            if wanted:
                log.info("limits updated", id=container_id, **wanted)
            if action.drift:
                log.warning("drift corrected", id=container_id, **action.drift)
        else:
            # Forgotten first: a container the agent had and finds gone counts as removed
            # by hand, which this one, even if the agent stops right now, is not.
            self._applied.forget(container_id)
            await self.engine.remove(
                action.docker_id, stop_timeout=self._stop_timeout(action.stop_timeout)
            )
            log.info("container removed", id=container_id, reason=action.reason)

    def _settle(self, desired: dict[str, DesiredContainer], revision: int, outcome: _Pass) -> None:
        """Record what now matches: settings as applied, revisions as reached. A
        container's revision moves only with a revision that changed what it should be:
        a deployment elsewhere on the node leaves its status as it was, so a partial
        status (``report_pace``) need not list it."""
        targets = self._targets(desired, self._observed)
        for one in self._observed:
            container_id = one.observed.id
            target = targets.get(container_id)
            if target is not None and self.host.settings(one.observed.limits) == target:
                self._applied.set(container_id, target)
                wanted = desired.get(container_id)
                changed = wanted is None or self._settled_as.get(container_id) != wanted
                if container_id not in outcome.errors and changed:
                    self._container_revision[container_id] = revision
                    if wanted is not None:
                        self._settled_as[container_id] = wanted
        self._applied.keep_only(desired.keys())
        per_container: tuple[dict[str, Any], ...] = (
            self._container_revision,
            self._settled_as,
            self._drift,
            self._problems,
            self._loops,
            self._attempts,
            self._restarts,
        )
        for kept in per_container:
            for container_id in kept.keys() - desired.keys():
                del kept[container_id]
        # Applied once the pass's own work went through, none of it still waiting for
        # CPUs. Removals may still be under way (or failed): a container being removed
        # stays in the report until it is gone, which is what the coordinator waits for
        # before it frees what it held, so one slow stop does not hold up the release of
        # the others.
        if not outcome.errors and not outcome.held:
            self._applied_revision = revision

    def _engine_down(self, reason: str) -> None:
        if self._docker_problem != reason:
            log.error("docker engine unavailable", reason=reason)
        self._docker_problem = reason

    def _engine_up(self) -> None:
        if self._docker_problem:
            log.info("docker engine available again")
        self._docker_problem = ""

    # -- reporting -----------------------------------------------------------------

    async def _publish(self) -> None:
        report = self._build_report()
        self._save_state(report)
        if report != self._report:
            async with self._report_changed:
                self._report = report
                self._report_version += 1
                self._report_changed.notify_all()

    def _save_state(self, report: Status) -> None:
        """For ``allot-agent status``; a state that cannot be written is only logged (once
        per reason), since the coordinator's report does not depend on it."""
        self._state_writer.write(self.options.state_path, to_json(self._state(report)))

    def _build_report(self) -> Status:
        problems = [*self.options.node_problems, *self._cgroup_problems]
        if self._docker_problem:
            problems.append(f"docker: {self._docker_problem}")
        return Status(
            applied_revision=self._applied_revision,
            listed_after=self._observed_after,
            containers=self._container_statuses(),
            problems=[clipped(problem) for problem in problems[:MAX_MESSAGES]],
            pressure=self._pressure,
        )

    def _container_statuses(self) -> list[ContainerStatus]:
        desired = self._desired or {}
        statuses: dict[str, ContainerStatus] = {}
        for one in self._observed:
            container_id = one.observed.id
            wanted = desired.get(container_id)
            cores, memory, pressure = self._usage.get(container_id, (None, None, None))
            correction = self._drift.get(container_id)
            statuses[container_id] = ContainerStatus(
                id=container_id,
                state=one.observed.state,
                namespace=one.namespace,
                deployment=one.deployment,
                capacity=wanted.capacity if wanted else "",
                limits=one.observed.limits,
                revision=self._container_revision.get(container_id, 0),
                started_at=one.started_at,
                exit_code=one.observed.exit_code,
                error=clipped(self._problems.get(container_id, "")),
                drift=[clipped(note) for note in correction.notes[:MAX_MESSAGES]]
                if correction
                else [],
                drift_at=correction.at if correction else 0.0,
                cpu_usage=cores,
                memory_usage=memory,
                cpu_pressure=pressure,
                replacing=self._replacing(wanted),
                attempt=self._attempts.get(container_id),
            )
        for container_id, wanted in desired.items():
            if container_id not in statuses:
                problem = self._problems.get(container_id, "")
                statuses[container_id] = ContainerStatus(
                    id=container_id,
                    state=_unheld_state(problem),
                    namespace=wanted.namespace,
                    deployment=wanted.deployment,
                    capacity=wanted.capacity,
                    error=clipped(problem),
                    replacing=self._replacing(wanted),
                    attempt=self._attempts.get(container_id),
                )
        return [statuses[key] for key in sorted(statuses)]

    def node_pressure(self) -> CpuPressure | None:
        """The node's CPU pressure at the last sample (None before one, or when it
        cannot be read): what the reports carry."""
        return self._pressure

    def container_figures(self) -> list[ContainerFigures]:
        """Each of allot's containers Docker holds here, as last observed and measured."""
        return figures_of(
            self._observed, usage=self._usage, restarts=self._restarts, host=self.host
        )

    def _pool(self, desired: dict[str, DesiredContainer]) -> CpuSet:
        seen = [one.observed for one in self._observed]
        return shared_pool(desired.values(), self.host, still_bound(desired, seen, self.host))

    def _state(self, report: Status) -> AgentState:
        desired = self._desired
        return AgentState(
            node=self.options.node,
            pid=os.getpid(),
            updated_at=self._clock(),
            docker=self._docker_problem or "up",
            desired_revision=self.desired_revision,
            applied_revision=report.applied_revision,
            shared_pool=str(self._pool(desired or {})),
            last_reconcile=self._last_pass,
            problems=report.problems,
            containers=report.containers,
        )


def _unheld_state(problem: str) -> str:
    """The state of a desired container Docker does not hold: refused (the agent will
    not make it), waiting (for its cores: ``steps``), failed (making it failed:
    ``problem`` says why) or missing (not yet)."""
    if problem.startswith("refused"):
        return "refused"
    if problem.startswith(WAITING):
        return "waiting"
    return "failed" if problem else "missing"


def _describe(settings: Settings) -> dict[str, object]:
    return {
        "cpuset": str(settings.cpuset_cpus),
        "cpu_shares": settings.cpu_shares,
        "cpu_quota": settings.cpu_quota,
        "mem": format_memory(settings.mem_limit) if settings.mem_limit else "unlimited",
    }


def _verb(action: Action) -> str:
    verbs = {Create: "create", Start: "start", Update: "update", Stop: "stop", Remove: "remove"}
    return verbs[type(action)]
