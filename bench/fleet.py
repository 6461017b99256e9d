"""How many targets one advisor process evaluates within half a 15 s scrape interval.

Starts one stand-in server *process* serving a capture-sized vLLM exposition on N paths, builds a config
of N targets (10 replicas per deployment), runs the advisor's real loop (``Service.run_once``: scrape →
normalize → evaluate → rules → publish), and prints per N: the median cycle time, the advisor's CPU
seconds per target per cycle, its resident memory, and the largest N whose cycle stays under 7.5 s.

The exposition is ``../shared/engine-metrics/vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom`` when that
capture is present (62 KB, 619 lines — a real engine's size), else the stand-in engine's own rendering.
Both processes share this machine's two cores, so the figures include the stand-in's cost.

    .venv/bin/python bench/fleet.py                 # N = 100, 1000, 2000, 5000
    .venv/bin/python bench/fleet.py --sizes 100,500 --cycles 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import statistics
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO.parent / "shared" / "engine-metrics" / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"


def _body() -> bytes:
    if CAPTURE.exists():
        return CAPTURE.read_bytes()
    sys.path.insert(0, str(REPO))
    from prometheus_client import generate_latest

    from advisor.standin import StandInEngine, StandInServer

    srv = StandInServer(StandInEngine())
    try:
        return generate_latest(srv.registry)
    finally:
        srv.server_close()


def _serve(port_queue: Any, body: bytes) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    srv = Server(("127.0.0.1", 0), Handler)
    port_queue.put(srv.server_address[1])
    srv.serve_forever()


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(n: int, port: int, cycles: int, body: bytes) -> dict[str, float]:
    """Fill every target's history to steady state (a whole 5 min window of 15 s scrapes, through the
    service's own retention policy), then run ``cycles`` cycles over ``n`` targets; return the median
    cycle seconds, CPU per target and resident memory."""
    sys.path.insert(0, str(REPO))
    from advisor.config import parse_config
    from advisor.domain import TimedSnapshot
    from advisor.exporter import make_registry
    from advisor.service import Service, record
    from advisor.sources.exposition import parse_exposition

    deployments = []
    for d in range(0, n, 10):
        deployments.append(
            {
                "name": f"dep-{d // 10}",
                "engine": "vllm",
                "targets": [f"http://127.0.0.1:{port}/t/{i}/metrics" for i in range(d, min(n, d + 10))],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
            }
        )
    cfg = parse_config({"scrape_interval": "15s", "evaluation_window": "5m", "deployments": deployments})
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    times, cpus = [], []
    try:
        svc.run_once()  # warm-up: connections, caches
        text = body.decode()
        now = time.time()
        for d in svc.deployments:
            assert d.adapter is not None
            for t in d.targets:
                t.history.clear()
                for k in range(21, 0, -1):  # 5 min of 15 s scrapes before now
                    snap = d.adapter.snapshot(parse_exposition(text, keep=d.adapter.wants))
                    record(t.history, TimedSnapshot(t.url, now - 15 * k, snap), cfg.evaluation_window)
        for _ in range(cycles):
            c0, t0 = time.process_time(), time.perf_counter()
            svc.run_once()
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        up = sum(1 for d in svc.deployments for t in d.targets if t.up)
    finally:
        svc.close()
    return {
        "cycle_seconds": statistics.median(times),
        "cpu_ms_per_target": statistics.median(cpus) / n * 1000,
        "rss_mib": _rss_mib(),
        "up": up,
        "history_points": statistics.median(len(t.history) for d in svc.deployments for t in d.targets),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", default="100,1000,2000,5000")
    ap.add_argument("--cycles", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    body = _body()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(q, body), daemon=True)
    server.start()
    port = q.get(timeout=30)
    print(f"exposition: {'capture ' + CAPTURE.name if CAPTURE.exists() else 'stand-in'} ({len(body):,} bytes)")
    print(f"{'targets':>8} {'cycle s':>9} {'CPU ms/target':>14} {'RSS MiB':>9} {'up':>6} {'points/target':>14}")
    results = []
    try:
        for n in sizes:
            # each size in a fresh process, so RSS is that size's alone
            with ctx.Pool(1) as pool:
                r = pool.apply(measure, (n, port, args.cycles, body))
            results.append((n, r))
            print(
                f"{n:>8} {r['cycle_seconds']:>9.2f} {r['cpu_ms_per_target']:>14.2f} {r['rss_mib']:>9.0f} "
                f"{r['up']:>6} {r['history_points']:>14.0f}"
            )
    finally:
        server.terminate()
    under = [(n, r) for n, r in results if r["cycle_seconds"] < 7.5]
    if under:
        n, r = max(under, key=lambda x: x[0])
        estimate = int(n * 7.5 / r["cycle_seconds"])
        print(
            f"largest measured N with a cycle under 7.5 s (half a 15 s interval): {n}; "
            f"extrapolated limit ≈ {estimate:,} targets"
        )
    else:
        print("no measured N keeps the cycle under 7.5 s")


if __name__ == "__main__":
    main()
