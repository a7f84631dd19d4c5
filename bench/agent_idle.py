"""What one real, idle agent sends: status frames and heartbeats per second.

    .venv/bin/python bench/agent_idle.py [--containers 2] [--seconds 120] [--settle 20]

A real ``allot-coordinator`` (SQLite in a new temporary directory under ``--workdir``) and
a real ``allot-agent`` of this host as node ``bench-idle-<random>``, on the local Docker
engine with the image ``allot/busybox:test``. One deployment of ``--containers``
containers (``sleep 3600``, 0.1 CPU each) is placed on the node; once ``--settle``
seconds have passed with them running, the frames the coordinator received from the
agent (``allot_agent_frames_total``) are counted over ``--seconds``, and printed per
second and per 10,000 such agents. ``--agent-arg`` passes a flag on to the agent (e.g.
``--agent-arg=--full-report-seconds=30``). The containers are removed at the end, found
by their node label, even on failure. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import docker
from fleet import IMAGE, Coordinator, free_port

NAMESPACE = "fleet"
FRAMES = re.compile(r'^allot_agent_frames_total\{type="(\w+)"\} (\S+)$', re.MULTILINE)


async def frames(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with http.get(url + "/metrics") as response:
        text = await response.text()
    return {kind: float(count) for kind, count in FRAMES.findall(text)}


async def running(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> int:
    async with http.get(f"{url}/v1/containers?state=running", headers=headers) as response:
        return len((await response.json())["containers"])


def start_agent(
    workdir: Path, server: str, node: str, join_token: str, more: list[str]
) -> subprocess.Popen[bytes]:
    binary = Path(sys.executable).parent / "allot-agent"
    argv = [str(binary), "run", f"--server={server}", f"--node-name={node}"]
    argv += [f"--state-dir={workdir}", "--stop-timeout-seconds=1", *more]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    with (workdir / "agent.log").open("ab") as log:
        return subprocess.Popen(
            argv,
            env=environment | {"ALLOT_AGENT_JOIN_TOKEN": join_token},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def run(args: argparse.Namespace, workdir: Path, node: str) -> None:
    join_token, api_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    coordinator = Coordinator(workdir, free_port(), join_token, api_token)
    headers = {"Authorization": f"Bearer {api_token}"}
    coordinator.start()
    agent = start_agent(workdir, coordinator.url, node, join_token, args.agent_arg)
    try:
        async with aiohttp.ClientSession() as http:
            body = {
                "name": "idle",
                "image": IMAGE,
                "command": ["sleep", "3600"],
                "count": args.containers,
                "resources": {"cpu": "0.1", "memory": "16Mi"},
            }
            deadline = time.monotonic() + 60
            while True:
                coordinator.check_alive()
                try:
                    path = f"{coordinator.url}/v1/namespaces/{NAMESPACE}/deployments"
                    async with http.post(path, json=body, headers=headers) as response:
                        if response.status == 201:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("agent_idle: the deployment was not placed within 60 s")
                await asyncio.sleep(0.5)
            while await running(http, coordinator.url, headers) < args.containers:
                if time.monotonic() > deadline:
                    raise SystemExit("agent_idle: the containers did not run within 60 s")
                await asyncio.sleep(0.5)
            await asyncio.sleep(args.settle)
            before = await frames(http, coordinator.url)
            started = time.monotonic()
            await asyncio.sleep(args.seconds)
            after = await frames(http, coordinator.url)
            took = time.monotonic() - started
        for kind in ("status", "heartbeat"):
            rate = (after.get(kind, 0.0) - before.get(kind, 0.0)) / took
            print(
                f"{kind}: {rate:.3f} frames/s from one idle agent with {args.containers}"
                f" containers over {took:.0f} s; {rate * 10_000:,.0f}/s at 10,000 such agents"
            )
    finally:
        agent.terminate()
        agent.wait(timeout=30)
        coordinator.stop()


def remove_containers(node: str) -> None:
    client = docker.from_env()
    try:
        for container in client.containers.list(all=True, filters={"label": f"allot.node={node}"}):
            container.remove(force=True)
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=120.0, help="the measured window")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before it")
    parser.add_argument("--agent-arg", action="append", default=[], help="a flag for the agent")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where the store goes")
    args = parser.parse_args()
    node = f"bench-idle-{secrets.token_hex(3)}"
    workdir = Path(tempfile.mkdtemp(prefix="agent-idle-", dir=args.workdir))
    try:
        asyncio.run(run(args, workdir, node))
    finally:
        remove_containers(node)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
