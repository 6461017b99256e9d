"""Issue 12, acceptance 4 (second half): VictoriaMetrics (Debian's ``victoria-metrics``, single-node server) is a
second Prometheus-compatible backend for ``source: prometheus``, end to end.

Set-up: the same 30 stand-in targets as ``test_prometheus_real.py`` (10 vLLM, 10 SGLang, 10 llama.cpp; its
helpers are imported, not copied) scraped by VictoriaMetrics every second through ``-promscrape.config`` (the
Prometheus config ``test_prometheus_real.prometheus_config`` writes), started by
:func:`tests.e2e.victoriametrics.start_victoriametrics` with ``-search.latencyOffset=0s`` (its default, 30 s,
hides the newest samples) and a temporary ``-storageDataPath``. While it scrapes, the test scrapes the three
``small`` targets directly through the advisor's own path — the reference.

What differs from Prometheus, and what the tests hold:

* **Values** are stored as a decimal mantissa and exponent, about 12 significant digits: ``1/3`` reads back as
  ``0.333333333333``, ``0.41000000000000003`` as ``0.41`` (measured on 1.79.5). Gauges are therefore equal to
  the direct scrape's within a relative 1e-11, not bit for bit; everything else (names, labels, ``le`` bounds,
  integer counts) is equal.
* **Step alignment**: a ``query_range`` resolving to 50 points or more has its ``start`` and ``end`` moved to
  multiples of ``step`` unless ``nocache=1`` is sent (for its response cache; see
  https://github.com/VictoriaMetrics/victoriametrics-datasource/releases/tag/v0.26.0). The advisor sends
  ``nocache=1``, so points fall at ``start + k × step`` as with Prometheus — checked here with 61 points.
* Counters lag a direct scrape by the age of VictoriaMetrics's newest scrape, within one scrape interval plus
  jitter, as for Prometheus (same bounds as ``test_prometheus_real.py``).

The second test runs the advisor itself (``Service``, ``source: prometheus``) against VictoriaMetrics — and
against a real Prometheus scraping the same engine when that binary is present (in CI it must be) — beside a
deployment scraping the engine directly: the same engine, state, snapshot gauges and recommendations; then the
engine goes away and every view turns ``unavailable`` with its target down (VictoriaMetrics's scraper writes
``up`` 0 and stale markers as Prometheus does, so the engine's series stop).

Without the binary the module is skipped with the reason — or fails when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.config import parse_config
from advisor.engines import detect_engine, get_adapter
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.sources.prometheus import PrometheusSource, to_timed_snapshots
from advisor.standin import Phase, StandInEngine, StandInServer
from advisor.telemetry import window_stats
from tests.e2e.prometheus import hostport, start_prometheus
from tests.e2e.victoriametrics import (
    active_targets,
    newest_sample_seconds,
    require_binary,
    start_victoriametrics,
    victoriametrics_binary,
)
from tests.sources.test_prometheus_real import (
    COLLECT_SECONDS,
    INTERVAL,
    JITTER,
    KINDS,
    PER_KIND,
    PERIOD,
    SCRAPE_LAG,
    Clocked,
    Fleet,
    FleetServer,
    Target,
    counter_series,
    interpolate,
    prometheus_config,
    read_cycle,
    scrape_direct,
    shape,
    vllm_engine,
    window,
)

pytestmark = pytest.mark.integration

REL = 1e-11
"""VictoriaMetrics keeps about 12 significant digits of a float (decimal mantissa and exponent)."""


def close(a: Any, b: Any) -> bool:
    """Equal, floats within ``REL`` (recursing into mappings and sequences); ``None`` only equals ``None``."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=REL)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    victoriametrics_binary()  # skip (or fail under CI) before starting anything
    began = time.monotonic()
    tmp = tmp_path_factory.mktemp("victoriametrics")
    clocked = Clocked(time.time())
    fleet_server = FleetServer(clocked)
    servers: list[ThreadingHTTPServer] = [fleet_server]
    targets: list[Target] = []
    for i in range(PER_KIND):
        standin = StandInServer(vllm_engine(i))
        servers.append(standin)
        targets.append(Target("vllm", i, f"127.0.0.1:{standin.server_address[1]}", standin.url()))
    for kind in ("sglang", "llamacpp"):
        for i in range(PER_KIND):
            targets.append(Target(kind, i, f"{kind}-{i}", f"http://{fleet_server.address}/{kind}/{i}/metrics"))
    for srv in servers:
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with start_victoriametrics(tmp, prometheus_config(targets, fleet_server.address)) as url:
            ready = time.monotonic() - began
            deadline = time.monotonic() + 20
            while True:
                active = active_targets(url)
                if len(active) == len(targets) and all(t["health"] == "up" for t in active):
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"not all {len(targets)} targets up after 20 s: {active}")
                time.sleep(0.1)
            f = Fleet(
                url, targets, clocked, tmp / "victoria-metrics.log", ready_seconds=ready,
                startup_seconds=time.monotonic() - began,
            )  # fmt: skip
            small = [t for t in targets if t.subset == "small"]
            f.direct = {t.kind: [] for t in small}
            end = time.monotonic() + COLLECT_SECONDS
            tick = time.monotonic()
            while time.monotonic() < end:
                for t in small:
                    f.direct[t.kind].append(scrape_direct(t))
                tick += INTERVAL
                time.sleep(max(0.0, tick - time.monotonic()))
            # every small target's scrape at or after the window's end must be searchable before the tests read
            # it: VictoriaMetrics makes pending rows searchable after about a second, longer on a loaded machine
            # (CI once saw 11 of 21 grid times after a fixed 1.5 s sleep)
            _, b = window(f)
            deadline = time.monotonic() + 30
            while True:
                newest = newest_sample_seconds(url, 'up{subset="small"}')
                if len(newest) == len(small) and min(newest.values()) >= b:
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"VictoriaMetrics holds no scrape at or after {b} for every small target: {newest}")
                time.sleep(0.2)
            yield f
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()


@pytest.mark.parametrize("kind", KINDS)
def test_victoriametrics_snapshots_equal_direct_scrapes(
    fleet: Fleet, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gauges and shape equal (within 12 digits) at a common time; counters and buckets equal at the point's own
    time (its scrape's) within the scrape's latency; the window rates the rules see agree."""
    a, b = window(fleet)
    assert b - a >= 6, f"window too short: {a}..{b}"
    target = next(t for t in fleet.targets if t.kind == kind and t.subset == "small")
    direct = fleet.direct[kind]
    with PrometheusSource(fleet.base_url, read_timeout=10) as source:
        h = source.history(f'kind="{kind}",subset="small"', get_adapter(kind).wants, a, b, INTERVAL)
    assert h.ok, (h.error_reason, h.error_message)
    assert [g.target for g in h.groups] == [target.instance]
    group = h.groups[0]
    assert group.dropped_labels >= {"job", "instance", "kind", "subset"}  # target labels, read from ``up``
    assert group.up and all(v == 1.0 for _, v in group.up)
    vm = to_timed_snapshots(group, get_adapter(kind))
    grid = [a + k * INTERVAL for k in range(int(b - a) + 1)]
    held = [p.timestamp for p in vm]
    # one point per raw scrape, stamped with that scrape's time (the first grid time showing it holds the newest
    # scrape at or before it): every grid time gives one, unless a scrape came more than a step late (loaded
    # machine) and its grid time re-read the scrape before it
    assert held == list(group.scraped) and held == sorted(set(held)), (held, group.scraped)
    assert a - INTERVAL - JITTER < held[0] <= a and held[-1] <= b and len(held) >= len(grid) - 2, (a, b, held)
    start, end = held[0], held[-1]

    compared = 0
    for p in vm:
        period = fleet.clocked.period(p.timestamp)
        if p.timestamp - (fleet.clocked.t0 + period * PERIOD) < INTERVAL + JITTER:
            continue
        for d in direct:
            offset = d.timestamp - (fleet.clocked.t0 + period * PERIOD)
            if 0.1 <= offset <= PERIOD - 0.1:
                assert close(shape(p.snapshot), shape(d.snapshot)), (p.timestamp, d.timestamp)
                compared += 1
    assert compared >= 3, f"only {compared} same-period pairs compared"

    vm_series, direct_series = counter_series(vm), counter_series(direct)
    assert vm_series.keys() == direct_series.keys()
    lags: list[float] = []
    for name, dpoints in direct_series.items():
        rate = (dpoints[-1][1] - dpoints[0][1]) / (dpoints[-1][0] - dpoints[0][0])
        vpoints = dict(vm_series[name])
        delta_v = vpoints[end] - vpoints[start]
        delta_d = interpolate(dpoints, end) - interpolate(dpoints, start)
        rounding = 1.0 if kind == "vllm" and not name.startswith(("ttft", "tpot")) else 1e-6
        bound = rate * SCRAPE_LAG + rounding + abs(delta_d) * REL
        assert abs(delta_v - delta_d) <= bound, (name, delta_v, delta_d, bound)
        if (rate >= 1.0 and rounding < 1) or rate >= 50:
            for t, v in vpoints.items():
                lag = (interpolate(dpoints, t) - v) / rate
                lags.append(lag)
                assert -SCRAPE_LAG <= lag <= SCRAPE_LAG, (name, t, lag)
    assert lags, "no counter fast enough to measure the lag"

    ws_v = window_stats(vm, now=end, window_seconds=end - start)
    ws_d = window_stats([d for d in direct if start <= d.timestamp <= end], now=end, window_seconds=end - start)
    assert ws_v.span_seconds == end - start
    for rate_field in ("prompt_tokens_per_second", "generation_tokens_per_second"):
        rv, rd = getattr(ws_v, rate_field), getattr(ws_d, rate_field)
        assert rv is not None and rd is not None
        assert abs(rv - rd) <= rd * 2 * SCRAPE_LAG / (end - start) + 2 / (end - start), (rate_field, rv, rd)
    if ws_d.ttft is not None:
        assert ws_v.ttft is not None and ws_v.ttft.bounds() == ws_d.ttft.bounds()

    with capsys.disabled():
        print(
            f"\n[victoriametrics vs direct] {kind}: {compared} gauge pairs equal; {len(lags)} counter points, lag "
            f"{min(lags):.3f}..{max(lags):.3f} s (bound ±{SCRAPE_LAG:g}); healthy in "
            f"{fleet.ready_seconds:.1f} s, all targets up after {fleet.startup_seconds:.1f} s"
        )


def test_points_fall_at_start_plus_k_steps_however_many(fleet: Fleet) -> None:
    """61 points at 0.125 s from a start that is no multiple of the step: VictoriaMetrics would move start and
    end to multiples of the step (≥ 50 points) unless asked not to; the source asks (``nocache=1``). ``up`` holds
    every evaluation time; the engine's points only the first showing each raw scrape (the store scrapes every
    second: the others re-read it), each stamped with that scrape's time, at or before its grid time."""
    a, b = window(fleet)
    step = 0.125
    start = a + 0.07
    end = start + 60 * step
    assert end <= b
    with PrometheusSource(fleet.base_url, read_timeout=10) as source:
        h = source.history('kind="vllm",subset="small"', get_adapter("vllm").wants, start, end, step)
    assert h.ok, (h.error_reason, h.error_message)
    (group,) = h.groups
    times = [t for t, _ in group.up]
    assert len(times) == 61
    assert all(abs(t - (start + k * step)) < 0.002 for k, t in enumerate(times)), (start, times[:3], times[-1])
    kept = [t for t, _ in group.points]
    assert kept == list(group.scraped) == sorted(set(kept)), kept  # one point per raw scrape, at its time
    assert start - INTERVAL - JITTER < kept[0] and kept[-1] <= end + 0.002, (start, end, kept)
    assert 60 * step / INTERVAL - 1 <= len(kept) <= 60 * step / INTERVAL + 2, kept


def test_queries_per_cycle_do_not_depend_on_the_number_of_targets(fleet: Fleet) -> None:
    """The names listing detects each engine; one query per deployment whether it has 1 target or 10."""
    a, b = window(fleet)
    with PrometheusSource(fleet.base_url, read_timeout=10) as source:
        wanted: dict[str, Any] = {}
        for kind in KINDS:
            listed = source.metric_names(f'kind="{kind}"', a, b)
            assert listed.ok, listed.error_message
            assert detect_engine(listed.names) == kind
            wanted[kind] = frozenset(n for n in listed.names if get_adapter(kind).wants(n))
        small = read_cycle(source, fleet, "small", wanted, a, b)
        large = read_cycle(source, fleet, None, wanted, a, b)
    assert (small.groups, large.groups) == (3, 30)
    assert small.queries == large.queries == 3


# --- the advisor's own loop ---------------------------------------------------------------------------------

SATURATED = Phase("saturated", 10_000, 0.97, 48, 12, 3.0, 1500, 300, 1.0, 0.5, 0.05)
SPEED = 3.0  # scenario seconds per second: 9 requests/s, ~70 finishing in the window
CYCLE = 2.0  # the advisor's scrape interval (room for a slow direct scrape on a loaded machine), seconds
WINDOW = 8.0  # its evaluation window, seconds
DEPLOYMENT: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "max_num_seqs": 256,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}
SNAPSHOT_KEYS = ("requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "model")


def _service(engine_url: str, store_url: str) -> Service:
    cfg = parse_config(
        {
            "scrape_interval": f"{CYCLE:g}s",
            "evaluation_window": f"{WINDOW:g}s",
            "prometheus": {"url": store_url},
            "deployments": [
                {"name": "direct", "targets": [engine_url], **DEPLOYMENT},
                {"name": "via-store", "source": "prometheus", "selector": 'job="vllm"', **DEPLOYMENT},
            ],
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics, ignore_for=True)


def _wait_for_series(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = requests.get(f"{url}/api/v1/query", params={"query": "vllm:num_requests_running"}, timeout=2)
            if r.ok and r.json()["data"]["result"]:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    pytest.fail(f"no engine series in {url} after {timeout:g}s")


def _recommendations(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(r["rule"], r["dial"], r["action"], r["current"]) for r in result["recommendations"]]


def _suggested_agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Suggested values equal — numbers within 10 % or 1: those derived from window rates (tokens per finished
    request …) differ by the store's lag behind a direct scrape, up to one scrape interval of counter growth."""
    for x, y in zip(a["recommendations"], b["recommendations"], strict=True):
        u, v = x["suggested"], y["suggested"]
        if isinstance(u, int | float) and isinstance(v, int | float) and not isinstance(u, bool):
            if abs(u - v) > max(1.0, 0.1 * abs(v)):
                return False
        elif u != v:
            return False
    return True


def test_the_advisor_reads_victoriametrics_as_it_reads_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``source: prometheus`` pointed at VictoriaMetrics (and at Prometheus): the same engine detected, the same
    state, snapshot gauges and recommendations as the deployment scraping the engine directly; when the engine
    goes away, every view turns ``unavailable`` with the target down."""
    victoriametrics_binary()
    with_prometheus = True
    try:
        require_binary("prometheus", "Debian: apt-get install -y prometheus")
    except pytest.skip.Exception:
        with_prometheus = False  # the VictoriaMetrics half still runs; CI fails above instead
    engine = StandInServer(StandInEngine(phases=(SATURATED,), speed=SPEED, num_gpu_blocks=2000))
    engine.start_background()
    target = hostport(engine.url())
    scrape = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"}, "scrape_configs": []}
    scrape["scrape_configs"] = [{"job_name": "vllm", "static_configs": [{"targets": [target]}]}]
    results: dict[str, list[dict[str, Any]]] = {}
    queries: dict[str, int] = {}
    gone: dict[str, list[dict[str, Any]]] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(engine.server_close)
        stack.callback(engine.shutdown)
        stores = {"victoriametrics": stack.enter_context(start_victoriametrics(tmp_path / "vm", scrape))}
        if with_prometheus:
            prom = start_prometheus(tmp_path / "prom", {"vllm": [target]}, scrape_interval="1s")
            stores["prometheus"] = stack.enter_context(prom)
        for url in stores.values():
            _wait_for_series(url)
        services = {name: _service(engine.url(), url) for name, url in stores.items()}
        for svc in services.values():
            stack.callback(svc.close)
        for _ in range(int(WINDOW / CYCLE)):  # the direct deployment's history fills the window
            for svc in services.values():
                svc.scrape_once()
            time.sleep(CYCLE)
        for name, svc in services.items():
            assert svc.prom is not None
            before = svc.prom.queries_made
            svc.scrape_once()
            queries[name] = svc.prom.queries_made - before
            results[name] = [d.as_dict() for d in svc.evaluate_once().deployments]

        engine.shutdown()  # the engine goes away: the stores' next scrapes fail (up == 0, series marked stale)
        engine.server_close()
        time.sleep(3 * INTERVAL)
        for name, svc in services.items():
            svc.scrape_once()
            gone[name] = [d.as_dict() for d in svc.evaluate_once().deployments]

    for name, (direct, via) in gone.items():  # every view says so
        assert via["state"] == direct["state"] == "unavailable", (name, via["state"], direct["state"])
        assert [t["up"] for t in via["targets"]] == [t["up"] for t in direct["targets"]] == [False], name
        assert _recommendations(via) == _recommendations(direct), name  # open ones stay open, none added
    for name, (direct, via) in results.items():
        assert via["engine"] == "vllm", name  # detected from the series names the store holds
        assert via["state"] == direct["state"] == "fresh", name
        for key in SNAPSHOT_KEYS:
            assert close(via["snapshot"][key], direct["snapshot"][key]), (name, key)
        assert queries[name] == 1, name  # one range query per deployment per cycle
        assert via["recommendations"], name
        assert _recommendations(via) == _recommendations(direct), name
        assert _suggested_agree(via, direct), (name, via["recommendations"], direct["recommendations"])
        gen_direct = direct["snapshot"]["generation_tokens_per_second"]
        gen_via = via["snapshot"]["generation_tokens_per_second"]
        assert gen_direct == pytest.approx(900 * SPEED, rel=0.35), name  # 3 requests/s × 300 tokens
        assert gen_via == pytest.approx(900 * SPEED, rel=0.35), name
    if with_prometheus:
        vm, prom = results["victoriametrics"][1], results["prometheus"][1]
        assert _recommendations(vm) == _recommendations(prom)
        assert _suggested_agree(vm, prom)
    with capsys.disabled():
        direct = results["victoriametrics"][0]
        print(f"\n[advisor] direct: {[(r['dial'], r['suggested']) for r in direct['recommendations']]}")
        for name, (_, via) in results.items():
            print(f"[advisor] via {name}: {[(r['dial'], r['suggested']) for r in via['recommendations']]}")


def test_an_absent_binary_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI (``CI`` set) must not pass by skipping the backend tests."""
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-server-binary"):
        require_binary("no-such-server-binary", "not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        require_binary("no-such-server-binary", "not installed")
