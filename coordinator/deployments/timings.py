"""Where the deployment service reports how long its steps took (the coordinator's
metrics implement it; ``NO_TIMINGS`` drops them). Each call gets seconds."""

from __future__ import annotations

from typing import Protocol


class Timings(Protocol):
    def decided(self, seconds: float) -> None:
        """A batch's deciders ran."""

    def committed(self, seconds: float) -> None:
        """A batch was committed to the store and applied to the books."""

    def published(self, seconds: float) -> None:
        """A committed batch's touched nodes went to the publishers."""

    def scheduled(self, seconds: float) -> None:
        """A scheduler pass over the pending containers ended."""


class _NoTimings:
    def decided(self, seconds: float) -> None:
        pass

    def committed(self, seconds: float) -> None:
        pass

    def published(self, seconds: float) -> None:
        pass

    def scheduled(self, seconds: float) -> None:
        pass


NO_TIMINGS: Timings = _NoTimings()
