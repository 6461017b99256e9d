"""Serve simulated replicas' ``/metrics`` over HTTP, in real time or on an accelerated clock (the edge).

:func:`start_fleet` starts a small fleet on loopback with one call::

    fleet = start_fleet(DEMO_SCENARIOS, speed=10.0)     # healthy, kv-saturated, over-provisioned
    for name, url in fleet.targets:                        # one (deployment, /metrics URL) per replica
        print(name, url)
    cfg = {"deployments": [s.deployment_fields(fleet.urls(s.name)) for s in DEMO_SCENARIOS], ...}
    ...
    fleet.stop()                                           # or: with start_fleet(...) as fleet:

Each replica gets its own :class:`ThreadingHTTPServer` on ``host`` (port 0: a free port), as each engine has
its own ``/metrics``. One daemon thread advances every deployment to ``(monotonic() − start) × speed``
simulated seconds every ``tick_seconds``; a scrape advances its deployment to the same instant first, so
every scrape sees the simulation at scrape time. ``speed = 1`` is real time. A deployment's replicas share
one lock (they share one router and one traffic stream).

Paths: ``/metrics`` (the engine's format, :mod:`advisor.sim.exposition`), ``/health`` (200, as engines
answer), anything else 404.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from prometheus_client.registry import Collector

from advisor.hangups import QuietHangupServer
from advisor.sim.engine import ReplicaObserver
from advisor.sim.exposition import SGLangCollector, VLLMCollector, render
from advisor.sim.fleet import Fleet
from advisor.sim.metrics import SGLangMetrics, VLLMMetrics
from advisor.sim.scenarios import Scenario

__all__ = ["RunningFleet", "SimulatedDeployment", "start_fleet"]

_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class SimulatedDeployment:
    """One scenario's replicas, router and traffic, with each replica's engine metrics, behind one lock.

    ``sim_time()`` gives the simulated seconds the deployment should have reached (the fleet's clock).
    """

    def __init__(self, scenario: Scenario, sim_time: Callable[[], float], created: float, pid: int = 1) -> None:
        self.scenario = scenario
        self.config = scenario.engine_config()
        self.lock = threading.Lock()
        self._sim_time = sim_time
        self.metrics: list[VLLMMetrics | SGLangMetrics] = []

        def observers(i: int) -> Sequence[ReplicaObserver]:
            m: VLLMMetrics | SGLangMetrics
            if scenario.engine_format == "sglang":
                m = SGLangMetrics()
            else:
                spec = self.config.speculative
                m = VLLMMetrics(self.config.max_model_len, spec.num_speculative_tokens if spec else 0)
            self.metrics.append(m)
            return [m]

        self.fleet = Fleet(
            self.config,
            scenario.traffic,
            replicas=scenario.replicas,
            router=scenario.router,
            seed=scenario.seed,
            observers=observers,
        )
        self.collectors: list[Collector] = []
        for replica, m in zip(self.fleet.replicas, self.metrics, strict=True):
            if isinstance(m, SGLangMetrics):
                self.collectors.append(
                    SGLangCollector(replica, m, pid=pid, lock=self.lock, before_collect=self._catch_up)
                )
            else:
                self.collectors.append(
                    VLLMCollector(replica, m, created=created, lock=self.lock, before_collect=self._catch_up)
                )

    def _catch_up(self) -> None:
        """Advance to the clock's time (the caller holds :attr:`lock`)."""
        t = self._sim_time()
        if t > self.fleet.now:
            self.fleet.advance(t)

    def advance(self) -> None:
        """Advance to the clock's time under the lock."""
        with self.lock:
            self._catch_up()


class _Handler(BaseHTTPRequestHandler):
    server: _ReplicaServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body = render(self.server.collector)
            ctype = _CONTENT_TYPE
        elif path == "/health":
            body, ctype = b"", "text/plain"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _ReplicaServer(QuietHangupServer):
    daemon_threads = True

    def __init__(self, collector: Collector, host: str, port: int) -> None:
        self.collector = collector
        super().__init__((host, port), _Handler)

    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/metrics"


class RunningFleet:
    """Started by :func:`start_fleet`: the deployments, their servers and the clock thread."""

    def __init__(self, deployments: list[SimulatedDeployment], servers: list[tuple[str, _ReplicaServer]]) -> None:
        self.deployments = deployments
        self._servers = servers
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def targets(self) -> list[tuple[str, str]]:
        """``(deployment name, /metrics URL)`` per replica, in scenario then replica order."""
        return [(name, srv.url()) for name, srv in self._servers]

    def urls(self, name: str) -> list[str]:
        """The ``/metrics`` URLs of one deployment's replicas.

        Raises:
            KeyError: no deployment of that name.
        """
        out = [url for n, url in self.targets if n == name]
        if not out:
            raise KeyError(name)
        return out

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.targets)

    def _start(self, tick_seconds: float) -> None:
        for name, srv in self._servers:
            t = threading.Thread(target=srv.serve_forever, name=f"sim-{name}", daemon=True)
            t.start()
            self._threads.append(t)

        def run() -> None:
            while not self._stop.wait(tick_seconds):
                for d in self.deployments:
                    d.advance()

        clock = threading.Thread(target=run, name="sim-clock", daemon=True)
        clock.start()
        self._threads.append(clock)

    def stop(self) -> None:
        """Stop the clock and the servers and close their sockets."""
        self._stop.set()
        # each shutdown() waits for its serve_forever loop's next poll (0.5 s): asked of every server at once, the
        # fleet stops in one poll, not one per server (a 10-engine fleet under load took >10 s one by one)
        stoppers = [threading.Thread(target=srv.shutdown, daemon=True) for _, srv in self._servers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(timeout=5)
        for _, srv in self._servers:
            srv.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> RunningFleet:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_fleet(
    scenarios: Sequence[Scenario],
    speed: float = 10.0,
    *,
    host: str = "127.0.0.1",
    tick_seconds: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
) -> RunningFleet:
    """Start every scenario's replicas on ``host`` (free ports) and the clock thread; ``speed`` simulated
    seconds pass per real second. Returns the running fleet (``.targets``, ``.urls(name)``, ``.stop()``).

    Raises:
        ValueError: a non-positive speed or two scenarios with the same name.
        CapacityError: a scenario's configuration does not fit its GPU.
        OSError: a port cannot be bound.
    """
    if not speed > 0:
        raise ValueError(f"speed must be > 0 (simulated seconds per real second), got {speed!r}")
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise ValueError(f"scenario names must be unique: {names}")
    start = clock()
    created = time.time()

    def sim_time() -> float:
        return (clock() - start) * speed

    deployments = [SimulatedDeployment(s, sim_time, created, pid=1000 + i) for i, s in enumerate(scenarios)]
    servers: list[tuple[str, _ReplicaServer]] = []
    try:
        for d in deployments:
            for collector in d.collectors:
                servers.append((d.scenario.name, _ReplicaServer(collector, host, 0)))
    except OSError:
        for _, srv in servers:
            srv.server_close()
        raise
    fleet = RunningFleet(deployments, servers)
    fleet._start(tick_seconds)
    return fleet
