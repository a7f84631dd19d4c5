"""``allot-coordinator``: serve the API and the agent socket until told to stop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import socket
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web

from coordinator.app import make_app
from coordinator.config import ENV_PREFIX, CoordinatorConfig
from coordinator.doors import Doors, DoorSite, open_doors
from coordinator.keys import METRICS
from coordinator.leading import serve_on_etcd
from coordinator.lease_worker import LeaseDoor, LeaseProcessFailed, lease_process
from coordinator.store import StoreError
from coordinator.store.etcd import check_root
from coordinator.store.etcd_link import EtcdSettings, endpoint_problem
from coordinator.store.migrate import migrate
from coordinator.tls_command import tls_main
from shared.logs import configure, get_logger
from shared.sdnotify import notify
from shared.service import (
    add_config_arguments,
    load_config_or_exit,
    stop_signal,
    systemd_watchdog,
)
from shared.tls import TlsError

log = get_logger("allot.coordinator")


def main(argv: list[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    if args_given[:1] == ["migrate"]:
        return migrate_main(args_given[1:])
    if args_given[:1] == ["tls"]:
        return tls_main(args_given[1:])
    parser = argparse.ArgumentParser(
        prog="allot-coordinator",
        description="Run the allot coordinator: the HTTP API, the agent socket and the store."
        f" Every setting can also be given as {ENV_PREFIX}<NAME> in the environment."
        " 'allot-coordinator migrate --help': copy a SQLite store into etcd;"
        " 'allot-coordinator tls --help': make a CA and certificates.",
    )
    add_config_arguments(parser, CoordinatorConfig)
    args = parser.parse_args(argv)
    config = load_config_or_exit(
        "allot-coordinator", CoordinatorConfig, args, env_prefix=ENV_PREFIX
    )
    configure(config.log_level)
    try:
        asyncio.run(serve(config))
    except StoreError as error:
        log.error("cannot open the store", reason=error)
        return 1
    except ListenError as error:
        log.error("cannot listen", host=config.host, port=config.port, reason=error)
        return 1
    except LeaseProcessFailed as error:
        log.error("the lease process did not start", address=config.lease_address, reason=error)
        return 1
    return 0


def migrate_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="allot-coordinator migrate",
        description="Copy a SQLite store (no coordinator running on it) into an empty etcd"
        " prefix: every key and value; etcd numbers the revisions anew. The etcd password,"
        f" if any, comes from {ENV_PREFIX}ETCD_PASSWORD.",
    )
    parser.add_argument("--from", dest="source", type=Path, required=True, help="allot.db")
    parser.add_argument(
        "--to", dest="endpoints", required=True, help="etcd endpoints, comma-separated"
    )
    parser.add_argument("--etcd-prefix", default="/allot")
    for name in ("ca-file", "cert-file", "key-file", "user"):
        parser.add_argument(f"--etcd-{name}", default="")
    args = parser.parse_args(argv)
    configure("info")
    try:
        target = EtcdSettings(
            endpoints=tuple(e.strip() for e in args.endpoints.split(",") if e.strip()),
            prefix=args.etcd_prefix,
            ca_file=args.etcd_ca_file,
            cert_file=args.etcd_cert_file,
            key_file=args.etcd_key_file,
            user=args.etcd_user,
            password=os.environ.get(f"{ENV_PREFIX}ETCD_PASSWORD", ""),
        )
        problems = [endpoint_problem(e) for e in target.endpoints] or ["no endpoint given"]
        if any(problems):
            parser.error(f"--to: {'; '.join(p for p in problems if p)}")
        check_root(target.prefix)
        copied = asyncio.run(migrate(args.source, target))
    except (StoreError, ValueError) as error:
        log.error("migration refused", source=args.source, reason=error)
        return 1
    log.info(
        "store migrated",
        source=args.source,
        endpoints=",".join(target.endpoints),
        prefix=target.prefix,
        keys=copied.keys,
        value_bytes=copied.value_bytes,
        source_revision=copied.source_revision,
        etcd_revision=copied.target_revision,
    )
    return 0


class ListenError(Exception):
    """The address cannot be bound (in use, not local, no permission)."""


# The coordinator's heap is mostly what start-up loads from the store (every node,
# container, deployment and event: 100,000 containers are 766,000 objects the collector
# tracks) and lives as long as the process, yet every full collection rescans all of it.
# bench/leases.py --heap-containers 100000 --clients 100000 --pool-update-seconds 60
# (2 x 20 s of lease requests, three runs each, on the 2-core VM shared with other jobs):
# - Python's defaults: one full collection a run, of 597-744 ms; steady-phase lease p99
#   408-547 ms;
# - the loaded heap frozen (gc.freeze, below): it is left out of every collection; 0-5
#   full collections a run, the longest 23-49 ms; steady-phase p99 51-129 ms.
# The load itself runs with the collector off: it makes long-lived objects only, and each
# collection while the heap grows rescans it. Ready (process start to READY=1) in
# 5.5-6.9 s instead of 8.0-10.5 s, the one collection before the freeze included
# (0.5-0.9 s). Rejected: a young-generation threshold of 10,000 instead of 700
# (collector time 1.4 s -> 0.2 s a run, but each young collection then took 12 ms on
# average and up to 43 ms, over the 20 ms p99 goal); Python's thresholds are kept.
# What is loaded later (a deployment storm after start-up) is not frozen.
def settle_heap() -> None:
    """Once start-up has loaded the store (the collector off meanwhile): collect the
    start-up garbage once, freeze what is left (``gc.freeze``: no later collection looks
    at it again) and turn the collector back on."""
    gc.collect()
    gc.freeze()
    gc.enable()


async def serve(config: CoordinatorConfig) -> None:
    tls = config.server_tls_context()
    with _reloading_on_sighup(config, tls):
        if config.store == "etcd":
            await _serve_on_etcd(config, tls)
        else:
            await _serve_alone(config, tls)


@contextlib.contextmanager
def _reloading_on_sighup(config: CoordinatorConfig, tls: ssl.SSLContext | None) -> Iterator[None]:
    """While the block runs, SIGHUP reads the TLS files again (``systemctl reload``)."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, _reload_tls, config, tls)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGHUP)


def _reload_tls(config: CoordinatorConfig, tls: ssl.SSLContext | None) -> None:
    """New handshakes get the files as they are now; open connections keep theirs, so
    no agent session is dropped. Unusable files leave the previous ones in use."""
    if tls is None:
        log.info("SIGHUP: nothing to reload, TLS is off")
        return
    try:
        config.reload_tls(tls)
    except TlsError as error:
        log.error("TLS files not reloaded; the previous ones stay in use", reason=error)
        return
    log.info("TLS files reloaded", cert=config.tls_cert_file, client_ca=config.tls_client_ca_file)


async def _serve_on_etcd(config: CoordinatorConfig, tls: ssl.SSLContext | None) -> None:
    """Several coordinators on one etcd prefix: one leads, the others stand by."""
    try:
        listener = socket.create_server((config.host, config.port), reuse_port=False)
    except OSError as error:
        raise ListenError(error.strerror or str(error)) from error
    stopping = asyncio.ensure_future(stop_signal())
    bound = _url(listener.getsockname()[:2], tls=tls is not None)
    try:
        _say_listening(config, bound, leader_ttl_s=config.leader_ttl_seconds)
        async with systemd_watchdog():
            url = config.advertise_url.rstrip("/") or bound
            await serve_on_etcd(config, listener, url, stopping, tls)
    finally:
        stopping.cancel()
        listener.close()


def _family(config: CoordinatorConfig) -> socket.AddressFamily:
    """IPv6 for an IPv6 address (``::``, ``::1``), else IPv4 (an address or a name)."""
    return socket.AF_INET6 if ":" in config.host else socket.AF_INET


def _say_listening(config: CoordinatorConfig, url: str, **more: object) -> None:
    log.info(
        "coordinator listening",
        url=url,
        store=config.store_location,
        lease_s=config.lease_seconds,
        heartbeat_s=config.heartbeat_seconds,
        **more,
    )


def _url(address: tuple[str, int], *, tls: bool) -> str:
    host, port = address
    scheme = "https" if tls else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


async def _serve_alone(config: CoordinatorConfig, tls: ssl.SSLContext | None) -> None:
    doors = open_doors(config)
    async with lease_process(config, won_at=None) as door:
        await _serve_alone_with(config, tls, doors, door)


async def _serve_alone_with(
    config: CoordinatorConfig, tls: ssl.SSLContext | None, doors: Doors, leases: LeaseDoor | None
) -> None:
    app = make_app(config, leases=leases)
    app[METRICS].follow_connections(doors)
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=5.0, keepalive_timeout=doors.keepalive_s
    )
    gc.disable()  # until settle_heap: loading the store makes long-lived objects only
    try:
        await runner.setup()
    finally:
        settle_heap()
    try:
        try:
            listener = socket.create_server((config.host, config.port), family=_family(config))
        except OSError as error:
            raise ListenError(error.strerror or str(error)) from error
        await DoorSite(runner, listener, doors, ssl_context=tls).start()
        url = _url(listener.getsockname()[:2], tls=tls is not None)
        _say_listening(config, url, max_connections=doors.max_connections)
        notify("READY=1", f"STATUS=serving on {url}")
        async with systemd_watchdog():
            await stop_signal()
        log.info("coordinator stopping")
        notify("STOPPING=1")
    finally:
        await runner.cleanup()
