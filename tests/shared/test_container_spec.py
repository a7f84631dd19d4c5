"""shared.container_spec: what the Docker engine takes for a container's fixed fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.container_spec import container_problems, image_problem, label_problem

TAKEN = [
    "busybox",
    "busybox:1.36",
    "allot/busybox:test",
    "registry.example:5000/team/app:v2",
    "localhost/a_b__c--d.e:latest",
    "Registry.Example/app",
    "busybox@sha256:" + "0123456789abcdef" * 4,
    "app:v1@sha256:" + "a" * 64,
    "sha256:" + "f" * 64,
]
REFUSED = [
    "",
    "Not An Image!",
    "UPPER",
    "a//b",
    ":tag",
    "a:",
    "-a",
    "a_",
    "a___b",
    "app:" + "x" * 129,
    "app@sha256:abc",
    "x" * 513,
]


@pytest.mark.parametrize("image", TAKEN)
def test_references_docker_takes(image: str) -> None:
    assert image_problem(image) is None


@pytest.mark.parametrize("image", REFUSED)
def test_references_docker_refuses(image: str) -> None:
    assert image_problem(image) is not None


@given(st.text(max_size=600))
def test_any_text_gets_an_answer_quickly(image: str) -> None:
    problem = image_problem(image)
    assert problem is None or problem.startswith(("is not", "must have"))


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("allot.id", "is reserved for allot (labels allot.*)"),
        ("allot.x", "is reserved for allot (labels allot.*)"),
        ("", "must not be empty"),
        ("allotment", None),
        ("com.example.team", None),
    ],
)
def test_label_keys(key: str, problem: str | None) -> None:
    assert label_problem(key) == problem


def test_container_problems_name_every_field() -> None:
    problems = container_problems(
        "Bad Image",
        ["sleep", "1\0"],
        {"A=B": "x", "": "y", "OK": "\0"},
        {"allot.id": "mine", "fine": "value"},
    )
    assert problems == [
        "image 'Bad Image' is not an image reference like 'busybox', 'busybox:1.36' or"
        " 'registry.example:5000/team/app:v2' (lower-case path, optional tag and digest)",
        "command[1]: must not contain a NUL character",
        "env 'OK': must not contain a NUL character",
        "env 'A=B': the name must not contain '='",
        "env '': the name must not be empty",
        "label 'allot.id' is reserved for allot (labels allot.*)",
    ]


def test_a_container_docker_takes_has_no_problems() -> None:
    assert container_problems("busybox", ["sh", "-c", "x=1"], {"A": "b=c"}, {"k": ""}) == []
    assert container_problems(None, [], {}, {}) == []
