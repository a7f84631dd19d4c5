"""The coordinator's settings: ``/etc/allot/coordinator.toml``, ``ALLOT_COORDINATOR_*``,
then flags (see ``shared.config``)."""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from coordinator.leases import ResourceTemplate, TemplateError, validate_templates
from coordinator.pools import PoolConfigError, parse_config
from coordinator.store.etcd import check_root
from coordinator.store.etcd_link import EtcdSettings, endpoint_problem
from shared.protocol import DEFAULT_MAX_FRAME_BYTES
from shared.resource_names import is_rfc1123_label
from shared.tls import TlsError, reload_server_context, server_context
from shared.tokens import token_problem

ENV_PREFIX = "ALLOT_COORDINATOR_"


class QuotaSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[quotas]`` (quotas spec section 11)."""

    # G: the GB of GPU memory charged for each whole nvidia.com/gpu.
    nvidia_gpu_resource_memory_gb: Annotated[int, Meta(ge=1)] = 16
    # "convention": every whole GPU is G GB; "inventory": the assigned GPU's real memory.
    gpu_memory_source: Literal["convention", "inventory"] = "convention"
    # Seconds before a quota may again preempt the quota it just preempted; 0 disables.
    preemption_cooldown_s: Annotated[float, Meta(ge=0)] = 30.0


class NamespaceToken(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[namespace_tokens]]`` entry: a secret that acts only for these namespaces.

    Validated by ``CoordinatorConfig``, which can name the entry's position and compare the
    token with every other one.
    """

    token: str
    namespaces: list[str]


class PoolSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[pools]``: the pool tree's settings (pools spec section 2)."""

    fair_share_update_period: float = 1.0  # seconds between updates, 0.01..60
    smooth_period: float = 60.0  # T_s: a pool spends at most V/T_s share at once
    pool_capacity_saturation_period: float = 86_400.0  # P: volume capacity = flow * P
    relaxed_share_multiplier_limit: float = 3.0  # a relaxed pool gets at most m * flow
    charge_volume_by_usage: bool = False  # charge measured usage instead of the share

    def __post_init__(self) -> None:
        try:
            parse_config({"settings": msgspec.structs.asdict(self), "pools": {}})
        except PoolConfigError as error:
            raise ValueError(f"pools: {error.message}") from None


class PressureSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[pressure]``: when a node counts as under CPU pressure, from its agent's reading
    (PSI "some avg10", or the share of CFS periods throttled; in percent). A node enters
    at ``enter_percent`` or more and leaves at ``leave_percent`` or less; in between it
    stays as it was (hysteresis), so a reading near one threshold does not flap."""

    enter_percent: Annotated[float, Meta(gt=0, le=100)] = 60.0
    leave_percent: Annotated[float, Meta(ge=0, lt=100)] = 30.0

    def __post_init__(self) -> None:
        if self.leave_percent >= self.enter_percent:
            raise ValueError(
                f"pressure: leave_percent ({self.leave_percent:g}) must be below"
                f" enter_percent ({self.enter_percent:g})"
            )


class CoordinatorConfig(msgspec.Struct, frozen=True, kw_only=True):
    host: Annotated[str, Meta(description="address to listen on")] = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535, description="TCP port (0: any free port)")] = 7600
    data_dir: Annotated[str, Meta(description="where the SQLite store lives")] = "/var/lib/allot"
    store: Annotated[
        Literal["sqlite", "etcd"],
        Meta(description="the state store: sqlite (embedded, in data_dir) or etcd"),
    ] = "sqlite"
    etcd_endpoints: Annotated[
        list[str],
        Meta(description="etcd members, host:port or http(s)://host:port (comma-separated)"),
    ] = []
    etcd_prefix: Annotated[
        str, Meta(description="every key under this etcd prefix: one per allot cluster")
    ] = "/allot"
    etcd_ca_file: Annotated[str, Meta(description="TLS: the CA of the etcd members")] = ""
    etcd_cert_file: Annotated[str, Meta(description="TLS: client certificate for etcd")] = ""
    etcd_key_file: Annotated[str, Meta(description="TLS: the client certificate's key")] = ""
    etcd_user: Annotated[str, Meta(description="etcd user (with etcd_password)")] = ""
    etcd_password: Annotated[str, Meta(description="that etcd user's password")] = ""
    etcd_timeout_seconds: Annotated[
        float,
        Meta(
            gt=0,
            description="the most one etcd call waits on one member (connecting and small"
            " calls wait at most 1 s)",
        ),
    ] = 10.0
    etcd_max_txn_ops: Annotated[
        int,
        Meta(
            ge=8,
            description="etcd: the --max-txn-ops its members run with; a decision with more"
            " writes is committed in several fenced steps",
        ),
    ] = 10_000
    etcd_compact_seconds: Annotated[
        float,
        Meta(
            ge=0,
            description="etcd: the leader compacts etcd's history older than this, this"
            " often (0: never; leave it to etcd's --auto-compaction-retention)",
        ),
    ] = 60.0
    leader_ttl_seconds: Annotated[
        int,
        Meta(
            ge=2,
            le=60,
            description="etcd: the leader's key lives this long after its last renewal;"
            " a standby takes over about this long after the leader dies",
        ),
    ] = 5
    advertise_url: Annotated[
        str,
        Meta(
            description="etcd: the URL agents and clients reach this coordinator at, given"
            " to them by the standbys while it leads (default: http://host:port, the port"
            " bound; https:// with TLS)"
        ),
    ] = ""
    tls_cert_file: Annotated[
        str, Meta(description="TLS: the coordinator's certificate (PEM): serve https and wss")
    ] = ""
    tls_key_file: Annotated[str, Meta(description="TLS: that certificate's key (PEM)")] = ""
    tls_client_ca_file: Annotated[
        str,
        Meta(
            description="TLS: the CA of agents' certificates; each agent must then present"
            " one, and may register only as the node it names (the join token is not needed)"
        ),
    ] = ""
    allow_insecure_http: Annotated[
        bool,
        Meta(
            description="serve plain http on a non-loopback host: tokens and desired state"
            " cross the network readable by anyone on the path"
        ),
    ] = False
    join_token: Annotated[
        str,
        Meta(description="secret agents present to join (not needed with tls_client_ca_file)"),
    ] = ""
    api_tokens: Annotated[
        list[str], Meta(description="secrets API clients present (comma-separated)")
    ] = []
    # [[namespace_tokens]] in the TOML file only: tokens limited to some namespaces. The
    # api_tokens above are the admin tokens.
    namespace_tokens: list[NamespaceToken] = []
    lease_seconds: Annotated[
        float, Meta(gt=0, description="a node is lost after this long without a heartbeat")
    ] = 15.0
    heartbeat_seconds: Annotated[
        float,
        Meta(
            gt=0,
            description="how often agents send a heartbeat, while the fleet is small enough"
            " for max_heartbeats_per_second",
        ),
    ] = 5.0
    max_heartbeats_per_second: Annotated[
        float,
        Meta(
            gt=0,
            description="the most heartbeats the whole fleet sends a second: agents' intervals"
            " (and their nodes' leases with them) stretch as the fleet grows past"
            " heartbeat_seconds times this",
        ),
    ] = 50.0
    removal_ack_seconds: Annotated[
        float,
        Meta(
            ge=0,
            le=60,
            description="how long the answer to a removal waits for the hosts concerned to"
            " acknowledge it (0: it does not wait)",
        ),
    ] = 2.0
    hello_timeout_seconds: Annotated[
        float, Meta(gt=0, description="how long a new agent connection may take to say hello")
    ] = 10.0
    max_frame_bytes: Annotated[
        int, Meta(ge=4096, description="largest websocket frame accepted from an agent")
    ] = DEFAULT_MAX_FRAME_BYTES
    header_timeout_seconds: Annotated[
        float,
        Meta(
            gt=0,
            description="a connection that has not sent a request's headers this long after"
            " it opened (or after the request's first byte, on a kept-alive connection) is"
            " closed; also bounds the TLS handshake",
        ),
    ] = 10.0
    max_connections: Annotated[
        int,
        Meta(
            ge=1,
            description="connections held at once; past this a new one is closed at once"
            " (kept below the open-files limit)",
        ),
    ] = 10_000
    share_base: Annotated[
        int, Meta(ge=1, le=10_000, description="CPU pieces per core, cluster-wide")
    ] = 100
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # [[resources]] in the TOML file only: capacity-lease templates, in matching order.
    resources: list[ResourceTemplate] = []
    # [quotas], [pools] and [pressure] in the TOML file only.
    quotas: QuotaSettings = QuotaSettings()
    pools: PoolSettings = PoolSettings()
    pressure: PressureSettings = PressureSettings()
    lost_node_grace_seconds: Annotated[
        float,
        Meta(
            ge=0,
            description="how long a lost node's containers stay allocated before they are"
            " released and their stand-ins pending (0: released in the commit that marks"
            " the node lost)",
        ),
    ] = 300.0
    scheduler_seconds: Annotated[
        float,
        Meta(
            gt=0,
            description="how often pending containers are tried again even when nothing"
            " said room appeared (a pool limit raised); a freed node, a node that joins or"
            " is uncordoned, and a quota written start a pass at once",
        ),
    ] = 10.0
    lease_sweep_seconds: Annotated[
        float, Meta(gt=0, description="how often expired capacity leases are dropped")
    ] = 1.0
    lease_address: Annotated[
        str,
        Meta(
            description="host:port where a process of its own serves the lease API (port 0:"
            " any free port), so that deploys never delay it; empty: the main process serves"
            " it. The main port's lease routes are forwarded there either way"
        ),
    ] = ""
    metrics_container_series: Annotated[
        Literal["container", "deployment"],
        Meta(
            description="the containers' usage in /metrics: one series per container, or"
            " summed per deployment (for fleets where a series per container is too many)"
        ),
    ] = "container"

    def __post_init__(self) -> None:
        if not self.api_tokens:
            raise ValueError("api_tokens must name at least one token")
        named = [] if self.tls_client_ca_file else [("join_token", self.join_token)]
        named += [(f"api_tokens[{i}]", token) for i, token in enumerate(self.api_tokens)]
        named += [
            (f"namespace_tokens[{i}].token", e.token) for i, e in enumerate(self.namespace_tokens)
        ]
        for name, token in named:
            problem = token_problem(name, token)
            if problem:
                raise ValueError(problem)
        _check_namespace_tokens(self.namespace_tokens)
        _check_distinct(self.api_tokens, self.namespace_tokens)
        try:
            validate_templates(self.resources)
        except TemplateError as error:
            raise ValueError(f"resources: {error.message}") from None
        _check_etcd(self)
        _check_tls(self)
        if self.lease_address:
            _check_lease_address(self)
        if self.heartbeat_seconds >= self.lease_seconds:
            raise ValueError(
                f"heartbeat_seconds ({self.heartbeat_seconds:g}) must be shorter than"
                f" lease_seconds ({self.lease_seconds:g})"
            )

    @property
    def tls(self) -> bool:
        """Whether the API and the agent socket are served over TLS."""
        return bool(self.tls_cert_file)

    def server_tls_context(self) -> ssl.SSLContext | None:
        """A fresh context for the configured files (None without TLS)."""
        if not self.tls:
            return None
        return server_context(self.tls_cert_file, self.tls_key_file, self.tls_client_ca_file)

    def reload_tls(self, context: ssl.SSLContext) -> None:
        """Read the configured files again into ``context`` (raises ``TlsError``)."""
        reload_server_context(
            context, self.tls_cert_file, self.tls_key_file, self.tls_client_ca_file
        )

    @property
    def store_path(self) -> Path:
        return Path(self.data_dir) / "allot.db"

    @property
    def lease_store_path(self) -> Path:
        """The lease process's own SQLite store, beside the main one."""
        return Path(self.data_dir) / "leases.db"

    @property
    def lease_host_port(self) -> tuple[str, int]:
        """``lease_address`` split (IPv6 hosts in brackets: ``[::1]:7602``)."""
        host, _, port = self.lease_address.rpartition(":")
        return host.removeprefix("[").removesuffix("]"), int(port)

    @property
    def etcd(self) -> EtcdSettings:
        return EtcdSettings(
            endpoints=tuple(self.etcd_endpoints),
            prefix=self.etcd_prefix,
            ca_file=self.etcd_ca_file,
            cert_file=self.etcd_cert_file,
            key_file=self.etcd_key_file,
            user=self.etcd_user,
            password=self.etcd_password,
            timeout_s=self.etcd_timeout_seconds,
        )

    @property
    def store_location(self) -> str:
        """Where the store is, for the log."""
        if self.store == "etcd":
            return f"etcd {','.join(self.etcd_endpoints)} prefix {self.etcd_prefix}"
        return str(self.store_path)


def _check_etcd(config: CoordinatorConfig) -> None:
    if config.store == "etcd" and not config.etcd_endpoints:
        raise ValueError('store = "etcd" needs etcd_endpoints: at least one etcd member')
    for endpoint in config.etcd_endpoints:
        problem = endpoint_problem(endpoint)
        if problem:
            raise ValueError(f"etcd_endpoints: {problem}")
    try:
        check_root(config.etcd_prefix)
    except ValueError as error:
        raise ValueError(str(error)) from None
    if config.advertise_url and not config.advertise_url.startswith(("http://", "https://")):
        raise ValueError(f"advertise_url {config.advertise_url!r} must be an http(s):// URL")
    wildcard = config.host in ("0.0.0.0", "::", "")
    if config.store == "etcd" and not config.advertise_url and wildcard:
        raise ValueError(
            f'with store = "etcd" and host {config.host!r} give an advertise_url: the standbys'
            " send agents and clients to the leader's URL, which must reach it from elsewhere"
        )
    if bool(config.etcd_user) != bool(config.etcd_password):
        raise ValueError("etcd_user and etcd_password go together: give both or neither")
    if bool(config.etcd_cert_file) != bool(config.etcd_key_file):
        raise ValueError("etcd_cert_file and etcd_key_file go together: give both or neither")
    for name in ("etcd_ca_file", "etcd_cert_file", "etcd_key_file"):
        path = getattr(config, name)
        if path and not Path(path).is_file():
            raise ValueError(f"{name}: {path} is not a readable file")


def _check_tls(config: CoordinatorConfig) -> None:
    """The TLS files exist and fit (the context is built once to know), and a host beyond
    loopback is served over TLS unless the operator chose otherwise."""
    if bool(config.tls_cert_file) != bool(config.tls_key_file):
        raise ValueError("tls_cert_file and tls_key_file go together: give both or neither")
    if config.tls_client_ca_file and not config.tls:
        raise ValueError("tls_client_ca_file needs tls_cert_file and tls_key_file: TLS on")
    try:
        config.server_tls_context()
    except TlsError as error:
        raise ValueError(f"tls: {error}") from None
    if not config.tls and not config.allow_insecure_http and not is_loopback(config.host):
        raise ValueError(
            f"host {config.host!r} is beyond loopback and TLS is off: tokens would cross the"
            " network in clear. Give tls_cert_file and tls_key_file (allot-coordinator tls"
            " makes them), or allow_insecure_http = true on a network you trust"
        )


def _check_lease_address(config: CoordinatorConfig) -> None:
    host, colon, port = config.lease_address.rpartition(":")
    if not (colon and host and port.isdigit() and int(port) <= 65535):
        raise ValueError(f"lease_address {config.lease_address!r} must be host:port")
    host = config.lease_host_port[0]
    if not config.tls and not config.allow_insecure_http and not is_loopback(host):
        raise ValueError(
            f"lease_address {config.lease_address!r} is beyond loopback and TLS is off;"
            " give the TLS files, or allow_insecure_http = true on a network you trust"
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` can be reached from this machine only: localhost, 127.0.0.0/8, ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_namespace_tokens(entries: list[NamespaceToken]) -> None:
    for index, entry in enumerate(entries):
        where = f"namespace_tokens[{index}]"
        if not entry.namespaces:
            raise ValueError(f"{where}: namespaces must name at least one namespace")
        bad = [name for name in entry.namespaces if not is_rfc1123_label(name)]
        if bad:
            raise ValueError(
                f"{where}: namespaces {bad} are not valid namespace names"
                " (a-z, 0-9 and '-', starting and ending with a letter or digit,"
                " at most 63 characters)"
            )


def _check_distinct(api_tokens: list[str], entries: list[NamespaceToken]) -> None:
    """Every token once: a token listed twice would have two roles. The message names the
    positions, never the secret."""
    first: dict[str, str] = {}
    places = [(f"api_tokens[{i}]", token) for i, token in enumerate(api_tokens)]
    places += [(f"namespace_tokens[{i}]", entry.token) for i, entry in enumerate(entries)]
    for place, token in places:
        if token in first:
            raise ValueError(
                f"{first[token]} and {place} are the same token; every token must be distinct"
            )
        first[token] = place
