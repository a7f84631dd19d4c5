"""What the agent manages and how its last reconcile went, kept in a file that
``allot-agent status`` reads. Written after every reconcile, atomically (a reader sees
the previous version or the new one, never half of one)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from shared.codec import json_decoder
from shared.protocol import ContainerStatus


class LastReconcile(msgspec.Struct, frozen=True, kw_only=True):
    at: float  # Unix time it ended
    duration_ms: float
    actions: int
    failures: int


class AgentState(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    pid: int
    updated_at: float
    docker: str  # "up", or why the engine cannot be used
    desired_revision: int | None  # None until the coordinator has sent a desired state
    applied_revision: int
    shared_pool: str
    last_reconcile: LastReconcile | None
    problems: list[str]
    containers: list[ContainerStatus]


_decoder: msgspec.json.Decoder[AgentState] = json_decoder(AgentState)


def state_path(state_dir: str, node: str) -> Path:
    return Path(state_dir) / f"agent-{node}.json"


def read_state(path: Path) -> AgentState:
    """Raises OSError when there is no file, ``msgspec.DecodeError`` when it is damaged."""
    return _decoder.decode(path.read_bytes())
