"""allotctl's commands run through ``main`` against a real coordinator in the test's
event loop: the fixtures of tests/coordinator/conftest.py."""

from __future__ import annotations

from tests.coordinator.conftest import cluster, coordinator

__all__ = ["cluster", "coordinator"]
