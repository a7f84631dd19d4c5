"""``GET /v1/openapi.json``: an OpenAPI 3.1 document of the coordinator's HTTP API.

The document is built once, on first use, from the table in ``operations``.
Struct bodies get their JSON Schema from msgspec (``schema_components``); the plain
dicts handlers build have schemas written in ``schemas``; every error answer
shares one ``Error`` schema through ``components/responses``.

tests/coordinator/test_openapi.py keeps the document honest: it lists exactly the routes
``make_app`` registers, and every example validates against its schema.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections.abc import Mapping
from typing import Any

import msgspec
from aiohttp import web

from coordinator.openapi.examples import ERRORS, MORE_ERRORS
from coordinator.openapi.operations import (
    ERROR_RESPONSES,
    OPENAPI_PATH,
    OPERATIONS,
    REFERENCED,
    TAGS,
    WHO,
    Body,
    Operation,
    Param,
    Who,
)
from coordinator.openapi.schemas import REFINED, SCHEMAS, STRING, Schema, ref
from shared.codec import to_json
from shared.cpuset import CpuSet
from shared.protocol import SUBPROTOCOL

REF_TEMPLATE = "#/components/schemas/{name}"


def add_openapi_routes(app: web.Application) -> None:
    app.router.add_get(OPENAPI_PATH, openapi_json)


async def openapi_json(request: web.Request) -> web.Response:
    return web.Response(body=_encoded(), content_type="application/json")


@functools.cache
def _encoded() -> bytes:
    return to_json(openapi_document())


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The document, built on the first call. It is shared: read it, do not change it."""
    schemas, refs = _schemas()
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, refs)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "allot coordinator API",
            "version": importlib.metadata.version("allot"),
            "description": (
                "The coordinator's HTTP API. Bodies are JSON; every error answers"
                ' {"error": {"code", "message", "details"}}. Send an API token as'
                " 'Authorization: Bearer <token>': an admin token may do everything; a"
                " namespace token acts only in its namespaces and may not change cluster"
                " configuration (quotas, pools, resource templates)."
            ),
        },
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "security": [{"apiToken": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": _error_responses(),
            "securitySchemes": {
                "apiToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An admin token (api_tokens) or a namespace token.",
                },
                "joinToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The join token agents present on /v1/agent.",
                },
            },
        },
    }
    _check_refs(document, document)
    # A JSON round trip: the caller gets exactly what is served, sharing nothing with the
    # tables it came from.
    built: dict[str, Any] = msgspec.json.decode(to_json(document))
    return built


def resolve(document: Mapping[str, Any], pointer: str) -> Any:
    """What a local ``$ref`` such as ``#/components/schemas/Error`` points at."""
    if not pointer.startswith("#/"):
        raise KeyError(f"not a local reference: {pointer}")
    found: Any = document
    for part in pointer[2:].split("/"):
        found = found[part.replace("~1", "/").replace("~0", "~")]
    return found


def _schemas() -> tuple[dict[str, Schema], dict[type[Any], Schema]]:
    """Every component schema by name, and the reference to each struct type's."""
    answers = [alt.response for op in OPERATIONS for alt in op.alternatives]
    bodies = [
        b for op in OPERATIONS for b in (op.request, op.response, *answers) if isinstance(b, type)
    ]
    types = list(dict.fromkeys([*bodies, *REFERENCED]))
    refs, generated = msgspec.json.schema_components(
        types, schema_hook=_schema_hook, ref_template=REF_TEMPLATE
    )
    clash = generated.keys() & SCHEMAS.keys()
    if clash:
        raise RuntimeError(f"schemas both generated and hand-written: {sorted(clash)}")
    for (name, prop), schema in REFINED.items():
        properties = generated[name]["properties"]
        default = {"default": properties[prop]["default"]} if "default" in properties[prop] else {}
        properties[prop] = {**schema, **default}
    # PUT /v1/resources/{id} takes a template whose identifier_glob may be left to the path.
    template = generated["ResourceTemplate"]
    generated["ResourceTemplateBody"] = {
        **template,
        "title": "ResourceTemplateBody",
        "description": "A resource template; identifier_glob defaults to the path's.",
        "required": [field for field in template["required"] if field != "identifier_glob"],
    }
    return dict(sorted({**generated, **SCHEMAS}.items())), dict(zip(types, refs, strict=True))


def _schema_hook(type_: type[Any]) -> Schema:
    if type_ is CpuSet:
        return {
            "type": "string",
            "pattern": r"^(\d+(-\d+)?(,\d+(-\d+)?)*)?$",
            "description": 'a kernel CPU list such as "0-3,8"; "" for none',
        }
    raise NotImplementedError(f"no JSON Schema for {type_!r}")


def _operation(op: Operation, refs: Mapping[type[Any], Schema]) -> dict[str, Any]:
    named = re.findall(r"\{(\w+)\}", op.path)
    if named != [param.name for param in op.params]:
        raise RuntimeError(f"{op.method} {op.path}: describe the path parameters {named}")
    out: dict[str, Any] = {
        "operationId": op.id,
        "summary": op.summary,
        "description": f"{op.description} {WHO[op.who]}".strip(),
        "tags": [op.tag],
        "security": _security(op.who),
    }
    parameters = [_param(p, "path") for p in op.params] + [_param(p, "query") for p in op.query]
    if op.who == "join":
        parameters.append(
            {
                "name": "Sec-WebSocket-Protocol",
                "in": "header",
                "required": True,
                "description": f"must offer {SUBPROTOCOL}",
                "schema": dict(STRING),
                "example": SUBPROTOCOL,
            }
        )
    if parameters:
        out["parameters"] = parameters
    if op.request is not None:
        out["requestBody"] = {
            "required": True,
            "content": {"application/json": _media(op.request, op.request_examples, refs)},
        }
    success: dict[str, Any] = {"description": op.summary}
    if op.status == 101:
        success["description"] = "Switching Protocols: the websocket is open."
    if op.response is not None:
        success["content"] = {op.media: _media(op.response, op.examples, refs)}
    responses = {str(op.status): success}
    for alt in op.alternatives:
        content = {op.media: _media(alt.response, alt.examples, refs)}
        responses[str(alt.status)] = {"description": alt.description, "content": content}
    for status in sorted(op.errors):
        responses[str(status)] = {"$ref": f"#/components/responses/{ERROR_RESPONSES[status][0]}"}
    out["responses"] = responses
    return out


def _media(
    body: Body, examples: Mapping[str, object], refs: Mapping[type[Any], Schema]
) -> dict[str, Any]:
    schema = ref(body) if isinstance(body, str) else refs[body]
    return {"schema": schema, "examples": _examples(examples)}


def _security(who: Who) -> list[dict[str, list[str]]]:
    if who == "open":
        return []
    return [{"joinToken" if who == "join" else "apiToken": []}]


def _param(param: Param, where: str) -> dict[str, Any]:
    return {
        "name": param.name,
        "in": where,
        "required": where == "path",
        "description": param.description,
        "schema": param.schema,
    }


def _examples(named: Mapping[str, object]) -> dict[str, Any]:
    """OpenAPI example objects, keyed by a slug of what each shows."""
    return {
        re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"): {"summary": name, "value": value}
        for name, value in named.items()
    }


def _error_responses() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, (name, description) in ERROR_RESPONSES.items():
        response: dict[str, Any] = {
            "description": description,
            "content": {
                "application/json": {
                    "schema": ref("Error"),
                    "examples": _examples({name: ERRORS[status], **MORE_ERRORS.get(status, {})}),
                }
            },
        }
        if status == 401:
            response["headers"] = {
                "WWW-Authenticate": {"description": 'Bearer realm="allot"', "schema": STRING}
            }
        out[name] = response
    return out


def _check_refs(node: object, document: Mapping[str, Any]) -> None:
    """Raise ``KeyError`` if a ``$ref`` in ``node`` points nowhere in ``document``."""
    if isinstance(node, Mapping):
        target = node.get("$ref")
        if isinstance(target, str):
            resolve(document, target)
        for value in node.values():
            _check_refs(value, document)
    elif isinstance(node, list):
        for value in node:
            _check_refs(value, document)
