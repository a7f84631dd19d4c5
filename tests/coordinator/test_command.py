"""``allot-coordinator`` as a process: what it says when it cannot start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COORDINATOR = str(Path(sys.executable).parent / "allot-coordinator")


def test_the_coordinator_refuses_a_short_token_before_anything_starts(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    data = tmp_path / "data"
    result = subprocess.run(
        [
            COORDINATOR,
            f"--data-dir={data}",
            "--port=0",
            "--join-token=s3cr3t",
            "--api-tokens=a-long-enough-api-token",
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "allot-coordinator: join_token has 6 characters; a token needs at least 16"
        " (make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')\n"
    )
    assert not data.exists()  # no store was opened
