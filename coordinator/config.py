"""The coordinator's settings: ``/etc/allot/coordinator.toml``, ``ALLOT_COORDINATOR_*``,
then flags (see ``shared.config``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from coordinator.leases import ResourceTemplate, TemplateError, validate_templates
from coordinator.pools import PoolConfigError, parse_config
from shared.protocol import DEFAULT_MAX_FRAME_BYTES

ENV_PREFIX = "ALLOT_COORDINATOR_"
MIN_TOKEN_LENGTH = 16


class QuotaSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[quotas]`` (quotas spec section 11)."""

    # G: the GB of GPU memory charged for each whole nvidia.com/gpu.
    nvidia_gpu_resource_memory_gb: Annotated[int, Meta(ge=1)] = 16
    # "convention": every whole GPU is G GB; "inventory": the assigned GPU's real memory.
    gpu_memory_source: Literal["convention", "inventory"] = "convention"
    # Seconds before a quota may again preempt the quota it just preempted; 0 disables.
    preemption_cooldown_s: Annotated[float, Meta(ge=0)] = 30.0


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


class CoordinatorConfig(msgspec.Struct, frozen=True, kw_only=True):
    host: Annotated[str, Meta(description="address to listen on")] = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535, description="TCP port (0: any free port)")] = 7600
    data_dir: Annotated[str, Meta(description="where the SQLite store lives")] = "/var/lib/allot"
    join_token: Annotated[str, Meta(description="secret agents present to join")] = ""
    api_tokens: Annotated[
        list[str], Meta(description="secrets API clients present (comma-separated)")
    ] = []
    lease_seconds: Annotated[
        float, Meta(gt=0, description="a node is lost after this long without a heartbeat")
    ] = 15.0
    heartbeat_seconds: Annotated[
        float, Meta(gt=0, description="how often agents send a heartbeat")
    ] = 5.0
    hello_timeout_seconds: Annotated[
        float, Meta(gt=0, description="how long a new agent connection may take to say hello")
    ] = 10.0
    max_frame_bytes: Annotated[
        int, Meta(ge=4096, description="largest websocket frame accepted from an agent")
    ] = DEFAULT_MAX_FRAME_BYTES
    share_base: Annotated[
        int, Meta(ge=1, le=10_000, description="CPU pieces per core, cluster-wide")
    ] = 100
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # [[resources]] in the TOML file only: capacity-lease templates, in matching order.
    resources: list[ResourceTemplate] = []
    # [quotas] and [pools] in the TOML file only.
    quotas: QuotaSettings = QuotaSettings()
    pools: PoolSettings = PoolSettings()
    lease_sweep_seconds: Annotated[
        float, Meta(gt=0, description="how often expired capacity leases are dropped")
    ] = 1.0

    def __post_init__(self) -> None:
        if len(self.join_token) < MIN_TOKEN_LENGTH:
            raise ValueError(f"join_token must be set, at least {MIN_TOKEN_LENGTH} characters")
        if not self.api_tokens:
            raise ValueError("api_tokens must name at least one token")
        short = [i for i, token in enumerate(self.api_tokens) if len(token) < MIN_TOKEN_LENGTH]
        if short:
            raise ValueError(
                f"api_tokens at positions {short} are shorter than {MIN_TOKEN_LENGTH} characters"
            )
        try:
            validate_templates(self.resources)
        except TemplateError as error:
            raise ValueError(f"resources: {error.message}") from None
        if self.heartbeat_seconds >= self.lease_seconds:
            raise ValueError(
                f"heartbeat_seconds ({self.heartbeat_seconds:g}) must be shorter than"
                f" lease_seconds ({self.lease_seconds:g})"
            )

    @property
    def store_path(self) -> Path:
        return Path(self.data_dir) / "allot.db"
