"""Crash-loop backoff: when the agent tries again to get a container running.

The agent tries to get every desired container running: it creates one that is missing
and starts again one that exited while its restart policy (``shared.restart_policy``)
says it runs again. Tries in a row form a crash loop: the first try of a loop is at once,
each next one waits twice as long as the one before, from ``initial_seconds`` up to
``max_seconds`` (Kubernetes' ``CrashLoopBackOff``, without jitter, so the wait is the
same each time it is told). A loop ends once its container has run ``reset_seconds``
since its last try, and belongs to one fixed spec: a container made anew with another
image or command (a replace, a new spec) starts afresh.

    loop = after_try(None, spec="3f2a", now=100.0)           # the first try
    due(loop, "3f2a", rules)                                 # 100.0 + rules.initial_seconds
    describe("exited with code 1", loop, rules)          # what the status says meanwhile
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.backoff import bound


@dataclass(frozen=True)
class RestartRules:
    initial_seconds: float = 1.0
    max_seconds: float = 300.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_seconds <= self.max_seconds:
            raise ValueError(
                f"restart backoff: need 0 < initial ({self.initial_seconds:g}s)"
                f" <= max ({self.max_seconds:g}s)"
            )

    @property
    def reset_seconds(self) -> float:
        """How long a container must run after a try for its loop to end: twice the
        longest wait, so that a container crashing at the longest wait stays in its loop."""
        return 2 * self.max_seconds


@dataclass(frozen=True)
class CrashLoop:
    """The tries in a row to get one container running."""

    spec: str  # the fixed spec (``allot.spec``) they were tries of
    tries: int  # >= 1
    last: float  # when the last try was made (the agent's clock, Unix time)
    failure: str = ""  # why the last try failed; "" when the engine took it


def wait_after(tries: int, rules: RestartRules) -> float:
    """The wait before the next try once ``tries`` were made in a row: none after none,
    then initial, 2 x initial, 4 x initial, ... never above max. O(1)."""
    return 0.0 if tries <= 0 else bound(rules.initial_seconds, rules.max_seconds, tries - 1)


def due(loop: CrashLoop | None, spec: str, rules: RestartRules) -> float:
    """When the next try at a container of fixed spec ``spec`` may be made: 0.0 (at once)
    unless ``loop`` holds earlier tries of that spec."""
    if loop is None or loop.spec != spec:
        return 0.0
    return loop.last + wait_after(loop.tries, rules)


def after_try(loop: CrashLoop | None, spec: str, now: float, failure: str = "") -> CrashLoop:
    """The loop once a try at ``spec`` was made at ``now``, failing with ``failure`` if
    it is not ""; a loop of another spec is over."""
    tries = loop.tries + 1 if loop is not None and loop.spec == spec else 1
    return CrashLoop(spec=spec, tries=tries, last=now, failure=failure)


def ended(loop: CrashLoop, running: bool, now: float, rules: RestartRules) -> bool:
    """True once the loop's container has run ``reset_seconds`` since the last try."""
    return running and now - loop.last >= rules.reset_seconds


def describe(why: str, loop: CrashLoop, rules: RestartRules) -> str:
    """What the container's status says while in the loop: why it is not running, and
    the pace. The same text on every pass until the next try, so that it is logged once."""
    wait = wait_after(loop.tries, rules)
    return f"{why} (try {loop.tries} in a row; the next {wait:g}s after it)"
