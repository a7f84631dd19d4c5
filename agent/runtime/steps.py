"""How a reconcile pass splits its plan into bounded steps: a pure function.

    step = next_step(work, desired, leaving, bound, removing=..., done=...)

A pass plans, takes one step, and plans again from the newest desired state, so no step
acts on a desired state older than the one the agent held when the step began. A step is:

- ``removals``: every removal of a container no longer desired (not in ``desired``; a
  work of removals only) whose Docker container is not already being removed
  (``removing``); the runtime runs them in the background, a bounded number at once,
  each with its own stop timeout, so a container slow to stop holds up neither the
  others nor the pass;
- ``works``: the other works in plan order (by id), skipping the containers this pass
  already acted on (``done``: a failure is tried again in the next pass, not in a loop),
  up to ``budget`` actions (always at least one work, however many actions it has);
- ``held``: works left out because they would start a bound container on CPUs another
  container still runs on that is to leave them (``leaving``: each such container's
  CPUs, e.g. one no longer desired, or a shared-pool one about to be updated; ``bound``:
  the CPUs of each desired bound container), each with why. They are planned again once
  that container is gone or updated, so no two running containers ever share a bound
  core.

A step without works ends the pass (its removals go on in the background).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from agent.runtime.plan import Create, Remove, Start, Work
from shared.cpuset import CpuSet

STEP_ACTIONS = 8  # actions carried out between two reads of the desired state
WAITING = "waiting for "  # how the reason of a held work begins


@dataclass(frozen=True)
class Step:
    removals: tuple[tuple[str, Remove], ...] = ()  # (container id, its removal)
    works: tuple[Work, ...] = ()
    held: Mapping[str, str] = field(default_factory=dict)  # container id -> why it waits


def next_step(
    work: Sequence[Work],
    desired: Collection[str],
    leaving: Mapping[str, CpuSet],
    bound: Mapping[str, CpuSet],
    *,
    removing: Collection[str] = (),
    done: Collection[str] = (),
    budget: int = STEP_ACTIONS,
) -> Step:
    """The next step of a pass (module docstring). Cost: O(len(work) * len(leaving))."""
    removals: list[tuple[str, Remove]] = []
    works: list[Work] = []
    held: dict[str, str] = {}
    actions = 0
    for one in work:
        if one.id not in desired and all(isinstance(a, Remove) for a in one.actions):
            removals.extend(
                (one.id, a)
                for a in one.actions
                if isinstance(a, Remove) and a.docker_id not in removing
            )
            continue
        if not one.actions or one.id in done or (works and actions + len(one.actions) > budget):
            continue
        blocker = _blocker(one, leaving, bound.get(one.id))
        if blocker:
            held[one.id] = blocker
            continue
        works.append(one)
        actions += len(one.actions)
    return Step(removals=tuple(removals), works=tuple(works), held=held)


def _blocker(work: Work, leaving: Mapping[str, CpuSet], cores: CpuSet | None) -> str:
    """Why ``work`` may not start its container yet; "" when it may."""
    if cores is None or not any(isinstance(a, Create | Start) for a in work.actions):
        return ""
    for container_id, cpus in sorted(leaving.items()):
        shared = cores & cpus
        if shared and container_id != work.id:
            return f"{WAITING}{container_id} to leave CPUs {shared}"
    return ""
