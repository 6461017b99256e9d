"""A stand-in vLLM engine for the demo and the tests: serves vLLM-format ``/metrics`` following a
scripted load ramp on an accelerated clock. No model, no GPU.

The exposition uses vLLM V1's family names, types, labels (``model_name``, ``engine``) and bucket
bounds (``vllm/v1/metrics/loggers.py``, 0.33.0; bounds as in the reference catalog §1.2), rendered by
prometheus-client like the engine itself does.

The scenario is a list of :class:`Phase` values in *scenario seconds*; ``speed`` scenario seconds pass
per real second. Gauges take the phase's values; counters and histograms integrate the phase's rates
over the scenario time elapsed since the previous scrape, so every scrape is consistent with the last.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from advisor.engines.catalog import Family, reference_exposition
from advisor.hangups import QuietHangupServer

_V: Final = reference_exposition("vllm")

TTFT_BUCKETS: Final = _V["time_to_first_token_seconds"].buckets
"""vLLM's TTFT bounds, from the catalog (:mod:`advisor.engines.reference`)."""
TPOT_BUCKETS: Final = _V["request_time_per_output_token_seconds"].buckets
"""vLLM's per-request TPOT bounds, from the catalog."""
_SPREAD = ((0.5, 0.2), (1.0, 0.6), (1.8, 0.2))
"""Observations of a phase: 20 % at half its mean, 60 % at the mean, 20 % at 1.8× the mean."""


@dataclass(frozen=True, slots=True)
class Phase:
    """One stretch of the scenario. Durations in scenario seconds, rates per scenario second."""

    name: str
    duration: float
    kv_cache_usage: float
    running: float
    waiting: float
    requests_per_second: float
    prompt_tokens_per_request: float
    output_tokens_per_request: float
    preemptions_per_second: float
    ttft_seconds: float
    tpot_seconds: float


DEMO_RAMP: tuple[Phase, ...] = (
    Phase("idle", 30, 0.02, 1, 0, 0.2, 1500, 300, 0, 0.12, 0.02),
    Phase("busy", 90, 0.62, 38, 0, 4.0, 1500, 300, 0, 0.35, 0.04),
    Phase("saturated", 200, 0.985, 52, 60, 3.0, 1500, 300, 1.5, 6.0, 0.09),
    Phase("recovered", 10_000, 0.40, 24, 0, 3.0, 1500, 300, 0, 0.3, 0.035),
)
"""idle → busy → KV pool saturated (requests waiting, preemptions rising) → recovered."""


class _Histo:
    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0.0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, n: float) -> None:
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.counts[i] += n
                break
        else:
            self.counts[-1] += n
        self.sum += value * n

    def family(self, name: str, doc: str, labels: list[str], label_values: list[str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=labels)
        cum = 0.0
        buckets: list[tuple[str, float]] = []
        for b, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cum += n
            buckets.append(("+Inf" if b == float("inf") else str(float(b)), cum))
        fam.add_metric(label_values, buckets, self.sum)
        return fam


class StandInEngine(Collector):
    """The scripted engine's state; a prometheus-client collector rendering vLLM's families."""

    def __init__(
        self,
        phases: Sequence[Phase] = DEMO_RAMP,
        speed: float = 10.0,
        model: str = "meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks: int = 27000,
        block_size: int = 16,
        clock: Callable[[], float] = time.monotonic,
        gpu_memory_utilization: float = 0.9,
    ) -> None:
        """``speed``: scenario seconds per real second. ``num_gpu_blocks × block_size`` is the pool;
        ``gpu_memory_utilization`` the budget ``cache_config_info`` reports (vLLM's default 0.9)."""
        self.phases = tuple(phases)
        self.speed = speed
        self.model = model
        self.num_gpu_blocks = num_gpu_blocks
        self.block_size = block_size
        self.gpu_memory_utilization = gpu_memory_utilization
        self._clock = clock
        self._start = clock()
        self._t = 0.0  # scenario seconds integrated so far
        self._lock = threading.Lock()
        self.prompt_tokens = 0.0
        self.generation_tokens = 0.0
        self.preemptions = 0.0
        self.finished = 0.0
        self.ttft = _Histo(TTFT_BUCKETS)
        self.tpot = _Histo(TPOT_BUCKETS)
        self.created = time.time()

    def phase_at(self, t: float) -> Phase:
        """The phase at scenario time ``t`` (the last phase lasts forever)."""
        for p in self.phases:
            if t < p.duration:
                return p
            t -= p.duration
        return self.phases[-1]

    def scenario_time(self) -> float:
        """Scenario seconds since start."""
        return (self._clock() - self._start) * self.speed

    def advance(self) -> Phase:
        """Integrate counters and histograms up to now (one-second scenario steps); return the phase."""
        with self._lock:
            target = self.scenario_time()
            while self._t < target:
                dt = min(1.0, target - self._t)
                p = self.phase_at(self._t)
                n = p.requests_per_second * dt
                self.finished += n
                self.prompt_tokens += n * p.prompt_tokens_per_request
                self.generation_tokens += n * p.output_tokens_per_request
                self.preemptions += p.preemptions_per_second * dt
                for factor, share in _SPREAD:
                    self.ttft.observe(p.ttft_seconds * factor, n * share)
                    self.tpot.observe(p.tpot_seconds * factor, n * share)
                self._t += dt
            return self.phase_at(self._t)

    def collect(self) -> Iterator[Metric]:
        """Render the current state in vLLM's format."""
        p = self.advance()
        labels = ["engine", "model_name"]
        lv = ["0", self.model]

        def gauge(f: Family, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(f.name, f.help, labels=labels)
            g.add_metric(lv, value)
            return g

        def counter(f: Family, value: float) -> CounterMetricFamily:
            cf = CounterMetricFamily(f.name, f.help, labels=labels)
            cf.add_metric(lv, round(value), created=self.created)
            return cf

        yield gauge(_V["num_requests_running"], p.running)
        yield gauge(_V["num_requests_waiting"], p.waiting)
        yield gauge(_V["kv_cache_usage_perc"], p.kv_cache_usage)
        yield counter(_V["num_preemptions"], self.preemptions)
        yield counter(_V["prompt_tokens"], self.prompt_tokens)
        yield counter(_V["generation_tokens"], self.generation_tokens)
        success = _V["request_success"]
        rs = CounterMetricFamily(success.name, success.help, labels=["engine", "finished_reason", "model_name"])
        rs.add_metric(["0", "stop", self.model], round(self.finished), created=self.created)
        yield rs
        ttft, tpot = _V["time_to_first_token_seconds"], _V["request_time_per_output_token_seconds"]
        yield self.ttft.family(ttft.name, ttft.help, labels, lv)
        yield self.tpot.family(tpot.name, tpot.help, labels, lv)
        cache_config = _V["cache_config_info"]
        info = GaugeMetricFamily(
            cache_config.name,
            cache_config.help,
            labels=[
                "block_size",
                "cache_dtype",
                "engine",
                "gpu_memory_utilization",
                "kv_cache_size_tokens",
                "num_gpu_blocks",
            ],
        )
        info.add_metric(
            [
                str(self.block_size),
                "auto",
                "0",
                str(self.gpu_memory_utilization),
                str(self.num_gpu_blocks * self.block_size),
                str(self.num_gpu_blocks),
            ],
            1.0,
        )
        yield info


class _Handler(BaseHTTPRequestHandler):
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        body = generate_latest(self.server.registry)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class StandInServer(QuietHangupServer):
    """Serves one :class:`StandInEngine` at ``/metrics`` on ``(host, port)`` (port 0 picks a free one)."""

    daemon_threads = True

    def __init__(self, engine: StandInEngine, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(engine)
        super().__init__((host, port), _Handler)

    def url(self) -> str:
        """The ``/metrics`` URL."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def start_background(self) -> threading.Thread:
        """Serve on a daemon thread."""
        t = threading.Thread(target=self.serve_forever, name="standin", daemon=True)
        t.start()
        return t
