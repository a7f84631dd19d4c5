"""What the Docker engine takes for a container's fixed fields: image, command, env and
labels. The coordinator refuses a request that breaks these rules when it arrives, so
that no container is accepted that its agent would refuse or fail to create forever.

    image_problem("busybox:1.36")            -> None
    image_problem("Not An Image!")           -> "is not an image reference like ..."
    label_problem("allot.id")                -> "is reserved for allot (labels allot.*)"
    container_problems(image, command, env, labels)   -> every problem, each naming its field

The image rule is Docker's reference grammar: ``[host[:port]/]path[:tag][@digest]``, the
path of lower-case components separated by ``/`` (each letters and digits joined by
``.``, ``_``, ``__`` or dashes), a tag of at most 128 word characters, dots and dashes,
a digest ``algorithm:hex``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

RESERVED_LABEL_PREFIX = "allot."  # the agent's own labels: allot.id, allot.node, ...
MAX_IMAGE_LENGTH = 512

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_HOST = rf"{_HOST_PART}(?:\.{_HOST_PART})*(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"
_REFERENCE = re.compile(
    rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    rf"(?::{_TAG})?(?:@{_DIGEST})?"
)


def image_problem(image: str) -> str | None:
    """Why ``image`` is not an image reference Docker takes, or None. O(len(image))."""
    if not image or len(image) > MAX_IMAGE_LENGTH:
        return f"must have 1 to {MAX_IMAGE_LENGTH} characters"
    if _REFERENCE.fullmatch(image) is None:
        return (
            "is not an image reference like 'busybox', 'busybox:1.36' or"
            " 'registry.example:5000/team/app:v2' (lower-case path, optional tag and digest)"
        )
    return None


def label_problem(key: str) -> str | None:
    """Why ``key`` cannot be a label the user sets, or None."""
    if not key:
        return "must not be empty"
    if key.startswith(RESERVED_LABEL_PREFIX):
        return f"is reserved for allot (labels {RESERVED_LABEL_PREFIX}*)"
    return None


def env_problem(key: str) -> str | None:
    """Why ``key`` cannot be an environment variable's name, or None."""
    if not key:
        return "must not be empty"
    if "=" in key:
        return "must not contain '='"
    return None


def container_problems(
    image: str | None,
    command: Sequence[str],
    env: Mapping[str, str],
    labels: Mapping[str, str],
) -> list[str]:
    """Every rule the fields break, each as ``"<field> <value>: <rule>"``; [] when Docker
    takes them. ``image`` None: not given (kept from elsewhere). No text may hold a NUL
    character, which the engine's API cannot carry."""
    problems: list[str] = []
    if image is not None:
        problem = image_problem(image)
        if problem:
            problems.append(f"image {image[:MAX_IMAGE_LENGTH]!r} {problem}")
    texts = [
        *((f"command[{i}]", arg) for i, arg in enumerate(command)),
        *((f"env {key!r}", f"{key}{value}") for key, value in env.items()),
        *((f"label {key!r}", f"{key}{value}") for key, value in labels.items()),
    ]
    problems += [f"{where}: must not contain a NUL character" for where, t in texts if "\0" in t]
    for key in env:
        problem = env_problem(key)
        if problem:
            problems.append(f"env {key!r}: the name {problem}")
    for key in labels:
        problem = label_problem(key)
        if problem:
            problems.append(f"label {key!r} {problem}")
    return problems
