"""Named quotas and states shared by the quota tests, defined once, and the hypothesis
strategies for the property tests.

Everything here is immutable in use: the engine never changes a Quota, a Container or a
list it is given (the tests check that after every expected failure).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from coordinator.quotas import Container, Quota

MIG10 = {"nvidia.com/mig-1g.10gb": 1}  # 10 GB of GPU memory


def gpu10(name: str, namespace: str, created: float, **changes: Any) -> Container:
    """A container of the seed's examples: one 1g.10gb MIG device, on node n1."""
    fields: dict[str, Any] = {"node": "n1", "created": created} | changes
    return Container(name, namespace, dict(MIG10), **fields)


@contextmanager
def unchanged(*values: object) -> Iterator[None]:
    """Assert that ``values`` (lists, dicts, structs) are equal to deep copies taken
    before the block: the engine changed nothing, whatever happened inside."""
    before = copy.deepcopy(values)
    try:
        yield
    finally:
        assert values == before


# --- the seed's example (spec section 7.1) ------------------------------------------------
# A, B, C govern GPU memory only, with no max: min 40, 10, 30 (Σmin = 80). One node n1 of
# 80 GB; every container asks for 10 GB with priority 0.

SEED_A = Quota("a", ["team-a"], {"gpu-memory": 40})
SEED_B = Quota("b", ["team-b"], {"gpu-memory": 10})
SEED_C = Quota("c", ["team-c"], {"gpu-memory": 30})
SEED_QUOTAS = [SEED_A, SEED_B, SEED_C]
# t1: A runs a1-a4 (40 GB, all in-quota); B runs b1-b4 (40 GB, b2-b4 over-quota). Full.
SEED_T1 = [gpu10(f"a{i}", "team-a", float(i)) for i in range(1, 5)] + [
    gpu10(f"b{i}", "team-b", float(4 + i)) for i in range(1, 5)
]
SEED_A5 = gpu10("a5", "team-a", 10.0)
SEED_A6 = gpu10("a6", "team-a", 11.0)
SEED_C1 = gpu10("c1", "team-c", 12.0)
NODE_FULL = {"gpu-memory": 0}

# --- the cool-down state (spec section 8.3) -------------------------------------------------
# A (min 10) borrows: a1 in-quota, a2 and a3 over-quota; B (min 30) runs b1. n1 is full.
# B's b2 is within B's min, so R1 lets it reclaim from A: a3, the newest, unless a recent
# A -> B preemption protects A.
COOL_A = Quota("a", ["team-a"], {"gpu-memory": 10})
COOL_B = Quota("b", ["team-b"], {"gpu-memory": 30})
COOL_C = Quota("c", ["team-c"], {"gpu-memory": 10})
COOL_QUOTAS = [COOL_A, COOL_B, COOL_C]
COOL_STATE = [
    gpu10("a1", "team-a", 1.0),
    gpu10("a2", "team-a", 2.0),
    gpu10("a3", "team-a", 3.0),
    gpu10("b1", "team-b", 4.0),
]
COOL_B2 = gpu10("b2", "team-b", 5.0)


# --- hypothesis strategies -------------------------------------------------------------------

QUOTA_NAMESPACES = {"qa": ["na"], "qb": ["nb1", "nb2"], "qc": ["nc"]}  # qb is composite
NAMESPACES = ["na", "nb1", "nb2", "nc", "nu"]  # nu is unmanaged
NODES = ["n1", "n2"]

requests = st.fixed_dictionaries(
    {"nvidia.com/mig-1g.10gb": st.integers(0, 2)},
    optional={
        "nvidia.com/gpu": st.integers(0, 1),
        "cpu": st.sampled_from(["0.25", "0.5", "1", "1.5"]),
        "example.com/fpga": st.integers(0, 2),
    },
)


# A preemptor always needs GPU memory, so that a full node makes it look for victims.
preemptor_requests = st.fixed_dictionaries(
    {"nvidia.com/mig-1g.10gb": st.integers(1, 3)},
    optional={"cpu": st.sampled_from(["0.25", "0.5", "1"])},
)


@st.composite
def quota_sets(draw: st.DrawFn) -> list[Quota]:
    """2-3 quotas over GPU memory and cpu (sometimes an empty min, sometimes a max)."""
    names = sorted(draw(st.sets(st.sampled_from(sorted(QUOTA_NAMESPACES)), min_size=2)))
    quotas = []
    for name in names:
        minimum: dict[str, Any] = {}
        if draw(st.integers(0, 4)) > 0:
            minimum["gpu-memory"] = draw(st.sampled_from([0, 10, 20, 30, 40, 60, 120]))
        if draw(st.booleans()):
            minimum["cpu"] = draw(st.sampled_from(["0.5", "1", "2", "3.5"]))
        maximum: dict[str, Any] | None = None
        if draw(st.integers(0, 5)) == 0:
            maximum = {"gpu-memory": minimum.get("gpu-memory", 0) + draw(st.integers(0, 40))}
        quotas.append(Quota(name, QUOTA_NAMESPACES[name], minimum, maximum))
    return quotas


@st.composite
def containers(draw: st.DrawFn, count: int = 8) -> list[Container]:
    """Up to ``count`` containers with tied creation times and priorities."""
    n = draw(st.integers(0, count))
    return [
        Container(
            f"c{i}",
            draw(st.sampled_from(NAMESPACES)),
            draw(requests),
            priority=draw(st.integers(-1, 2)),
            created=float(draw(st.integers(0, 5))),
            running=draw(st.integers(0, 5)) > 0,
            node=draw(st.sampled_from(["n1", "n1", "n1", "n2"])),
        )
        for i in range(n)
    ]


@dataclass(frozen=True)
class Case:
    """A whole state and one preemptor on n1, with what is free there."""

    quotas: list[Quota]
    containers: list[Container]
    preemptor: Container
    free: dict[str, Fraction]
    now: float = 0.0
    recent: list[dict[str, Any]] = field(default_factory=list)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Skewed towards preemption: the preemptor is usually governed, and another quota's
    namespace (the borrower) gets extra 10 GB containers on n1."""
    quotas = draw(quota_sets())
    managed = [ns for q in quotas for ns in q.namespaces]
    namespace = draw(st.sampled_from([*managed, *managed, "nu"]))
    own = next((q.namespaces for q in quotas if namespace in q.namespaces), [])
    others = [ns for ns in managed if ns not in own]
    state = draw(containers(count=6))
    borrower = draw(st.sampled_from(others or NAMESPACES))
    for i in range(draw(st.integers(0, 4))):
        state.append(
            Container(
                f"x{i}",
                borrower,
                {"nvidia.com/mig-1g.10gb": 1},
                priority=draw(st.integers(-1, 2)),
                created=float(draw(st.integers(0, 5))),
                node="n1",
            )
        )
    preemptor = Container(
        "p",
        namespace,
        draw(preemptor_requests),
        priority=draw(st.integers(-1, 2)),
        created=float(draw(st.integers(0, 6))),
        running=False,
        node="n1",
    )
    free: dict[str, Fraction] = {"gpu-memory": Fraction(draw(st.sampled_from([0, 0, 5, 10])))}
    if draw(st.integers(0, 3)) == 0:
        free["cpu"] = Fraction(draw(st.integers(0, 4)), 4)
    recent = []
    if draw(st.integers(0, 3)) == 0:
        a, b = draw(st.permutations([q.name for q in quotas]))[:2]
        at = float(draw(st.integers(0, 40)))
        recent.append({"at": at, "preemptor_quota": a, "victim_quota": b})
    return Case(quotas, state, preemptor, free, now=30.0, recent=recent)


@st.composite
def fair_share_cases(draw: st.DrawFn) -> Case:
    """R2 made likely: A is at or above its min, B borrows on n1, C's large min is idle,
    so g_A and g_B are large enough for R2(a) to hold and (b) to matter."""
    quotas = [
        Quota("qa", ["na"], {"gpu-memory": draw(st.sampled_from([10, 20, 30]))}),
        Quota("qb", ["nb1", "nb2"], {"gpu-memory": draw(st.sampled_from([0, 10, 20]))}),
        Quota("qc", ["nc"], {"gpu-memory": draw(st.sampled_from([40, 60, 120]))}),
    ]

    def tens(prefix: str, namespaces: list[str], low: int, high: int) -> list[Container]:
        return [
            Container(
                f"{prefix}{i}",
                draw(st.sampled_from(namespaces)),
                {"nvidia.com/mig-1g.10gb": draw(st.integers(1, 2))},
                priority=draw(st.integers(-1, 1)),
                created=float(draw(st.integers(0, 5))),
                node=draw(st.sampled_from(["n1", "n1", "n2"])),
            )
            for i in range(draw(st.integers(low, high)))
        ]

    state = tens("a", ["na"], 1, 4) + tens("b", ["nb1", "nb2"], 2, 6)
    preemptor = Container(
        "p", "na", {"nvidia.com/mig-1g.10gb": draw(st.integers(1, 2))}, created=9.0, node="n1"
    )
    free = {"gpu-memory": Fraction(draw(st.sampled_from([0, 5, 10])))}
    return Case(quotas, state, preemptor, free, now=30.0)


any_cases = st.one_of(cases(), fair_share_cases())
