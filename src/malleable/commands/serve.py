"""``malleable manager serve`` and ``malleable manager status``: the site service
(docs/site.md). Registered under ``malleable manager`` by :mod:`malleable.commands.manager`."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from malleable.errors import InputError

DEFAULT_CONFIG = Path("/etc/malleable/manager.toml")


def register_verbs(verbs: Any) -> None:
    s = verbs.add_parser(
        "serve", help="run the site service until stopped (SIGTERM stops, SIGHUP reloads)",
        description="Discover users' malleable jobs (tagged by `malleable submit` or sbatch) "
                    "on every configured Slurm site, place them with the configured policy and "
                    "grow and shrink them, until SIGTERM (the operation in flight ends, state "
                    "kept, exit 0). SIGHUP reloads the config (policy, poll period, sites). "
                    "Logs one event per line to stderr (journald). See docs/site.md.")
    s.add_argument("--config", type=Path, default=DEFAULT_CONFIG, metavar="FILE",
                   help=f"service config (TOML; default {DEFAULT_CONFIG})")
    s.add_argument("--allow-root", action="store_true", help=argparse.SUPPRESS)
    s.set_defaults(func=serve)
    t = verbs.add_parser(
        "status", help="the site service's sites, jobs and last cycle",
        description="Show what the service wrote after its last cycle: whether it runs, its "
                    "policy, each site's health, the managed jobs with their sizes, and "
                    "resizes in flight (from the journal).")
    t.add_argument("--config", type=Path, default=DEFAULT_CONFIG, metavar="FILE",
                   help=f"service config (TOML; default {DEFAULT_CONFIG})")
    t.add_argument("--json", action="store_true", help="one JSON object")
    t.set_defaults(func=status)


class _EventFormatter(logging.Formatter):
    """One line per event, no timestamp (journald adds it): ``LEVEL logger: message``."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname} {record.name}: {record.getMessage()}".replace("\n", " | ")
        if record.exc_info:  # -v: the traceback the CLI promises, as Python prints it
            text += "\n" + self.formatException(record.exc_info)
        return text


def _journald_logging(verbose: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_EventFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


def serve(args: argparse.Namespace) -> int:
    import os

    from malleable.site import statedir
    from malleable.site.assembly import open_service
    from malleable.site.config import load_service_config
    from malleable.site.driver import driver_for

    config = load_service_config(args.config)
    if os.geteuid() == 0 and not args.allow_root:
        raise InputError("the service must not run as root: run it as its own account "
                         "(e.g. `malleable`, the unit's User=)")
    if config.account is not None:
        import getpass
        if getpass.getuser() != config.account:
            raise InputError(f"service.account is {config.account!r} but this process runs as "
                             f"{getpass.getuser()!r}", source=config.source)
    _journald_logging(args.verbose)
    log = logging.getLogger("malleable.site")
    os.umask(statedir.umask(config))  # journal and status 0600 (0640) whatever the login's
    service = open_service(config)
    try:
        if config.metrics is not None:
            try:
                port = service.metrics.serve(*config.metrics)
            except OSError as exc:
                raise InputError(f"service.metrics: cannot listen on {config.metrics[0]}:"
                                 f"{config.metrics[1]}: {exc.strerror or exc}: free the port "
                                 "or choose another address (\"\" turns metrics off)",
                                 source=config.source) from None
            log.info("event=metrics address=%s:%d", config.metrics[0], port)
        if service.channel is not None:
            try:
                service.channel.start()
            except OSError as exc:
                raise InputError(f"service.channel: cannot listen on "
                                 f"{service.channel.host}:{service.channel.port}: "
                                 f"{exc.strerror or exc}: free the port or choose another "
                                 "address", source=config.source) from None
        driver = driver_for(service)

        def hangup(signum: int, frame: FrameType | None) -> None:
            service.reload_requested = True

        previous = signal.signal(signal.SIGHUP, hangup)
        log.info("event=started run=%s sites=%s poll=%s pid=%d", service.info.run_id,
                 ",".join(service.adapters), config.poll, os.getpid())
        try:
            outcome = driver.run()
        finally:
            signal.signal(signal.SIGHUP, previous)
        log.info("event=stopped reason=%s cycles=%d", outcome.stopped, service.cycles)
    finally:
        service.close()
    return 0


def status(args: argparse.Namespace) -> int:
    from malleable.site.config import load_service_config
    from malleable.site.status import read_status

    found = read_status(load_service_config(args.config))
    if args.json:
        print(json.dumps(found))
        return 0
    _print_status(found)
    return 0


#: How ``manager status`` names a job's id by its site's kind.
KIND_LABELS = {"slurm": "Slurm", "oar": "OAR"}


def _where(job: dict[str, Any], kind: str | None) -> str:
    """``SITE, Slurm job ID`` (``OAR job``); a status file of a service older than the
    ``native_id`` field (no kind either) gives ``SITE #ID``."""
    native = job.get("native_id", job.get("slurm_id"))
    label = KIND_LABELS.get(kind or "")
    return f"{job['site']}, {label} job {native}" if label else f"{job['site']} #{native}"


def _print_status(found: dict[str, Any]) -> None:
    state = "running" if found["running"] and not found["stale"] else \
        "running, but no cycle lately" if found["running"] else "not running"
    policy = found["policy"]
    options = ", ".join(f"{k}={v}" for k, v in sorted(policy["options"].items()))
    print(f"service: {state} (pid {found['pid']}), run {found['run_id']}, "
          f"{found['cycles']} cycles, last took {found['last_cycle_seconds']} s")
    print(f"policy: {policy['name']}" + (f" ({options})" if options else "") +
          f", poll {found['poll']} s")
    for site in found["sites"]:
        health = "up" if site["online"] else f"DOWN ({site['last_error']})"
        nodes = ("nodes not known (no answer yet)" if site["nodes"] is None
                 else f"{site['nodes']} nodes, {site['idle']} idle")
        print(f"site {site['name']}: {health}, {nodes}, "
              f"reserve {site['reserve']}, {site['ignored_tags']} tags ignored")
        if site.get("admin_held"):
            print(f"site {site['name']}: held by an administrator (left held): "
                  + ", ".join(map(str, site["admin_held"])))
    kinds = {site["name"]: site.get("kind") for site in found["sites"]}
    for job in found["jobs"]:
        where = _where(job, kinds.get(job["site"])) if job["site"] else \
            "waiting (copies: " + ",".join(job["copies"]) + ")"
        print(f"job {job['id']}: {job['state']}, {job['size']} nodes in "
              f"[{job['min']}, {job['max']}], {where}")
    for resize in found["pending_resizes"]:
        print(f"resize in flight: {resize['job']} (Slurm job {resize['slurm_id']} on "
              f"{resize['site']})")
