"""allotctl's config file: named contexts, each a cluster to talk to, and the current one.

    $ALLOT_CONFIG, else $XDG_CONFIG_HOME/allot/config.toml (XDG default ~/.config)

    current_context = "local"
    [contexts.local]
    servers = ["http://127.0.0.1:7600"]      # a leader and its standbys
    token_file = "/abs/path/api-token"       # or token = "..."
    ca_file = "/abs/path/ca.pem"             # optional

    config = load(config_path())   # an empty Config when the file does not exist
    save(config_path(), config)    # mode 0600, atomically (a temp file, then rename)

Reading refuses, naming the file, what is not this shape (``ConfigError``). Python reads
TOML (``tomllib``) but does not write it; ``render`` writes this one fixed shape.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_ENV = "ALLOT_CONFIG"
CONTEXT_FIELDS = ("servers", "token_file", "token", "ca_file")


class ConfigError(Exception):
    """A config file, context or file named by one that cannot be used; the text names it."""


@dataclass(frozen=True, kw_only=True)
class Context:
    servers: tuple[str, ...]
    token_file: str = ""
    token: str = ""
    ca_file: str = ""


@dataclass(frozen=True, kw_only=True)
class Config:
    current_context: str = ""
    contexts: dict[str, Context] = field(default_factory=dict)


def config_path() -> Path:
    """``$ALLOT_CONFIG``, else ``$XDG_CONFIG_HOME/allot/config.toml``."""
    if explicit := os.environ.get(CONFIG_ENV):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "allot" / "config.toml"


def load(path: Path) -> Config:
    """The file's contexts; an empty ``Config`` when there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except OSError as error:
        raise ConfigError(f"cannot read the config file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"the config file {path} is not UTF-8 text") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"the config file {path} is not TOML: {error}") from None
    return _parsed(raw, path)


def _parsed(raw: dict[str, object], path: Path) -> Config:
    unknown = sorted(set(raw) - {"current_context", "contexts"})
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r}")
    current = raw.get("current_context", "")
    if not isinstance(current, str):
        raise ConfigError(f"{path}: current_context must be a string")
    contexts = raw.get("contexts", {})
    if not isinstance(contexts, dict):
        raise ConfigError(f"{path}: contexts must be a table of [contexts.NAME]")
    return Config(
        current_context=current,
        contexts={name: _context(name, fields, path) for name, fields in contexts.items()},
    )


def _context(name: str, fields: object, path: Path) -> Context:
    where = f"{path}: context {name!r}"
    if not isinstance(fields, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(fields) - set(CONTEXT_FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}")
    servers = fields.get("servers")
    if (
        not isinstance(servers, list)
        or not servers
        or not all(isinstance(server, str) and server for server in servers)
    ):
        raise ConfigError(f"{where}: servers must be a non-empty list of URLs")
    texts = {key: fields.get(key, "") for key in CONTEXT_FIELDS[1:]}
    for key, value in texts.items():
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key} must be a string")
    if texts["token"] and texts["token_file"]:
        raise ConfigError(f"{where}: give token_file or token, not both")
    return Context(servers=tuple(servers), **{k: str(v) for k, v in texts.items()})


def render(config: Config) -> str:
    """``config`` as TOML that ``load`` reads back to the same ``Config``.

    Strings are written as JSON strings: every escape JSON writes is also a TOML basic
    string escape, and JSON escapes every control character TOML needs escaped but DEL."""
    lines = []
    if config.current_context:
        lines += [f"current_context = {_string(config.current_context)}", ""]
    for name, context in config.contexts.items():
        lines.append(f"[contexts.{_string(name)}]")
        lines.append("servers = [" + ", ".join(_string(s) for s in context.servers) + "]")
        for key in CONTEXT_FIELDS[1:]:
            if value := getattr(context, key):
                lines.append(f"{key} = {_string(value)}")
        lines.append("")
    return "\n".join(lines)


def _string(text: str) -> str:
    # Not ensure_ascii: JSON would write a character beyond U+FFFF as two surrogate
    # escapes, which TOML refuses.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def save(path: Path, config: Config) -> None:
    """Write ``config`` to ``path`` with mode 0600 (it may hold a token), atomically: a
    reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:  # mkstemp makes it 0600
            file.write(render(config))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
