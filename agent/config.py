"""The agent's settings: ``/etc/allot/agent.toml``, ``ALLOT_AGENT_*``, then flags."""

from __future__ import annotations

import socket
import ssl
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from agent.listen_address import split_host_port
from agent.runtime.pressure import DEFAULT_PSI_FILE
from shared.cpuset import CpuSet, CpuSetError
from shared.inventory import MAX_EXTENDED, ExtendedName, ExtendedUnits
from shared.protocol import DEFAULT_MAX_FRAME_BYTES
from shared.resource_names import extended_name_problem
from shared.servers import split_servers
from shared.tls import TlsError, client_context

ENV_PREFIX = "ALLOT_AGENT_"


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    server: Annotated[
        str,
        Meta(
            description="the coordinator's base URL, or several comma-separated (coordinators"
            " on etcd: the agent finds the leader among them)"
        ),
    ] = "http://127.0.0.1:7600"
    join_token: Annotated[
        str,
        Meta(description="the coordinator's join token (not needed with a client certificate)"),
    ] = ""
    tls_ca_file: Annotated[
        str,
        Meta(description="TLS: the CA that signed the coordinator's certificate (https servers)"),
    ] = ""
    tls_cert_file: Annotated[
        str,
        Meta(
            description="TLS: this node's client certificate (PEM), for a coordinator with a"
            " client CA; it names the node this agent may register as"
        ),
    ] = ""
    tls_key_file: Annotated[str, Meta(description="TLS: that certificate's key (PEM)")] = ""
    node_name: Annotated[str, Meta(description="this node's name (default: the hostname)")] = ""
    sysfs_root: Annotated[str, Meta(description="filesystem root holding sys/ to read")] = "/"
    reserved_cpus: Annotated[
        str, Meta(description="CPUs kept for the system, never offered, e.g. '0-1'")
    ] = ""
    backoff_initial_seconds: Annotated[
        float, Meta(gt=0, description="first reconnect delay bound")
    ] = 0.5
    backoff_max_seconds: Annotated[
        float,
        Meta(
            gt=0,
            description="largest reconnect delay; once registered, also at most a quarter"
            " of the node's lease",
        ),
    ] = 30.0
    docker_host: Annotated[
        str,
        Meta(description="the Docker engine's address (default: DOCKER_HOST or the local socket)"),
    ] = ""
    docker_timeout_seconds: Annotated[
        int, Meta(ge=1, description="longest wait for one call to the Docker engine")
    ] = 20
    resync_seconds: Annotated[
        float, Meta(gt=0, description="longest time between two full reconciles")
    ] = 10.0
    full_report_seconds: Annotated[
        float,
        Meta(
            gt=0,
            description="longest time between two status reports; a change other than the"
            " usage and pressure figures is reported at once",
        ),
    ] = 60.0
    stop_timeout_seconds: Annotated[
        int,
        Meta(
            ge=0,
            description="grace between SIGTERM and SIGKILL for a container whose desired"
            " record sets none (a deployment's stop_timeout_seconds wins)",
        ),
    ] = 10
    replace_settle_seconds: Annotated[
        float,
        Meta(ge=0, description="how long a replacing container must run before the old one goes"),
    ] = 5.0
    restart_backoff_seconds: Annotated[
        float,
        Meta(gt=0, description="wait before the second try in a row to get a container running"),
    ] = 1.0
    restart_backoff_max_seconds: Annotated[
        float,
        Meta(gt=0, description="longest wait between two tries to get a container running"),
    ] = 300.0
    state_dir: Annotated[
        str, Meta(description="where the agent keeps the state `allot-agent status` shows")
    ] = "/run/allot"
    max_frame_bytes: Annotated[
        int, Meta(ge=4096, description="largest websocket frame accepted from the coordinator")
    ] = DEFAULT_MAX_FRAME_BYTES
    extended_resources: Annotated[
        dict[ExtendedName, ExtendedUnits],
        Meta(
            max_length=MAX_EXTENDED,
            description="named extended resources this node offers, counted in units,"
            " e.g. 'example.com/fpga=2' (GPUs and MIG devices are discovered, not set here)",
        ),
    ] = {}
    cpu_pressure_file: Annotated[
        str,
        Meta(
            description="the PSI file the node's CPU pressure is read from; where it is"
            " missing, or set to '', pressure comes from the containers' CFS throttling"
        ),
    ] = str(DEFAULT_PSI_FILE)
    metrics_address: Annotated[
        str,
        Meta(
            description="host:port where the agent serves Prometheus metrics at /metrics"
            " (empty: not served)"
        ),
    ] = "127.0.0.1:7601"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    def __post_init__(self) -> None:
        for url in self.servers or [self.server]:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"server {url!r} must be an http:// or https:// URL")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("tls_cert_file and tls_key_file go together: give both or neither")
        try:
            self.tls_context()
        except TlsError as error:
            raise ValueError(f"tls: {error}") from None
        try:
            CpuSet.parse(self.reserved_cpus)
        except CpuSetError as error:
            raise ValueError(f"reserved_cpus: {error}") from None
        if self.backoff_initial_seconds > self.backoff_max_seconds:
            raise ValueError("backoff_initial_seconds must not exceed backoff_max_seconds")
        if self.restart_backoff_seconds > self.restart_backoff_max_seconds:
            raise ValueError("restart_backoff_seconds must not exceed restart_backoff_max_seconds")
        if self.metrics_address:
            try:
                split_host_port(self.metrics_address)
            except ValueError as error:
                raise ValueError(f"metrics_address: {error}") from None
        for resource in sorted(self.extended_resources):
            problem = extended_name_problem(resource)
            if problem is not None:
                raise ValueError(f"extended_resources: {resource!r} {problem}")

    def tls_context(self) -> ssl.SSLContext | None:
        """The context of https/wss connections to the coordinator; None: aiohttp's default
        (the system's CAs, no client certificate)."""
        return client_context(self.tls_ca_file, self.tls_cert_file, self.tls_key_file)

    @property
    def name(self) -> str:
        return self.node_name or socket.gethostname().lower()

    @property
    def reserved(self) -> CpuSet:
        return CpuSet.parse(self.reserved_cpus)

    @property
    def metrics_endpoint(self) -> tuple[str, int] | None:
        """``metrics_address`` as host and port; None when metrics are off."""
        return split_host_port(self.metrics_address) if self.metrics_address else None

    @property
    def servers(self) -> list[str]:
        """The coordinators' base URLs, in the order given."""
        return split_servers(self.server)
