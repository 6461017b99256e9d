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
    .venv/bin/python bench/fleet.py --baseline main # N = 100, 300; 4 repeats per side, interleaved

``--baseline REF`` measures git ref REF and this tree side by side in one run, against the same stand-in server:
REF is checked out into a temporary ``git worktree`` (removed at the end); every measurement runs in a fresh
subprocess with ``PYTHONPATH`` set to its side's tree, which imports that tree's ``advisor`` and calls that
tree's own ``bench/fleet.py`` ``measure`` (so each side is driven through its own API; ``bench/baseline.py``).
Per size the sides alternate — baseline, current, current, baseline, … — ``--repeats`` times each (default 4),
and it prints each figure's median for both sides and the median of the per-repeat ratios current ÷ baseline
(min..max). Cycle seconds are wall time, CPU ms/target is the advisor process's CPU time (as above). Defaults in
this mode: ``--sizes 100,300``, ``--cycles 5``, 4 repeats — about 3 minutes on a loaded two-core machine (each
measurement starts a process and fills 5 minutes of history per target before timing). Verdict ``PASS`` when
the median CPU-per-target ratio is at most ``1 + --tolerance`` (default 0.10) at every size; exit status 1
otherwise. The cycle time ratio is printed but not judged: it is wall time, and on a shared machine it moves
with the other processes' load (0.64..1.50 between repeats of identical code at load 85).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO.parent / "shared" / "engine-metrics" / "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom"


def _body(capture: Path = CAPTURE) -> bytes:
    if capture.exists():
        return capture.read_bytes()
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
    from advisor.service import Service
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
        tracker = getattr(svc, "tracker", None)  # since issue 13 the tracker holds the histories
        for d in svc.deployments:
            assert d.adapter is not None
            urls = tracker.targets(d.spec.name) if tracker is not None else [t.url for t in d.targets]
            for url in urls:
                points = [
                    TimedSnapshot(url, now - 15 * k, d.adapter.snapshot(parse_exposition(text, keep=d.adapter.wants)))
                    for k in range(21, 0, -1)  # 5 min of 15 s scrapes before now
                ]
                if tracker is not None:
                    tracker.replace_history(d.spec.name, url, [])
                    for p in points:
                        tracker.observe(d.spec.name, url, p)  # through the tracker's own retention policy
                else:  # a baseline from before the tracker (--baseline REF): the service's own record()
                    from advisor.service import record  # type: ignore[attr-defined]

                    t = next(t for t in d.targets if t.url == url)
                    t.history.clear()
                    for p in points:
                        record(t.history, p, cfg.evaluation_window)
        for _ in range(cycles):
            c0, t0 = time.process_time(), time.perf_counter()
            svc.run_once()
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        if tracker is not None:
            views = [v for d in svc.deployments for v in tracker.views(d.spec.name)]
            up = sum(1 for v in views if v.up)
            points = statistics.median(len(v.history) for v in views)
        else:
            up = sum(1 for d in svc.deployments for t in d.targets if t.up)
            points = statistics.median(len(t.history) for d in svc.deployments for t in d.targets)
    finally:
        svc.close()
    return {
        "cycle_seconds": statistics.median(times),
        "cpu_ms_per_target": statistics.median(cpus) / n * 1000,
        "rss_mib": _rss_mib(),
        "up": up,
        "history_points": points,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", default=None, help="target counts (default 100,1000,2000,5000; 100,300 with --baseline)")
    ap.add_argument("--cycles", type=int, default=None, help="timed cycles per size (default 3; 5 with --baseline)")
    ap.add_argument("--baseline", metavar="REF", help="also measure git ref REF, side by side (see above)")
    ap.add_argument("--repeats", type=int, default=4, help="--baseline: measurements per side and size (default 4)")
    ap.add_argument("--tolerance", type=float, default=0.10, help="--baseline: allowed slowdown (default 0.10)")
    ap.add_argument(
        "--exposition", type=Path, default=CAPTURE, help=f"served exposition (default ../shared/…/{CAPTURE.name})"
    )
    ap.add_argument("--worker", nargs=3, metavar=("N", "PORT", "BODY_FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cycles is None:
        args.cycles = 5 if args.baseline else 3
    if args.worker:
        return worker(int(args.worker[0]), int(args.worker[1]), args.cycles, Path(args.worker[2]))
    sizes = [int(x) for x in (args.sizes or ("100,300" if args.baseline else "100,1000,2000,5000")).split(",")]
    body = _body(args.exposition)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(q, body), daemon=True)
    server.start()
    port = q.get(timeout=30)
    print(
        f"exposition: {'capture ' + args.exposition.name if args.exposition.exists() else 'stand-in'} "
        f"({len(body):,} bytes)"
    )
    if args.baseline:
        try:
            return compare(args, sizes, port, body)
        finally:
            server.terminate()
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
    return 0


# --- --baseline REF ---------------------------------------------------------------------------------------------

FIGURES = (  # key, heading, format, compared in the verdict
    ("cycle_seconds", "cycle s", ".2f", False),
    ("cpu_ms_per_target", "CPU ms/target", ".2f", True),
    ("rss_mib", "RSS MiB", ".0f", False),
    ("up", "up", ".0f", False),
    ("history_points", "points/target", ".0f", False),
)


def worker(n: int, port: int, cycles: int, body_file: Path) -> int:
    """One ``--baseline`` measurement: this process's ``PYTHONPATH`` tree's own ``bench/fleet.py`` ``measure``;
    prints the figures as one JSON line."""
    from baseline import check_import

    tree = Path(os.environ.get("PYTHONPATH", ""))
    spec = importlib.util.spec_from_file_location("fleet_under_test", tree / "bench" / "fleet.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {tree / 'bench' / 'fleet.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure(n, port, cycles, body_file.read_bytes())
    result["advisor"] = check_import(str(tree))
    print(json.dumps(result))
    return 0


def compare(args: argparse.Namespace, sizes: list[int], port: int, body: bytes) -> int:
    """``--baseline REF``: per size, ``--repeats`` fresh-process measurements per side, the sides alternating."""
    from baseline import REPO, baseline_tree, describe, dirty, ratio_stats, run_once

    began = time.perf_counter()
    sides = ("baseline", "current")
    slower: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fleet-body-") as tmp, baseline_tree(args.baseline) as tree:
        body_file = Path(tmp) / "body.prom"
        body_file.write_bytes(body)
        trees = {"baseline": tree, "current": REPO}
        print(f"baseline: {describe(args.baseline)}")
        print(f"current:  {REPO} at {describe('HEAD')}{dirty()}")
        print(
            f"{args.repeats} fresh-process measurements per side and size, interleaved; {args.cycles} cycles each; "
            "figures: baseline / current (median), ratio current ÷ baseline (median of repeats, min..max)"
        )
        cmd = [sys.executable, str(Path(__file__).resolve()), "--cycles", str(args.cycles), "--worker"]
        for n in sizes:
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
            for k in range(args.repeats):  # baseline, current, current, baseline, …
                for side in sides if k % 2 == 0 else sides[::-1]:
                    runs[side].append(run_once([*cmd, str(n), str(port), str(body_file)], trees[side]))
            parts = []
            for key, heading, fmt, judged in FIGURES:
                base = [float(r[key]) for r in runs["baseline"]]
                cur = [float(r[key]) for r in runs["current"]]
                med, lo, hi = ratio_stats(cur, base)
                parts.append(
                    f"{heading} {statistics.median(base):{fmt}} / {statistics.median(cur):{fmt}} "
                    f"= {med:.3f}× ({lo:.2f}..{hi:.2f})"
                )
                if judged and med > 1 + args.tolerance:
                    slower.append(f"{heading} at {n} targets: {med:.3f}×")
            print(f"{n:>6} targets: " + "; ".join(parts))
        print(f"advisor: baseline from {runs['baseline'][0]['advisor']}, current from {runs['current'][0]['advisor']}")
    verdict = "PASS" if not slower else "FAIL"
    print(
        f"CPU per target within {1 + args.tolerance:.2f}× of the baseline at every size: {verdict}; "
        f"{time.perf_counter() - began:.0f} s"
    )
    for line in slower:
        print(f"  slower: {line}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
