"""``allotctl config``: the contexts of the config file (``allotctl.config_file``).

    allotctl config set-context NAME --server URL [--server URL ...] [--token-file F]
                                     [--ca-file F] [--use]
    allotctl config use-context NAME
    allotctl config get-contexts
    allotctl config view

``set-context`` writes the whole context (a field not given is unset); the files it
names are made absolute and must be readable, so a typo is refused now rather than on
the next command. ``view`` and ``get-contexts`` never print a token.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from allotctl.config_file import Config, ConfigError, Context, load, render, save
from shared.text import table

MASK = "****"


def config_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    setter = actions.add_parser("set-context", help="add or replace a context")
    setter.add_argument("name")
    setter.add_argument(
        "--server",
        dest="context_servers",
        action="append",
        required=True,
        metavar="URL",
        help="a coordinator; repeat for a leader and its standbys",
    )
    setter.add_argument(
        "--token-file", dest="context_token_file", metavar="F", help="a file holding the token"
    )
    setter.add_argument(
        "--ca-file", dest="context_ca_file", metavar="F", help="CA (PEM) for https servers"
    )
    setter.add_argument("--use", action="store_true", help="make it the current context")
    user = actions.add_parser("use-context", help="make a context the current one")
    user.add_argument("name")
    actions.add_parser("get-contexts", help="list the contexts (tokens masked)")
    actions.add_parser("view", help="print the config file (tokens masked)")


def run_config(args: argparse.Namespace, path: Path) -> str:
    """What the action prints; the file is written only by set-context and use-context."""
    config = load(path)
    if args.action == "get-contexts":
        return contexts_table(config)
    if args.action == "view":
        if config == Config():
            return f"no config file at {path}: add a context with allotctl config set-context"
        return render(masked(config)).rstrip("\n")
    if args.action == "use-context":
        if args.name not in config.contexts:
            raise ConfigError(f"no context {args.name!r} in {path}")
        save(path, dataclasses.replace(config, current_context=args.name))
        return f"current context is now {args.name!r}"
    context = Context(
        servers=tuple(args.context_servers),
        token_file=_readable(args.context_token_file, "--token-file"),
        ca_file=_readable(args.context_ca_file, "--ca-file"),
    )
    current = args.name if args.use or not config.current_context else config.current_context
    save(path, Config(current_context=current, contexts={**config.contexts, args.name: context}))
    used = " (current)" if current == args.name else ""
    return f"context {args.name!r} set in {path}{used}"


def _readable(given: str | None, flag: str) -> str:
    """``given`` made absolute, once it is known to be a readable file ("" if not given)."""
    if given is None:
        return ""
    path = Path(given).expanduser().absolute()
    try:
        path.open("rb").close()
    except OSError as error:
        raise ConfigError(f"{flag} {given}: cannot read it: {error.strerror}") from None
    return str(path)


def masked(config: Config) -> Config:
    contexts = {
        name: dataclasses.replace(context, token=MASK) if context.token else context
        for name, context in config.contexts.items()
    }
    return dataclasses.replace(config, contexts=contexts)


def contexts_table(config: Config) -> str:
    if not config.contexts:
        return "no contexts: add one with allotctl config set-context NAME --server URL"
    rows = [
        (
            "*" if name == config.current_context else "",
            name,
            ",".join(context.servers),
            _token_shown(context),
            context.ca_file or "-",
        )
        for name, context in sorted(config.contexts.items())
    ]
    return table(("CURRENT", "NAME", "SERVERS", "TOKEN", "CA"), rows)


def _token_shown(context: Context) -> str:
    if context.token_file:
        return context.token_file
    return MASK if context.token else "-"
