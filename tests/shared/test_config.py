"""shared.config: settings from a TOML file, then the environment, then flags; and the
coordinator's and agent's real settings built on it."""

from __future__ import annotations

import argparse
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest
from msgspec import Meta

from agent.config import AgentConfig
from coordinator.config import CoordinatorConfig
from shared.config import ConfigError, add_flags, flag_values, load
from shared.cpuset import CpuSet
from shared.servers import agent_socket_url

PREFIX = "ALLOT_X_"


class Spec(msgspec.Struct, frozen=True, kw_only=True):
    host: Annotated[str, Meta(description="address to listen on")] = "127.0.0.1"
    port: Annotated[int, Meta(ge=1, le=65535, description="TCP port")] = 8080
    ratio: Annotated[float, Meta(gt=0, le=1, description="share kept back")] = 0.5
    verbose: Annotated[bool, Meta(description="say more")] = False
    tags: Annotated[list[str], Meta(description="labels, comma-separated")] = []
    weights: Annotated[dict[str, int], Meta(description="name=weight, comma-separated")] = {}
    max_items: int = 10
    mode: Literal["fast", "safe"] = "safe"

    def __post_init__(self) -> None:
        if self.mode == "fast" and self.verbose:
            raise ValueError("fast mode cannot be verbose")


KNOWN = "host, max_items, mode, port, ratio, tags, verbose, weights"


def toml_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return path


def load_spec(
    *,
    file: Path | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> Spec:
    return load(Spec, file=file, environ=env, env_prefix=PREFIX, flags=flags)


def config_error(
    *,
    file: Path | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> str:
    with pytest.raises(ConfigError) as caught:
        load_spec(file=file, env=env, flags=flags)
    return str(caught.value)


# --- sources and precedence --------------------------------------------------------------


def test_defaults_without_any_source() -> None:
    assert load_spec() == Spec()
    assert load(Spec) == Spec()


def test_file_values(tmp_path: Path) -> None:
    path = toml_file(
        tmp_path,
        'host = "0.0.0.0"\nport = 9000\nratio = 0.25\nverbose = true\ntags = ["a", "b"]\n',
    )
    assert load_spec(file=path) == Spec(
        host="0.0.0.0", port=9000, ratio=0.25, verbose=True, tags=["a", "b"]
    )


def test_environment_overrides_file(tmp_path: Path) -> None:
    path = toml_file(tmp_path, 'host = "file"\nport = 9000\n')
    loaded = load_spec(file=path, env={"ALLOT_X_PORT": "9001"})
    assert loaded.port == 9001
    assert loaded.host == "file"


def test_flags_override_environment_and_file(tmp_path: Path) -> None:
    path = toml_file(tmp_path, "port = 9000\nmax_items = 3\n")
    loaded = load_spec(
        file=path, env={"ALLOT_X_PORT": "9001", "ALLOT_X_HOST": "env"}, flags={"port": "9002"}
    )
    assert (loaded.port, loaded.host, loaded.max_items) == (9002, "env", 3)


def test_flag_equal_to_the_default_still_overrides(tmp_path: Path) -> None:
    loaded = load_spec(env={"ALLOT_X_PORT": "9001"}, flags={"port": 8080})
    assert loaded.port == 8080


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a, b", ["a", "b"]), ("a,,b ,", ["a", "b"]), ("single", ["single"]), ("", []), (" , ", [])],
    ids=["two", "empty-items-dropped", "one", "empty", "only-separators"],
)
def test_list_from_environment_is_comma_separated(text: str, expected: list[str]) -> None:
    assert load_spec(env={"ALLOT_X_TAGS": text}).tags == expected


def test_list_from_flag_is_comma_separated() -> None:
    assert load_spec(flags={"tags": "x,y"}).tags == ["x", "y"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a=1, b = 2", {"a": 1, "b": 2}), ("x.io/y=0,", {"x.io/y": 0}), ("", {})],
    ids=["two", "one-trailing-comma", "empty"],
)
def test_map_from_environment_is_comma_separated_pairs(text: str, expected: dict[str, int]) -> None:
    assert load_spec(env={"ALLOT_X_WEIGHTS": text}).weights == expected


def test_map_from_flag_is_comma_separated_pairs() -> None:
    assert load_spec(flags={"weights": "a=3"}).weights == {"a": 3}


def test_map_item_without_equals_names_the_source() -> None:
    assert (
        config_error(flags={"weights": "a=1,b"})
        == "flag --weights: 'b' is not key=value (write a=1,b=2)"
    )
    message = config_error(env={"ALLOT_X_WEIGHTS": "a"})
    assert message == "environment variable ALLOT_X_WEIGHTS: 'a' is not key=value (write a=1,b=2)"


def test_map_value_of_the_wrong_type_names_the_setting() -> None:
    message = config_error(env={"ALLOT_X_WEIGHTS": "a=many"})
    assert message.startswith("environment variable ALLOT_X_WEIGHTS: Expected `int`"), message


def test_commas_in_a_non_list_setting_are_kept() -> None:
    assert load_spec(env={"ALLOT_X_HOST": "a,b"}).host == "a,b"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("false", False)],
    ids=["true", "false"],
)
def test_bool_from_environment(text: str, expected: bool) -> None:
    assert load_spec(env={"ALLOT_X_VERBOSE": text}).verbose is expected


def test_numbers_from_environment_are_converted() -> None:
    loaded = load_spec(env={"ALLOT_X_PORT": "443", "ALLOT_X_RATIO": "0.75"})
    assert (loaded.port, loaded.ratio) == (443, 0.75)


def test_environment_without_the_prefix_is_ignored() -> None:
    env = {"PORT": "1", "ALLOT_Y_PORT": "nonsense", "HOME": "/root", "ALLOT_XPORT": "2"}
    assert load_spec(env=env) == Spec()


def test_lowercase_suffix_of_a_prefixed_variable_is_the_same_setting() -> None:
    assert load_spec(env={"ALLOT_X_port": "81"}).port == 81


def test_environment_is_ignored_without_a_prefix() -> None:
    assert load(Spec, environ={"PORT": "1", "port": "2"}) == Spec()


# --- errors ------------------------------------------------------------------------------


def test_unknown_key_in_file_names_file_key_and_known_keys(tmp_path: Path) -> None:
    path = toml_file(tmp_path, "port = 1\ncolour = 'blue'\n")
    message = config_error(file=path)
    assert str(path) in message
    assert "unknown setting 'colour'" in message
    assert message.endswith(f"(known: {KNOWN})")


def test_unknown_key_in_file_message_is_well_punctuated(tmp_path: Path) -> None:
    # The file's origin already ends with ":"; the message must not read "settings.toml::".
    path = toml_file(tmp_path, "colour = 'blue'\n")
    assert config_error(file=path) == (
        f"config file {path}: unknown setting 'colour' (known: {KNOWN})"
    )


def test_unknown_prefixed_environment_variable() -> None:
    assert config_error(env={"ALLOT_X_COLOUR": "blue"}) == (
        f"environment variable: unknown setting 'ALLOT_X_COLOUR' (known: {KNOWN})"
    )


def test_unknown_flag_is_a_config_error() -> None:
    # flag_values() only passes known names, but load() takes any mapping.
    with pytest.raises(ConfigError, match=re.escape("flag: unknown setting '--colour'")):
        load_spec(flags={"colour": "blue"})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("env", "environment variable ALLOT_X_PORT: Expected `int`, got `str`"),
        ("file", "config file {path}: port: Expected `int`, got `str`"),
        ("flag", "flag --port: Expected `int`, got `str`"),
    ],
    ids=["env", "file", "flag"],
)
def test_wrong_type_names_its_source(tmp_path: Path, source: str, expected: str) -> None:
    path = toml_file(tmp_path, 'port = "eighty"\n')
    if source == "env":
        message = config_error(env={"ALLOT_X_PORT": "eighty"})
    elif source == "file":
        message = config_error(file=path)
    else:
        message = config_error(flags={"port": "eighty"})
    assert message == expected.format(path=path)


def test_error_names_the_source_that_won(tmp_path: Path) -> None:
    path = toml_file(tmp_path, "port = 9000\n")
    message = config_error(file=path, env={"ALLOT_X_PORT": "x"})
    assert message == "environment variable ALLOT_X_PORT: Expected `int`, got `str`"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"ALLOT_X_PORT": "0"}, "environment variable ALLOT_X_PORT: Expected `int` >= 1"),
        ({"ALLOT_X_PORT": "65536"}, "environment variable ALLOT_X_PORT: Expected `int` <= 65535"),
        ({"ALLOT_X_RATIO": "0"}, "environment variable ALLOT_X_RATIO: Expected `float` > 0.0"),
        (
            {"ALLOT_X_MODE": "turbo"},
            "environment variable ALLOT_X_MODE: Invalid enum value 'turbo'",
        ),
        (
            {"ALLOT_X_VERBOSE": "yes"},
            "environment variable ALLOT_X_VERBOSE: Expected `bool`, got `str`",
        ),
    ],
    ids=["below-minimum", "above-maximum", "not-positive", "not-in-literal", "bool-word"],
)
def test_out_of_bounds_and_invalid_values(env: dict[str, str], expected: str) -> None:
    assert config_error(env=env) == expected


def test_wrong_list_item_names_the_setting(tmp_path: Path) -> None:
    path = toml_file(tmp_path, "tags = ['a', 2]\n")
    assert config_error(file=path) == f"config file {path}: tags: Expected `str`, got `int`"


def test_post_init_check_becomes_config_error() -> None:
    message = config_error(env={"ALLOT_X_MODE": "fast"}, flags={"verbose": True})
    assert message == "fast mode cannot be verbose"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    assert config_error(file=path) == f"cannot read config file {path}: No such file or directory"


def test_invalid_toml(tmp_path: Path) -> None:
    path = toml_file(tmp_path, "port = = 1\n")
    message = config_error(file=path)
    assert message.startswith(f"config file {path} is not valid TOML: ")


# --- add_flags and flag_values -----------------------------------------------------------


def parsed_flags(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="test")
    parser.add_argument("--config", type=Path)
    add_flags(parser, Spec)
    return flag_values(parser.parse_args(list(argv)), Spec)


def test_only_given_flags_are_values() -> None:
    assert parsed_flags() == {}
    assert parsed_flags("--config", "/etc/x.toml") == {}


def test_flags_are_kebab_case_and_strings() -> None:
    assert parsed_flags("--port", "9000", "--max-items", "5", "--tags", "a,b") == {
        "port": "9000",
        "max_items": "5",
        "tags": "a,b",
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["--verbose"], True), (["--no-verbose"], False), (["--verbose", "--no-verbose"], False)],
    ids=["on", "off", "last-wins"],
)
def test_bool_flags_have_a_negative_form(argv: list[str], expected: bool) -> None:
    assert parsed_flags(*argv) == {"verbose": expected}


def test_parsed_flags_load_and_override_environment() -> None:
    flags = parsed_flags("--port", "9000", "--no-verbose", "--tags", "a, b")
    loaded = load_spec(env={"ALLOT_X_VERBOSE": "true", "ALLOT_X_HOST": "h"}, flags=flags)
    assert loaded == Spec(host="h", port=9000, verbose=False, tags=["a", "b"])


def test_flag_help_uses_the_descriptions() -> None:
    parser = argparse.ArgumentParser(prog="test")
    add_flags(parser, Spec)
    text = " ".join(parser.format_help().split())
    assert "--port PORT TCP port" in text
    assert "--verbose, --no-verbose say more" in text
    assert "--max-items MAX_ITEMS" in text


def test_flag_values_ignores_other_arguments() -> None:
    namespace = argparse.Namespace(config=Path("x"), port="1", verbose=True)
    assert flag_values(namespace, Spec) == {"port": "1", "verbose": True}


# --- the coordinator's settings ----------------------------------------------------------

TOKEN = "a-token-of-16chr"
assert len(TOKEN) == 16
COORDINATOR_ENV = {
    "ALLOT_COORDINATOR_JOIN_TOKEN": "j" * 20,
    "ALLOT_COORDINATOR_API_TOKENS": f"{TOKEN}, {'b' * 30}",
}


def coordinator(**env: str) -> CoordinatorConfig:
    variables = COORDINATOR_ENV | {f"ALLOT_COORDINATOR_{k.upper()}": v for k, v in env.items()}
    return load(CoordinatorConfig, environ=variables, env_prefix="ALLOT_COORDINATOR_")


def coordinator_error(**env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        coordinator(**env)
    return str(caught.value)


def test_coordinator_config_from_environment() -> None:
    config = coordinator(port="7700", data_dir="/srv/allot", log_level="debug")
    assert config.api_tokens == [TOKEN, "b" * 30]
    assert config.port == 7700
    assert config.log_level == "debug"
    assert config.store_path == Path("/srv/allot/allot.db")


def test_coordinator_default_store_path() -> None:
    assert coordinator().store_path == Path("/var/lib/allot/allot.db")


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        ({"join_token": ""}, "join_token must be set: a secret of at least 16 characters"),
        ({"join_token": "j" * 15}, "join_token has 15 characters; a token needs at least 16"),
        ({"api_tokens": ""}, "api_tokens must name at least one token"),
        ({"api_tokens": f"{TOKEN},short"}, "api_tokens[1] has 5 characters; a token needs at"),
        (
            {"heartbeat_seconds": "15"},
            "heartbeat_seconds (15) must be shorter than lease_seconds (15)",
        ),
        (
            {"lease_seconds": "2", "heartbeat_seconds": "2.5"},
            "heartbeat_seconds (2.5) must be shorter",
        ),
        ({"port": "65536"}, "ALLOT_COORDINATOR_PORT: Expected `int` <= 65535"),
        ({"lease_seconds": "0"}, "ALLOT_COORDINATOR_LEASE_SECONDS: Expected `float` > 0.0"),
        ({"max_frame_bytes": "4095"}, "ALLOT_COORDINATOR_MAX_FRAME_BYTES: Expected `int` >= 4096"),
        ({"log_level": "trace"}, "ALLOT_COORDINATOR_LOG_LEVEL: Invalid enum value 'trace'"),
        (
            {"removal_ack_seconds": "-1"},
            "ALLOT_COORDINATOR_REMOVAL_ACK_SECONDS: Expected `float` >= 0.0",
        ),
    ],
    ids=[
        "no-join-token",
        "short-join-token",
        "no-api-tokens",
        "short-api-token",
        "heartbeat-equals-lease",
        "heartbeat-longer",
        "port-too-high",
        "zero-lease",
        "small-frames",
        "bad-log-level",
        "negative-removal-ack",
    ],
)
def test_coordinator_config_refuses(env: dict[str, str], complaint: str) -> None:
    assert complaint in coordinator_error(**env)


def test_coordinator_minimum_token_length_is_enough() -> None:
    assert coordinator(join_token="j" * 16).join_token == "j" * 16


def test_coordinator_heartbeat_just_under_the_lease() -> None:
    config = coordinator(lease_seconds="1", heartbeat_seconds="0.99")
    assert config.heartbeat_seconds < config.lease_seconds


# --- namespace tokens (file only) -------------------------------------------------------

NAMESPACE_TOKEN = "n" * 16


def coordinator_file(tmp_path: Path, toml: str) -> CoordinatorConfig:
    file = tmp_path / "coordinator.toml"
    file.write_text(f'join_token = "{"j" * 20}"\napi_tokens = ["{TOKEN}"]\n{toml}')
    return load(CoordinatorConfig, file=file)


def test_namespace_tokens_from_the_file(tmp_path: Path) -> None:
    config = coordinator_file(
        tmp_path,
        f"""
[[namespace_tokens]]
token = "{NAMESPACE_TOKEN}"
namespaces = ["team-a", "team-b"]

[[namespace_tokens]]
token = "{"m" * 40}"
namespaces = ["ml"]
""",
    )
    assert config.api_tokens == [TOKEN]
    assert [(e.token, e.namespaces) for e in config.namespace_tokens] == [
        (NAMESPACE_TOKEN, ["team-a", "team-b"]),
        ("m" * 40, ["ml"]),
    ]


def test_namespace_tokens_default_to_none() -> None:
    assert coordinator().namespace_tokens == []


def test_namespace_tokens_can_only_be_set_in_a_file() -> None:
    complaint = coordinator_error(namespace_tokens=NAMESPACE_TOKEN)
    assert complaint == (
        "environment variable ALLOT_COORDINATOR_NAMESPACE_TOKENS:"
        " namespace_tokens can only be set in a file"
    )
    parser = argparse.ArgumentParser()
    add_flags(parser, CoordinatorConfig)
    assert "--namespace-tokens" not in parser.format_help()


def _entry(token: str = NAMESPACE_TOKEN, namespaces: str = '["team-a"]') -> str:
    return f'\n[[namespace_tokens]]\ntoken = "{token}"\nnamespaces = {namespaces}\n'


@pytest.mark.parametrize(
    ("toml", "complaint"),
    [
        (_entry(token="n" * 15), "namespace_tokens[0].token has 15 characters; a token needs"),
        (
            _entry() + _entry(token="", namespaces='["x"]'),
            "namespace_tokens[1].token must be set: a secret of at least 16 characters",
        ),
        (_entry(namespaces="[]"), "namespace_tokens[0]: namespaces must name at least one"),
        (
            _entry(namespaces='["team-a", "Team_B", "-x", "' + "a" * 64 + '"]'),
            f"namespace_tokens[0]: namespaces ['Team_B', '-x', '{'a' * 64}'] are not valid"
            " namespace names (a-z, 0-9 and '-', starting and ending with a letter or digit,"
            " at most 63 characters)",
        ),
        (
            _entry(token=TOKEN),
            "api_tokens[0] and namespace_tokens[0] are the same token;"
            " every token must be distinct",
        ),
        (
            _entry() + _entry(namespaces='["team-b"]'),
            "namespace_tokens[0] and namespace_tokens[1] are the same token",
        ),
        (
            '\n[[namespace_tokens]]\ntoken = "' + NAMESPACE_TOKEN + '"\n',
            "namespace_tokens: Object missing required field `namespaces`",
        ),
        (
            _entry() + 'colour = "blue"\n',
            "namespace_tokens: Object contains unknown field `colour`",
        ),
    ],
    ids=[
        "short-token",
        "short-second-token",
        "no-namespaces",
        "bad-namespace-names",
        "same-as-an-admin-token",
        "listed-twice",
        "missing-namespaces",
        "unknown-field",
    ],
)
def test_namespace_tokens_refused(tmp_path: Path, toml: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        coordinator_file(tmp_path, toml)
    assert complaint in str(caught.value)


def test_a_secret_is_never_in_a_duplicate_token_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        coordinator_file(tmp_path, _entry(token=TOKEN))
    assert TOKEN not in str(caught.value)


def test_api_tokens_listed_twice_are_refused() -> None:
    complaint = coordinator_error(api_tokens=f"{TOKEN},{'b' * 30},{TOKEN}")
    assert complaint == "api_tokens[0] and api_tokens[2] are the same token;" + (
        " every token must be distinct"
    )


# --- the agent's settings ----------------------------------------------------------------


def agent(**env: str) -> AgentConfig:
    variables = {f"ALLOT_AGENT_{k.upper()}": v for k, v in env.items()}
    return load(AgentConfig, environ=variables, env_prefix="ALLOT_AGENT_")


def test_agent_defaults() -> None:
    config = agent()
    assert config.server == "http://127.0.0.1:7600"
    assert config.servers == ["http://127.0.0.1:7600"]
    assert config.reserved == CpuSet()


@pytest.mark.parametrize(
    ("server", "url"),
    [
        ("http://coord:7600", "ws://coord:7600/v1/agent"),
        ("https://coord.example", "wss://coord.example/v1/agent"),
        ("https://coord.example/", "wss://coord.example/v1/agent"),
        ("http://coord/allot/", "ws://coord/allot/v1/agent"),
        ("http://[::1]:7600", "ws://[::1]:7600/v1/agent"),
    ],
    ids=["http", "https", "trailing-slash", "path-prefix", "ipv6"],
)
def test_agent_url(server: str, url: str) -> None:
    assert agent_socket_url(agent(server=server).servers[0]) == url


def test_agent_servers_may_be_several() -> None:
    config = agent(server="http://c1:7600, http://c2:7600/,https://c3")
    assert config.servers == ["http://c1:7600", "http://c2:7600", "https://c3"]


def test_each_of_several_agent_servers_must_be_http() -> None:
    with pytest.raises(ConfigError) as caught:
        agent(server="http://c1:7600,c2:7600")
    assert str(caught.value) == "server 'c2:7600' must be an http:// or https:// URL"


@pytest.mark.parametrize(
    "server",
    ["ftp://coord", "coord:7600", "ws://coord:7600", "", "httpx://coord"],
    ids=["ftp", "no-scheme", "websocket", "empty", "lookalike-scheme"],
)
def test_agent_server_must_be_http(server: str) -> None:
    with pytest.raises(ConfigError) as caught:
        agent(server=server)
    assert str(caught.value) == f"server {server!r} must be an http:// or https:// URL"


def test_agent_reserved_cpus() -> None:
    assert agent(reserved_cpus="0-1,4").reserved == CpuSet([0, 1, 4])


@pytest.mark.parametrize("text", ["0-", "all", "3-1"], ids=["open-range", "word", "descending"])
def test_agent_reserved_cpus_must_be_a_cpu_list(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        agent(reserved_cpus=text)
    assert str(caught.value).startswith("reserved_cpus: ")
    assert repr(text) in str(caught.value)


def test_agent_backoff_bounds() -> None:
    with pytest.raises(ConfigError, match="backoff_initial_seconds must not exceed"):
        agent(backoff_initial_seconds="5", backoff_max_seconds="1")


def test_agent_name_defaults_to_the_hostname(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "box-17")
    assert agent().name == "box-17"
    assert agent(node_name="gpu-07").name == "gpu-07"
