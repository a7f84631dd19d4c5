"""allotctl's commands run through ``main`` against a real coordinator in the test's
event loop: the fixtures of tests/coordinator/conftest.py.

Every test here runs with a config file of its own (``ALLOT_CONFIG`` in ``tmp_path``, not
yet written) and none of allotctl's variables from the shell that started pytest, so no
test reads or writes this machine's ~/.config/allot."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.coordinator.conftest import cluster, coordinator

__all__ = ["cluster", "config_file", "coordinator"]

ALLOTCTL_ENV = ("ALLOT_SERVER", "ALLOT_TOKEN", "ALLOT_CA_FILE", "ALLOT_CONTEXT", "XDG_CONFIG_HOME")


@pytest.fixture(autouse=True)
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The path of this test's allotctl config file."""
    for name in ALLOTCTL_ENV:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "allotctl-config" / "config.toml"
    monkeypatch.setenv("ALLOT_CONFIG", str(path))
    return path
