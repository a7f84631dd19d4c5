"""``allot-agent``: ``run`` (the default) keeps this host registered with the
coordinator and its containers as the coordinator wants them; ``discover`` prints what
this host offers and exits, like ``slurmd -C``; ``status`` prints what the running agent
manages and how its last reconcile went."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from pathlib import Path

import msgspec

from agent.config import ENV_PREFIX, AgentConfig
from agent.discovery.inventory import DiscoveryError, discover
from agent.metrics import AgentMetrics
from agent.metrics_server import metrics_site
from agent.runtime.applied_file import applied_path
from agent.runtime.docker_engine import DockerEngine
from agent.runtime.plan import Host
from agent.runtime.reconciler import Runtime, RuntimeOptions
from agent.runtime.restarts import RestartRules
from agent.runtime.state_file import read_state, state_path
from agent.runtime.status_text import describe_state
from agent.session import run_link
from shared.codec import to_json
from shared.inventory import Inventory
from shared.inventory_text import describe_inventory
from shared.logs import configure, get_logger
from shared.sdnotify import notify, watchdog_interval
from shared.service import add_config_arguments, load_config_or_exit, stop_signal
from shared.tokens import token_problem

log = get_logger("allot.agent")
COMMANDS = ("run", "discover", "status")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="allot-agent",
        description="The allot agent for this host."
        f" Every setting can also be given as {ENV_PREFIX}<NAME> in the environment.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{run,discover,status}")
    run = commands.add_parser("run", help="register with the coordinator and serve (default)")
    add_config_arguments(run, AgentConfig)
    show = commands.add_parser("discover", help="print this host's inventory and exit")
    add_config_arguments(show, AgentConfig)
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    status = commands.add_parser("status", help="print what the running agent manages")
    add_config_arguments(status, AgentConfig)
    status.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(_with_default_command(sys.argv[1:] if argv is None else argv))
    config = load_config_or_exit("allot-agent", AgentConfig, args, env_prefix=ENV_PREFIX)
    if args.command == "status":
        return _print_status(config, as_json=args.json)
    # A client certificate is the credential where the coordinator has a client CA.
    problem = None if config.tls_cert_file else token_problem("join_token", config.join_token)
    if args.command == "run" and problem:
        print(f"allot-agent: {problem} (or {ENV_PREFIX}JOIN_TOKEN)", file=sys.stderr)
        return 2
    configure(config.log_level)
    try:
        inventory = _discover(config)
    except DiscoveryError as error:
        log.error("discovery failed", reason=error)
        return 1
    if args.command == "discover":
        print(to_json(inventory).decode() if args.json else describe_inventory(inventory))
        return 0
    return asyncio.run(_serve(config, inventory))


def _with_default_command(argv: list[str]) -> list[str]:
    """``allot-agent --flag`` means ``allot-agent run --flag``."""
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help")):
        return argv
    return ["run", *argv]


def _print_status(config: AgentConfig, *, as_json: bool) -> int:
    path = state_path(config.state_dir, config.name)
    try:
        state = read_state(path)
    except OSError as error:
        print(
            f"allot-agent: no state for node {config.name} at {path} ({error.strerror});"
            " is the agent running with this state_dir and node_name?",
            file=sys.stderr,
        )
        return 1
    except msgspec.DecodeError as error:
        print(f"allot-agent: {path} is damaged: {error}", file=sys.stderr)
        return 1
    print(to_json(state).decode() if as_json else describe_state(state))
    return 0


def _discover(config: AgentConfig) -> Inventory:
    return discover(
        sysfs_root=Path(config.sysfs_root),
        reserved=config.reserved,
        hostname=socket.gethostname(),
        extended=config.extended_resources,
    )


async def _serve(config: AgentConfig, inventory: Inventory) -> int:
    """Run the link until a stop signal; 1 if the link failed by itself."""
    log.info(
        "agent starting",
        node=config.name,
        cpus_offered=str(inventory.offered()),
        numa_nodes=len(inventory.numa_nodes),
        gpus=len(inventory.gpus),
        extended=inventory.extended,
        problems=len(inventory.problems),
    )
    metrics = AgentMetrics()
    engine = DockerEngine.connect(
        node=config.name,
        base_url=config.docker_host,
        timeout=config.docker_timeout_seconds,
        timings=metrics.docker_call,
    )
    options = _runtime_options(config, inventory)
    runtime = Runtime(engine, Host.of(inventory), options, metrics=metrics)
    tasks = {
        asyncio.create_task(runtime.run(), name="reconcile"),
        asyncio.create_task(run_link(config, inventory, runtime, metrics), name="link"),
    }
    # Beside the others, not among them: metrics that cannot be served stop nothing.
    serving = asyncio.create_task(_serve_metrics(config, metrics))
    stopping = asyncio.create_task(stop_signal())
    done, _ = await asyncio.wait({*tasks, stopping}, return_when=asyncio.FIRST_COMPLETED)
    failed = [task for task in tasks if task in done]
    if not failed:
        log.info("agent stopping")
        notify("STOPPING=1")
    for task in tasks | {serving, stopping}:
        task.cancel()
    await asyncio.gather(*tasks, serving, stopping, return_exceptions=True)
    engine.close()
    for task in failed:
        log.error(f"agent {task.get_name()} failed", reason=task.exception())
    return 1 if failed else 0


async def _serve_metrics(config: AgentConfig, metrics: AgentMetrics) -> None:
    """Serve /metrics on ``metrics_address`` until cancelled. An address that cannot be
    bound is logged and the agent goes on without metrics: its containers matter more."""
    endpoint = config.metrics_endpoint
    if endpoint is None:
        return
    try:
        async with metrics_site(endpoint, metrics) as url:
            log.info("metrics listening", url=url)
            await asyncio.Event().wait()
    except OSError as error:
        log.error("metrics not served", address=config.metrics_address, reason=error)


def _runtime_options(config: AgentConfig, inventory: Inventory) -> RuntimeOptions:
    return RuntimeOptions(
        node=config.name,
        state_path=state_path(config.state_dir, config.name),
        applied_path=applied_path(config.state_dir, config.name),
        resync_seconds=config.resync_seconds,
        stop_timeout_seconds=config.stop_timeout_seconds,
        replace_settle_seconds=config.replace_settle_seconds,
        watchdog_seconds=watchdog_interval(),
        backoff_initial_seconds=config.backoff_initial_seconds,
        backoff_max_seconds=config.backoff_max_seconds,
        node_problems=inventory.problems,
        restarts=RestartRules(
            initial_seconds=config.restart_backoff_seconds,
            max_seconds=config.restart_backoff_max_seconds,
        ),
        cpu_pressure_file=Path(config.cpu_pressure_file) if config.cpu_pressure_file else None,
    )
