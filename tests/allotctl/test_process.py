"""The installed ``allotctl`` as a shell runs it, in a real subprocess: a pipe closed
early (``| head -c 100``) ends it quietly, ``--version`` names the distribution's version, and
shell completion answers argcomplete's protocol (``_ARGCOMPLETE``)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from allotctl.main import CLOSED_PIPE, main
from tests.coordinator.conftest import API_TOKEN, Coordinator

ALLOTCTL = Path(sys.executable).parent / "allotctl"
PIPE_BUFFER = 64 * 1024  # Linux's default: more than this makes the writer wait for head


def environment(**extra: str) -> dict[str, str]:
    """This test's environment (its ALLOT_CONFIG, no ALLOT_SERVER or ALLOT_TOKEN)."""
    return {**os.environ, **extra}


async def test_a_closed_pipe_ends_quietly(
    coordinator: Coordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pools = "---\n".join(f"kind: Pool\nname: pool-{i}\n" for i in range(300))
    await asyncio.to_thread((tmp_path / "pools.yaml").write_text, pools)
    argv = ["--server", coordinator.url, "--token", API_TOKEN]
    assert await asyncio.to_thread(main, [*argv, "apply", "-f", str(tmp_path / "pools.yaml")]) == 0
    listing = capsys.readouterr().out
    assert listing.count("created") == 300
    script = (
        f'{ALLOTCTL} {" ".join(argv)} pools --json 2>"$1" | head -c 100 >/dev/null;'
        ' echo "${PIPESTATUS[0]}"'
    )
    stderr = tmp_path / "stderr"
    piped = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script, "bash", str(stderr)],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    full = await asyncio.to_thread(main, [*argv, "pools", "--json"])
    assert full == 0
    assert len(capsys.readouterr().out) > PIPE_BUFFER  # so head did close it early
    assert piped.stdout == f"{CLOSED_PIPE}\n"
    assert await asyncio.to_thread(stderr.read_text) == ""


def test_version_is_the_distributions() -> None:
    shown = subprocess.run(
        [str(ALLOTCTL), "--version"], env=environment(), capture_output=True, text=True, timeout=30
    )
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == f"allotctl {importlib.metadata.version('allot')}\n"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("allotctl conf", {"config"}),
        ("allotctl config ", {"set-context", "use-context", "get-contexts", "view"}),
        ("allotctl --cont", {"--context"}),
        ("allotctl resource set r --algo", {"--algorithm"}),
        ("allotctl resource set r --algorithm F", {"FAIR_SHARE"}),
    ],
)
def test_completion_answers_the_shell(tmp_path: Path, line: str, expected: set[str]) -> None:
    answer = tmp_path / "completions"
    completing = environment(
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_IFS="\n",
        _ARGCOMPLETE_STDOUT_FILENAME=str(answer),
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
    )
    done = subprocess.run(
        [str(ALLOTCTL)], env=completing, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    offered = {word.strip() for word in answer.read_text().split("\n") if word.strip()}
    assert expected <= offered  # and -h, --help where they fit
    assert all(word.startswith(line.rpartition(" ")[2]) for word in offered)
