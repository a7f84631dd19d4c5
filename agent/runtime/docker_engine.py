"""The Docker engine as the runtime uses it: a few calls of the synchronous SDK, each
run in a bounded thread pool so the event loop never waits on Docker.

    engine = DockerEngine.connect(node="n1", base_url="", timeout=30, timings=metrics.docker_call)
    observed = await engine.observe()            # this node's containers, inspected
    docker_id = await engine.create(container, settings, stop_timeout=10)
    await engine.start(docker_id)
    await engine.update(docker_id, settings)
    await engine.remove(docker_id, stop_timeout=10)
    driver = await engine.cgroup_driver()        # "cgroupfs" or "systemd"

An engine that cannot be reached raises ``EngineUnavailable``; the engine refusing one
call (a missing image, a bad setting) raises ``DockerRefused`` with its explanation. A
create or start given a ``gate`` is sent only if the gate still says yes once a thread
is free to send it; else it raises ``NotWanted``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import docker
import requests
from docker.errors import APIError, DockerException
from docker.types import DeviceRequest

from agent.runtime import labels
from agent.runtime.plan import Observed
from agent.runtime.settings import Settings
from shared.cpuset import docker_cpuset
from shared.protocol import DesiredContainer, Limits

# Pinned so that a client can be made while the engine is down (the SDK otherwise asks
# the engine for its version first); 1.41 is Docker 20.10, the first with every field
# used here, and later engines still serve it.
API_VERSION = "1.41"
GPU_CAPABILITIES = [["gpu"]]  # what `docker run --gpus device=...` asks for
NO_RESERVATION = -1  # what an update takes to remove a memory reservation (Docker 20.10)

# Threads for the SDK's blocking calls, and as many connections to the engine. A stop
# holds one for up to its stop timeout, so there is room for the runtime's concurrent
# removals (reconciler.REMOVALS_AT_ONCE) and still threads for creates, starts and
# inspects beside them.
WORKERS = 24

T = TypeVar("T")


class EngineUnavailable(Exception):
    """The Docker engine did not answer."""


class DockerRefused(Exception):
    """The engine answered one call with an error."""


class NotWanted(Exception):
    """A create or start was not made: its gate said no, right before the call."""


# Asked on the worker thread right before a create or start is sent to the engine, after
# any wait for a free thread, so it must only read (the runtime looks the container up in
# the desired state it holds, a dict replaced whole, never changed in place).
Gate = Callable[[], bool]


def _always() -> bool:
    return True


# Called on the worker thread after each call sent: the SDK method's name and the seconds
# it took (e.g. AgentMetrics.docker_call, whose histogram is thread-safe).
Timings = Callable[[str, float], None]


def _untimed(call: str, seconds: float) -> None:
    """The timings of an engine no one measures."""


@dataclass(frozen=True)
class Inspected:
    """One container's observed state, with what its status reports beyond the plan."""

    observed: Observed
    namespace: str
    deployment: str
    started_at: str
    pid: int = 0  # its main process on the host while it runs


class DockerEngine:
    def __init__(
        self,
        client: docker.DockerClient,
        node: str,
        *,
        workers: int = WORKERS,
        timings: Timings = _untimed,
    ) -> None:
        self.client = client
        self.node = node
        self._timings = timings
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="docker")

    @classmethod
    def connect(
        cls, *, node: str, base_url: str, timeout: int, timings: Timings = _untimed
    ) -> DockerEngine:
        """A client for ``base_url`` (or DOCKER_HOST, or the local socket); makes no call."""
        if base_url:
            client = docker.DockerClient(
                base_url=base_url, version=API_VERSION, timeout=timeout, max_pool_size=WORKERS
            )
        else:
            client = docker.from_env(version=API_VERSION, timeout=timeout, max_pool_size=WORKERS)
        return cls(client, node, timings=timings)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    async def observe(self) -> list[Inspected]:
        """Every container carrying this node's label, inspected."""
        summaries = await self._call(
            self.client.api.containers, all=True, filters=labels.node_filter(self.node)
        )
        found = await asyncio.gather(*(self._inspect(s["Id"]) for s in summaries))
        return [one for one in found if one is not None]

    async def create(
        self,
        container: DesiredContainer,
        settings: Settings,
        *,
        stop_timeout: int,
        cgroup_parent: str = "",
        gate: Gate = _always,
    ) -> str:
        """Create the container (not started), with the seconds it has to stop before it
        is killed kept by Docker (its StopTimeout: a removal after an agent restart still
        knows it), under ``cgroup_parent`` ("": Docker's default); its Docker id."""
        api = self.client.api
        host_config = api.create_host_config(
            **_settings_arguments(settings),
            # The agent restarts it as its policy says (shared.restart_policy), with a
            # backoff and an event each time; Docker restarting it too would race that.
            restart_policy={"Name": "no", "MaximumRetryCount": 0},
            device_requests=device_requests(container.gpus) or None,
            cgroup_parent=cgroup_parent or None,
        )
        created = await self._call(
            api.create_container,
            container.image,
            gate=gate,
            command=container.command or None,
            environment=container.env,
            labels=labels.labels_for(container, self.node),
            host_config=host_config,
            stop_timeout=stop_timeout,
        )
        docker_id: str = created["Id"]
        return docker_id

    async def cgroup_driver(self) -> str:
        """The engine's cgroup driver: "cgroupfs" or "systemd"."""
        info = await self._call(self.client.info)
        return str(info.get("CgroupDriver") or "")

    async def start(self, docker_id: str, *, gate: Gate = _always) -> None:
        await self._call(self.client.api.start, docker_id, gate=gate)

    async def update(self, docker_id: str, settings: Settings) -> None:
        await self._call(self.client.api.update_container, docker_id, **_update_arguments(settings))

    async def stop(self, docker_id: str, *, stop_timeout: int) -> None:
        await self._call(self.client.api.stop, docker_id, timeout=stop_timeout)

    async def remove(self, docker_id: str, *, stop_timeout: int) -> None:
        try:
            await self._call(self.client.api.stop, docker_id, timeout=stop_timeout)
            await self._call(self.client.api.remove_container, docker_id, force=True)
        except DockerRefused:
            if await self._exists(docker_id):
                raise

    async def _exists(self, docker_id: str) -> bool:
        return await self._inspect(docker_id) is not None

    async def _inspect(self, docker_id: str) -> Inspected | None:
        """None when the container went away meanwhile."""
        try:
            attrs = await self._call(self.client.api.inspect_container, docker_id)
        except DockerRefused:
            return None
        return inspected(attrs)

    async def _call(
        self, function: Callable[..., T], *args: Any, gate: Gate = _always, **kwargs: Any
    ) -> T:
        loop = asyncio.get_running_loop()
        call = functools.partial(self._send, gate, function, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def _send(self, gate: Gate, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """On a worker thread: the call, if its gate still says yes, timed."""
        name = getattr(function, "__name__", "call")
        if not gate():
            raise NotWanted(name)
        started = time.perf_counter()
        try:
            return _translated(function, *args, **kwargs)
        finally:
            self._timings(name, time.perf_counter() - started)


def device_requests(uuids: list[str]) -> list[DeviceRequest]:
    """Whole GPUs and MIG devices by UUID, as the NVIDIA container runtime takes them."""
    if not uuids:
        return []
    return [DeviceRequest(device_ids=list(uuids), capabilities=GPU_CAPABILITIES)]


def inspected(attrs: dict[str, Any]) -> Inspected:
    """What ``docker inspect`` says of one container, in the runtime's terms."""
    found = attrs["Config"].get("Labels") or {}
    state = attrs["State"]
    status = state["Status"]
    host = attrs["HostConfig"]
    return Inspected(
        observed=Observed(
            docker_id=attrs["Id"],
            id=found.get(labels.ID, ""),
            spec=found.get(labels.SPEC, ""),
            state=status,
            limits=Limits(
                cpuset_cpus=host.get("CpusetCpus") or "",
                cpuset_mems=host.get("CpusetMems") or "",
                cpu_shares=host.get("CpuShares") or 0,
                cpu_quota=host.get("CpuQuota") or 0,
                cpu_period=host.get("CpuPeriod") or 0,
                mem_limit=host.get("Memory") or 0,
                memswap_limit=host.get("MemorySwap") or 0,
                # an update that took the reservation away leaves -1
                mem_reservation=max(host.get("MemoryReservation") or 0, 0),
            ),
            created=attrs.get("Created", ""),
            started_at=state.get("StartedAt", ""),
            exit_code=state.get("ExitCode") if status in ("exited", "dead") else None,
            stop_timeout=attrs["Config"].get("StopTimeout"),
            bound=found.get(labels.BOUND) == "true",
            cgroup_parent=host.get("CgroupParent") or "",
        ),
        namespace=found.get(labels.NAMESPACE, ""),
        deployment=found.get(labels.DEPLOYMENT, ""),
        started_at=state.get("StartedAt", ""),
        pid=state.get("Pid") or 0,
    )


def _settings_arguments(settings: Settings) -> dict[str, Any]:
    """The SDK's keyword arguments for create. Memory fields at 0 are left out: at
    create that means no limit."""
    return {
        "cpuset_cpus": docker_cpuset(settings.cpuset_cpus),
        "cpuset_mems": docker_cpuset(settings.cpuset_mems),
        "cpu_shares": settings.cpu_shares,
        "cpu_quota": settings.cpu_quota,
        "cpu_period": settings.cpu_period,
        "mem_limit": settings.mem_limit or None,
        "memswap_limit": settings.memswap_limit or None,
        "mem_reservation": settings.mem_reservation or None,
    }


def _update_arguments(settings: Settings) -> dict[str, Any]:
    """The SDK's keyword arguments for update. To an update 0 means "unchanged": a memory
    limit at 0 is left out (the planner makes a container anew to lose one), and a
    reservation at 0 is sent as -1, which takes one away."""
    reservation = settings.mem_reservation or NO_RESERVATION
    return _settings_arguments(settings) | {"mem_reservation": reservation}


def _translated(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return function(*args, **kwargs)
    except APIError as error:
        raise DockerRefused(_explain(error)) from error
    except (requests.ConnectionError, requests.Timeout) as error:
        raise EngineUnavailable(f"the Docker engine does not answer: {error}") from error
    except DockerException as error:
        raise EngineUnavailable(str(error)) from error


def _explain(error: APIError) -> str:
    return str(error.explanation or error)
