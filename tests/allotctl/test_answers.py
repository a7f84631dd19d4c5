"""allotctl stands apart from the server: importing it loads no coordinator module, and
the answers it decodes (``client.answers``) read what the coordinator writes: every
field is one the server's type has, every example of the OpenAPI document decodes, and
the words allotctl sends (strategies, filters) are the ones the API takes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, get_args

import msgspec
import msgspec.inspect as mi
import pytest

from allotctl import deployments
from client import answers
from coordinator.deployments.records import Strategy
from coordinator.events import Event
from coordinator.http import deployments as deployment_api
from coordinator.openapi.operations import OPERATIONS
from shared.codec import json_decoder, to_json

# The answers named by a schema of the document rather than by a struct.
NAMED: dict[str, type[msgspec.Struct]] = {
    "NodeList": answers.NodeList,
    "NodeCordon": answers.Cordoned,
    "NodeDrained": answers.Cordoned,
    "ResourceList": answers.ResourceList,
    "DeploymentList": answers.DeploymentList,
    "DeploymentDeleted": answers.Deleted,
    "ContainerList": answers.ContainerList,
    "ContainerDeleted": answers.Deleted,
    "EventList": answers.EventList,
}
# The server's structs that an answer of client.answers, of the same name, reads.
STRUCTS = sorted(
    {
        operation.response
        for operation in OPERATIONS
        if isinstance(operation.response, type) and hasattr(answers, operation.response.__name__)
    }
    | {Event},  # the items of the EventList schema
    key=lambda server: server.__name__,
)
# Every example answer of the document that allotctl reads.
READ = [
    (operation, name, example)
    for operation in OPERATIONS
    if operation.response in STRUCTS or operation.response in NAMED
    for name, example in operation.examples.items()
]


def answer_for(response: object) -> type[msgspec.Struct]:
    if isinstance(response, str):
        return NAMED[response]
    assert isinstance(response, type)
    found: type[msgspec.Struct] = getattr(answers, response.__name__)
    return found


def test_importing_allotctl_and_the_client_loads_no_coordinator_module() -> None:
    script = (
        "import importlib, pkgutil, sys\n"
        "import allotctl, client\n"
        "for package in (allotctl, client):\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'coordinator'))\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] in ('allotctl', 'client')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    server, loaded = result.stdout.splitlines()
    assert server == "[]"
    assert "'allotctl.main'" in loaded
    assert "'client.answers'" in loaded


@pytest.mark.parametrize(
    ("response", "example"),
    [(operation.response, example) for operation, _, example in READ],
    ids=[f"{operation.id}:{name}" for operation, name, _ in READ],
)
def test_every_example_answer_of_the_document_decodes(response: object, example: object) -> None:
    decoder: msgspec.json.Decoder[Any] = json_decoder(answer_for(response))
    decoder.decode(json.dumps(example).encode())


def test_every_answer_allotctl_reads_has_an_example_in_the_document() -> None:
    documented = {answer_for(operation.response) for operation, _, _ in READ}
    structs = {
        value
        for value in vars(answers).values()
        if isinstance(value, type)
        and issubclass(value, msgspec.Struct)
        and value.__module__ == answers.__name__
    }
    nested = {found for answer in documented for found in _structs_within(mi.type_info(answer))}
    assert structs - nested == set()


@pytest.mark.parametrize("server", STRUCTS, ids=[server.__name__ for server in STRUCTS])
def test_every_field_an_answer_reads_is_one_the_server_writes(server: type[Any]) -> None:
    problems = _unwritten(mi.type_info(answer_for(server)), mi.type_info(server), server.__name__)
    assert problems == []


def test_a_field_the_server_adds_is_ignored() -> None:
    body = to_json({"node": "node-b", "cordoned": True, "added_later": [1, 2]})
    assert json_decoder(answers.Cordoned).decode(body) == answers.Cordoned("node-b", True)


def test_the_words_allotctl_sends_are_those_the_api_takes() -> None:
    assert get_args(Strategy) == deployments.STRATEGIES
    assert deployments.CONTAINER_FILTERS == deployment_api.CONTAINER_FILTERS
    assert deployments.EVENT_FILTERS == deployment_api.EVENT_FILTERS


def _structs_within(found: mi.Type) -> set[type[Any]]:
    """Every struct type ``found`` is or holds, at any depth."""
    if isinstance(found, mi.StructType):
        inner = {s for field in found.fields for s in _structs_within(field.type)}
        return {found.cls} | inner
    if isinstance(found, mi.UnionType):
        return {s for member in found.types for s in _structs_within(member)}
    if isinstance(found, mi.ListType | mi.DictType):
        values = found.item_type if isinstance(found, mi.ListType) else found.value_type
        return _structs_within(values)
    return set()


def _unwritten(answer: mi.Type, server: mi.Type, where: str) -> list[str]:
    """The fields of ``answer``, at any depth, that ``server`` has no field for."""
    answer, server = _without_none(answer), _without_none(server)
    if isinstance(answer, mi.StructType):
        if not isinstance(server, mi.StructType):
            return [f"{where}: an object here, not on the server"]
        written = {field.encode_name: field.type for field in server.fields}
        problems: list[str] = []
        for field in answer.fields:
            name = f"{where}.{field.encode_name}"
            if field.encode_name not in written:
                problems.append(f"{name}: the server writes no such field")
            else:
                problems += _unwritten(field.type, written[field.encode_name], name)
        return problems
    if isinstance(answer, mi.ListType) and isinstance(server, mi.ListType):
        return _unwritten(answer.item_type, server.item_type, where + "[]")
    if isinstance(answer, mi.DictType) and isinstance(server, mi.DictType):
        return _unwritten(answer.value_type, server.value_type, where + "{}")
    return []


def _without_none(found: mi.Type) -> mi.Type:
    """``T | None`` as ``T``; other types as they are."""
    if isinstance(found, mi.UnionType):
        members = [member for member in found.types if not isinstance(member, mi.NoneType)]
        if len(members) == 1:
            return members[0]
    return found
