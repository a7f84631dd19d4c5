"""allotctl stands apart from the server: importing it loads no coordinator module. It
reads the coordinator's answers with the structs the coordinator writes them with
(``shared.api``), through ``client.answers``: every example answer of the OpenAPI
document decodes, and a field a newer coordinator adds is ignored, even inside a struct
that the coordinator reads strictly as a request body."""

from __future__ import annotations

import copy
import importlib
import json
import pkgutil
import subprocess
import sys
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

import shared.api
from client.answers import AnswerDecoder
from coordinator.openapi.operations import OPERATIONS
from shared.api.containers import ContainerList, ContainerView
from shared.api.deployments import Deleted, DeploymentList, DeploymentSpec, DeploymentView
from shared.api.events import EventList
from shared.api.leases import ResourceList
from shared.api.node_admin import Cordoned, NodeDeleted
from shared.api.nodes import NodeList
from shared.codec import json_decoder

# The answers the coordinator builds as plain dicts, named by a schema of the document,
# and the struct a client reads each with.
NAMED: dict[str, type[msgspec.Struct]] = {
    "NodeList": NodeList,
    "NodeCordon": Cordoned,
    "NodeDrained": Cordoned,
    "NodeDeleted": NodeDeleted,
    "ResourceList": ResourceList,
    "DeploymentList": DeploymentList,
    "DeploymentDeleted": Deleted,
    "ContainerList": ContainerList,
    "ContainerDeleted": Deleted,
    "EventList": EventList,
}
API_MODULES = [
    importlib.import_module(module.name)
    for module in pkgutil.iter_modules(shared.api.__path__, shared.api.__name__ + ".")
]


def _of_shared_api(body: object) -> bool:
    return isinstance(body, type) and body.__module__.startswith(shared.api.__name__ + ".")


# Every example answer of the document that a struct of shared.api reads.
ANSWERS = [(operation, operation.response, operation.examples) for operation in OPERATIONS] + [
    (operation, answer.response, answer.examples)
    for operation in OPERATIONS
    for answer in operation.alternatives
]
READ = [
    (operation, response, name, example)
    for operation, response, examples in ANSWERS
    if response in NAMED or _of_shared_api(response)
    for name, example in examples.items()
]


def answer_for(response: object) -> type[msgspec.Struct]:
    if isinstance(response, str):
        return NAMED[response]
    assert isinstance(response, type)
    return response


def example_of(operation_id: str, name: str) -> Any:
    """A copy of the example ``name`` of the operation ``operation_id``, as plain JSON."""
    (operation,) = [operation for operation in OPERATIONS if operation.id == operation_id]
    return copy.deepcopy(operation.examples[name])


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
    [(response, example) for _, response, _, example in READ],
    ids=[f"{operation.id}:{name}" for operation, _, name, _ in READ],
)
def test_every_example_answer_of_the_document_decodes(response: object, example: object) -> None:
    AnswerDecoder(answer_for(response)).decode(json.dumps(example).encode())


def test_every_struct_of_shared_api_is_a_body_of_the_document_or_within_one() -> None:
    bodies = {answer_for(response) for _, response, _, _ in READ} | {
        operation.request for operation in OPERATIONS if _of_shared_api(operation.request)
    }
    within = {found for body in bodies for found in _structs_within(mi.type_info(body))}
    # A struct an answer extends (a node's stored record, in NodeView) is in it too.
    within |= {base for found in within for base in found.__mro__}
    defined = {
        value
        for module in API_MODULES
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, msgspec.Struct)
        and value.__module__ == module.__name__
    }
    assert defined - within == set()


# Where a newer coordinator might add a field: (the object's path, whether the
# coordinator reads that struct strictly as a request body).
DEPLOYMENT_PLACES = [
    ((), False),
    (("deployment",), False),
    (("deployment", "spec"), True),
    (("deployment", "spec", "resources"), True),
    (("containers", 0, "record"), False),
    (("containers", 0, "record", "limits"), False),
]


@pytest.mark.parametrize(
    ("path", "strict"), DEPLOYMENT_PLACES, ids=["/".join(map(str, p)) for p, _ in DEPLOYMENT_PLACES]
)
def test_a_field_a_newer_coordinator_adds_to_a_deployment_is_ignored(
    path: tuple[str | int, ...], strict: bool
) -> None:
    answer = example_of("getDeployment", "two containers")
    expected = AnswerDecoder(DeploymentView).decode(json.dumps(answer).encode())
    _at(answer, path)["added_later"] = {"by": "a newer coordinator"}
    body = json.dumps(answer).encode()
    assert AnswerDecoder(DeploymentView).decode(body) == expected
    if strict:  # the plain decoder, as the coordinator reads the body, refuses it
        with pytest.raises(msgspec.ValidationError, match="unknown field `added_later`"):
            json_decoder(DeploymentView).decode(body)


@pytest.mark.parametrize("path", [("templates", 0), ("templates", 0, "algorithm")])
def test_a_field_a_newer_coordinator_adds_to_a_resource_template_is_ignored(
    path: tuple[str | int, ...],
) -> None:
    answer = example_of("listResources", "one of each")
    expected = AnswerDecoder(ResourceList).decode(json.dumps(answer).encode())
    _at(answer, path)["added_later"] = [1, 2]
    assert AnswerDecoder(ResourceList).decode(json.dumps(answer).encode()) == expected


def test_a_field_added_to_the_observed_state_or_the_list_is_ignored() -> None:
    container = example_of("getContainer", "running")
    expected = ContainerList([AnswerDecoder(ContainerView).decode(json.dumps(container).encode())])
    container["observed"]["added_later"] = "x"
    answer = {"containers": [container], "added_later": 1}
    assert AnswerDecoder(ContainerList).decode(json.dumps(answer).encode()) == expected


def test_maps_keep_every_key_and_values_are_still_checked() -> None:
    body = {"node": "node-b", "cordoned": True, "stand_ins": {"c1": "c3", "added": "c2"}}
    decoded = AnswerDecoder(Cordoned).decode(json.dumps(body).encode())
    assert decoded == Cordoned("node-b", True, stand_ins={"c1": "c3", "added": "c2"})
    with pytest.raises(msgspec.ValidationError, match="stand_ins"):
        AnswerDecoder(Cordoned).decode(json.dumps({**body, "stand_ins": {"c1": 3}}).encode())
    spec = example_of("createDeployment", "two containers placed")["deployment"]["spec"]
    with pytest.raises(msgspec.ValidationError, match="strategy"):
        AnswerDecoder(DeploymentSpec).decode(json.dumps({**spec, "strategy": "spread"}).encode())


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


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
