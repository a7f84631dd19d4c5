"""``allotctl apply -f FILE``: make the cluster hold what a YAML file describes.

    kind: ElasticQuota          # or CompositeElasticQuota, Pool, ResourceTemplate,
    name: team-a                #    Deployment (which also needs namespace: NS)
    namespace: team-a           # the rest: the fields of the API body
    min: {cpu: 2}
    ---
    kind: Pool
    ...

Every document is checked (a mapping, a known kind, a name) before anything is written;
a bad one is refused naming its index and field. Then each is read back from the API
(GET) and written only when it differs, so each answers ``created``, ``configured`` or
``unchanged``, and applying the same file again writes nothing. Amounts are compared
by value ("500m" is "0.5"; ``allotctl.same_amounts``).

A Deployment that exists and differs only in ``count`` is scaled; a document without
``count`` leaves the count as it is. One that differs in anything else is refused: the
API changes a deployment's containers one by one (``allotctl replace``, ``realloc``), not
its spec, so apply says to delete it and apply again rather than guess which was meant.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import yaml

from allotctl.bodies import COMPOSITE, ELASTIC, pool_path, quota_path, template_path
from allotctl.deployments import deployments_path
from allotctl.same_amounts import same_amount, same_amounts
from client.answers import AnswerDecoder
from client.api import ApiClient, ApiClientError
from shared.api.deployments import DeploymentSpec, DeploymentView
from shared.api.leases import ResourceTemplate

DEPLOYMENT = "Deployment"
POOL = "Pool"
TEMPLATE = "ResourceTemplate"
KINDS = (DEPLOYMENT, ELASTIC, COMPOSITE, POOL, TEMPLATE)
CREATED, CONFIGURED, UNCHANGED = "created", "configured", "unchanged"
QUOTA_FIELDS = {ELASTIC: {"namespace", "min", "max"}, COMPOSITE: {"namespaces", "min", "max"}}

_template = AnswerDecoder(ResourceTemplate)
_deployment = AnswerDecoder(DeploymentView)


@dataclass(frozen=True, kw_only=True)
class Document:
    index: int  # its place in the file, from 1
    kind: str
    name: str
    namespace: str = ""  # a Deployment's
    body: dict[str, Any]  # the API body: the document less kind, name and namespace

    @property
    def label(self) -> str:
        """``Pool batch``, ``Deployment team-a/web``."""
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else f"{self.kind} {self.name}"
        )


class Stopped(Exception):
    """A document the API refused: those before it were applied (``done``), those after
    it were not tried."""

    def __init__(self, message: str, done: list[str]) -> None:
        super().__init__(message)
        self.done = done


def read_documents(text: str, source: str) -> list[Document]:
    """The documents of a YAML stream; ``ValueError`` naming ``source``, the document's
    index and the field, for the first that is not one. Empty documents are skipped."""
    try:
        raw = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise ValueError(f"{source}: not YAML: {error}") from None
    documents = [_document(i, item, source) for i, item in enumerate(raw, 1) if item is not None]
    if not documents:
        raise ValueError(f"{source}: no documents")
    return documents


def _document(index: int, raw: object, source: str) -> Document:
    where = f"{source}: document {index}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a mapping with kind and name, not {raw!r:.40}")
    body = dict(raw)
    kind = body.pop("kind", None)
    if kind not in KINDS:
        said = "is missing" if kind is None else f"{kind!r} is not one of"
        raise ValueError(f"{where}: kind {said} {', '.join(KINDS)}")
    name = _text(body.pop("name", None), where, "name")
    namespace = _text(body.pop("namespace", None), where, "namespace") if kind == DEPLOYMENT else ""
    return Document(index=index, kind=kind, name=name, namespace=namespace, body=body)


def _text(value: object, where: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {field} is missing (a non-empty string)")
    return value


def apply_all(client: ApiClient, documents: list[Document]) -> list[str]:
    """Each document applied in turn: "Pool batch created", ... (``Stopped`` at the first
    the API refuses)."""
    done: list[str] = []
    for document in documents:
        try:
            result = _APPLIERS[document.kind](client, document)
        except (ApiClientError, ValueError) as error:
            message = f"document {document.index} ({document.label}): {error}"
            raise Stopped(message, done) from None
        done.append(f"{document.label} {result}")
    return done


def _stored(client: ApiClient, path: str) -> bytes | None:
    """What the API holds at ``path``; None when it answers 404."""
    try:
        return client.get(path)
    except ApiClientError as error:
        if error.status == 404:
            return None
        raise


def _put_unless_same(
    client: ApiClient, path: str, body: object, same: Callable[[bytes], bool]
) -> str:
    stored = _stored(client, path)
    if stored is not None and same(stored):
        return UNCHANGED
    client.put(path, body)
    return CREATED if stored is None else CONFIGURED


def _quota(client: ApiClient, document: Document) -> str:
    body = document.body

    def same(stored: bytes) -> bool:
        quota = json.loads(stored)
        namespaces = body.get("namespaces", [body.get("namespace")])
        max_, stored_max = body.get("max"), quota["max"]
        return (
            set(body) <= QUOTA_FIELDS[document.kind]
            and quota["namespaces"] == namespaces
            and same_amounts(body.get("min") or {}, quota["min"])
            and (max_ is None) == (stored_max is None)
            and (max_ is None or same_amounts(max_, stored_max))
        )

    return _put_unless_same(client, quota_path(document.kind, document.name), body, same)


def _pool(client: ApiClient, document: Document) -> str:
    def same(stored: bytes) -> bool:
        return bool(json.loads(stored)["config"] == document.body)

    return _put_unless_same(client, pool_path(document.name), document.body, same)


def _template_of(document: Document) -> ResourceTemplate | None:
    """The template the document describes; None when it is not one (the API says why)."""
    try:
        return msgspec.convert(
            {"identifier_glob": document.name, **document.body}, ResourceTemplate
        )
    except msgspec.ValidationError:
        return None


def _resource_template(client: ApiClient, document: Document) -> str:
    mine = _template_of(document)

    def same(stored: bytes) -> bool:
        return mine is not None and _template.decode(stored) == mine

    return _put_unless_same(client, template_path(document.name), document.body, same)


def _deployment_apply(client: ApiClient, document: Document) -> str:
    spec = {"name": document.name, **document.body}
    stored = _stored(client, deployments_path(document.namespace, document.name))
    if stored is None:
        client.post(deployments_path(document.namespace), spec)
        return CREATED
    try:
        mine = msgspec.convert(spec, DeploymentSpec)
    except msgspec.ValidationError as error:
        raise ValueError(f"invalid deployment: {error}") from None
    theirs = _deployment.decode(stored).deployment.spec
    if differing := spec_differences(mine, theirs):
        raise ValueError(
            f"it exists with another {', '.join(differing)}; apply changes only a deployment's"
            f" count: delete it (allotctl delete deployment {document.namespace}"
            f" {document.name}) and apply again"
        )
    if "count" not in document.body or mine.count == theirs.count:
        return UNCHANGED
    client.post(
        deployments_path(document.namespace, document.name) + "/scale", {"count": mine.count}
    )
    return f"{CONFIGURED} (count {theirs.count} -> {mine.count})"


def spec_differences(mine: DeploymentSpec, theirs: DeploymentSpec) -> list[str]:
    """The fields other than ``count`` in which two specs differ (amounts by value)."""
    differing = [
        field
        for field in mine.__struct_fields__
        if field not in ("count", "resources") and getattr(mine, field) != getattr(theirs, field)
    ]
    ours, stored = msgspec.to_builtins(mine.resources), msgspec.to_builtins(theirs.resources)
    differing += [
        f"resources.{field}"
        for field in sorted(ours.keys() | stored.keys())
        if not same_amount(field, ours.get(field), stored.get(field))
    ]
    return differing


_APPLIERS: dict[str, Callable[[ApiClient, Document], str]] = {
    DEPLOYMENT: _deployment_apply,
    ELASTIC: _quota,
    COMPOSITE: _quota,
    POOL: _pool,
    TEMPLATE: _resource_template,
}
