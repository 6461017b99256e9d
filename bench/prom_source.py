"""``source: prometheus`` at fleet scale (issue 15, acceptance 2): N vLLM instances behind one selector in a real
Prometheus 2.42 and in a real VictoriaMetrics, read by the advisor's own cycle; per cycle it prints the bytes
fetched, the advisor's CPU and the cycle's wall time.

    PYTHONPATH=$PWD .venv/bin/python bench/prom_source.py                       # 1,000 and 10,000, both stores
    PYTHONPATH=$PWD .venv/bin/python bench/prom_source.py --sizes 1000 --stores victoriametrics --cycles 4

Set-up, per store and size (everything on loopback, in a temporary directory, removed at the end):

* **Stand-in exporters.** ``--exporters`` HTTP servers (one child process, one thread each) each expose
  N / exporters instances' vLLM series, every series carrying its own ``instance="e-00042"`` label; the store
  scrapes them with ``honor_labels: true``, so it holds N instances as if it scraped N engines. Each instance's
  block is the project's simulated vLLM 0.33 replica page (``bench/fleet.py`` ``_sim_page``) cut to the families
  the advisor's vLLM adapter reads (``advisor.engines.vllm.WANTED_SAMPLE_NAMES``): 132 series per instance, so
  1,000 instances are 132,000 series and 10,000 are 1.32 million. Counters and histograms grow on every scrape.
* **Stores**: Debian's ``prometheus`` (2.42) and ``victoria-metrics`` (1.79, ``-search.latencyOffset=0s``),
  started by the test helpers ``tests/e2e/prometheus.py`` / ``tests/e2e/victoriametrics.py`` on free ports,
  scraping every ``--interval`` seconds.
* **The advisor**: ``advisor.service.Service`` in this process with one ``source: prometheus`` deployment,
  selector ``job="fleet",instance=~"e-.+"``, ``scrape_interval`` = ``--interval``, ``evaluation_window`` =
  ``--window``, ``prometheus.batch_instances`` = ``--batch``. After ``--warmup`` seconds of store data it runs
  ``--cycles`` cycles (``scrape_once`` + ``evaluate_once``), one per interval, each followed, as in the daemon, by
  its garbage-collection turn (``advisor.heap.CycleHeap``; before 2026-12-03 the bench left the collector's full
  passes in, which rescan every instance's history and grew the CPU cycle by cycle). Cycle 1 reads all the window
  the store holds; the later ones only the points since the previous cycle.

Printed per cycle: bytes fetched (``PrometheusSource.bytes_received``), queries, the advisor's CPU
(``time.process_time`` of this process: the exporters and the stores run in other processes), the cycle's wall
time, the targets up, and the CPU the store and the exporters used during the cycle (:func:`others_cpu`: the
cores the cycle shares). Then, for comparison, what one read of the whole window costs (the path before issue 15
did this every cycle): its bytes and CPU, or ``too_large`` past ``prometheus.max_bytes``.

Goal (issue 15): 10,000 instances within a 15 s cycle, bytes per cycle proportional to the new points.

Measured on the shared 2-core machine (2026-12-02, other benchmarks running; figures per advisor cycle):

    --sizes 1000 --stores victoriametrics --cycles 4 --warmup 30
        cycle 1 (the window so far) 38.2 MB, CPU 7.6 s, 10.6 s; cycles 2-4 (1 new point) 32.5 MB, CPU 5.5-6.3 s, 7-8 s
    --sizes 1000 --stores prometheus --cycles 4 --warmup 30 --whole-window
        cycle 1 38.0 MB, CPU 6.1 s, 8.6 s; cycles 2-4 (1 new point) 33.7 MB, CPU 5.7-6.3 s, 8.2-13.9 s;
        one whole-window read of only ~90 s of data: 58.8 MB (a full 5 min window passes the 64 MiB cap)
    --sizes 10000 --stores prometheus --cycles 2 --warmup 15 --interval 30
        cycle 1 320.5 MB in 52 queries, CPU 54.6 s, 95.8 s, RSS peak 211 MiB; cycle 2 (3 new points) 379.3 MB,
        CPU 86.1 s, 123.0 s — 10,000 instances do not fit a 15 s cycle: about 5.5-6 ms of CPU per instance
        per cycle (JSON decoding and reshaping ~132 series per instance), and the answer is mostly labels: each
        series costs about 190 bytes of labels plus about 22 bytes per point, so a cycle's bytes are
        series × (190 + 22 × points): proportional to the new points beyond a fixed per-series part, and
        independent of the window.

With the incremental reads from ``/federate`` (``prometheus.federate: true``, the default; ``--no-federate`` gives
the range path above), same machine and day, other benchmarks running:

    --sizes 1000 --stores victoriametrics --cycles 4 --warmup 30
        cycle 1 38.9 MB, CPU 7.6 s, 11.1 s; cycles 2-4 (/federate) 22.5 MB, CPU 2.1-2.4 s, 4.0-7.8 s
    --sizes 1000 --stores prometheus --cycles 4 --warmup 30
        cycle 1 39.5 MB, CPU 7.5 s, 10.9 s; cycles 2-4 (/federate) 23.3 MB, CPU 1.7-2.2 s, 2.8-3.4 s
    --sizes 10000 --stores victoriametrics --cycles 3 --warmup 15
        cycle 1 448.5 MB in 52 queries, CPU 121 s, 217 s; cycles 2-3 (/federate, 50 queries) 225 MB, CPU 26.0-26.1 s,
        45-52 s, RSS peak 396 MiB
    --sizes 10000 --stores prometheus --cycles 3 --warmup 15
        cycle 1 414.5 MB in 52 queries, CPU 92 s, 144 s; cycles 2-3 (/federate, 50 queries) 233 MB, CPU 24.4-26.1 s,
        49-53 s, RSS peak 376 MiB

About 2.5 ms of advisor CPU per instance per cycle (3× less than the range path; bytes 30-40 % less: ~170 bytes
per series, one sample each): 10,000 instances still do not fit a 15 s cycle. Where it goes, per 1,000 instances
(in-process profile of one cycle): parsing the federation text ~0.65 s (C-speed line split 0.25-0.3 s, one Python
step per series for the rest), the vLLM adapter's snapshot of each instance ~0.55 s, evaluation ~0.25 s; the wall
time beyond the CPU is the store producing 1.32 million series' newest samples while it scrapes them.

With ``FederationReader`` (the /federate answers read through a cache of the series set; ``--compare`` alternates it
with the reference path cycle by cycle), same run, side by side, 2026-12-02 13:25-13:37 UTC with other helpers'
benchmarks holding the 2-core machine at load average 6-8 (every figure inflated against the ones above):

    --sizes 1000 --cycles 7 --warmup 30 --compare
        prometheus       /federate cycles: reference CPU 5.16-5.36 s, 22-23 s; cached CPU 3.70-4.02 s, 16-23 s (23.3 MB)
        victoriametrics  /federate cycles: reference CPU 4.00-5.03 s, 16-19 s; cached CPU 3.16-3.93 s, 11-20 s (22.5 MB)
    --sizes 10000 --stores prometheus --cycles 4 --warmup 45 --interval 30 --compare
        cycle 1 (range) 552 MB in 52 queries, CPU 313 s, 496 s, RSS peak 490 MiB: longer than the 5 min window, so
        cycle 2 re-read the whole window by range again; stopped before any /federate cycle (with --interval 15
        the store could not list 10,000 instances within the 9 s read timeout for four cycles)
    --offline 200 --reps 8   (no store: one 200-instance batch, 4.39 MB, 26,425 lines; median process time)
        reading it: reference 342 ms, cached 167 ms; reading and applying it to the tracker: 738 -> 513 ms
    --offline 200 --reps 6 --pods   (each instance with a pod target label: 4.90 MB, 26,626 lines)
        reading it: reference 1154 ms, cached 482 ms; reading and applying it: 1512 -> 785 ms (before the cached
        reader checked repeated series per target, it took the reference path on every such read: 1355 ms)

    Those two --offline figures of "applying" are too low: until 2026-12-03 the offline rounds were stamped 15 s
    apart into the future, so from round 5 on every instance failed as "ahead of the advisor's clock" and the
    rounds timed the failure path. Stamped in the past (rounds 1 s apart, the newest 1 s ago), with one
    ``FrozenLabels`` per series handed out by the cached reader so the adapters' shape memos take their layouts
    (2026-12-03, 3 alternating runs per side, load 2.8-4, median ms per 200-instance batch):

    --offline 200 --reps 8
        cached path: reading 78.1 -> 69.2 ms (0.391 -> 0.346 ms per instance); reading and applying
        186.8 -> 134.6 ms (0.934 -> 0.673 ms per instance); the reference path unchanged (~280-310 ms)
    --offline 200 --reps 6 --pods
        reading and applying 361-363 -> 243-264 ms (1.81 -> 1.27 ms per instance)

What the machine has left for the advisor at 10,000 instances (2026-12-03, nothing else running, load ~1; the
store's and the exporters' CPU per cycle are printed since this day):

    --sizes 10000 --stores prometheus --cycles 3 --warmup 30
        before the advisor starts, the store scraping alone uses 0.52 CPU (cores) and the exporters 0.06
        cycle 2 (/federate) 232.8 MB in 50 queries, advisor CPU 15.7 s, cycle 28.7 s; meanwhile the store 27.8 s of
        CPU and the exporters 1.8 s
    --sizes 10000 --stores prometheus --cycles 4 --warmup 15
        cycles 2-4 (/federate) advisor CPU 16.0, 18.6, 17.7 s, cycles 28.6, 31.7, 28.6 s; the store 28.1, 30.4,
        27.4 s of CPU in the same cycles

    The store needs ~1 core throughout a cycle: 0.52 of a core to scrape 1.32 million series, plus ~12.8 s of CPU
    per cycle to render 233 MB of /federate (27.8 s − 0.52 × 28.7 s). In a 15 s cycle on these 2 cores (30 s of CPU)
    that is 7.8 + 12.8 = 20.6 s for the store and ~0.9 s for the exporters, leaving ~8.5 s for the advisor, which
    spends 15.7-18.6 s (1.6-1.9 ms per instance) beside the store. With no store running it costs about the same:
    ``--offline 2000 --reps 22 --evaluate`` (same day, load ~1) gave, once 18-22 points were held, reading 0.83-1.07,
    applying 0.40-0.50 and evaluating 0.27-0.37 ms per instance, ~1.5-1.9 ms, all on the cycle's one core (the
    reads of one selector run on one thread). The 15 s goal at 10,000 instances does not fit this machine with the
    store on it: the advisor would need half its CPU per instance and the second core the store is using.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import re
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

SELECTOR = 'job="fleet",instance=~"e-.+"'
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_SERIES = 5_000_000
"""VictoriaMetrics ``-search.maxUniqueTimeseries`` for the bench (above 10,000 instances × 132 series)."""
_COUNTER = re.compile(r"(_total|_bucket|_count|_sum)$")


# --- the stand-in exporters -----------------------------------------------------------------------------------


def instance_block() -> list[tuple[str, float, bool]]:
    """One instance's lines as ``(series text with an @@I@@ instance placeholder, value, grows)``: the simulated
    vLLM 0.33 page cut to the sample names the vLLM adapter reads."""
    from fleet import _sim_page

    from advisor.engines.vllm import VLLMAdapter

    adapter = VLLMAdapter()
    out: list[tuple[str, float, bool]] = []
    for line in _sim_page().decode().splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name = re.split(r"[{ ]", series, maxsplit=1)[0]
        if not adapter.wants(name):
            continue
        if "{" in series:
            series = series.replace("{", '{instance="@@I@@",', 1)
        else:
            series += '{instance="@@I@@"}'
        out.append((series, float(value), bool(_COUNTER.search(name))))
    return out


def _serve_exporters(ports: Any, instances: list[list[str]], block: list[tuple[str, float, bool]]) -> None:
    """Child process: one HTTP server per list of instance names; each scrape renders the block once (counters
    grown by the time since start) and repeats it per instance."""
    started = time.time()

    def page(names: list[str]) -> bytes:
        grow = 1.0 + (time.time() - started) / 600.0
        text = "\n".join(f"{s} {v * grow if g else v!r}" for s, v, g in block) + "\n"
        return "".join(text.replace("@@I@@", n) for n in names).encode()

    servers = []
    for names in instances:

        class Handler(BaseHTTPRequestHandler):
            mine = names

            def do_GET(self) -> None:
                body = page(self.mine)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    ports.put([s.server_address[1] for s in servers])
    while True:
        time.sleep(3600)


@contextlib.contextmanager
def exporters(n: int, count: int) -> Iterator[list[str]]:
    """Start ``count`` exporters holding ``n`` instances between them; yield their ``host:port`` targets."""
    names = [f"e-{i:05d}" for i in range(n)]
    per = -(-n // count)
    chunks = [names[i : i + per] for i in range(0, n, per)]
    ctx = multiprocessing.get_context("fork")
    ports = ctx.Queue()
    proc = ctx.Process(target=_serve_exporters, args=(ports, chunks, instance_block()), daemon=True)
    proc.start()
    try:
        yield [f"127.0.0.1:{p}" for p in ports.get(timeout=60)]
    finally:
        proc.terminate()
        proc.join(10)


# --- the stores ---------------------------------------------------------------------------------------------------


def scrape_config(targets: list[str], interval: float) -> dict[str, Any]:
    job = {
        "job_name": "fleet",
        "honor_labels": True,
        "scrape_interval": f"{interval:g}s",
        "scrape_timeout": f"{interval:g}s",
        "static_configs": [{"targets": targets}],
    }
    return {"global": {"scrape_interval": f"{interval:g}s"}, "scrape_configs": [job]}


@contextlib.contextmanager
def store(kind: str, workdir: Path, targets: list[str], interval: float) -> Iterator[str]:
    from tests.e2e.prometheus import start_prometheus
    from tests.e2e.victoriametrics import start_victoriametrics

    config = scrape_config(targets, interval)
    if kind == "prometheus":
        with start_prometheus(
            workdir, {}, f"{interval:g}s", extra_config={"scrape_configs": config["scrape_configs"]}, timeout=120
        ) as url:
            yield url
    else:
        # its default -search.maxUniqueTimeseries (300,000) refuses the series-name listing of a selector
        # matching more series (HTTP 422, "the number of matching timeseries exceeds 300000"): 2,272 instances here
        with start_victoriametrics(
            workdir, config, timeout=120, extra_args=[f"-search.maxUniqueTimeseries={MAX_SERIES}"]
        ) as url:
            yield url


def wait_for_instances(url: str, n: int, timeout: float) -> float:
    """Seconds until the store answers with every instance's ``vllm:num_requests_running``."""
    began = time.monotonic()
    query = 'count(vllm:num_requests_running{job="fleet"})'
    while time.monotonic() - began < timeout:
        with contextlib.suppress(requests.RequestException, KeyError, IndexError, ValueError):
            r = requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=30).json()
            if int(float(r["data"]["result"][0]["value"][1])) >= n:
                return time.monotonic() - began
        time.sleep(1.0)
    raise TimeoutError(f"the store did not hold {n} instances within {timeout:g}s")


# --- the advisor ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _daemon_heap() -> Iterator[Any]:
    """The daemon's garbage-collection policy (:class:`advisor.heap.CycleHeap`: collect the young generations and
    freeze the heap after each cycle), so the figures are the daemon's, not those of a process whose full collections
    rescan every instance's history; unfrozen at the end."""
    from advisor.heap import CycleHeap

    heap = CycleHeap()
    try:
        yield heap
    finally:
        heap.close()


def service(url: str, interval: float, window: str, batch: int, max_bytes: int, federate: bool = True) -> Any:
    from advisor.config import parse_config
    from advisor.exporter import make_registry
    from advisor.service import Service

    cfg = parse_config(
        {
            "scrape_interval": f"{interval:g}s",
            "evaluation_window": window,
            "prometheus": {"url": url, "batch_instances": batch, "max_bytes": max_bytes, "federate": federate},
            "deployments": [
                {
                    "name": "fleet",
                    "source": "prometheus",
                    "selector": SELECTOR,
                    "model": MODEL,
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ],
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics)


def others_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's descendants by role: ``store`` (the Prometheus or VictoriaMetrics
    process), ``exporters`` (the stand-in exporters' process), from ``/proc/<pid>/stat`` (user + system, every
    thread). With the advisor's own CPU they are what the cycle shares this machine's cores with."""
    import os

    out = {"store": 0.0, "exporters": 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = "store" if comm.startswith(("prometheus", "victoria")) else "exporters"
        out[role] += sum(int(x) for x in fields[11:13]) / tick  # utime, stime
    return out


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (``/proc/<pid>/task/<tid>/children``)."""
    import os

    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(c) for c in f.read().split()]
                out.extend(kids)
                todo.extend(kids)
        except OSError:
            continue
    return out


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(kind: str, n: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"prom-source-{kind}-"))
        targets = stack.enter_context(exporters(n, args.exporters))
        url = stack.enter_context(store(kind, Path(tmp), targets, args.interval))
        filled = wait_for_instances(url, n, args.ready_timeout)
        print(f"# {kind} n={n}: {n} instances ({n * 132:,} series) held after {filled:.0f}s", flush=True)
        idle0, idle_began = others_cpu(), time.monotonic()
        time.sleep(args.warmup)
        idle = {k: v - idle0[k] for k, v in others_cpu().items()}
        span = time.monotonic() - idle_began
        print(
            f"# {kind} n={n}: before the advisor starts, the store scraping alone uses {idle['store'] / span:.2f} "
            f"CPU (cores) and the exporters {idle['exporters'] / span:.2f}, over {span:.0f} s",
            flush=True,
        )
        svc = service(url, args.interval, args.window, args.batch, args.max_bytes, not args.no_federate)
        heap = stack.enter_context(_daemon_heap())
        assert svc.prom is not None
        cached = svc.prom.federation_reader
        try:
            for i in range(1, args.cycles + 1):
                # --compare: even cycles read /federate by the reference path, odd ones through the cache
                reader = "reference" if args.reference or (args.compare and i % 2 == 0) else "cached"
                svc.prom.federation_reader = None if reader == "reference" else cached
                began = time.monotonic()
                cpu0 = time.process_time()
                others0 = others_cpu()
                assert svc.prom is not None
                b0, q0 = svc.prom.bytes_received, svc.prom.queries_made
                until = svc.deployments[0].prom_until
                svc.scrape_once()
                result = svc.evaluate_once()
                heap.after_cycle()  # the daemon's collector policy between cycles (advisor.heap), CPU counted
                others = {k: v - others0[k] for k, v in others_cpu().items()}
                row = {
                    "store": kind,
                    "instances": n,
                    "cycle": i,
                    "bytes": svc.prom.bytes_received - b0,
                    "queries": svc.prom.queries_made - q0,
                    "cpu_s": time.process_time() - cpu0,
                    "wall_s": time.monotonic() - began,
                    "store_cpu_s": others["store"],
                    "exporters_cpu_s": others["exporters"],
                    # evaluation times new to this cycle, per series (the whole window held so far on cycle 1)
                    "new_points": None
                    if until is None or svc.deployments[0].prom_until is None
                    else round((svc.deployments[0].prom_until - until) / args.interval),
                    "up": sum(t.up for d in result.deployments for t in d.targets),
                    "rss_peak_mib": _rss_mib(),
                    "federate": svc.prom.federation,
                    "reader": reader,
                }
                if svc.prom.federation and until is not None:
                    row["new_points"] = 1  # /federate: the newest sample of each series
                rows.append(row)
                print(
                    f"{kind:16} n={n:<6} cycle {i}: {row['bytes'] / 1e6:8.2f} MB in {row['queries']:3} queries "
                    f"({'the window' if row['new_points'] is None else row['new_points']} new points per series), "
                    f"advisor CPU {row['cpu_s']:6.2f} s, cycle {row['wall_s']:6.2f} s, "
                    f"{row['up']} targets up, RSS peak {row['rss_peak_mib']:.0f} MiB; meanwhile the store used "
                    f"{row['store_cpu_s']:.2f} s CPU and the exporters {row['exporters_cpu_s']:.2f} s"
                    f"{f', /federate ({reader})' if row['federate'] and i > 1 else ''}",
                    flush=True,
                )
                if args.json:
                    print(json.dumps(row), flush=True)
                time.sleep(max(0.0, began + args.interval - time.monotonic()))
            if args.whole_window:
                rows.append(whole_window(svc, kind, n, args))
        finally:
            svc.close()
    return rows


def whole_window(svc: Any, kind: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """One read of the whole window in one query, as the source did every cycle before issue 15."""
    cfg = svc.cfg
    now = time.time()
    cpu0, began = time.process_time(), time.monotonic()
    h = svc.prom.history(
        SELECTOR,
        svc.deployments[0].prom_wanted,
        now - cfg.evaluation_window - cfg.scrape_interval,
        now,
        cfg.scrape_interval,
    )
    row = {
        "store": kind,
        "instances": n,
        "cycle": "whole-window",
        "bytes": h.response_bytes,
        "ok": h.ok,
        "error": h.error_reason,
        "cpu_s": time.process_time() - cpu0,
        "wall_s": time.monotonic() - began,
    }
    outcome = "ok" if h.ok else f"failed {h.error_reason}"
    print(
        f"{kind:16} n={n:<6} one whole-window read (the old path, every cycle): {h.response_bytes / 1e6:8.2f} MB, "
        f"{outcome}, CPU {row['cpu_s']:.2f} s (reading only; the old path then observed every point), "
        f"{row['wall_s']:.2f} s",
        flush=True,
    )
    return row


def federate_body(n: int, stamp_ms: int, pods: bool = False) -> str:
    """A ``/federate`` answer of the shape Prometheus 2.42 gives the advisor for ``n`` bench instances: families in
    the block's order, each under its ``# TYPE`` line, one line per instance with ``job="fleet"`` and the labels
    sorted, the value and ``stamp_ms``. ``pods``: each instance's series also carry ``pod="vllm-e-00042"``, a target
    label (Kubernetes service discovery), which its ``up`` series, listed first, carries too."""
    families: dict[str, list[str]] = {}
    if pods:
        families["up"] = [f'up{{instance="e-{i:05d}",job="fleet",pod="vllm-e-{i:05d}"}} 1 {stamp_ms}' for i in range(n)]
    pod = ['pod="vllm-@@I@@'] if pods else []
    for series, value, _ in instance_block():
        name, _, rest = series.partition("{")
        labels = sorted([*(x.rstrip('"') for x in rest.rstrip("}").split('",')), 'job="fleet', *pod])
        body = '",'.join(labels) + '"'
        lines = families.setdefault(name, [])
        lines += [f"{name}{{{body.replace('@@I@@', f'e-{i:05d}')}}} {value!r} {stamp_ms}" for i in range(n)]
    return "".join(f"# TYPE {name} untyped\n" + "\n".join(sorted(lines)) + "\n" for name, lines in families.items())


def offline(n: int, reps: int, pods: bool = False, evaluate: bool = False) -> None:
    """Side by side in this process, no store: one ``n``-instance ``/federate`` batch (:func:`federate_body`, new
    timestamps each time) read by the reference path and by the cached ``FederationReader``, alternately, then
    applied to a service's tracker (``Service._apply_groups`` + ``_finish_read``: the adapter's snapshot of each
    instance). Prints the median and least process time of each over ``reps`` rounds. With ``evaluate`` (the cached
    service only) each round is also evaluated (``evaluate_once`` on a clock that follows the rounds, then the
    daemon's ``CycleHeap`` turn) and every round's read, apply and evaluate times per instance are printed, so a
    cost that grows with the points held shows."""
    import statistics

    from advisor.engines import get_adapter
    from advisor.sources.prometheus import FederationReader, PromHistory, groups_from_federation

    reader = FederationReader()
    readers = {"reference": groups_from_federation, "cached": reader.read}
    services = {}
    for mode in readers:
        svc = service("http://127.0.0.1:9", 15.0, "5m", n, 64 << 20)
        svc.deployments[0].adapter = get_adapter("vllm")
        services[mode] = svc
    times: dict[tuple[str, str], list[float]] = {(m, s): [] for m in readers for s in ("parse", "parse+apply")}
    # stamped in the past, the newest round a second ago: a point more than FUTURE_SAMPLE_SECONDS ahead of the
    # service's clock fails its target (the apply step would then time the failure, not the snapshots)
    base = int(time.time() * 1000) - 15_000 * reps - 1000
    heap = None
    if evaluate:
        from advisor.heap import CycleHeap

        heap = CycleHeap()
        services["cached"].clock = lambda: (base + 15_000 * k) / 1000 + 1  # the service's clock follows the rounds
    for k in range(reps + 1):
        text = federate_body(n, base + 15_000 * k, pods)
        for mode, read in readers.items():
            svc = services[mode]
            d = svc.deployments[0]
            c0 = time.process_time()
            shaped = read(text)
            c1 = time.process_time()
            seen = svc._apply_groups(d, shaped.groups)
            svc._finish_read(d, seen, PromHistory(ok=True, groups=shaped.groups))
            c2 = time.process_time()
            if heap is not None and mode == "cached":
                svc.evaluate_once()
                c3 = time.process_time()
                heap.after_cycle()
                print(
                    f"round {k:3d}: read {(c1 - c0) / n * 1000:.3f}, apply {(c2 - c1) / n * 1000:.3f}, "
                    f"evaluate {(c3 - c2) / n * 1000:.3f} ms per instance",
                    flush=True,
                )
            if k:  # the first round fills the histories (and the cache)
                times[(mode, "parse")].append(c1 - c0)
                times[(mode, "parse+apply")].append(c2 - c0)
    size = len(text.encode())
    what = f"{n} instances" + (" with a pod label each" if pods else "")
    print(f"# offline: one /federate batch of {what}, {size / 1e6:.2f} MB, {text.count(chr(10))} lines")
    for (mode, step), got in times.items():
        print(
            f"{mode:10} {step:12} median {statistics.median(got) * 1000:7.1f} ms, least {min(got) * 1000:7.1f} ms "
            f"({statistics.median(got) / n * 1000:.3f} ms per instance)",
            flush=True,
        )
    for svc in services.values():
        svc.close()
    if heap is not None:
        heap.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", default="1000,10000", help="instance counts (default 1000,10000)")
    ap.add_argument("--stores", default="prometheus,victoriametrics", help="stores to run (default both)")
    ap.add_argument("--cycles", type=int, default=5, help="advisor cycles per store and size (default 5)")
    ap.add_argument("--interval", type=float, default=15.0, help="store scrape and advisor interval, s (default 15)")
    ap.add_argument("--window", default="5m", help="the advisor's evaluation_window (default 5m)")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds of store data before cycle 1 (default 60)")
    ap.add_argument("--exporters", type=int, default=20, help="stand-in exporter servers (default 20)")
    ap.add_argument("--batch", type=int, default=200, help="prometheus.batch_instances (default 200)")
    ap.add_argument("--max-bytes", type=int, default=64 * 1024 * 1024, help="prometheus.max_bytes (default 64 MiB)")
    ap.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for the store (default 600)")
    ap.add_argument("--whole-window", action="store_true", help="also time one whole-window read (the old path)")
    ap.add_argument("--no-federate", action="store_true", help="prometheus.federate: false (query_range every cycle)")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="alternate the /federate readers: even cycles the reference path (groups_from_federation, no cache), "
        "odd ones the cached FederationReader (the default), side by side in one run",
    )
    ap.add_argument("--reference", action="store_true", help="read /federate by the reference path only")
    ap.add_argument(
        "--offline",
        type=int,
        metavar="N",
        help="no store: time reading one N-instance /federate batch by both paths, side by side (see offline())",
    )
    ap.add_argument("--reps", type=int, default=8, help="--offline rounds (default 8)")
    ap.add_argument("--pods", action="store_true", help="--offline: each instance carries a pod target label")
    ap.add_argument(
        "--evaluate", action="store_true", help="--offline: also evaluate each round; print every round's times"
    )
    ap.add_argument("--json", action="store_true", help="also print each cycle as one JSON line")
    args = ap.parse_args()
    if args.offline:
        offline(args.offline, args.reps, args.pods, args.evaluate)
        return 0
    # SIGTERM (timeout, kill) unwinds like Ctrl-C: the stores, the exporters and the temporary data are removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for n in (int(s) for s in args.sizes.split(",")):
        for kind in args.stores.split(","):
            measure(kind, n, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
