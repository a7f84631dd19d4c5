"""``allot-agent``: ``run`` (the default) keeps this host registered with the
coordinator; ``discover`` prints what this host offers and exits, like ``slurmd -C``."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from pathlib import Path

from agent.config import ENV_PREFIX, AgentConfig
from agent.discovery.inventory import DiscoveryError, discover
from agent.session import run_link
from shared.codec import to_json
from shared.inventory import Inventory
from shared.inventory_text import describe_inventory
from shared.logs import configure, get_logger
from shared.sdnotify import notify
from shared.service import add_config_arguments, load_config_or_exit, stop_signal, systemd_watchdog

log = get_logger("allot.agent")
COMMANDS = ("run", "discover")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="allot-agent",
        description="The allot agent for this host."
        f" Every setting can also be given as {ENV_PREFIX}<NAME> in the environment.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{run,discover}")
    run = commands.add_parser("run", help="register with the coordinator and serve (default)")
    add_config_arguments(run, AgentConfig)
    show = commands.add_parser("discover", help="print this host's inventory and exit")
    add_config_arguments(show, AgentConfig)
    show.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(_with_default_command(sys.argv[1:] if argv is None else argv))
    config = load_config_or_exit("allot-agent", AgentConfig, args, env_prefix=ENV_PREFIX)
    if args.command == "run" and not config.join_token:
        print(f"allot-agent: join_token must be set (or {ENV_PREFIX}JOIN_TOKEN)", file=sys.stderr)
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


def _discover(config: AgentConfig) -> Inventory:
    return discover(
        sysfs_root=Path(config.sysfs_root), reserved=config.reserved, hostname=socket.gethostname()
    )


async def _serve(config: AgentConfig, inventory: Inventory) -> int:
    """Run the link until a stop signal; 1 if the link failed by itself."""
    log.info(
        "agent starting",
        node=config.name,
        cpus_offered=str(inventory.offered()),
        numa_nodes=len(inventory.numa_nodes),
        gpus=len(inventory.gpus),
        problems=len(inventory.problems),
    )
    link = asyncio.create_task(run_link(config, inventory))
    async with systemd_watchdog():
        stopping = asyncio.create_task(stop_signal())
        await asyncio.wait({link, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if link.done():
        stopping.cancel()
        log.error("agent link failed", reason=link.exception())
        return 1
    log.info("agent stopping")
    notify("STOPPING=1")
    link.cancel()
    await asyncio.gather(link, return_exceptions=True)
    return 0
