"""What the agent last set on each container it manages, in a file that outlives the
agent process.

    applied = AppliedSettings(path)
    applied.load()                      # what an earlier run of the agent wrote
    applied.set("c1", settings)         # each change is written through
    applied.forget("c1")                # before the agent itself removes c1's container
    plan(desired, observed, applied.settings, host)

The planner tells drift from a new desired value by it: a limit that differs from the
one the agent set, while the coordinator still wants that one, was changed by hand; a
container the agent had and finds gone was removed by hand. Held only in memory, this
died with the agent, so a change made while it was down was put back as if the
coordinator had asked for it, and unreported. Docker holds nothing that could stand in
for it (labels cannot change after creation), so the agent keeps it itself, beside its
state file, and writes it through whenever it changes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import msgspec

from agent.runtime.atomic_write import QuietWriter, write_atomically
from agent.runtime.settings import Settings
from shared.codec import json_decoder, to_json
from shared.logs import get_logger

log = get_logger("allot.agent.runtime")

VERSION = 1


class AppliedFile(msgspec.Struct, frozen=True, kw_only=True):
    version: int
    containers: dict[str, Settings]  # by allot id


class UnreadableApplied(Exception):
    """The file exists but cannot be used; the message says why."""


_decoder: msgspec.json.Decoder[AppliedFile] = json_decoder(AppliedFile)


def applied_path(state_dir: str, node: str) -> Path:
    return Path(state_dir) / f"applied-{node}.json"


def encoded(applied: Mapping[str, Settings]) -> bytes:
    return to_json(AppliedFile(version=VERSION, containers=dict(applied)))


def write_applied(path: Path, applied: Mapping[str, Settings]) -> None:
    write_atomically(path, encoded(applied))


def read_applied(path: Path) -> dict[str, Settings]:
    """The settings written last; {} when no file was written yet."""
    try:
        found = _decoder.decode(path.read_bytes())
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise UnreadableApplied(f"{error.strerror or error}: {path}") from error
    except msgspec.DecodeError as error:
        raise UnreadableApplied(f"{path} is damaged: {error}") from error
    if found.version != VERSION:
        raise UnreadableApplied(f"{path} has version {found.version}; this agent reads {VERSION}")
    return found.containers


class AppliedSettings:
    """The settings the agent last set on each container, written through to ``path``.

    A file that cannot be read or written is logged (a write once per reason) and the
    agent carries on from memory: every change is still put back, but one made while
    the agent was down is then not known for drift.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._settings: dict[str, Settings] = {}
        self._writer = QuietWriter("cannot keep what the agent applied across restarts")

    @property
    def settings(self) -> Mapping[str, Settings]:
        return self._settings

    def load(self) -> None:
        try:
            self._settings = read_applied(self.path)
        except UnreadableApplied as error:
            log.warning(
                "what the agent last applied is unknown: drift made while it was down will"
                " be put back unreported",
                reason=str(error),
            )
            self._settings = {}

    def set(self, container_id: str, settings: Settings) -> None:
        if self._settings.get(container_id) != settings:
            self._settings[container_id] = settings
            self._write()

    def forget(self, container_id: str) -> None:
        if self._settings.pop(container_id, None) is not None:
            self._write()

    def keep_only(self, container_ids: Collection[str]) -> None:
        gone = self._settings.keys() - set(container_ids)
        for container_id in gone:
            del self._settings[container_id]
        if gone:
            self._write()

    def _write(self) -> None:
        self._writer.write(self.path, encoded(self._settings))
