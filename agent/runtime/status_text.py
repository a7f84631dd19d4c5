"""``allot-agent status`` as an operator reads it: the node, the last reconcile, then one
row per container with the limits Docker actually holds and what it uses (cores averaged
since the previous sample, memory less its inactive file cache)."""

from __future__ import annotations

import time

from agent.runtime.state_file import AgentState
from shared.quantity import format_memory, format_memory_approx
from shared.text import table


def describe_state(state: AgentState, *, now: float | None = None) -> str:
    now = time.time() if now is None else now
    last = state.last_reconcile
    desired = state.desired_revision
    summary = [
        ("node", state.node),
        ("agent pid", str(state.pid)),
        ("updated", f"{now - state.updated_at:.1f}s ago"),
        ("docker", state.docker),
        ("desired revision", "none yet" if desired is None else str(desired)),
        ("applied revision", str(state.applied_revision)),
        ("shared pool", state.shared_pool or "-"),
        (
            "last reconcile",
            "none yet"
            if last is None
            else f"{now - last.at:.1f}s ago, {last.duration_ms:g} ms,"
            f" {last.actions} action(s), {last.failures} failure(s)",
        ),
    ]
    summary += [("problem", problem) for problem in state.problems]
    rows = [
        (
            c.id,
            c.namespace or "-",
            c.deployment or "-",
            c.state + (f" ({c.exit_code})" if c.exit_code is not None else ""),
            c.capacity or "-",
            c.limits.cpuset_cpus or "-",
            c.limits.cpu_shares or "-",
            c.limits.cpu_quota if c.limits.cpu_quota > 0 else "-",
            format_memory(c.limits.mem_limit) if c.limits.mem_limit > 0 else "-",
            "-" if c.cpu_usage is None else f"{c.cpu_usage:.2f}",
            "-" if c.memory_usage is None else format_memory_approx(c.memory_usage),
            c.revision,
            c.error or ("drift: " + "; ".join(c.drift) if c.drift else ""),
        )
        for c in state.containers
    ]
    headers = (
        "ID",
        "NAMESPACE",
        "DEPLOYMENT",
        "STATE",
        "CAPACITY",
        "CPUSET",
        "SHARES",
        "QUOTA",
        "MEMORY",
        "CPU-USED",
        "MEM-USED",
        "REVISION",
        "NOTE",
    )
    containers = table(headers, rows) if rows else "no containers"
    return f"{table(None, summary)}\n\n{containers}"
