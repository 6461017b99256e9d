"""``source: prometheus`` over a store whose own scrape of the engine is slower than the advisor's reads.

``query_range`` fills every evaluation time with the newest raw sample at or before it, so when the store scrapes
less often than the advisor reads (a late scrape on a loaded machine, a longer scrape interval, remote-write or
ingestion delay) consecutive points repeat one scrape: every counter reads flat while requests run, and the stall
check took those for still intervals — a ``stalled → restart the engine`` recommendation for a busy engine (CI,
``tests/e2e/test_sources_agree.py[query_range]`` on VictoriaMetrics). A point showing the same raw scrape as the
point before it is not a new observation: the history holds one point per real scrape.

A stand-in Prometheus HTTP API on loopback holds a vLLM engine scraped every :data:`STORE_SCRAPE` seconds and
evaluates ``query_range`` as Prometheus does (look-back: each point holds the newest scrape at or before it); asked
for ``timestamp(up)`` it answers each point's raw scrape time, as Prometheus 2.42 and VictoriaMetrics 1.79 do
(:data:`advisor.sources.prometheus.SCRAPE_TIME`; measured against both). The service's clock is driven by the test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.sources.prometheus import SCRAPE_TIME, SCRAPE_TIME_MARK
from tests.conftest import reply

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
T0 = 1_700_000_000.0  # the service's clock at the first read
STEP = 5.0  # the advisor's scrape interval: it reads the store every STEP seconds
STORE_SCRAPE = 4 * STEP  # the store scrapes the engine at T0 + k × this: slower than the reads
INSTANCE = "10.0.0.1:8000"


@dataclass
class Engine:
    """The engine as the store scraped it: counters of the scrape time (still when ``hung``), 12 running."""

    hung: bool = False
    with_scrape_times: bool = True  # the store answers timestamp(up) (a store without it: every point kept)
    engine_series: bool = True  # False: the store holds up (== 1) but no engine sample in the range

    def series(self, scraped: float) -> dict[str, float]:
        moved = 0.0 if self.hung else scraped - T0 + 10_000
        return {
            "vllm:num_requests_running": 12.0,
            "vllm:num_requests_waiting": 3.0,
            "vllm:kv_cache_usage_perc": 0.5,
            "vllm:generation_tokens_total": 5_000.0 + 120.0 * moved,
            "vllm:prompt_tokens_total": 9_000.0 + 400.0 * moved,
        }


def _scraped(t: float) -> float:
    """The newest raw scrape at or before evaluation time ``t``."""
    return T0 + STORE_SCRAPE * math.floor((t - T0) / STORE_SCRAPE + 1e-9)


def _answer(engine: Engine, h: BaseHTTPRequestHandler) -> None:
    parts = urlsplit(h.path)
    params = dict(parse_qsl(parts.query))
    if h.command == "POST":
        params.update(parse_qsl(h.rfile.read(int(h.headers.get("Content-Length") or 0)).decode()))
    data: Any
    if parts.path == "/api/v1/label/__name__/values":
        data = sorted({*engine.series(T0), "up"})
    elif parts.path == "/api/v1/label/instance/values":
        data = [INSTANCE]
    elif parts.path == "/api/v1/query_range":
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
        times = [start + k * step for k in range(round((end - start) / step) + 1)]
        target = {"instance": INSTANCE, "job": "vllm"}
        result: list[dict[str, Any]] = [{"metric": {"__name__": "up", **target}, "values": [[t, "1"] for t in times]}]
        for name in engine.series(T0) if engine.engine_series else ():
            labels = {"__name__": name, **target, "engine": "0", "model_name": MODEL}
            values = [[t, repr(engine.series(_scraped(t))[name])] for t in times]
            result.append({"metric": labels, "values": values})
        if engine.with_scrape_times and "timestamp(" in params["query"]:
            mark, value = SCRAPE_TIME_MARK
            metric = {"__name__": SCRAPE_TIME, mark: value, **target}
            result.append({"metric": metric, "values": [[t, f"{_scraped(t):.3f}"] for t in times]})
        data = {"resultType": "matrix", "result": result}
    else:
        reply(h, 404, b"not found")  # no /federate: the range path (federate is off anyway)
        return
    reply(h, 200, json.dumps({"status": "success", "data": data}).encode(), "application/json")


@pytest.fixture
def store(http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str]) -> Iterator[tuple[Engine, str]]:
    engine = Engine()
    yield engine, http_server(lambda h: _answer(engine, h))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _service(url: str, clock: Clock, served_model: str | None = None) -> Service:
    dep: dict[str, Any] = {
        "name": "fleet",
        "source": "prometheus",
        "engine": "vllm",
        "selector": 'job="vllm"',
        "model": MODEL,
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    if served_model is not None:
        dep["served_model"] = served_model
    cfg = parse_config(
        {
            "scrape_interval": f"{STEP:g}s",
            "evaluation_window": f"{12 * STEP:g}s",
            "prometheus": {"url": url, "federate": False},
            "deployments": [dep],
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics, clock=clock, ignore_for=True)


def _run(url: str, reads: int) -> tuple[list[float], list[list[str]]]:
    """Read every :data:`STEP` seconds ``reads`` times, evaluating after each read; the history's times (in steps
    after ``T0``) and each evaluation's rules."""
    clock = Clock()
    svc = _service(url, clock)
    rules: list[list[str]] = []
    try:
        for i in range(reads):
            clock.now = T0 + i * STEP
            svc.scrape_once()
            rules.append(sorted(r["rule"] for r in svc.evaluate_once().deployments[0].as_dict()["recommendations"]))
        stamps = [(p.timestamp - T0) / STEP for p in svc.tracker.history("fleet", INSTANCE)]
    finally:
        svc.close()
    return stamps, rules


def test_a_busy_engine_behind_a_lagging_store_is_not_stalled(store: tuple[Engine, str]) -> None:
    """The store scrapes every 4 steps, the advisor reads every step: three of four points re-read a scrape. They
    are dropped, so no evaluation sees a still interval and the history holds one point per real scrape (the
    first evaluation time showing it)."""
    _, url = store
    stamps, rules = _run(url, 24)
    assert not [r for r in rules if "stalled" in r], rules
    assert stamps == [8.0, 12.0, 16.0, 20.0]  # the 12-step window: one point per store scrape


def test_a_hung_engine_behind_a_lagging_store_is_still_stalled(store: tuple[Engine, str]) -> None:
    """New scrapes with the same values and requests running: a genuine stall, still seen through the store."""
    engine, url = store
    engine.hung = True
    stamps, rules = _run(url, 24)
    assert stamps == [8.0, 12.0, 16.0, 20.0]
    assert "stalled" in rules[-1], rules[-1]


def test_a_store_that_does_not_say_which_scrape_a_point_shows_keeps_every_point(store: tuple[Engine, str]) -> None:
    """No ``timestamp(up)`` in the answer (a store without ``up``): every point is kept, as before the fix."""
    engine, url = store
    engine.with_scrape_times = False
    stamps, _ = _run(url, 24)
    assert stamps == [float(t) for t in range(8, 24)]


def test_a_read_with_no_new_point_leaves_the_refusal_of_the_last_point(store: tuple[Engine, str]) -> None:
    """``served_model`` names no model of the engine: every point is refused (``served_model_not_found``), none is
    recorded. A later read with no new point for the target — the store still shows the same scrape, or holds
    its ``up`` and no engine sample yet — leaves that status: the target is not "down (up == 0) or has no samples"
    (CI: ``tests/test_prometheus_read.py::test_served_model_not_found_through_prometheus``)."""
    engine, url = store
    clock = Clock()
    svc = _service(url, clock, served_model="nope")
    try:
        reasons: list[str | None] = []
        for i, engine_series in ((0, True), (1, True), (2, False)):  # 1: the same scrape; 2: up alone
            clock.now = T0 + i * STEP
            engine.engine_series = engine_series
            svc.scrape_once()
            (t,) = svc.evaluate_once().deployments[0].as_dict()["targets"]
            reasons.append(t["error_reason"])
        assert svc.tracker.history("fleet", INSTANCE) == ()
    finally:
        svc.close()
    assert reasons == ["served_model_not_found"] * 3, reasons
