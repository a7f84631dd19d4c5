"""Quotas written by an administrator, as decisions: checked against every quota as the
decisions before left them, committed together with the labels they move."""

from __future__ import annotations

from coordinator.deployments.draft import Draft
from coordinator.deployments.labels import relabel_everything
from coordinator.quotas import Quota, canonical_quota, validate_quotas


def put_quota(draft: Draft, quota: Quota) -> Quota:
    """Create or replace ``quota``; ``QuotaError`` (nothing changed) if it breaks a rule
    with the others (``validate_quotas``, the one being written last)."""
    stored = canonical_quota(quota, share_base=draft.context.share_base)
    validate_quotas([*draft.quotas(), stored], share_base=draft.context.share_base)
    draft.change.quotas[stored.name] = stored
    relabel_everything(draft)
    return stored


def delete_quota(draft: Draft, kind: str, name: str) -> bool:
    """Remove the quota; its containers keep running, unmanaged (quotas spec 2). False
    when there is no such quota (deleted by a decision before)."""
    if not any(q.name == name and q.kind == kind for q in draft.quotas()):
        return False
    draft.change.quotas[name] = None
    relabel_everything(draft)
    return True
