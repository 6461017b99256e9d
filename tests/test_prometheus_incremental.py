"""``source: prometheus`` reads only the points since the previous cycle (issue 15).

A stand-in Prometheus HTTP API on loopback holds a synthetic vLLM fleet whose samples are functions of time
(counters grow at a known rate), evaluates ``query_range`` as Prometheus does (one point per series at
``start + k × step``) and counts, server-side, the points and bytes it sends. The service's clock is driven by
the test, so each cycle's range is exact and nothing sleeps.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from advisor.config import parse_config
from advisor.errors import ConfigError, ParseError
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.sources.prometheus import (
    FederationReader,
    PrometheusSource,
    PromHistory,
    _federation_general,
    groups_from_federation,
    incremental_range,
)
from tests.conftest import reply

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GEN_RATE = 120.0  # generation tokens per second, every instance
PROMPT_RATE = 400.0
T0 = 1_700_000_000.0  # the service's clock at the first cycle
SCRAPE = 5.0  # the stand-in store scrapes its engines at multiples of this (for /federate's timestamps)
# name → value at time t (seconds); counters start at 0 at T0 - 10,000 s
SERIES: dict[str, Callable[[float], float]] = {
    "vllm:num_requests_running": lambda t: 12.0,
    "vllm:num_requests_waiting": lambda t: 3.0,
    "vllm:kv_cache_usage_perc": lambda t: 0.5,
    "vllm:generation_tokens_total": lambda t: GEN_RATE * (t - T0 + 10_000),
    "vllm:prompt_tokens_total": lambda t: PROMPT_RATE * (t - T0 + 10_000),
}


@dataclass
class Store:
    """The stand-in's fleet and what it answered."""

    instances: list[str]
    failing: bool = False
    restart_at: float | None = None  # the engines restart then: counters start again from 0
    poisoned: str | None = None  # a query_range or /federate selecting this instance fails (HTTP 503)
    federate: bool = True  # serves /federate (else 404, as Thanos Querier and Mimir do)
    clock: Callable[[], float] | None = None  # /federate: the newest scrape is the last multiple of SCRAPE
    # a slow store: a query_range of more than slow_points points per series calls slow_answer before answering
    # (the test's clock moves on: the answer arrives that much later)
    slow_answer: Callable[[], None] | None = None
    slow_points: int = 2
    ahead: dict[str, float] = field(default_factory=dict)  # /federate: seconds added to an instance's timestamps
    requests: list[dict[str, Any]] = field(default_factory=list)  # one per query_range: path, params, points, bytes
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ranges(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"] == "/api/v1/query_range"]

    def federations(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"] == "/federate"]

    def value(self, name: str, t: float) -> float:
        f = SERIES[name]
        if self.restart_at is not None and name.endswith("_total") and t >= self.restart_at:
            return f(t) - f(self.restart_at)
        return f(t)

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()


def _selected(query: str, instances: list[str]) -> list[str]:
    """The instances an ``instance=~"a|b"`` matcher of ``query`` picks (all when there is none)."""
    m = re.search(r'instance=~"((?:[^"\\]|\\.)*)"', query)
    if m is None:
        return instances
    wanted = {re.sub(r"\\\\(.)", r"\1", v) for v in m.group(1).split("|")}
    return [i for i in instances if i in wanted]


def _answer(store: Store, h: BaseHTTPRequestHandler) -> None:
    parts = urlsplit(h.path)
    params = dict(parse_qsl(parts.query))
    if h.command == "POST":
        length = int(h.headers.get("Content-Length") or 0)
        params.update(parse_qsl(h.rfile.read(length).decode()))
    if store.failing:
        reply(h, 503, b"store down")
        return
    points = 0
    data: Any
    if parts.path == "/api/v1/label/__name__/values":
        data = sorted({*SERIES, "up"})
    elif parts.path == "/api/v1/label/instance/values":
        data = list(store.instances)
    elif parts.path == "/api/v1/query_range":
        if store.poisoned is not None and store.poisoned in _selected(params["query"], store.instances):
            reply(h, 503, b"this batch is down")
            return
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
        times = [start + k * step for k in range(round((end - start) / step) + 1)]
        if store.slow_answer is not None and len(times) > store.slow_points:
            store.slow_answer()
        result = []
        for inst in _selected(params["query"], store.instances):
            target = {"job": "vllm", "instance": inst}
            result.append({"metric": {"__name__": "up", **target}, "values": [[t, "1"] for t in times]})
            for name in SERIES:
                labels = {"__name__": name, **target, "engine": "0", "model_name": MODEL}
                result.append({"metric": labels, "values": [[t, repr(store.value(name, t))] for t in times]})
        points = sum(len(s["values"]) for s in result)
        data = {"resultType": "matrix", "result": result}
    elif parts.path == "/federate" and store.federate and h.command == "GET":
        query = params["match[]"]
        if store.poisoned is not None and store.poisoned in _selected(query, store.instances):
            with store.lock:
                store.requests.append({"path": parts.path, "params": params, "points": 0, "bytes": 18})
            reply(h, 503, b"this batch is down")
            return
        assert store.clock is not None
        t = SCRAPE * (store.clock() // SCRAPE)
        picked = _selected(query, store.instances)
        at = {i: round((t + store.ahead.get(i, 0.0)) * 1000) for i in picked}
        lines = ["# TYPE up untyped", *(f'up{{instance="{i}",job="vllm"}} 1 {at[i]}' for i in picked)]
        for name in SERIES:
            value = repr(store.value(name, t))
            lines.append(f"# TYPE {name} untyped")
            lines += [
                f'{name}{{engine="0",instance="{i}",job="vllm",model_name="{MODEL}"}} {value} {at[i]}' for i in picked
            ]
        text = "\n".join(lines) + "\n"
        with store.lock:
            store.requests.append(
                {"path": parts.path, "params": params, "points": len(picked) * (len(SERIES) + 1), "bytes": len(text)}
            )
        reply(h, 200, text.encode(), "text/plain; version=0.0.4")
        return
    else:
        with store.lock:
            store.requests.append({"path": parts.path, "params": params, "points": 0, "bytes": len(b"not found")})
        reply(h, 404, b"not found")
        return
    body = json.dumps({"status": "success", "data": data}).encode()
    with store.lock:
        store.requests.append({"path": parts.path, "params": params, "points": points, "bytes": len(body)})
    reply(h, 200, body, "application/json")


@pytest.fixture
def store(http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str]) -> Iterator[tuple[Store, str]]:
    s = Store([f"10.0.0.{i}:8000" for i in range(1, 8)])
    yield s, http_server(lambda h: _answer(s, h))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _service(url: str, clock: Clock, window: str = "60s", **prometheus: Any) -> Service:
    """One ``source: prometheus`` deployment over the stand-in; ``federate`` is off unless given (the range path)."""
    prometheus.setdefault("federate", False)
    cfg = parse_config(
        {
            "scrape_interval": "5s",
            "evaluation_window": window,
            "prometheus": {"url": url, **prometheus},
            "deployments": [
                {
                    "name": "fleet",
                    "source": "prometheus",
                    "engine": "vllm",
                    "selector": 'job="vllm"',
                    "model": MODEL,
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ],
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics, clock=clock)


def _timestamps(svc: Service, target: str) -> list[float]:
    return [p.timestamp for p in svc.tracker.history("fleet", target)]


def test_the_range_ends_now_and_counts_back_to_the_first_new_point() -> None:
    assert incremental_range(None, 1000.5, 60, 15) == (940.5, 1000.5)  # the whole window, newest point now
    assert incremental_range(1000.5, 1016.0, 60, 15) == (1001.0, 1016.0)
    assert incremental_range(1000.5, 1046.0, 60, 15) == (1016.0, 1046.0)  # three new points
    # one new point, or none: the point before it too (a one-point range near now is empty in VictoriaMetrics)
    assert incremental_range(1000.5, 1005.0, 60, 15) == (990.0, 1005.0)
    assert incremental_range(990.0, 2000.0, 60, 15) == (1940.0, 2000.0)  # a gap longer than the window
    with pytest.raises(ValueError, match="step"):
        incremental_range(None, 1000.0, 60, 0)


def test_the_newest_point_is_now_and_a_re_read_sample_is_not_a_new_interval(store: tuple[Store, str]) -> None:
    """Each read ends at ``now`` (as fresh as a whole-window read), off the grid of the previous read: a point
    read again a moment later (the same sample at another evaluation time) is not appended, so no interval
    shorter than half a step enters the history."""
    s, url = store
    clock = Clock()
    svc = _service(url, clock)
    try:
        for offset in (0.0, 5.4, 5.9, 10.2, 16.0, 16.3, 20.9):  # seconds after T0, off the 5 s grid
            clock.now = T0 + offset
            svc.scrape_once()
        stamps = _timestamps(svc, "10.0.0.1:8000")
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert stamps[-1] == T0 + 20.9  # the newest point is the time of the read
    assert stamps[-5:] == [T0, T0 + 5.4, T0 + 10.2, T0 + 16.0, T0 + 20.9]
    assert min(b - a for a, b in itertools.pairwise(stamps)) >= 2.5
    assert result["state"] == "fresh"
    assert result["snapshot"]["generation_tokens_per_second"] == pytest.approx(GEN_RATE * len(s.instances), rel=1e-9)


def test_each_cycle_fetches_only_the_new_points_whatever_the_window(store: tuple[Store, str]) -> None:
    s, url = store
    per_cycle: dict[str, list[int]] = {}
    bytes_steady: dict[str, int] = {}
    for window in ("60s", "300s"):
        s.clear()
        clock = Clock()
        svc = _service(url, clock, window=window)
        try:
            for _ in range(4):
                svc.scrape_once()
                clock.now += 5
            clock.now += 10  # three new grid points
            svc.scrape_once()
            assert svc.prom is not None
            assert svc.prom.bytes_received == sum(r["bytes"] for r in s.requests)  # the source counts what came
        finally:
            svc.close()
        ranges = s.ranges()
        per_cycle[window] = [r["points"] for r in ranges]
        bytes_steady[window] = ranges[1]["bytes"]
    series = len(s.instances) * (len(SERIES) + 1)
    # the first cycle reads the window (+ one interval) on the 5 s grid; every later one only what is new (one
    # new point comes with the newest point held, which is skipped, not counted twice)
    assert per_cycle["60s"] == [series * 14, series * 2, series * 2, series * 2, series * 3]
    assert per_cycle["300s"] == [series * 62, series * 2, series * 2, series * 2, series * 3]
    assert bytes_steady["60s"] == bytes_steady["300s"]  # bytes per cycle do not grow with the window


def test_histories_grow_by_appending_and_rates_are_those_of_a_whole_window_read(store: tuple[Store, str]) -> None:
    s, url = store
    clock = Clock()
    svc = _service(url, clock)
    try:
        for _ in range(30):  # 150 s: the 60 s window turned over twice
            svc.scrape_once()
            svc.scrape_once()  # no new grid point: the newest is read again and not counted twice
            clock.now += 5
        clock.now -= 5
        stamps = _timestamps(svc, "10.0.0.1:8000")
        incremental = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert stamps == sorted(set(stamps)) and stamps[-1] == clock.now  # strictly increasing, up to now
    fresh = _service(url, clock)  # one whole-window read at the same time
    try:
        fresh.scrape_once()
        whole = fresh.evaluate_once().deployments[0].as_dict()
    finally:
        fresh.close()
    assert incremental["state"] == whole["state"] == "fresh"
    for key in ("generation_tokens_per_second", "prompt_tokens_per_second", "requests_running"):
        assert incremental["snapshot"][key] == pytest.approx(whole["snapshot"][key], rel=1e-9), key
    fleet_rate = GEN_RATE * len(s.instances)  # the deployment sums its instances
    assert incremental["snapshot"]["generation_tokens_per_second"] == pytest.approx(fleet_rate, rel=1e-9)
    assert len(incremental["targets"]) == len(s.instances) and all(t["up"] for t in incremental["targets"])


def test_a_short_failure_reads_the_missed_points_and_a_gap_reads_the_window(store: tuple[Store, str]) -> None:
    s, url = store
    clock = Clock()
    svc = _service(url, clock)
    series = len(s.instances) * (len(SERIES) + 1)
    try:
        svc.scrape_once()
        s.failing = True
        for _ in range(2):  # two failed cycles (10 s, less than the window)
            clock.now += 5
            svc.scrape_once()
        assert not svc.evaluate_once().deployments[0].as_dict()["targets"][0]["up"]
        s.failing = False
        clock.now += 5
        s.clear()
        svc.scrape_once()
        assert [r["points"] for r in s.ranges()] == [series * 3]  # the two missed points and the new one
        s.failing = True
        clock.now += 120  # longer than the window
        svc.scrape_once()
        s.failing = False
        clock.now += 5
        s.clear()
        svc.scrape_once()
        assert [r["points"] for r in s.ranges()] == [series * 14]  # the whole window again
        stamps = _timestamps(svc, "10.0.0.3:8000")
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert stamps == sorted(set(stamps))
    assert result["state"] == "fresh"
    assert result["snapshot"]["generation_tokens_per_second"] == pytest.approx(GEN_RATE * len(s.instances), rel=1e-9)


def test_an_engine_restart_between_two_reads_is_a_counter_reset_not_a_negative_rate(store: tuple[Store, str]) -> None:
    s, url = store
    clock = Clock()
    svc = _service(url, clock)
    try:
        for _ in range(13):  # the window is full
            svc.scrape_once()
            clock.now += 5
        s.restart_at = clock.now - 2.5  # between the last point read and the next one
        for _ in range(3):
            svc.scrape_once()
            clock.now += 5
        clock.now -= 5
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert result["state"] == "fresh"
    # the increase across the reset is counted from 0 (as Prometheus's increase() does): 2.5 s of the 60 s
    # window's growth is lost, never a negative or doubled rate
    fleet_rate = GEN_RATE * len(s.instances)
    assert result["snapshot"]["generation_tokens_per_second"] == pytest.approx(fleet_rate * 57.5 / 60, rel=1e-9)


def test_a_selector_of_many_instances_is_read_in_batches(store: tuple[Store, str]) -> None:
    s, url = store
    clock = Clock()
    svc = _service(url, clock, batch_instances=3)
    try:
        svc.scrape_once()
        clock.now += 5
        s.clear()
        svc.scrape_once()
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    queries = [r["params"]["query"] for r in s.ranges()]
    assert len(queries) == 3  # 7 instances, 3 per batch
    picked = [_selected(q, s.instances) for q in queries]
    assert [len(p) for p in picked] == [3, 3, 1]
    assert sorted(i for p in picked for i in p) == sorted(s.instances)
    assert sorted(t["target"] for t in result["targets"]) == sorted(s.instances)
    assert result["state"] == "fresh" and all(t["up"] for t in result["targets"])


def test_a_failed_batch_fails_only_its_instances_and_is_read_again_next_cycle(store: tuple[Store, str]) -> None:
    s, url = store
    clock = Clock()
    svc = _service(url, clock, batch_instances=3)
    try:
        svc.scrape_once()
        clock.now += 5
        s.poisoned = "10.0.0.7:8000"  # the third batch (the seventh instance alone)
        svc.scrape_once()
        during = {t["target"]: t for t in svc.evaluate_once().deployments[0].as_dict()["targets"]}
        s.poisoned = None
        clock.now += 5
        s.clear()
        svc.scrape_once()
        after = svc.evaluate_once().deployments[0].as_dict()
        stamps = _timestamps(svc, "10.0.0.1:8000")
    finally:
        svc.close()
    assert not during["10.0.0.7:8000"]["up"] and during["10.0.0.7:8000"]["error_reason"] == "http_status"
    assert all(t["up"] for name, t in during.items() if name != "10.0.0.7:8000")
    # the read after the failure starts where the failed one did: its two points, for every batch
    per_instance = 2 * (len(SERIES) + 1)
    assert [r["points"] for r in s.ranges()] == [3 * per_instance, 3 * per_instance, 1 * per_instance]
    assert stamps == sorted(set(stamps))  # the points the good batches held are not counted twice
    assert after["state"] == "fresh" and all(t["up"] for t in after["targets"])


def test_a_selector_within_the_batch_size_is_one_query_without_an_instance_matcher(store: tuple[Store, str]) -> None:
    s, url = store
    svc = _service(url, Clock())
    try:
        svc.scrape_once()
    finally:
        svc.close()
    (only,) = s.ranges()
    assert "instance" not in only["params"]["query"]


def test_the_answer_cap_is_the_max_bytes_key(store: tuple[Store, str]) -> None:
    s, url = store
    svc = _service(url, Clock(), max_bytes=4096)
    try:
        svc.scrape_once()
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert s.ranges()[0]["bytes"] > 4096
    assert result["state"] == "unavailable"
    assert all(t["error_reason"] == "too_large" for t in result["targets"])
    assert "4096" in result["targets"][0]["error"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_bytes", 0), ("max_bytes", "lots"), ("max_bytes", 10**20), ("batch_instances", 0), ("batch_instances", -5)],
)
def test_bad_cap_and_batch_values_name_their_field(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        _service("http://127.0.0.1:9", Clock(), **{key: value})
    assert [p[0] for p in err.value.problems] == [f"prometheus.{key}"]


def test_history_batches_merges_groups_and_counts_every_request(store: tuple[Store, str], tmp_path: Path) -> None:
    s, url = store
    with PrometheusSource(url) as src:
        h = src.history_batches('job="vllm"', set(SERIES), T0 - 10, T0, 5, s.instances, 2)
        assert h.ok and h.queries == 4 and src.queries_made == 4
        assert [g.target for g in h.groups] == sorted(s.instances)
        assert h.response_bytes == src.bytes_received == sum(r["bytes"] for r in s.requests)
        parts: list[PromHistory] = []
        streamed = src.history_batches('job="vllm"', set(SERIES), T0 - 10, T0, 5, s.instances, 2, on_batch=parts.append)
        assert streamed.ok and streamed.groups == ()  # handed over batch by batch, not kept
        assert sorted(g.target for p in parts for g in p.groups) == sorted(s.instances) and len(parts) == 4
        with pytest.raises(ValueError, match="batch"):
            src.history_batches('job="vllm"', set(SERIES), T0 - 10, T0, 5, s.instances, 0)


# --- /federate: the newest sample of each series ----------------------------------------------------------------


def test_after_the_window_each_cycle_reads_the_newest_samples_from_federate(store: tuple[Store, str]) -> None:
    """The first read fills the window by ``query_range``; each later one is one ``/federate`` request whose
    samples carry the store's scrape time: a point stamped with it is appended when newer than the target's
    newest, and the rates equal a whole-window read's."""
    s, url = store
    clock = Clock()
    s.clock = clock
    svc = _service(url, clock, federate=True)
    try:
        svc.scrape_once()
        for _ in range(14):
            clock.now += 5.3  # the cycle drifts off the store's 5 s scrape grid
            svc.scrape_once()
        svc.scrape_once()  # no new scrape in the store: nothing appended
        stamps = _timestamps(svc, "10.0.0.1:8000")
        result = svc.evaluate_once().deployments[0].as_dict()
        assert svc.prom is not None and svc.prom.bytes_received == sum(r["bytes"] for r in s.requests)
    finally:
        svc.close()
    assert len(s.ranges()) == 1 and len(s.federations()) == 15
    series = len(s.instances) * (len(SERIES) + 1)
    assert [r["points"] for r in s.federations()] == [series] * 15  # one sample per series, whatever the window
    assert stamps == sorted(set(stamps))
    assert stamps[-1] == SCRAPE * ((T0 + 14 * 5.3) // SCRAPE)  # the scrape's own time, not the read's
    assert all(t % SCRAPE == 0 for t in stamps if t > T0)
    assert result["state"] == "fresh" and all(t["up"] for t in result["targets"])
    assert result["snapshot"]["generation_tokens_per_second"] == pytest.approx(GEN_RATE * len(s.instances), rel=1e-9)
    assert result["snapshot"]["requests_running"] == 12.0 * len(s.instances)


def test_a_store_without_federate_is_read_by_ranges_and_not_asked_again(
    store: tuple[Store, str], caplog: pytest.LogCaptureFixture
) -> None:
    s, url = store
    s.federate = False  # Thanos Querier, Mimir: 404
    clock = Clock()
    svc = _service(url, clock, federate=True)
    try:
        with caplog.at_level("INFO", logger="advisor.service"):
            for _ in range(4):
                svc.scrape_once()
                clock.now += 5
        clock.now -= 5
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert len(s.federations()) == 1 and s.federations()[0]["bytes"] == len(b"not found")
    assert len(s.ranges()) == 4  # the window, then the cycle the 404 came in, then every later one
    assert [r.getMessage() for r in caplog.records].count(
        next(r.getMessage() for r in caplog.records if "no federation endpoint" in r.getMessage())
    ) == 1
    assert result["state"] == "fresh" and all(t["up"] for t in result["targets"])
    assert result["snapshot"]["generation_tokens_per_second"] == pytest.approx(GEN_RATE * len(s.instances), rel=1e-9)


def test_federate_reads_in_instance_batches_and_a_failed_batch_fails_only_its_instances(
    store: tuple[Store, str],
) -> None:
    s, url = store
    clock = Clock()
    s.clock = clock
    svc = _service(url, clock, federate=True, batch_instances=3)
    try:
        svc.scrape_once()
        clock.now += 5
        s.clear()
        s.poisoned = "10.0.0.7:8000"
        svc.scrape_once()
        during = {t["target"]: t for t in svc.evaluate_once().deployments[0].as_dict()["targets"]}
        picked = [_selected(r["params"]["match[]"], s.instances) for r in s.federations()]
        s.poisoned = None
        clock.now += 5
        svc.scrape_once()
        after = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert not s.ranges()[1:] and [len(p) for p in picked] == [3, 3, 1]
    assert not during["10.0.0.7:8000"]["up"] and during["10.0.0.7:8000"]["error_reason"] == "http_status"
    assert all(t["up"] for name, t in during.items() if name != "10.0.0.7:8000")
    assert after["state"] == "fresh" and all(t["up"] for t in after["targets"])


def test_a_federate_answer_past_max_bytes_is_too_large(store: tuple[Store, str]) -> None:
    s, url = store
    s.clock = Clock()
    with PrometheusSource(url, max_bytes=1024) as src:
        h = src.latest('job="vllm"', set(SERIES))
    assert not h.ok and h.error_reason == "too_large" and "1024" in (h.error_message or "")
    with PrometheusSource(url) as src:
        h = src.latest('job="vllm"', set(SERIES), instances=["10.0.0.2:8000"])
    assert h.ok and [g.target for g in h.groups] == ["10.0.0.2:8000"] and src.federation is True


# --- a read longer than the window ------------------------------------------------------------------------------

SLOW_READ = 500.0
"""Seconds the slow store takes to answer a whole-window ``query_range`` (measured: 496 s for 10,000 instances),
longer than the 65 s the service reads (60 s window + one interval)."""


def _slow_store(s: Store, clock: Clock) -> None:
    """Whole-window ranges answer :data:`SLOW_READ` seconds late on ``clock``; ranges of two points at once."""

    def late() -> None:
        clock.now += SLOW_READ

    s.slow_answer = late


def test_after_a_read_longer_than_the_window_each_cycle_reads_federate_and_the_window_fills_from_it(
    store: tuple[Store, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The first read fills the window by ``query_range`` and its answer arrives 500 s later, when every point it
    holds is older than the window. The next cycles read the newest samples from ``/federate`` (reading the window
    again would take as long, forever): the window fills one point per cycle, the 500 s gap stays a gap (no point
    is made up for it), and the statistics are those of the points held, with the coverage they give."""
    s, url = store
    clock = Clock()
    s.clock = clock
    _slow_store(s, clock)
    svc = _service(url, clock, federate=True)
    cycles = [T0 + SLOW_READ + 5.3 * k for k in range(8)]  # drifting off the store's 5 s scrape grid
    try:
        with caplog.at_level("INFO", logger="advisor.service"):
            svc.scrape_once()
            assert clock.now == T0 + SLOW_READ  # the answer arrived late
            for t in cycles:
                clock.now = t
                svc.scrape_once()
        histories = {i: _timestamps(svc, i) for i in s.instances}
        result = svc.evaluate_once().deployments[0]
    finally:
        svc.close()
    assert len(s.ranges()) == 1 and len(s.federations()) == len(cycles)
    refill = [T0 - 65 + 5 * j for j in range(14)]  # the first read: 14 evaluation times, 5 s apart, up to T0
    federated = [T0 + SLOW_READ + 5 * k for k in range(8)]  # each cycle: the store's newest scrape (5 s grid)
    assert all(h == refill + federated for h in histories.values())
    n = len(s.instances)
    ev = result.evaluation
    # the 60 s window at the last cycle (T0 + 537.1) holds the 8 federated points of each instance, 35 s apart
    assert ev.samples == 8 * n and ev.expected_samples == (60 // 5 + 1) * n
    assert ev.coverage() == pytest.approx(8 / 13, rel=1e-12)
    assert ev.stats is not None and ev.stats.span_seconds == 35.0
    d = result.as_dict()
    assert d["state"] == "fresh" and all(t["up"] for t in d["targets"])
    assert d["snapshot"]["generation_tokens_per_second"] == pytest.approx(GEN_RATE * n, rel=1e-9)
    assert d["snapshot"]["prompt_tokens_per_second"] == pytest.approx(PROMPT_RATE * n, rel=1e-9)
    assert d["snapshot"]["requests_running"] == 12.0 * n
    said = [r for r in caplog.records if "took 500 s" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING" and "/federate" in said[0].getMessage()


def test_after_a_read_longer_than_the_window_a_store_without_federate_reads_short_ranges(
    store: tuple[Store, str],
) -> None:
    """The same slow first read from a store that answers ranges only: the next cycles read the points since the
    slow answer arrived (two evaluation times per range), not the window again."""
    s, url = store
    clock = Clock()
    _slow_store(s, clock)
    svc = _service(url, clock)  # federate off: the range path
    cycles = [T0 + SLOW_READ + 5.3 * k for k in range(8)]
    try:
        svc.scrape_once()
        for t in cycles:
            clock.now = t
            svc.scrape_once()
        stamps = _timestamps(svc, "10.0.0.4:8000")
        result = svc.evaluate_once().deployments[0]
    finally:
        svc.close()
    per_series = [r["points"] // (len(s.instances) * (len(SERIES) + 1)) for r in s.ranges()]
    assert per_series == [14] + [2] * len(cycles)
    # the first read up to T0; then [T0 + 495, T0 + 500] (a range spans two points); then each cycle's time (the
    # point re-read 0.3 s after the one held is skipped)
    assert stamps == [T0 - 65 + 5 * j for j in range(14)] + [T0 + 495.0] + cycles
    n = len(s.instances)
    assert result.evaluation.samples == 9 * n  # T0 + 495 … T0 + 537.1, inside the 60 s window
    assert result.evaluation.stats is not None
    assert result.evaluation.stats.span_seconds == pytest.approx(cycles[-1] - (T0 + 495), abs=1e-6)
    d = result.as_dict()
    assert d["state"] == "fresh"
    assert d["snapshot"]["generation_tokens_per_second"] == pytest.approx(GEN_RATE * n, rel=1e-9)


def test_failures_longer_than_the_window_after_a_slow_read_read_the_window_again(store: tuple[Store, str]) -> None:
    """What is skipped is only the slow read's own delay: a gap of failed cycles longer than the window, after it,
    reads the whole window again (by range), as after any gap."""
    s, url = store
    clock = Clock()
    s.clock = clock
    _slow_store(s, clock)
    svc = _service(url, clock, federate=True)
    try:
        svc.scrape_once()  # the slow first read
        svc.scrape_once()  # /federate
        s.failing = True
        for _ in range(14):  # 70 s of failed cycles
            clock.now += 5
            svc.scrape_once()
        s.failing = False
        s.slow_answer = None
        clock.now += 5
        s.clear()
        svc.scrape_once()
    finally:
        svc.close()
    assert [r["points"] for r in s.ranges()] == [len(s.instances) * (len(SERIES) + 1) * 14] and not s.federations()


FEDERATED = """# TYPE up untyped
up{instance="a:1",job="vllm",namespace="p"} 1 1700000000123
up{instance="b:1",job="vllm",namespace="prod"} 0 1700000005000
# TYPE vllm:num_requests_running untyped
vllm:num_requests_running{exported_job="e",instance="a:1",job="vllm",model_name="m\\"q",namespace="p"} 3 1700000000123
vllm:num_requests_running{instance="b:1",engine="0",job="vllm",model_name="m",namespace="prod"} 7 1700000000000
vllm:e2e_request_latency_seconds_bucket{engine="0",instance="a:1",job="vllm",le="+Inf"} 1e+06 1700000000123
"""


def test_groups_from_federation_reshapes_as_a_range_read_does() -> None:
    shaped = groups_from_federation(FEDERATED)
    a, b = shaped.groups
    assert a.target == "a:1" and a.up == ((1700000000.123, 1.0),)
    ((t, expo),) = a.points
    assert t == 1700000000.123
    (running,) = expo["vllm:num_requests_running"]
    # target labels (from up) dropped; the engine's own job label given back; escapes undone
    assert running.labels == {"job": "e", "model_name": 'm"q'} and running.value == 3.0
    assert [x.labels for x in expo["vllm:e2e_request_latency_seconds_bucket"]] == [{"engine": "0", "le": "+Inf"}]
    # b's scrapes fail since after its last samples (up == 0, newer): no point, the target reads down
    assert b.target == "b:1" and b.points == () and b.up == ((1700000005.0, 0.0),)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('up{instance="a"} 1 1700000000000\nthis is not a sample\n', "line 2 is not a sample"),
        ('up{instance="a",bad} 1 1700000000000\n', "malformed labels"),
        ('up{instance="a"} one 1700000000000\n', "a:|could not convert|one"),
    ],
)
def test_a_malformed_federation_answer_says_where(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        groups_from_federation(text)


def test_a_federation_sample_without_a_timestamp_fails_its_target_alone_and_names_it() -> None:
    """Before, one such line failed the whole answer (``sample up has no timestamp``, no target named)."""
    line = 'vllm:num_requests_running{instance="b:1",engine="0",job="vllm",model_name="m",namespace="prod"} 7'
    text = FEDERATED.replace(f"{line} 1700000000000", line)
    assert text != FEDERATED
    for read in (groups_from_federation, FederationReader().read):
        a, b = read(text).groups
        assert a.error is None and a == groups_from_federation(FEDERATED).groups[0]
        assert b.points == () and b.error is not None and b.error.startswith("b:1: 1 sample(s)")
        assert "vllm:num_requests_running" in b.error and "timestamp" in b.error


def test_the_fast_and_general_federation_paths_agree_and_a_repeated_series_is_read_once() -> None:
    general = _federation_general(FEDERATED, ("instance",), ())
    assert groups_from_federation(FEDERATED) == general
    # two jobs scraping one target: equal once target labels are dropped, read once with a warning
    twice = (
        FEDERATED + 'vllm:num_requests_running{exported_job="e",instance="a:1",job="other",model_name="m\\"q"} 3 1\n'
    )
    shaped = groups_from_federation(twice)
    assert shaped.warnings and "repeated" in shaped.warnings[0]
    assert len(shaped.groups[0].points[0][1]["vllm:num_requests_running"]) == 1


def test_a_federate_sample_stamped_far_ahead_fails_its_target_for_that_read_and_never_freezes_it(
    store: tuple[Store, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Adversarial review: one read whose samples of one instance were stamped in the future (microseconds for
    milliseconds) entered its history; every later point, older than that one, was dropped, and the target read
    ``fresh`` with frozen values for good. Now that read fails the target, naming it, and the next reads go on."""
    s, url = store
    clock = Clock()
    s.clock = clock
    svc = _service(url, clock, federate=True)
    try:
        svc.scrape_once()
        for _ in range(13):  # past the window: /federate reads
            clock.now += 5.0
            svc.scrape_once()
        before = _timestamps(svc, "10.0.0.2:8000")
        s.ahead["10.0.0.2:8000"] = 1e6  # ~11.6 days ahead
        clock.now += 5.0
        svc.scrape_once()
        during = svc.evaluate_once().deployments[0].as_dict()
        s.ahead.clear()
        for _ in range(3):
            clock.now += 5.0
            svc.scrape_once()
        after = svc.evaluate_once().deployments[0].as_dict()
        stamps = _timestamps(svc, "10.0.0.2:8000")
    finally:
        svc.close()
    assert s.federations()  # the reads in question were /federate reads
    bad = {t["target"]: t for t in during["targets"]}["10.0.0.2:8000"]
    assert not bad["up"] and bad["error_reason"] == "parse_error" and "ahead of the advisor's clock" in bad["error"]
    assert all(t["up"] for t in during["targets"] if t["target"] != "10.0.0.2:8000")
    assert before and max(stamps) <= clock.now and stamps == sorted(set(stamps))  # nothing from the future held
    assert stamps[-1] == SCRAPE * (clock.now // SCRAPE)  # the reads after it append again
    assert all(t["up"] for t in after["targets"])
    assert any("10.0.0.2:8000" in r.getMessage() and "ahead" in r.getMessage() for r in caplog.records)
