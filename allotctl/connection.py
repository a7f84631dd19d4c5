"""Which coordinator allotctl talks to, with which token and CA: each from the first of

    a flag (--server, --token, --ca-file)
    the environment (ALLOT_SERVER, ALLOT_TOKEN, ALLOT_CA_FILE)
    the context (--context, else ALLOT_CONTEXT, else the config file's current_context)
    the default (DEFAULT_SERVER; no token; the system's CAs)

that gives it. Each part is settled on its own, so ``ALLOT_TOKEN`` may go with the
context's servers. A context asked for by name must exist; its ``token_file`` must be
readable when the token comes from it (``ConfigError`` otherwise).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from allotctl.config_file import Config, ConfigError, Context

DEFAULT_SERVER = "http://127.0.0.1:7600"
FLAG_OR_ENV_TOKEN = "--token or ALLOT_TOKEN"


@dataclass(frozen=True, kw_only=True)
class Flags:
    """The global flags as given (None: not given)."""

    server: str | None = None
    token: str | None = None
    ca_file: str | None = None
    context: str | None = None


@dataclass(frozen=True, kw_only=True)
class Connection:
    server: str  # comma-separated when several coordinators
    token: str
    token_source: str  # where the token came from, for a refusal: "--token or ALLOT_TOKEN"
    ca_file: str | None


def connection(flags: Flags, config: Config, config_path: Path) -> Connection:
    named, context = chosen_context(flags, config, config_path)
    server = flags.server or os.environ.get("ALLOT_SERVER")
    if not server:
        server = ",".join(context.servers) if context else DEFAULT_SERVER
    ca_file = flags.ca_file or os.environ.get("ALLOT_CA_FILE") or None
    if ca_file is None and context is not None:
        ca_file = context.ca_file or None
    token = flags.token or os.environ.get("ALLOT_TOKEN", "")
    source = FLAG_OR_ENV_TOKEN
    if not token and context is not None:
        token, source = _context_token(named, context)
    return Connection(server=server, token=token, token_source=source, ca_file=ca_file)


def chosen_context(flags: Flags, config: Config, config_path: Path) -> tuple[str, Context | None]:
    """The context's name and settings: the one named by --context or ALLOT_CONTEXT
    (which must exist), else the current one (None when there is none)."""
    named = flags.context or os.environ.get("ALLOT_CONTEXT", "")
    if named:
        if named not in config.contexts:
            source = "--context" if flags.context else "ALLOT_CONTEXT"
            raise ConfigError(f"no context {named!r} ({source}) in {config_path}{_known(config)}")
        return named, config.contexts[named]
    current = config.current_context
    if not current:
        return "", None
    if current not in config.contexts:
        raise ConfigError(f"{config_path}: current_context {current!r} is not among its contexts")
    return current, config.contexts[current]


def _known(config: Config) -> str:
    return f"; it has {', '.join(sorted(config.contexts))}" if config.contexts else ""


def _context_token(name: str, context: Context) -> tuple[str, str]:
    if not context.token_file:
        return context.token, f"token of context {name}"
    path = Path(context.token_file).expanduser()
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise ConfigError(
            f"cannot read the token_file {path} of context {name!r}: {error.strerror}"
        ) from None
    return token, f"token_file {path} of context {name}"
