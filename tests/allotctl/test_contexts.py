"""``allotctl config`` and the contexts through ``main``, against a real coordinator:
set-context, use-context, get-contexts and view (tokens never printed), ``--context`` and
``ALLOT_CONTEXT``, the precedence flag > environment > context > default, and the errors
(exit 2, one line naming the file or flag, nothing written)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from allotctl.config_file import Config, Context, load, save
from allotctl.main import main
from tests.coordinator.conftest import API_TOKEN, Coordinator, register

WRONG_TOKEN = "not-the-api-token-0123456789"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def in_thread(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main`` in a thread (its client blocks) while the coordinator serves in this loop."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "api-token"
    path.write_text(API_TOKEN + "\n")
    return path


def test_set_use_get_and_view(
    capsys: pytest.CaptureFixture[str], config_file: Path, token_file: Path, tmp_path: Path
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read by set-context, only opened\n")
    code, out, err = run(
        capsys, "config", "set-context", "prod", "--server", "https://a:7600",
        "--server", "https://b:7600", "--token-file", str(token_file), "--ca-file", str(ca),
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out == f"context 'prod' set in {config_file} (current)\n"  # the first is current
    code, out, _ = run(capsys, "config", "set-context", "lab", "--server", "http://lab:7600")
    assert out == f"context 'lab' set in {config_file}\n"
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert load(config_file) == Config(
        current_context="prod",
        contexts={
            "prod": Context(
                servers=("https://a:7600", "https://b:7600"),
                token_file=str(token_file),
                ca_file=str(ca),
            ),
            "lab": Context(servers=("http://lab:7600",)),
        },
    )
    assert run(capsys, "config", "use-context", "lab")[1] == "current context is now 'lab'\n"
    code, out, _ = run(capsys, "config", "get-contexts")
    assert [line.split() for line in out.splitlines()] == [
        ["CURRENT", "NAME", "SERVERS", "TOKEN", "CA"],
        ["*", "lab", "http://lab:7600", "-", "-"],
        ["prod", "https://a:7600,https://b:7600", str(token_file), str(ca)],
    ]
    code, out, _ = run(capsys, "config", "set-context", "lab", "--server", "http://l:1", "--use")
    assert load(config_file).current_context == "lab"


def test_no_file_yet(capsys: pytest.CaptureFixture[str], config_file: Path) -> None:
    code, out, _ = run(capsys, "config", "view")
    assert (code, out) == (
        0,
        f"no config file at {config_file}: add a context with allotctl config set-context\n",
    )
    code, out, _ = run(capsys, "config", "get-contexts")
    assert out.startswith("no contexts")
    assert not config_file.exists()


def test_a_token_in_the_file_is_never_printed(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    save(config_file, Config(contexts={"ci": Context(servers=("http://ci:1",), token="s3cr3t")}))
    for action in ("view", "get-contexts"):
        code, out, _ = run(capsys, "config", action)
        assert code == 0
        assert "s3cr3t" not in out
        assert "****" in out


async def test_a_context_gives_server_and_token(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], token_file: Path
) -> None:
    await register(cluster, "node-a")
    run(capsys, "config", "set-context", "here", "--server", cluster.url, "--token-file",
        str(token_file))  # fmt: skip
    code, out, err = await in_thread(capsys, "nodes")
    assert (code, err) == (0, "")
    assert "node-a" in out
    # Another context is current; --context and ALLOT_CONTEXT name this one.
    run(capsys, "config", "set-context", "elsewhere", "--server", "http://127.0.0.1:9", "--use")
    assert (await in_thread(capsys, "--context", "here", "nodes"))[0] == 0
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ALLOT_CONTEXT", "here")
        assert (await in_thread(capsys, "nodes"))[0] == 0


async def test_flags_over_environment_over_context(
    cluster: Coordinator,
    capsys: pytest.CaptureFixture[str],
    token_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each of server and token is taken from the first that gives it; a wrong token
    says where it came from."""
    run(capsys, "config", "set-context", "here", "--server", cluster.url, "--token-file",
        str(token_file))  # fmt: skip
    refused = f"allotctl: the coordinator at {cluster.url} did not accept the API token"
    monkeypatch.setenv("ALLOT_TOKEN", WRONG_TOKEN)
    code, _, err = await in_thread(capsys, "nodes")
    assert (code, err) == (1, f"{refused} (from --token or ALLOT_TOKEN)\n")
    code, _, err = await in_thread(capsys, "--token", API_TOKEN, "nodes")
    assert (code, err) == (0, "")
    monkeypatch.delenv("ALLOT_TOKEN")
    await asyncio.to_thread(token_file.write_text, WRONG_TOKEN)
    code, _, err = await in_thread(capsys, "nodes")
    assert err == f"{refused} (from token_file {token_file} of context here)\n"
    # ALLOT_SERVER over the context's servers, --server over ALLOT_SERVER.
    monkeypatch.setenv("ALLOT_SERVER", "http://127.0.0.1:9")
    code, _, err = await in_thread(capsys, "--token", API_TOKEN, "nodes")
    assert code == 1
    assert "cannot reach the coordinator at http://127.0.0.1:9" in err
    code, _, err = await in_thread(capsys, "--server", cluster.url, "--token", API_TOKEN, "nodes")
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["--context", "nowhere", "nodes"],
            "allotctl: no context 'nowhere' (--context) in {file}; it has a",
        ),
        (["config", "use-context", "nowhere"], "allotctl: no context 'nowhere' in {file}"),
        (
            ["config", "set-context", "x", "--server", "http://x:1", "--token-file", "/no/such"],
            "allotctl: --token-file /no/such: cannot read it: No such file or directory",
        ),
        (
            ["config", "set-context", "x", "--server", "http://x:1", "--ca-file", "/no/such"],
            "allotctl: --ca-file /no/such: cannot read it: No such file or directory",
        ),
    ],
)
def test_a_bad_name_exits_2_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], config_file: Path, argv: list[str], said: str
) -> None:
    config = Config(current_context="a", contexts={"a": Context(servers=("http://a:1",))})
    save(config_file, config)
    before = config_file.read_bytes()
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == said.format(file=config_file) + "\n"
    assert config_file.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("current_context = ", "is not TOML"),
        ("current_context = 'gone'", "current_context 'gone' is not among its contexts"),
        (
            "current_context = 'a'\n[contexts.a]\nservers = ['http://a:1']\n"
            "token_file = '/no/such/token'",
            "cannot read the token_file /no/such/token of context 'a': No such file or directory",
        ),
    ],
)
def test_an_unusable_config_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], config_file: Path, text: str, said: str
) -> None:
    config_file.parent.mkdir()
    config_file.write_text(text)
    code, out, err = run(capsys, "nodes")
    assert (code, out) == (2, "")
    assert err.startswith("allotctl: ")
    assert said in err
    assert err.count("\n") == 1


def test_no_token_anywhere_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "nodes")
    assert code == 2
    assert "no API token" in err
    assert "token_file" in err
