"""Acceptance 3: a real Prometheus (Debian's ``prometheus``) scraping stand-in engines of three kinds, read back
through :class:`advisor.sources.prometheus.PrometheusSource`, agrees with scraping the same engines directly.

Set-up (one Prometheus for the module):

* 30 stand-in targets on 127.0.0.1: 10 vLLM (:class:`advisor.standin.StandInServer`, one port each) and 10 SGLang
  + 10 llama.cpp served by one threaded server at ``/sglang/<i>/metrics`` and ``/llamacpp/<i>/metrics`` from
  the templates in ``tests/fixtures/prometheus/``. Target 0 of each kind carries ``subset="small"``.
* Prometheus on a free loopback port with a generated config (``scrape_interval: 1s``, only these three jobs —
  none of the package's default node-exporter jobs; the lifecycle API stays off), TSDB in a temporary folder.
* While Prometheus scrapes, the test scrapes the three ``small`` targets itself every second through the
  advisor's own path (``scrape`` → ``parse_exposition`` → adapter), which is the reference.

The stand-ins' gauges are step functions of time (a new value every ``PERIOD`` seconds); their counters and
histogram buckets grow linearly. Tolerances (``I`` = the 1 s scrape interval, ``J`` = 0.5 s for scrape-start
jitter and request latency on a busy CI machine):

* **Gauges** and everything that is not a counter (model, engine config, ``missing``, histogram bounds and
  sources) are **equal** at a common time: a Prometheus point at ``t`` shows the newest scrape at or before ``t``,
  taken after ``t − I − J``; when no gauge step lies in ``(t − I − J, t]`` that scrape saw the same values as a
  direct scrape made in the same period.
* **Counters and histogram buckets**: the Prometheus value at ``t`` lags the true value by the age of that
  scrape, between 0 and ``I + J`` seconds. So the measured lag ``(direct(t) − prometheus(t)) ÷ rate`` must lie in
  ``[−0.15 s, I + J]`` (direct interpolated linearly between its own scrapes), and over the same window
  ``[a, b]`` the increases differ by at most ``rate × (I + J)`` plus 1 for engines that round their counters.
  Window rates (``telemetry.window_stats``) then differ by at most that over the span.

Measured (Debian 2.42.0, this suite's machine): the lag is constant per target — Prometheus scrapes each target
at a fixed phase of the interval — anywhere in [0, 1) s (0.01 to 0.95 s over several runs); so for linear
counters the window increases agree to the token and only the slow, integer-rounded vLLM counters differ (by
the rounding). Start-up takes ~6 s of the ~22 s: Prometheus hands discovered targets to its scrapers at most
every 5 s.

Query budget: one ``query_range`` per deployment and cycle — 3 for 3 deployments whether the selectors match
3 targets or 30 (6 when ``wanted`` is a predicate, which first lists metric names).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import signal
import socket
import string
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.engines import detect_engine, get_adapter
from advisor.sources.exposition import parse_exposition
from advisor.sources.prometheus import PrometheusSource, to_timed_snapshots
from advisor.sources.scrape import scrape
from advisor.standin import Phase, StandInEngine, StandInServer
from advisor.telemetry import window_stats

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "prometheus"
KINDS = ("vllm", "sglang", "llamacpp")
PER_KIND = 10
INTERVAL = 1.0  # Prometheus scrape_interval and the direct scrape cadence, seconds
JITTER = 0.5  # scrape-start jitter, a late scrape tick and request latency on a loaded CI machine, seconds
PERIOD = 4.0  # stand-in gauges take a new value every PERIOD seconds
SCRAPE_LAG = JITTER  # a point's stamp (its scrape's start) to the engine's answer, either scraper, seconds
COLLECT_SECONDS = 12.0
GAUGE_FIELDS = ("requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens")
SHAPE_FIELDS = (
    "engine",
    "model",
    "engine_config",
    "missing",
    "ttft_source",
    "tpot_source",
    "tpot_is_itl",
    "process_start_time_seconds",
)
COUNTER_FIELDS = ("prompt_tokens_total", "generation_tokens_total", "requests_finished_total", "preemptions_total")


# --- stand-in engines ----------------------------------------------------------------------------------------


def _num(v: float) -> str:
    return repr(float(v))


class Clocked:
    """Exposition values of the hand-written SGLang and llama.cpp stand-ins as functions of wall time."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.templates = {
            kind: string.Template((FIXTURES / f"{kind}.prom.tmpl").read_text()) for kind in ("sglang", "llamacpp")
        }

    def period(self, t: float) -> int:
        return math.floor((t - self.t0) / PERIOD)

    def values(self, kind: str, i: int, t: float) -> dict[str, str]:
        e = t - self.t0
        p = self.period(t)
        if kind == "llamacpp":
            return {
                "prompt": _num(5000 * (i + 1) + (120 + i) * e),
                "prompt_seconds": _num(10 + 0.05 * e),
                "cached": _num(800 + 40 * e),
                "predicted": _num(9000 + (75 + i) * e),
                "predicted_seconds": _num(20 + 0.9 * e),
                "decode": _num(4000 + 75 * e),
                "usage": _num(0.1 + 0.05 * ((p + i) % 8)),
                "kv_tokens": _num(4096 * (0.1 + 0.05 * ((p + i) % 8))),
                "running": _num(1 + (p + i) % 4),
                "waiting": _num((p + 2 * i) % 3),
            }
        requests_done = 100 + 2.0 * e
        ttft_shares = (0.1, 0.45, 0.8, 0.95, 0.99, 1.0)
        tpot_shares = (0.02, 0.3, 0.7, 0.9, 0.98, 1.0)
        out = {
            "running": _num(2 + (p + i) % 5),
            "waiting": _num((p + 2 * i) % 4),
            "usage": _num(0.2 + 0.07 * ((p + i) % 10)),
            "retracted": _num(3 + 0.25 * e),
            "prompt_batch": _num(1000 * (i + 1) + (30 + i) * e),
            "prompt_stream": _num(20000 + 170 * e),
            "generation_batch": _num(500 + 10 * e),
            "generation_stream": _num(7000 + 90 * e),
            "requests": _num(requests_done),
            "ttft_sum": _num(0.4 * requests_done),
            "tpot_sum": _num(0.045 * requests_done),
        }
        out.update({f"ttft_{k}": _num(s * requests_done) for k, s in enumerate(ttft_shares)})
        out.update({f"tpot_{k}": _num(s * requests_done) for k, s in enumerate(tpot_shares)})
        return out

    def render(self, kind: str, i: int) -> bytes:
        return self.templates[kind].substitute(self.values(kind, i, time.time())).encode()


_FLEET_PATH = re.compile(r"^/(sglang|llamacpp)/(\d+)/metrics$")


class FleetServer(ThreadingHTTPServer):
    """Many SGLang and llama.cpp stand-ins behind one port, one path each."""

    daemon_threads = True

    def __init__(self, clocked: Clocked) -> None:
        self.clocked = clocked
        super().__init__(("127.0.0.1", 0), _FleetHandler)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _FleetHandler(BaseHTTPRequestHandler):
    server: FleetServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        m = _FLEET_PATH.match(self.path.split("?", 1)[0])
        if m is None or int(m.group(2)) >= PER_KIND:
            self.send_error(404)
            return
        body = self.server.clocked.render(m.group(1), int(m.group(2)))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def vllm_engine(i: int) -> StandInEngine:
    """A steady vLLM stand-in: gauges fixed per instance, counters and histograms growing at fixed rates."""
    steady = Phase("steady", 1e9, 0.3 + 0.05 * i, 10 + i, i % 3, 2.0, 100, 50, 0.5, 0.2, 0.03)
    return StandInEngine(phases=(steady,), speed=1.0, model=f"standin-{i}")


# --- Prometheus ---------------------------------------------------------------------------------------------


@dataclass
class Target:
    kind: str
    index: int
    instance: str  # the instance label Prometheus gives it
    url: str  # for direct scraping

    @property
    def subset(self) -> str:
        return "small" if self.index == 0 else "large"


@dataclass
class Fleet:
    base_url: str
    targets: list[Target]
    clocked: Clocked
    log: Path
    direct: dict[str, list[TimedSnapshot]] = field(default_factory=dict)
    ready_seconds: float = 0.0  # from launching Prometheus to /-/ready
    startup_seconds: float = 0.0  # from the start of the fixture to every target up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def prometheus_config(targets: Sequence[Target], fleet_address: str) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = []
    for kind in KINDS:
        groups: list[dict[str, Any]] = []
        for t in (t for t in targets if t.kind == kind):
            labels = {"kind": kind, "subset": t.subset}
            if kind == "vllm":
                groups.append({"targets": [t.instance], "labels": labels})
            else:
                labels |= {"instance": t.instance, "__metrics_path__": f"/{kind}/{t.index}/metrics"}
                groups.append({"targets": [fleet_address], "labels": labels})
        jobs.append({"job_name": kind, "static_configs": groups})
    return {
        "global": {"scrape_interval": f"{INTERVAL:g}s", "scrape_timeout": f"{INTERVAL:g}s"},
        "scrape_configs": jobs,
    }


def wait_until(
    what: str, predicate: Callable[[], bool], timeout: float, proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode} while waiting for {what}:\n{tail(log)}")
        try:
            if predicate():
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:g}s waiting for {what}:\n{tail(log)}")


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def scrape_direct(t: Target) -> TimedSnapshot:
    """The reference: the advisor's own scrape path, timed at the middle of the request."""
    adapter = get_adapter(t.kind)
    with requests.Session() as session:
        before = time.time()
        result = scrape(t.url, session, connect_timeout=1.0, read_timeout=2.0)
        after = time.time()
    assert result.ok and result.text is not None, result.error_message
    snap = adapter.snapshot(parse_exposition(result.text, keep=adapter.wants))
    return TimedSnapshot(t.instance, (before + after) / 2, snap)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if PROMETHEUS is None:
        pytest.skip(
            "the prometheus binary is not on PATH (Debian: apt-get install -y prometheus; CI runs "
            ".ci/install-system-deps)"
        )
    began = time.monotonic()
    tmp = tmp_path_factory.mktemp("prometheus")
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

    config = tmp / "prometheus.yml"
    config.write_text(json.dumps(prometheus_config(targets, fleet_server.address), indent=1))
    log = tmp / "prometheus.log"
    proc: subprocess.Popen[bytes] | None = None
    base_url = ""
    try:
        for _attempt in range(3):  # a free port can be taken between probing and binding
            port = free_port()
            base_url = f"http://127.0.0.1:{port}"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [
                        PROMETHEUS,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={tmp / 'data'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=tmp,
                    start_new_session=True,
                )
            time.sleep(0.3)
            if proc.poll() is None:
                break
            if "address already in use" not in tail(log):
                pytest.fail(f"prometheus did not start:\n{tail(log)}")
        assert proc is not None
        launched = time.monotonic()
        wait_until("/-/ready", lambda: requests.get(f"{base_url}/-/ready", timeout=1).ok, 20, proc, log)
        ready_seconds = time.monotonic() - launched

        def all_up() -> bool:
            active = requests.get(f"{base_url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
            return len(active) == len(targets) and all(t["health"] == "up" for t in active)

        wait_until("all 30 targets up", all_up, 20, proc, log)
        f = Fleet(
            base_url, targets, clocked, log, ready_seconds=ready_seconds, startup_seconds=time.monotonic() - began
        )

        small = [t for t in targets if t.subset == "small"]
        f.direct = {t.kind: [] for t in small}
        end = time.monotonic() + COLLECT_SECONDS
        tick = time.monotonic()
        while time.monotonic() < end:
            for t in small:
                f.direct[t.kind].append(scrape_direct(t))
            tick += INTERVAL
            time.sleep(max(0.0, tick - time.monotonic()))
        time.sleep(INTERVAL + JITTER)  # let Prometheus ingest the last scrapes of the window
        yield f
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        for srv in servers:
            srv.shutdown()
            srv.server_close()


# --- comparisons ------------------------------------------------------------------------------------------------


def interpolate(points: Sequence[tuple[float, float]], t: float) -> float:
    """Linear interpolation through (time, value) points (sorted), t inside their span."""
    for (t1, v1), (t2, v2) in itertools.pairwise(points):
        if t1 <= t <= t2:
            return v1 if t2 == t1 else v1 + (v2 - v1) * (t - t1) / (t2 - t1)
    raise AssertionError(f"{t} outside {points[0][0]}..{points[-1][0]}")


def counter_series(history: Sequence[TimedSnapshot]) -> dict[str, list[tuple[float, float]]]:
    """Every counter-like value of the snapshots: counters, and each histogram's buckets, count and sum."""
    out: dict[str, list[tuple[float, float]]] = {}
    for ts in history:
        s = ts.snapshot
        for name in COUNTER_FIELDS:
            value = getattr(s, name)
            if value is not None:
                out.setdefault(name, []).append((ts.timestamp, value))
        for name in ("ttft", "tpot"):
            h: Histogram | None = getattr(s, name)
            if h is None:
                continue
            out.setdefault(f"{name}.count", []).append((ts.timestamp, h.count))
            out.setdefault(f"{name}.sum", []).append((ts.timestamp, h.sum))
            for le, c in h.buckets:
                out.setdefault(f"{name}.le={le:g}", []).append((ts.timestamp, c))
    return out


def shape(s: EngineSnapshot) -> dict[str, Any]:
    d = {f: getattr(s, f) for f in (*GAUGE_FIELDS, *SHAPE_FIELDS)}
    d["ttft_bounds"] = s.ttft.bounds() if s.ttft else None
    d["tpot_bounds"] = s.tpot.bounds() if s.tpot else None
    return d


@dataclass
class Cycle:
    queries: int
    groups: int
    seconds: float
    response_bytes: int


def read_cycle(
    source: PrometheusSource, fleet: Fleet, subset: str | None, wanted: dict[str, Any], a: float, b: float
) -> Cycle:
    """One advisor cycle: one history() per deployment (one deployment per engine kind)."""
    before = source.queries_made
    began = time.monotonic()
    groups = 0
    size = 0
    for kind in KINDS:
        selector = f'kind="{kind}"' + (f',subset="{subset}"' if subset else "")
        h = source.history(selector, wanted[kind], a, b, INTERVAL)
        assert h.ok, (h.error_reason, h.error_message)
        groups += len(h.groups)
        size += h.response_bytes
        adapter = get_adapter(kind)
        for g in h.groups:
            snaps = to_timed_snapshots(g, adapter)
            # one point per raw scrape (a scrape late or failed on a loaded machine leaves its step out)
            assert len(snaps) == len(g.scraped) == len(set(g.scraped)), (kind, g.target, g.scraped)
            assert len(snaps) >= (b - a) / 2, (kind, g.target, len(snaps))
            assert snaps[-1].snapshot.engine == kind
    return Cycle(source.queries_made - before, groups, time.monotonic() - began, size)


# --- the tests -------------------------------------------------------------------------------------------------


def window(fleet: Fleet) -> tuple[float, float]:
    """A whole-second window inside the direct scrapes, starting after one scrape interval plus jitter."""
    first = max(h[0].timestamp for h in fleet.direct.values())
    last = min(h[-1].timestamp for h in fleet.direct.values())
    return float(math.ceil(first + INTERVAL + JITTER)), float(math.floor(last))


@pytest.mark.parametrize("kind", KINDS)
def test_prometheus_snapshots_equal_direct_scrapes(fleet: Fleet, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Gauges equal at a common time; counters and buckets equal at the point's own time (its scrape's) within the
    scrape's latency."""
    a, b = window(fleet)
    assert b - a >= 6, f"window too short: {a}..{b}"
    target = next(t for t in fleet.targets if t.kind == kind and t.subset == "small")
    direct = fleet.direct[kind]
    with PrometheusSource(fleet.base_url, read_timeout=10) as source:
        h = source.history(f'kind="{kind}",subset="small"', get_adapter(kind).wants, a, b, INTERVAL)
    assert h.ok, (h.error_reason, h.error_message)
    assert [g.target for g in h.groups] == [target.instance]
    group = h.groups[0]
    assert group.up and all(v == 1.0 for _, v in group.up)
    prom = to_timed_snapshots(group, get_adapter(kind))
    grid = [a + k * INTERVAL for k in range(int(b - a) + 1)]
    held = [p.timestamp for p in prom]
    # one point per raw scrape, stamped with that scrape's time (the first grid time showing it holds the newest
    # scrape at or before it): every grid time gives one, unless a scrape came more than a step late (loaded
    # machine) and its grid time re-read the scrape before it
    assert held == list(group.scraped) and held == sorted(set(held)), (held, group.scraped)
    assert a - INTERVAL - JITTER < held[0] <= a and held[-1] <= b and len(held) >= len(grid) - 2, held
    start, end = held[0], held[-1]

    # gauges and shape: equal whenever no gauge step lies within I + J before the Prometheus point
    compared = 0
    for p in prom:
        period = fleet.clocked.period(p.timestamp)
        if p.timestamp - (fleet.clocked.t0 + period * PERIOD) < INTERVAL + JITTER:
            continue
        for d in direct:
            offset = d.timestamp - (fleet.clocked.t0 + period * PERIOD)
            if 0.1 <= offset <= PERIOD - 0.1:
                assert shape(p.snapshot) == shape(d.snapshot), (p.timestamp, d.timestamp)
                compared += 1
    assert compared >= 3, f"only {compared} same-period pairs compared"

    # counters and histogram buckets: lag in [−0.15 s, I + J]; window increases within rate × (I + J) (+1)
    prom_series, direct_series = counter_series(prom), counter_series(direct)
    assert prom_series.keys() == direct_series.keys()
    lags: list[float] = []
    worst_delta = 0.0
    for name, dpoints in direct_series.items():
        rate = (dpoints[-1][1] - dpoints[0][1]) / (dpoints[-1][0] - dpoints[0][0])
        ppoints = dict(prom_series[name])
        delta_p = ppoints[end] - ppoints[start]
        delta_d = interpolate(dpoints, end) - interpolate(dpoints, start)
        rounding = 1.0 if kind == "vllm" and not name.startswith(("ttft", "tpot")) else 1e-6
        bound = rate * SCRAPE_LAG + rounding
        assert abs(delta_p - delta_d) <= bound, (name, delta_p, delta_d, bound)
        if rate > 0:
            worst_delta = max(worst_delta, abs(delta_p - delta_d) / rate)
        if (rate >= 1.0 and rounding < 1) or rate >= 50:  # rounding noise (±0.5) below 10 ms of lag
            for t, v in ppoints.items():
                lag = (interpolate(dpoints, t) - v) / rate
                lags.append(lag)
                assert -SCRAPE_LAG <= lag <= SCRAPE_LAG, (name, t, lag)

    # what the rules see: window rates and TTFT deltas from both histories, over the span the points cover (an
    # evaluation-time stamp made that span up to one scrape interval short: rates high by up to I ÷ span)
    ws_p = window_stats(prom, now=end, window_seconds=end - start)
    ws_d = window_stats([d for d in direct if start <= d.timestamp <= end], now=end, window_seconds=end - start)
    assert ws_p.span_seconds == end - start
    for rate_field in ("prompt_tokens_per_second", "generation_tokens_per_second"):
        rp, rd = getattr(ws_p, rate_field), getattr(ws_d, rate_field)
        assert rp is not None and rd is not None
        assert abs(rp - rd) <= rd * 2 * SCRAPE_LAG / (end - start) + 2 / (end - start), (rate_field, rp, rd)
    if ws_d.ttft is not None:
        assert ws_p.ttft is not None and ws_p.ttft.bounds() == ws_d.ttft.bounds()

    with capsys.disabled():
        print(
            f"\n[prometheus vs direct] {kind}: {compared} gauge pairs equal; {len(lags)} counter points, lag "
            f"{min(lags):.3f}..{max(lags):.3f} s (bound ±{SCRAPE_LAG:g}); worst window-increase gap "
            f"{worst_delta:.3f} s of rate; Prometheus ready in {fleet.ready_seconds:.1f} s, all targets up after "
            f"{fleet.startup_seconds:.1f} s"
        )


def test_queries_per_cycle_do_not_depend_on_the_number_of_targets(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 deployments × 1 target and 3 deployments × 10 targets: the same number of HTTP requests per cycle."""
    a, b = window(fleet)
    with PrometheusSource(fleet.base_url, read_timeout=10) as source:
        # start-up: detect each deployment's engine from the metric names, fix the names to fetch
        wanted: dict[str, Any] = {}
        for kind in KINDS:
            listed = source.metric_names(f'kind="{kind}"', a, b)
            assert listed.ok, listed.error_message
            assert detect_engine(listed.names) == kind
            adapter = get_adapter(kind)
            wanted[kind] = frozenset(n for n in listed.names if adapter.wants(n))
        small = read_cycle(source, fleet, "small", wanted, a, b)
        large = read_cycle(source, fleet, None, wanted, a, b)
        predicates = {kind: get_adapter(kind).wants for kind in KINDS}
        small_pred = read_cycle(source, fleet, "small", predicates, a, b)
        large_pred = read_cycle(source, fleet, None, predicates, a, b)
    assert (small.groups, large.groups) == (3, 30)
    assert small.queries == large.queries == 3
    assert small_pred.queries == large_pred.queries == 6
    with capsys.disabled():
        print(
            f"\n[queries per cycle] 3 targets: {small.queries} ({small.seconds * 1000:.0f} ms, "
            f"{small.response_bytes} B), 30 targets: {large.queries} ({large.seconds * 1000:.0f} ms, "
            f"{large.response_bytes} B) over {b - a:g} s at {INTERVAL:g} s steps; with adapter.wants predicates: "
            f"{small_pred.queries} vs {large_pred.queries}"
        )
