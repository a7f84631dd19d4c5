"""A coordinator's refusal said in the terms of the command line that caused it.

    in_user_terms(error, server, {"$.resources.cpu": "--cpu", "cpu_request": "--cpu"})
      "Object missing required field `cpu` - at `$.resources`"  ->  "--cpu is required"
      "cpu_request = 'x': is not cores, like ..."    ->  "--cpu 'x': is not cores, like ..."
      401     ->  "the coordinator at URL did not accept the API token (from --token ...)"

The API names what it refuses by where it is in the request body (a JSON path, from the
body's decoder) or by the coordinator's own field (``cpu_request``, from the checks of a
quantity). Each command maps those names to its flags (``FlagNames``); a refusal that
names something the command has no flag for is shown as the API says it, with its numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from client.api import ApiClientError, describe_details
from shared.resource_names import RFC1123_LABEL_PATTERN

FlagNames = Mapping[str, str]  # a JSON path ("$.resources.cpu") or field ("cpu_request") -> flag

# "invalid deployment: Expected `int` <= 1000 - at `$.count`", as ``read_body`` and
# msgspec put it; a problem at the body's top level has no path.
_BODY_PROBLEM = re.compile(r"invalid [^:]+: (?P<problem>.+?)(?: - at `(?P<path>\$[^`]*)`)?")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")
# What msgspec says of a value out of its bounds or of a pattern, and the same in words.
_RULES = (
    (re.compile(r"Expected `\w+` <= (?P<bound>-?\d+)"), "must be at most {bound}"),
    (re.compile(r"Expected `\w+` >= (?P<bound>-?\d+)"), "must be at least {bound}"),
    (re.compile(r"Expected `int`, got `\w+`"), "must be a whole number"),
    (
        re.compile(r"Expected `str` matching regex " + re.escape(repr(RFC1123_LABEL_PATTERN))),
        "is not a name: lowercase letters, digits and '-',"
        " beginning and ending with a letter or digit",
    ),
)
# "pool 'p': field 'weight' = -1: must be ...", as the pool checks put a field's refusal.
_FIELD_REFUSED = re.compile(r".*?field '(?P<field>[^']+)' = (?P<rest>.+)", re.DOTALL)


def in_user_terms(
    error: ApiClientError,
    server: str,
    flags: FlagNames,
    token_source: str = "--token or ALLOT_TOKEN",
) -> str:
    """What to print for ``error``: a refused token as such, with where it came from, a
    refusal of what a flag gave in the flag's name, anything else as the API said it
    (``str(error)``)."""
    if error.status == 401:
        return f"the coordinator at {server} did not accept the API token (from {token_source})"
    return _flag_refused(error, flags) or _item_refused(error, flags) or str(error)


def _flag_refused(error: ApiClientError, flags: FlagNames) -> str | None:
    field = error.details.get("field")
    if isinstance(field, str) and field in flags and error.message.startswith(f"{field} = "):
        # "cpu_request = 'x': rule": the details restate the message, in the API's names.
        return flags[field] + " " + error.message.removeprefix(f"{field} = ")
    named = _FIELD_REFUSED.fullmatch(error.message)
    if named and isinstance(field, str) and named["field"] == field and field in flags:
        return f"{flags[field]} {named['rest']}"
    found = _BODY_PROBLEM.fullmatch(error.message)
    if found is None:
        return None
    path, problem = found["path"] or "$", found["problem"]
    if missing := _MISSING.fullmatch(problem):
        path, said = f"{path}.{missing['field']}", "is required"
    else:
        said = _in_words(problem)
    if path not in flags:
        return None
    return f"{flags[path]} {said}" + _details(error)


def _item_refused(error: ApiClientError, flags: FlagNames) -> str | None:
    """A quota's refused quantities, listed in its details' items by "min.cpu": each as
    the flag and pair that gave it, ``--min cpu='x': is not cores, ...``."""
    items = error.details.get("items")
    if not isinstance(items, list):
        return None
    said = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("field"), str):
            return None
        bound, _, resource = item["field"].partition(".")
        if bound not in flags or not resource:
            return None
        said.append(f"{flags[bound]} {resource}={item.get('value')!r}: {item.get('reason')}")
    return "\n".join(said) or None


def _in_words(problem: str) -> str:
    for pattern, words in _RULES:
        if found := pattern.fullmatch(problem):
            return words.format(**found.groupdict())
    return "is refused: " + problem.replace("`", "")


def _details(error: ApiClientError) -> str:
    return "\n" + describe_details(error.details) if error.details else ""
