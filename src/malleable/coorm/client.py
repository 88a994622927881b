"""A launcher as a network client of the CooRM service (section III-B, Fig. 4).

:func:`run_launcher` connects, subscribes, pulls the CINFOs and the ICINFO,
re-selects on every new view (after its adaptation delay) and sends the
request when it changed, deploys the payload on ``startNotify`` and sends
``done`` when it ends. The payload is a sleep for the application model's run
time on the hosts it got, or a command (``COORM_HOSTS`` lists the host ids; on
real sites ``COORM_JOBS`` lists ``SITE:JOBID`` of the Slurm or OAR jobs holding
them, so the command can run its processes there, e.g. ``srun --jobid`` on Slurm,
``oarstat -fJ -j JOBID`` for the nodes on OAR; ``COORM_SLURM_JOBS`` is its older name).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from malleable.coorm.launchers import Launcher
from malleable.coorm.protocol import (
    ChangeNotify,
    ClustersInfo,
    Done,
    Error,
    InterClusterInfo,
    KillNotify,
    ListClustersInfo,
    ListInterClusterInfo,
    Message,
    StartNotify,
    Subscribe,
    Subscribed,
    decode,
    encode,
)
from malleable.coorm.service import MAX_LINE
from malleable.errors import ExternalError, InfeasibleError

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class LaunchResult:
    """What happened to one application (times are ``time.time()`` seconds)."""

    name: str
    app: str = ""
    subscribed: float = 0.0
    started: float = 0.0
    ended: float = 0.0
    rids: dict[str, list[str]] = field(default_factory=dict)
    requests: int = 0
    views: int = 0
    killed: bool = False
    exit_code: int | None = None
    bytes_sent: int = 0
    bytes_received: int = 0


class _Session:
    def __init__(self, launcher: Launcher, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, command: Sequence[str] | None) -> None:
        self.launcher = launcher
        self.reader = reader
        self.writer = writer
        self.command = list(command) if command else None
        self.result = LaunchResult(launcher.name)
        self.pending: asyncio.TimerHandle | None = None
        self.needs = {"clusters", "links"}

    async def send(self, msg: Message) -> None:
        data = encode(msg)
        self.result.bytes_sent += len(data)
        self.writer.write(data)
        await self.writer.drain()

    async def receive(self) -> Message:
        line = await self.reader.readline()
        if not line:
            raise ExternalError("the CooRM service closed the connection")
        self.result.bytes_received += len(line)
        return decode(line)

    async def run(self) -> LaunchResult:
        await self.send(Subscribe(filter=self.launcher.filter, name=self.launcher.name))
        self.result.subscribed = time.time()
        await self.send(ListClustersInfo())
        await self.send(ListInterClusterInfo())
        while True:
            msg = await self.receive()
            if isinstance(msg, StartNotify):
                await self.deploy(msg)
                return self.result
            if isinstance(msg, KillNotify):
                self.result.killed = True
                return self.result
            await self.on_message(msg)

    async def on_message(self, msg: Message) -> None:
        if isinstance(msg, Subscribed):
            self.result.app = msg.app
        elif isinstance(msg, ClustersInfo):
            self.launcher.set_clusters(msg.clusters)
            self.needs.discard("clusters")
            problem = self.launcher.infeasible()
            if problem:
                raise InfeasibleError(problem)
        elif isinstance(msg, InterClusterInfo):
            self.launcher.set_links(msg.links)
            self.needs.discard("links")
        elif isinstance(msg, ChangeNotify):
            self.result.views += 1
            self.launcher.apply(msg.changes)
        elif isinstance(msg, Error):
            logger.warning("%s: RMS error: %s", self.launcher.name, msg.message)
            return
        if not self.needs and self.launcher.caps:
            await self.adapt()

    async def adapt(self) -> None:
        delay = self.launcher.adaptation_delay
        if delay <= 0:
            await self.request()
        elif self.pending is None:
            loop = asyncio.get_running_loop()
            self.pending = loop.call_later(delay, lambda: asyncio.ensure_future(self.timer()))

    async def timer(self) -> None:
        self.pending = None
        with contextlib.suppress(ConnectionError):
            await self.request()

    async def request(self) -> None:
        req = self.launcher.next_request()
        if req is not None:
            self.result.requests += 1
            await self.send(req)

    async def deploy(self, msg: StartNotify) -> None:
        if self.pending is not None:
            self.pending.cancel()
        self.result.started = time.time()
        self.result.rids = {c: list(r) for c, r in msg.rids.items()}
        payload = asyncio.ensure_future(self.payload(msg))
        watch = asyncio.ensure_future(self.receive())
        done, _ = await asyncio.wait({payload, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch in done and isinstance(watch.result(), KillNotify):
            self.result.killed = True
            payload.cancel()
        else:
            await payload
            watch.cancel()
            await self.send(Done())
        self.result.ended = time.time()

    async def payload(self, msg: StartNotify) -> None:
        if self.command is None:
            hosts = {c: len(r) for c, r in msg.rids.items()}
            await asyncio.sleep(self.launcher.runtime(hosts))
            self.result.exit_code = 0
            return
        env = dict(os.environ)
        env["COORM_HOSTS"] = " ".join(r for rs in msg.rids.values() for r in rs)
        if msg.jobs:  # a real site: where the application's nodes are held
            jobs = " ".join(f"{c}:{j}" for c, j in sorted(msg.jobs.items()))
            env["COORM_JOBS"] = env["COORM_SLURM_JOBS"] = jobs
        proc = await asyncio.create_subprocess_exec(*self.command, env=env)
        try:
            self.result.exit_code = await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def run_launcher(host: str, port: int, launcher: Launcher,
                       command: Sequence[str] | None = None) -> LaunchResult:
    """Run one application through the service at ``host:port`` (see module docstring)."""
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=MAX_LINE)
    except OSError as exc:
        raise ExternalError(f"cannot reach the CooRM service at {host}:{port}: "
                            f"{exc.strerror or exc}") from None
    session = _Session(launcher, reader, writer, command)
    try:
        return await session.run()
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
