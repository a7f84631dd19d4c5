"""One priority band's claims, ordered by need per subclient, with prefix sums.

The index answers the two sharing algorithms for one requester without looking at
every claim. An entry is a claim ``(w, s, client_id)`` (wants, subclients) under the key
``(w / s, client_id)``. Entries are kept in sorted blocks (a square-root decomposition,
like ``sortedcontainers``) and the blocks' sums of ``w`` and ``s`` in a Fenwick tree
(binary indexed tree), so a prefix sum over whole blocks costs O(log n).

Invariants, between calls:

1. every block is non-empty and sorted, the blocks are in order, ``_firsts[b]`` is the
   first key of block b; a block holds at most ``2 * load`` entries (a bigger one is
   split in halves) and, while there is more than one block, at least ``load // 2`` (a
   smaller one is merged into a neighbour);
2. ``_bw[b]``/``_bs[b]`` are block b's sums of w and s, ``_tw``/``_ts`` the Fenwick
   trees over them, ``_total_w``/``_total_s`` the totals; unless ``_stale`` is set, in
   which case the next query rebuilds the trees and totals from the block sums first
   (after a split, merge or dropped block: block positions moved). The s sums are
   exact (integers). A w sum is updated with ``+=``/``-=``; a block made by a split or
   merge gets ``math.fsum`` of its entries, and after ``max(1024, n)`` updates every
   block is summed again with ``math.fsum`` (amortised O(1) per update), so rounding
   drift stays below about ``n * 2**-53 * W`` between recounts, far under 1e-6;
3. ``_pre[b]`` (prefix sums inside block b) and the memo of the last query are dropped
   whenever what they were computed from changes.

Ties in ``w / s`` are ordered by client id, so the order is total and removal finds the
exact entry; ties do not change any share (equal need per subclient, equal level).

    band = BandIndex()
    band.add(50.0, 1, "c1"); band.add(10.0, 1, "c2"); band.add(1000.0, 1, "c0")
    band.water_level(120.0)            -> 60.0      (c0 gets min(1000, 60 * 1))
    band.proportional_terms(120.0)     -> (40.0, 30.0, 970.0)   q, slack, excess
    band.move(1000.0, 1, 900.0, 1, "c0")
    band.remove(50.0, 1, "c1")

Cost, with n entries in blocks of ``load // 2`` to ``2 * load`` (load 128): ``add``,
``remove`` and ``move`` take O(log n) Python steps plus an O(load) ``list.insert`` or
``del`` in C; a split or merge costs O(load) and makes the next query rebuild the trees
in O(n / load), which happens about once per ``load`` insertions: amortised
O(n / load^2). A query takes O(log n) Python steps (a descent of the tree, then a
bisection inside one block), plus O(load) in C when that block's prefix sums must be
rebuilt; a repeated query with nothing changed is O(1). ``steps`` counts the Python
loop iterations and the entries and block sums the C loops went over, so tests can
check that one request does not look at all n entries.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import accumulate

Key = tuple[float, str]

# Entries per block. Measured with ``bench/leases.py --block-sizes`` (one table, one
# band, FAIR_SHARE, capacity half the demand, on the 2-core development VM), in
# microseconds per request: first request / unchanged refresh / refresh with new wants.
#
#   load   n = 10,000            n = 100,000
#     16   11.3 / 3.3 / 18.1     39.3 / 3.6 / 44.3
#     32    9.2 / 3.3 / 15.7     19.3 / 3.7 / 26.9
#     64    9.0 / 3.4 / 15.1     13.2 / 3.6 / 23.2
#    128    8.5 / 3.3 / 14.6     11.9 / 3.6 / 22.7
#    256    9.2 / 3.3 / 16.0     11.6 / 3.6 / 21.2
#
# Small blocks split often, and each split costs a tree rebuild of O(n / load); big
# blocks make insert, delete and the in-block prefix sums cost more. 64 to 256 are
# within noise of each other; 128 is in the middle.
#
# Rejected after measuring on the same machine: prefix sums of the block sums rebuilt
# with itertools.accumulate on every query, and math.fsum of a block on every change.
# Both are C loops, but at 22-30 ns per element here they cost 40 us per first request
# and 85 us per new-wants refresh at n = 10,000, 67 and 147 us at n = 100,000 (load
# 256; 64 was worse at 100,000). Not tried: a balanced tree with sums in every node; it
# is O(log n) too, but with several Python steps per level plus rebalancing, where the
# Fenwick descent takes one step per level and never rebalances.
LOAD = 128

# The w sums are recomputed exactly after this many updates, or n if that is more.
RESUM_EVERY = 1024


class BandIndex:
    __slots__ = (
        "_blocks",
        "_bs",
        "_bw",
        "_firsts",
        "_inexact",
        "_len",
        "_load",
        "_memo_level",
        "_memo_terms",
        "_pre",
        "_s",
        "_stale",
        "_top",
        "_total_s",
        "_total_w",
        "_ts",
        "_tw",
        "_updates",
        "_w",
        "steps",
    )

    def __init__(self, load: int = LOAD) -> None:
        if load < 4:
            raise ValueError(f"load = {load} must be >= 4")
        self._load = load
        self._blocks: list[list[Key]] = []
        self._w: list[list[float]] = []
        self._s: list[list[int]] = []
        self._firsts: list[Key] = []
        self._bw: list[float] = []
        self._bs: list[int] = []
        self._tw: list[float] = [0.0]  # Fenwick tree over _bw, 1-based
        self._ts: list[int] = [0]
        self._top = 0  # the highest power of two <= the number of blocks
        self._total_w = 0.0
        self._total_s = 0
        self._len = 0
        self._updates = 0  # to the w sums since they were last recomputed
        self._stale = False  # blocks were split, merged or dropped: rebuild the trees
        self._inexact = False  # recompute every block's w sum with math.fsum first
        # Prefix sums inside a block, built when a query first needs them and dropped
        # when the block changes: the block a FAIR_SHARE query ends in rarely changes
        # from one request to the next, so this saves the O(load) summing (2 to 5 us).
        self._pre: dict[int, tuple[list[float], list[int]]] = {}
        # The last query and its answer, until the next change: a band whose claims
        # are all refreshed unchanged answers every request from here.
        self._memo_level: tuple[float, float] | None = None  # (available, level)
        self._memo_terms: tuple[float, tuple[float, float, float] | None] | None = None
        self.steps = 0

    def __len__(self) -> int:
        return self._len

    @property
    def total_wants(self) -> float:
        """Sum of the wants of every entry. O(1), or O(n / load) after a split."""
        if self._stale:
            self._rebuild()
        return self._total_w

    @property
    def total_subclients(self) -> int:
        """Sum of the subclients of every entry, exact. O(1)."""
        return self._total_s

    # --- updates --------------------------------------------------------------------

    def add(self, wants: float, subclients: int, client_id: str) -> None:
        """Insert a claim; ``client_id`` must not be in the band. O(log n) + O(load)."""
        key = (wants / subclients, client_id)
        self._memo_level = self._memo_terms = None
        self._len += 1
        self._total_w += wants
        self._total_s += subclients
        if not self._blocks:
            self._blocks.append([key])
            self._w.append([wants])
            self._s.append([subclients])
            self._firsts.append(key)
            self._bw.append(wants)
            self._bs.append(subclients)
            self._stale = True
            return
        b = bisect_right(self._firsts, key) - 1
        if b < 0:
            b = 0
        block = self._blocks[b]
        i = bisect_left(block, key)
        block.insert(i, key)
        self._w[b].insert(i, wants)
        self._s[b].insert(i, subclients)
        if i == 0:
            self._firsts[b] = key
        if len(block) > 2 * self._load:
            self._split(b)
        else:
            self._bump(b, wants, subclients)

    def remove(self, wants: float, subclients: int, client_id: str) -> None:
        """Remove the claim added with these values. O(log n) + O(load).

        Raises KeyError, changing nothing, if there is no such claim.
        """
        key = (wants / subclients, client_id)
        b = bisect_right(self._firsts, key) - 1
        block = self._blocks[b] if b >= 0 else []
        i = bisect_left(block, key)
        if i == len(block) or block[i] != key:
            raise KeyError(f"no claim wants={wants!r} subclients={subclients} id={client_id!r}")
        self._memo_level = self._memo_terms = None
        del block[i]
        del self._w[b][i]
        del self._s[b][i]
        self._len -= 1
        self._total_w -= wants
        self._total_s -= subclients
        if not block:
            del self._blocks[b], self._w[b], self._s[b]
            del self._firsts[b], self._bw[b], self._bs[b]
            self._stale = True
            if not self._blocks:
                self._total_w = 0.0
            return
        if i == 0:
            self._firsts[b] = block[0]
        if len(block) < self._load // 2 and len(self._blocks) > 1:
            self._merge(b if b + 1 < len(self._blocks) else b - 1)
        else:
            self._bump(b, -wants, -subclients)

    def move(
        self, wants: float, subclients: int, new_wants: float, new_subclients: int, client_id: str
    ) -> None:
        """Change a claim's values. Equivalent to ``remove`` then ``add``, but when the new
        key still falls between the neighbouring blocks (a small change of wants, the
        usual case) the entry moves inside its block with one tree update. Raises
        KeyError, changing nothing, if there is no such claim. O(log n) + O(load)."""
        key = (wants / subclients, client_id)
        new_key = (new_wants / new_subclients, client_id)
        firsts, blocks = self._firsts, self._blocks
        b = bisect_right(firsts, key) - 1
        block = blocks[b] if b >= 0 else []
        i = bisect_left(block, key)
        if i == len(block) or block[i] != key:
            raise KeyError(f"no claim wants={wants!r} subclients={subclients} id={client_id!r}")
        if (b == 0 or blocks[b - 1][-1] < new_key) and (
            b + 1 == len(blocks) or new_key < firsts[b + 1]
        ):
            self._memo_level = self._memo_terms = None
            ws, ss = self._w[b], self._s[b]
            del block[i], ws[i], ss[i]
            j = bisect_left(block, new_key)
            block.insert(j, new_key)
            ws.insert(j, new_wants)
            ss.insert(j, new_subclients)
            firsts[b] = block[0]
            self._total_w += new_wants - wants
            self._total_s += new_subclients - subclients
            self._bump(b, new_wants - wants, new_subclients - subclients)
        else:
            self.remove(wants, subclients, client_id)
            self.add(new_wants, new_subclients, client_id)

    def _bump(self, b: int, dw: float, ds: int) -> None:
        # Block b's sums changed by (dw, ds): update them and the Fenwick trees.
        self._bw[b] += dw
        self._bs[b] += ds
        self._updates += 1
        self._pre.pop(b, None)
        if self._stale:
            return
        if self._updates >= RESUM_EVERY and self._updates >= self._len:
            self._stale = self._inexact = True
            return
        tw, ts, n = self._tw, self._ts, len(self._bw)
        self.steps += n.bit_length()  # an upper bound on the loop's iterations
        i = b + 1
        while i <= n:
            tw[i] += dw
            ts[i] += ds
            i += i & -i

    def _split(self, b: int) -> None:
        keys, ws, ss = self._blocks[b], self._w[b], self._s[b]
        half = len(keys) // 2
        self._blocks[b : b + 1] = [keys[:half], keys[half:]]
        self._w[b : b + 1] = [ws[:half], ws[half:]]
        self._s[b : b + 1] = [ss[:half], ss[half:]]
        self._firsts[b : b + 1] = [keys[0], keys[half]]
        self._bw[b : b + 1] = [math.fsum(ws[:half]), math.fsum(ws[half:])]
        self._bs[b : b + 1] = [sum(ss[:half]), sum(ss[half:])]
        self.steps += len(keys)
        self._stale = True

    def _merge(self, b: int) -> None:
        # Block b absorbs block b + 1; split again if that made it too big.
        self._blocks[b].extend(self._blocks.pop(b + 1))
        self._w[b].extend(self._w.pop(b + 1))
        self._s[b].extend(self._s.pop(b + 1))
        del self._firsts[b + 1], self._bw[b + 1], self._bs[b + 1]
        self._bw[b] = math.fsum(self._w[b])
        self._bs[b] = sum(self._s[b])
        self.steps += len(self._w[b])
        self._stale = True
        if len(self._blocks[b]) > 2 * self._load:
            self._split(b)

    def _rebuild(self) -> None:
        # The Fenwick trees from the block sums in O(blocks) C steps: node k holds the
        # blocks [k & (k - 1), k), a difference of two prefix sums. After many updates
        # every block's w sum is first recomputed exactly, O(n) in C.
        if self._inexact:
            self._bw = [math.fsum(ws) for ws in self._w]
            self._bs = [sum(ss) for ss in self._s]
            self._updates = 0
            self._inexact = False
            self.steps += self._len
        bw, bs = self._bw, self._bs
        n = len(bw)
        pw = list(accumulate(bw, initial=0.0))
        ps = list(accumulate(bs, initial=0))
        self._tw = [pw[k] - pw[k & (k - 1)] for k in range(n + 1)]
        self._ts = [ps[k] - ps[k & (k - 1)] for k in range(n + 1)]
        self._top = 1 << (n.bit_length() - 1) if n else 0
        self._total_w = math.fsum(bw)
        self._total_s = ps[-1]
        self._stale = False
        self._pre.clear()
        self.steps += 4 * n

    def _prefix(self, b: int) -> tuple[float, int]:
        # Sums of w and s over blocks [0, b).
        tw, ts = self._tw, self._ts
        pw, ps = 0.0, 0
        self.steps += b.bit_length()  # an upper bound on the loop's iterations
        while b:
            pw += tw[b]
            ps += ts[b]
            b &= b - 1
        return pw, ps

    # --- queries --------------------------------------------------------------------

    def water_level(self, available: float) -> float:
        """The FAIR_SHARE level per subclient for ``available`` (``math.inf`` if all fit).

        Postcondition: each entry's share is ``min(w, level * s)`` and, when the wants
        exceed ``available``, those shares add up to ``available`` within rounding.
        Equivalent to ``algorithms.fair_band``'s loop, with the first entry it cannot
        serve found by bisection over prefix sums: entry j (in key order) is served iff
        ``w_j * (S - S_<j) <= s_j * (available - W_<j)``, which holds for a prefix of the
        order and fails after it. The blocks are bisected by a descent of the Fenwick
        tree, then the entries of one block. O(log n) Python steps + O(load) in C.
        """
        memo = self._memo_level
        if memo is not None and memo[0] == available:
            return memo[1]
        if self._stale:
            self._rebuild()
        level = self._water_level(available)
        self._memo_level = (available, level)
        return level

    def _water_level(self, available: float) -> float:
        total_s = self._total_s
        if self._total_w <= available:
            return math.inf
        firsts = self._firsts
        # Does block 0's first entry fail? Then nobody is served in full.
        if firsts[0][0] * total_s > available:
            return available / total_s
        # Descend to the last block whose first entry is served: pos, with the sums of
        # the blocks before it. A node at pos + step holds blocks [pos, pos + step).
        tw, ts, n = self._tw, self._ts, len(firsts)
        pos, pw, ps = 0, 0.0, 0
        step = self._top
        self.steps += step.bit_length()
        while step:
            cand = pos + step
            if cand < n:
                cw = pw + tw[cand]
                cs = ps + ts[cand]
                if firsts[cand][0] * (total_s - cs) <= available - cw:
                    pos, pw, ps = cand, cw, cs
            step >>= 1
        # Bisect block pos for its first entry that fails.
        w, s = self._w[pos], self._s[pos]
        pre = self._pre.get(pos)
        if pre is None:
            pre = self._pre[pos] = (
                list(accumulate(w, initial=0.0)),
                list(accumulate(s, initial=0)),
            )
            self.steps += 2 * len(w)
        bw, bs = pre
        lo, hi = 0, len(w)
        self.steps += hi.bit_length()
        while lo < hi:
            mid = (lo + hi) // 2
            if w[mid] * (total_s - ps - bs[mid]) > s[mid] * (available - pw - bw[mid]):
                hi = mid
            else:
                lo = mid + 1
        rest = total_s - ps - bs[lo]
        if rest <= 0:
            return math.inf  # rounding only: every entry fit after all
        return max(available - pw - bw[lo], 0.0) / rest

    def proportional_terms(self, available: float) -> tuple[float, float, float] | None:
        """PROPORTIONAL_SHARE's ``(q, slack, excess)`` for ``available``; None if all fit.

        ``q = available / S``; ``slack`` is ``sum(q * s - w)`` over entries with
        ``w / s < q`` and ``excess = slack + W - available``, which equals
        ``sum(w - q * s)`` over the others and is > 0 whenever ``W > available``.
        O(log n) Python steps + O(load) in C.
        """
        memo = self._memo_terms
        if memo is not None and memo[0] == available:
            return memo[1]
        if self._stale:
            self._rebuild()
        terms = self._proportional_terms(available)
        self._memo_terms = (available, terms)
        return terms

    def _proportional_terms(self, available: float) -> tuple[float, float, float] | None:
        if self._total_w <= available:
            return None
        q = available / self._total_s
        probe = (q,)  # sorts before every key (q, id): counts the keys with w / s < q
        b = bisect_left(self._firsts, probe) - 1
        if b < 0:
            w_below, s_below = 0.0, 0
        else:
            w_below, s_below = self._prefix(b)
            i = bisect_left(self._blocks[b], probe)
            w_below += sum(self._w[b][:i])
            s_below += sum(self._s[b][:i])
            self.steps += i
        slack = max(q * s_below - w_below, 0.0)
        return q, slack, slack + (self._total_w - available)

    # --- checking -------------------------------------------------------------------

    def entries(self) -> list[tuple[float, int, str]]:
        """Every ``(wants, subclients, client_id)`` in key order. O(n)."""
        return [
            (w, s, key[1])
            for block, ws, ss in zip(self._blocks, self._w, self._s, strict=True)
            for key, w, s in zip(block, ws, ss, strict=True)
        ]

    def check(self) -> None:
        """Raise AssertionError unless the invariants in the module docstring hold. O(n)."""
        keys = [key for block in self._blocks for key in block]
        assert keys == sorted(keys), "keys out of order"
        assert len(keys) == self._len == len(set(keys)), "length or duplicates"
        assert len(self._firsts) == len(self._blocks) == len(self._bw) == len(self._bs)
        for b, block in enumerate(self._blocks):
            assert block, f"block {b} empty"
            assert len(block) <= 2 * self._load, f"block {b} has {len(block)} entries"
            assert self._firsts[b] == block[0]
            for key, w, s in zip(block, self._w[b], self._s[b], strict=True):
                assert key[0] == w / s
            if len(self._blocks) > 1:
                assert len(block) >= self._load // 2, f"block {b} has {len(block)} entries"
        if self._stale:
            return
        exact = [math.fsum(ws) for ws in self._w]
        for b in range(len(self._blocks)):
            assert math.isclose(self._bw[b], exact[b], abs_tol=1e-6)
            assert self._bs[b] == sum(self._s[b])
            pw, ps = self._prefix(b + 1)
            assert math.isclose(pw, math.fsum(exact[: b + 1]), abs_tol=1e-6)
            assert ps == sum(self._bs[: b + 1])
        assert math.isclose(self._total_w, math.fsum(exact), abs_tol=1e-6)
        assert self._total_s == sum(self._bs)
