"""The service's Prometheus metrics (``prometheus_client``, on a registry of its own).

==================================  =========  ==========================================
``malleable_cycle_seconds``         histogram  wall time of one poll+decide+act cycle
``malleable_resizes_total``         counter    resizes by ``kind`` (grow, shrink) and
                                               ``outcome`` (done, partial, refused)
``malleable_placements_total``      counter    waiting jobs released on a site
``malleable_managed_jobs``          gauge      managed jobs by ``state`` (waiting, running)
``malleable_site_up``               gauge      1 when the site answered the last poll
``malleable_tags_ignored_total``    counter    jobs whose tag was refused (logged once)
``malleable_cycles_total``          counter    cycles since the service started
``process_*``                       various    prometheus_client's process collector:
                                               resident memory, CPU seconds, open files
==================================  =========  ==========================================

``process_resident_memory_bytes`` is what to watch on a service that runs for months
(its RSS grew 5.6% and 6.8% in two 30-minute soaks, docs/notes/issue-13-serve8.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from malleable.errors import require_extra

require_extra("prometheus_client", "service", "the site service")  # one line, not a traceback
from prometheus_client import (  # noqa: E402
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
)
from prometheus_client.exposition import MetricsHandler  # noqa: E402

_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class ServiceMetrics:
    """The metrics of one service (a registry of its own: tests may run several)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _server: Any = None

    def __post_init__(self) -> None:
        r = self.registry
        self.cycle = Histogram("malleable_cycle_seconds", "Wall time of one service cycle",
                               buckets=_BUCKETS, registry=r)
        self.resizes = Counter("malleable_resizes", "Resizes by kind and outcome",
                               ["kind", "outcome"], registry=r)
        self.placements = Counter("malleable_placements", "Waiting jobs released on a site",
                                  registry=r)
        self.jobs = Gauge("malleable_managed_jobs", "Managed jobs by state", ["state"],
                          registry=r)
        self.site_up = Gauge("malleable_site_up", "1 when the site answered the last poll",
                             ["site"], registry=r)
        self.ignored = Counter("malleable_tags_ignored", "Jobs whose tag was refused",
                               registry=r)
        self.cycles = Counter("malleable_cycles", "Cycles since the service started",
                              registry=r)
        ProcessCollector(registry=r)  # process_resident_memory_bytes and the like (Linux)

    def serve(self, host: str, port: int) -> int:
        """Start the ``/metrics`` HTTP endpoint in a thread; the port it listens on.

        (prometheus_client's own ``start_http_server`` returns nothing before 0.17, the
        version of Debian 12 that the testbed image carries: the same handler is served
        here with the standard library's threading server.)"""
        server = ThreadingHTTPServer((host, port), MetricsHandler.factory(self.registry))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        self._server = server
        return int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def sites(self, up: Iterable[tuple[str, bool]]) -> None:
        for name, online in up:
            self.site_up.labels(site=name).set(1 if online else 0)
