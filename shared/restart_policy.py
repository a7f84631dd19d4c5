"""What a container's restart policy means: whether it runs for good or to completion.

A container that should run and does not is started again by its node's agent, with a
crash-loop backoff and an event each time (``agent.runtime.restarts``); Docker's own
restart policy is not used, so that every restart is seen, paced and told. The words
are Docker's, the meanings allot's:

    "always", "unless-stopped"  run for good: started again whatever the exit (allot's
                                desired state is the coordinator's: to stop a container,
                                scale or delete its deployment; a ``docker stop`` by hand
                                is undone like any other hand-made change)
    "on-failure"                runs until it exits 0 (succeeded); started again otherwise
    "no"                        runs to completion: exit 0 succeeded, else failed

    runs_again("on-failure", exit_code=1)      # True
    completion("no", exit_code=0)              # "succeeded"

The default is "always". A deployment stored before that default keeps the "no" it was
stored with.
"""

from __future__ import annotations

from typing import Literal

RestartPolicy = Literal["no", "on-failure", "always", "unless-stopped"]
Completion = Literal["succeeded", "failed"]
DEFAULT_RESTART_POLICY: RestartPolicy = "always"


def runs_again(policy: RestartPolicy, exit_code: int | None) -> bool:
    """True when a container of ``policy`` that exited with ``exit_code`` is to be
    started again; an unknown exit code (a dead container) counts as a failure."""
    if policy in ("always", "unless-stopped"):
        return True
    return policy == "on-failure" and exit_code != 0


def completion(policy: RestartPolicy, exit_code: int | None) -> Completion | None:
    """How an exited container of ``policy`` ended: None when it is to run again.
    Equivalent to: None if runs_again(...) else ("succeeded" if exit_code == 0 else "failed")."""
    if runs_again(policy, exit_code):
        return None
    return "succeeded" if exit_code == 0 else "failed"
