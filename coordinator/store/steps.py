"""A commit with more writes than etcd takes in one transaction, made in fenced steps.

etcd refuses a transaction with more operations than its ``--max-txn-ops`` (128 by
default); a drain of a node holding thousands of containers writes several keys for each.
``FencedStore`` commits such a transaction in steps, pages of ``split``:

    pages = split(txn, most=128)          # [deletes..., then puts...], none over 128
    journal = encoded(txn)                # what a leader needs to finish it

1. The journal step: the transaction's compares, the fence, and one put,
   ``/coordinators/journal/<won_at>-<n>``, holding every write. A compare that fails
   refuses the commit as a whole and nothing is written, as for any commit. Once this
   step commits, the decision is taken: it will be finished, by this leader or the next.
2. The write steps: the pages in order, each fenced, each compared on the journal's
   revision; the last one also deletes the journal. The deletes come first, then the
   puts in the transaction's own order (the sequencer's: each node's allocation header,
   then its allocations, then the records). A state between two steps holds some of
   the old allocations and some of the new, never an allocation of each on the same
   core: it may charge a node less than what runs there, and no decision is taken on
   it (the leader decides again only once the last step is in; the next leader only
   once it finished the journal). A standby follows the steps as they come.
3. A leader that dies or is deposed between steps leaves the journal; the next leader
   finishes it before it serves (``finish``): it writes the whole journal again, in
   pages, then deletes it. Writing again is harmless: a put of the same value and a
   delete of a gone key leave the same state, and nothing else wrote those keys
   meanwhile (the journal's compares held, later steps of the old leader are refused
   by the fence, and the new leader serves nothing until it finished).

A reader between two steps (a standby following the watch) sees the decision part-made,
in the order above; a new leader's state is read after ``finish``, so it equals a fresh
load of the store. On SQLite, which has no such limit, every commit is one step.
"""

from __future__ import annotations

import msgspec

from coordinator.store import Txn

JOURNALS = "/coordinators/journal/"


class Journal(msgspec.Struct, frozen=True):
    """Every write of a commit made in steps."""

    puts: dict[str, bytes]
    deletes: list[str]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Journal)


def operations(txn: Txn) -> int:
    return len(txn.puts) + len(txn.deletes)


def split(txn: Txn, *, most: int) -> list[Txn]:
    """The writes of ``txn`` (not its compares) as pages of at most ``most`` operations,
    its deletes, then its puts, each in ``txn``'s order: at least one page, equivalent to
    ``txn``'s writes when applied in order. O(writes)."""
    if most < 1:
        raise ValueError(f"a step holds at least one operation, got {most}")
    writes: list[tuple[str, bytes | None]] = [(key, None) for key in txn.deletes]
    writes += txn.puts.items()
    pages: list[Txn] = []
    for start in range(0, len(writes), most):
        page = writes[start : start + most]
        puts = {key: value for key, value in page if value is not None}
        deletes = tuple(key for key, value in page if value is None)
        pages.append(Txn(puts=puts, deletes=deletes, lease=txn.lease))
    return pages or [Txn(lease=txn.lease)]


def encoded(txn: Txn) -> bytes:
    return _encoder.encode(Journal(dict(txn.puts), list(txn.deletes)))


def decoded(value: bytes) -> Txn:
    """The writes a journal holds, as one transaction without compares."""
    journal = _decoder.decode(value)
    return Txn(puts=journal.puts, deletes=tuple(journal.deletes))
