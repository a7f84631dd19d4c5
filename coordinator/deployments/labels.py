"""Quota labels (in-quota / over-quota) on containers, kept current by each decision.

A quota's labels depend only on its own namespaces' containers, so a decision relabels
the quotas of the namespaces it touched (``Draft.dirty``), over those namespaces'
containers (an index lookup); a namespace no quota governs only has its changed
containers checked, since its others were unlabelled when they were committed. A quota
written by an administrator relabels everything (``relabel_everything``).
"""

from __future__ import annotations

import msgspec

from coordinator.deployments.draft import Draft
from coordinator.deployments.translate import note_for, quota_container
from coordinator.quotas import label_containers
from shared.api.containers import ContainerRecord, HistoryEntry


def relabel(draft: Draft) -> None:
    """Give the containers of ``draft.dirty``'s namespaces the labels their quotas give
    them once the draft is applied; a label that moved is written (and is an event when
    the container had one before). Clears ``draft.dirty``."""
    if not draft.dirty:
        return
    dirty, draft.dirty = draft.dirty, set()
    quotas = draft.context.quotas
    share_base = draft.context.share_base
    governing = {ns: q for q in reversed(draft.quotas()) for ns in q.namespaces}
    labels: dict[str, str] = {}
    done: set[str] = set()
    for namespace in sorted(dirty):
        quota = governing.get(namespace)
        if quota is None or quota.name in done:
            continue
        done.add(quota.name)
        members = [quota_container(c) for c in draft.of_namespaces(quota.namespaces)]
        labels |= label_containers(quota, members, quotas.gb_per_gpu, share_base=share_base)
    governed = {ns for ns in dirty if ns in governing}
    relabelled = {ns for ns, quota in governing.items() if quota.name in done}
    checked = draft.of_namespaces(relabelled) if relabelled else []
    checked += [
        record
        for record in list(draft.change.containers.values())
        if record.namespace in dirty - governed and not (record.replaced_by or record.stopping)
    ]
    _write_labels(draft, checked, labels)


def relabel_everything(draft: Draft) -> None:
    """After a quota was written: every namespace's containers."""
    draft.dirty |= set(draft.books.namespaces())
    draft.dirty |= {r.namespace for r in draft.change.containers.values()}
    relabel(draft)
    # Namespaces no quota governs now may hold labels from one deleted since.
    governed = {ns for q in draft.quotas() for ns in q.namespaces}
    ungoverned = set(draft.books.namespaces()) - governed
    labelled = [record for record in draft.of_namespaces(ungoverned) if record.capacity]
    _write_labels(draft, labelled, {})


def _write_labels(draft: Draft, records: list[ContainerRecord], labels: dict[str, str]) -> None:
    now = draft.context.clock()
    for record in records:
        label = labels.get(f"{record.namespace}/{record.id}", "")
        if label == record.capacity:
            continue
        history = record.history
        if record.capacity:
            entry = HistoryEntry(at=now, event="relabelled", detail=label or "unmanaged")
            history = [*history, entry]
            moved = f"{record.capacity} -> {label or 'unmanaged'}"
            draft.note(note_for("relabelled", moved, record))
        draft.change.containers[record.id] = msgspec.structs.replace(
            record, capacity=label, history=history
        )
