"""Resource templates: decoding, every validation rule by its code, matching, and the
tables built and reconfigured from them."""

from __future__ import annotations

import math
import tomllib
from typing import Any

import msgspec
import pytest

from coordinator.leases import (
    Algorithm,
    Kind,
    ResourceTemplate,
    TemplateError,
    apply_template,
    match_template,
    table_for,
    validate_templates,
)

T0 = 1_700_000_000.0

SPEC_EXAMPLE = """
[[resources]]
identifier_glob = "db.write"
capacity = 500
safe_capacity = 5
description = "primary database writes"
algorithm = { kind = "FAIR_SHARE", lease_length = 30, refresh_interval = 10 }

[[resources]]
identifier_glob = "batch.*"
capacity = 40
[resources.algorithm]
kind = "PROPORTIONAL_SHARE"
lease_length = 50
refresh_interval = 10
learning_mode_duration = 50

[[resources]]
identifier_glob = "*"
capacity = 200
algorithm = { kind = "FAIR_SHARE", lease_length = 40, refresh_interval = 10 }
"""


def template(glob: str = "db.write", **changes: Any) -> ResourceTemplate:
    algorithm: dict[str, Any] = {
        "kind": Kind.FAIR_SHARE,
        "lease_length": 30,
        "refresh_interval": 10,
    }
    algorithm |= changes.pop("algorithm", {})
    fields: dict[str, Any] = {"identifier_glob": glob, "capacity": 100.0} | changes
    return ResourceTemplate(algorithm=Algorithm(**algorithm), **fields)


def test_the_spec_example_decodes_and_validates() -> None:
    templates = msgspec.convert(tomllib.loads(SPEC_EXAMPLE)["resources"], list[ResourceTemplate])
    validate_templates(templates)
    db, batch, catch_all = templates
    assert db.algorithm.kind is Kind.FAIR_SHARE
    assert (db.capacity, db.safe_capacity, db.description) == (
        500.0,
        5.0,
        "primary database writes",
    )
    assert (db.learning_window, batch.learning_window, catch_all.learning_window) == (30, 50, 40)
    assert catch_all.safe_capacity is None


def test_the_same_fields_decode_from_json() -> None:
    body = (
        b'{"identifier_glob": "gpu.*", "capacity": 8, "safe_capacity": -1,'
        b' "algorithm": {"kind": "STATIC", "lease_length": 60, "refresh_interval": 15,'
        b' "learning_mode_duration": 0}}'
    )
    decoded = msgspec.json.decode(body, type=ResourceTemplate)
    assert decoded == template(
        "gpu.*",
        capacity=8.0,
        safe_capacity=-1.0,
        algorithm={
            "kind": Kind.STATIC,
            "lease_length": 60,
            "refresh_interval": 15,
            "learning_mode_duration": 0,
        },
    )
    assert decoded.learning_window == 0


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            b'{"identifier_glob": "a", "capacity": 1, "colour": 1, "algorithm": '
            b'{"kind": "STATIC", "lease_length": 1, "refresh_interval": 1}}',
            id="unknown-field",
        ),
        pytest.param(
            b'{"identifier_glob": "a", "capacity": 1, "algorithm": '
            b'{"kind": "ROUND_ROBIN", "lease_length": 1, "refresh_interval": 1}}',
            id="unknown-kind",
        ),
        pytest.param(
            b'{"identifier_glob": "a", "algorithm": '
            b'{"kind": "STATIC", "lease_length": 1, "refresh_interval": 1}}',
            id="no-capacity",
        ),
    ],
)
def test_decoding_rejects_what_does_not_fit_the_structure(body: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(body, type=ResourceTemplate)


# --- validation rules ----------------------------------------------------------------------

RULES: list[Any] = [
    pytest.param([template("")], "empty_glob", 0, id="empty-glob"),
    pytest.param(
        [template("a"), template("b"), template("a")], "duplicate_glob", 2, id="duplicate"
    ),
    pytest.param([template("*"), template("a")], "catch_all_not_last", 0, id="catch-all-first"),
    pytest.param([template(algorithm={"kind": "ROUND_ROBIN"})], "unknown_kind", 0, id="kind"),
    pytest.param([template(capacity=math.nan)], "not_finite", 0, id="nan-capacity"),
    pytest.param([template(capacity=math.inf)], "not_finite", 0, id="inf-capacity"),
    pytest.param([template(safe_capacity=math.inf)], "not_finite", 0, id="inf-safe"),
    pytest.param([template(algorithm={"lease_length": math.inf})], "not_finite", 0, id="inf-lease"),
    pytest.param(
        [template(algorithm={"learning_mode_duration": math.nan})], "not_finite", 0, id="nan-learn"
    ),
    pytest.param([template(capacity="5")], "not_a_number", 0, id="capacity-str"),
    pytest.param([template(capacity=-1.0)], "negative_capacity", 0, id="negative-capacity"),
    pytest.param([template(safe_capacity=-0.5)], "bad_safe_capacity", 0, id="safe-minus-half"),
    pytest.param([template(safe_capacity=-2.0)], "bad_safe_capacity", 0, id="safe-minus-two"),
    pytest.param(
        [template(algorithm={"refresh_interval": 0.5, "lease_length": 1})],
        "refresh_interval_too_short",
        0,
        id="refresh-below-1",
    ),
    pytest.param(
        [template(algorithm={"refresh_interval": 10, "lease_length": 9.5})],
        "lease_shorter_than_refresh",
        0,
        id="lease-shorter",
    ),
    pytest.param(
        [template(algorithm={"learning_mode_duration": -1})],
        "negative_learning_mode_duration",
        0,
        id="negative-learning",
    ),
    pytest.param(
        [template("ok"), template("bad", capacity=-3.0)], "negative_capacity", 1, id="second-bad"
    ),
]


@pytest.mark.parametrize(("templates", "code", "position"), RULES)
def test_each_broken_rule_has_its_code(
    templates: list[ResourceTemplate], code: str, position: int
) -> None:
    with pytest.raises(TemplateError) as raised:
        validate_templates(templates)
    error = raised.value
    assert isinstance(error, ValueError)
    assert error.code == code
    assert error.details["position"] == position
    assert error.glob == templates[position].identifier_glob
    assert str(error) == error.message
    assert f"template {position}" in error.message


def test_error_messages_carry_the_numbers() -> None:
    with pytest.raises(TemplateError) as raised:
        validate_templates([template(algorithm={"refresh_interval": 10, "lease_length": 9.5})])
    assert "lease_length = 9.5 s must be >= algorithm.refresh_interval = 10 s" in str(raised.value)
    assert raised.value.details == {
        "position": 0,
        "field": "algorithm.lease_length",
        "value": 9.5,
        "refresh_interval": 10,
    }


@pytest.mark.parametrize(
    "templates",
    [
        pytest.param([], id="empty-list"),
        pytest.param([template("a"), template("*")], id="catch-all-last"),
        pytest.param([template("*")], id="catch-all-alone"),
        pytest.param([template(safe_capacity=-1.0)], id="safe-unlimited"),
        pytest.param([template(safe_capacity=0.0)], id="safe-zero"),
        pytest.param([template(capacity=0.0)], id="capacity-zero"),
        pytest.param([template(algorithm={"refresh_interval": 1, "lease_length": 1})], id="equal"),
        pytest.param([template(algorithm={"learning_mode_duration": 0})], id="no-learning"),
        pytest.param([template("a*"), template("a**")], id="globs-differ"),
    ],
)
def test_valid_lists_pass(templates: list[ResourceTemplate]) -> None:
    validate_templates(templates)


# --- matching ------------------------------------------------------------------------------

MATCHING = [
    template("db.*"),
    template("db.write"),
    template("gpu[!0-3]"),
    template("g?u*"),
    template("*"),
]


@pytest.mark.parametrize(
    ("resource_id", "glob"),
    [
        pytest.param("db.write", "db.write", id="exact-wins-over-earlier-glob"),
        pytest.param("db.read", "db.*", id="first-glob-in-order"),
        pytest.param("gpu7", "gpu[!0-3]", id="negated-set"),
        pytest.param("gpu2", "g?u*", id="negated-set-excludes"),
        pytest.param("db.write/primary", "db.*", id="star-matches-slash"),
        pytest.param("batch/a.b", "*", id="catch-all-slash-and-dot"),
        pytest.param("DB.READ", "*", id="case-sensitive"),
    ],
)
def test_matching(resource_id: str, glob: str) -> None:
    matched = match_template(MATCHING, resource_id)
    assert matched is not None
    assert matched.identifier_glob == glob


def test_no_match_is_none() -> None:
    assert match_template(MATCHING[:4], "cache.read") is None
    assert match_template([], "anything") is None


# --- tables from templates --------------------------------------------------------------------


def test_table_for_configures_a_table() -> None:
    spec = template(
        "batch.*",
        capacity=40.0,
        safe_capacity=4.0,
        algorithm={"kind": Kind.PROPORTIONAL_SHARE, "lease_length": 50, "refresh_interval": 10},
    )
    table = table_for(spec, started_at=T0, learning=True)
    assert (table.kind, table.capacity, table.lease_length, table.refresh_interval) == (
        Kind.PROPORTIONAL_SHARE,
        40,
        50,
        10,
    )
    assert (table.safe_capacity, table.learning_mode_duration, table.started_at) == (4, 50, T0)
    assert table.learning(T0 + 49)
    assert not table.learning(T0 + 50)
    assert not table_for(spec, started_at=T0, learning=False).learning(T0)


def test_apply_template_reconfigures_and_keeps_the_leases() -> None:
    table = table_for(template(capacity=100.0), started_at=T0, learning=False)
    table.request("a", 80, now=T0)
    table.request("b", 80, now=T0)
    apply_template(
        table,
        template(
            capacity=50.0,
            algorithm={"kind": Kind.STATIC, "lease_length": 60, "refresh_interval": 20},
        ),
    )
    assert [lease.has for lease in table.leases()] == [80, 20]
    assert (table.kind, table.capacity, table.lease_length) == (Kind.STATIC, 50, 60)
    assert table.request("b", 80, now=T0 + 1).capacity == 50  # STATIC: a per-client cap
