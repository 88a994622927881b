"""The CooRM service on the network: newline-delimited JSON over TCP (asyncio streams).

Each launcher opens one TCP connection (its session, section III-B) and sends
protocol messages, one JSON object per line (:mod:`malleable.coorm.protocol`);
the first must be ``subscribe``. The service feeds them to a
:class:`~malleable.coorm.core.CooRMCore` with its own clock (seconds since the
service started, monotonic) and writes back what the core answers, waking up on
its own for re-policy runs, fair-start releases and kills. A closed connection
counts as ``done`` (a running application) or as leaving (a waiting one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from malleable.coorm.core import CooRMCore
from malleable.coorm.profile import INF
from malleable.coorm.protocol import Error, Message, ProtocolError, Subscribe, decode, encode

logger = logging.getLogger(__name__)

#: Longest accepted message line (a CAP of ~50 000 steps).
MAX_LINE = 1 << 21


@dataclass(slots=True)
class ServiceTraffic:
    messages_in: int = 0
    messages_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class CooRMService:
    """Serve a CooRM core to launchers over TCP (see the module docstring)."""

    def __init__(self, core: CooRMCore, host: str = "127.0.0.1", port: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.core = core
        self.host = host
        self.port = port
        self.traffic = ServiceTraffic()
        self._clock = clock
        self._t0 = clock()
        self._writers: dict[str, asyncio.StreamWriter] = {}
        self._server: asyncio.Server | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._open: set[asyncio.StreamWriter] = set()

    def now(self) -> float:
        """Service time: seconds since the service started."""
        return self._clock() - self._t0

    async def start(self) -> tuple[str, int]:
        """Listen; the (host, port) actually bound (port 0 picks a free one)."""
        self._server = await asyncio.start_server(self._session, self.host, self.port,
                                                  limit=MAX_LINE)
        sock = self._server.sockets[0].getsockname()
        self.host, self.port = str(sock[0]), int(sock[1])
        logger.info("CooRM service listening on %s:%d", self.host, self.port)
        return self.host, self.port

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        server = self._server
        if server is None:
            raise RuntimeError("the service did not start")
        async with server:
            await server.serve_forever()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.close()
        for writer in list(self._open):
            writer.close()  # each session then reads EOF and ends by itself
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=5.0)
            for task in pending:
                task.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # ---------------------------------------------------------------- sessions

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        app_id: str | None = None
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._open.add(writer)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, ConnectionError) as exc:  # over-long line, reset peer
                    self._write(writer, Error(message=f"closing: {exc}"))
                    break
                if not line:
                    break
                app_id = self._receive(app_id, line, writer)
                self.pump()
                await writer.drain()
        except ConnectionError:
            logger.info("session %s: connection lost", app_id)
        finally:
            self._open.discard(writer)
            if app_id is not None:
                self._writers.pop(app_id, None)
                self.core.disconnect(app_id, self.now())
                self.pump()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _receive(self, app_id: str | None, line: bytes,
                 writer: asyncio.StreamWriter) -> str | None:
        self.traffic.messages_in += 1
        self.traffic.bytes_in += len(line)
        try:
            msg = decode(line)
        except ProtocolError as exc:
            self._write(writer, Error(message=str(exc)))
            return app_id
        if app_id is None:
            if not isinstance(msg, Subscribe):
                self._write(writer, Error(message="the first message must be subscribe"))
                return None
            app_id = self.core.subscribe(msg, self.now())
            self._writers[app_id] = writer
            return app_id
        if isinstance(msg, Subscribe):
            self._write(writer, Error(message="already subscribed"))
            return app_id
        self.core.handle(app_id, msg, self.now())
        return app_id

    # ---------------------------------------------------------------- output

    def pump(self) -> None:
        """Let the core act now and deliver its messages; re-arm the wake-up timer."""
        now = self.now()
        for app_id, msg in self.core.advance(now):
            writer = self._writers.get(app_id)
            if writer is not None and not writer.is_closing():
                self._write(writer, msg)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        wake = self.core.next_wakeup()
        if wake < INF:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(0.0, wake - now) + 1e-4, self.pump)

    def _write(self, writer: asyncio.StreamWriter, msg: Message) -> None:
        data = encode(msg)
        self.traffic.messages_out += 1
        self.traffic.bytes_out += len(data)
        writer.write(data)


async def serve(core: CooRMCore, host: str, port: int,
                ready: Callable[[str, int], None] | None = None) -> None:
    """Run a service until cancelled; ``ready(host, port)`` once it listens."""
    service = CooRMService(core, host, port)
    bound = await service.start()
    if ready is not None:
        ready(*bound)
    try:
        await service.serve_forever()
    finally:
        await service.close()
