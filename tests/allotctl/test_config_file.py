"""allotctl's config file on its own: what ``render`` writes ``load`` reads back, any text
included; a file not of the shape is refused naming the file and what is wrong; ``save``
writes mode 0600 and leaves no temporary file behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allotctl.config_file import Config, ConfigError, Context, config_path, load, save

texts = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20)
contexts = st.builds(
    Context,
    servers=st.lists(texts, min_size=1, max_size=3).map(tuple),
    token_file=st.one_of(st.just(""), texts),
    ca_file=st.one_of(st.just(""), texts),
)


@st.composite
def configs(draw: st.DrawFn) -> Config:
    named = draw(st.dictionaries(texts, contexts, max_size=4))
    current = draw(st.sampled_from(["", *named]))
    return Config(current_context=current, contexts=named)


@given(configs())
def test_what_render_writes_load_reads_back(config: Config) -> None:
    # The fixture's path, read from the environment: hypothesis runs every example in the
    # one test, and each overwrites the last one's file.
    path = Path(os.environ["ALLOT_CONFIG"])
    save(path, config)
    assert load(path) == config


def test_a_token_is_kept_and_read_back(config_file: Path) -> None:
    config = Config(contexts={"prod": Context(servers=("https://a:7600",), token="s3cr3t")})
    save(config_file, config)
    assert load(config_file) == config


def test_save_writes_0600_atomically(config_file: Path) -> None:
    config = Config(current_context="a", contexts={"a": Context(servers=("http://x:1",))})
    save(config_file, config)
    save(config_file, config)  # over an existing file
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert [p.name for p in config_file.parent.iterdir()] == [config_file.name]


def test_no_file_is_no_context(config_file: Path) -> None:
    assert load(config_file) == Config()
    assert not config_file.exists()


def test_the_path_follows_allot_config_then_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ALLOT_CONFIG", str(tmp_path / "mine.toml"))
    assert config_path() == tmp_path / "mine.toml"
    monkeypatch.delenv("ALLOT_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "allot" / "config.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_path() == tmp_path / "home" / ".config" / "allot" / "config.toml"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("current_context = ", "is not TOML"),
        ("colour = 'blue'", "unknown setting 'colour'"),
        ("current_context = 3", "current_context must be a string"),
        ("contexts = 3", "contexts must be a table"),
        ("[contexts.a]\ntoken = 'x'", "context 'a': servers must be a non-empty list"),
        ("[contexts.a]\nservers = []", "context 'a': servers must be a non-empty list"),
        ("[contexts.a]\nservers = ['u']\nca_file = 1", "context 'a': ca_file must be a string"),
        ("[contexts.a]\nservers = ['u']\nuser = 'x'", "context 'a': unknown field 'user'"),
        (
            "[contexts.a]\nservers = ['u']\ntoken = 'x'\ntoken_file = '/t'",
            "context 'a': give token_file or token, not both",
        ),
    ],
)
def test_a_file_not_of_the_shape_is_refused_by_name(
    config_file: Path, text: str, said: str
) -> None:
    config_file.parent.mkdir()
    config_file.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load(config_file)
    assert str(config_file) in str(refused.value)
    assert said in str(refused.value)
