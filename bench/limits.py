"""What one oversized page costs the advisor to read, with and without ``scrape.sample_limit`` (issue 14).

The page: a healthy vLLM exposition followed by ~170,000 other series (a runaway exporter on the same port: per-
request or per-user labels), ~15 MiB, inside the default 16 MiB byte cap. It is served on loopback; each reading
runs in a fresh worker subprocess, which does what the daemon does with a target's page — :func:`scrape` it, then
:func:`observe` it with ``engine: auto`` (a target's first page: every sample is parsed) — and reports:

* **cpu s** — user + system CPU time of the worker over the read (``resource.getrusage``, after imports);
* **peak RSS MB** — the worker's peak resident set (``ru_maxrss``), its resident set before the read (after
  imports, whose own transient peak may exceed what a small read needs), and the peak's growth during the read;
* the outcome (``ok`` or the scrape error reason) and its message.

Rows: ``limits off`` (``sample_limit 0``, ``label_limit 0``: what the advisor did before issue 14) and ``limits on``
(the defaults: 50,000 samples, 64 labels). ``--before-tree PATH`` adds a row that imports ``advisor`` from another
checkout (e.g. an export of 0c7e936) instead, with that tree's own ``scrape`` and ``observe``.

Usage: ``.venv/bin/python bench/limits.py [--series N] [--before-tree PATH]``. Timings are informational: no
threshold, no exit status.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def build_page(series: int) -> bytes:
    """A vLLM page (the stand-in engine's) and ``series`` extra series of 4 labels each, ~93 bytes a line."""
    from prometheus_client import CollectorRegistry, generate_latest

    from advisor.standin import Phase, StandInEngine

    registry = CollectorRegistry(auto_describe=False)
    phase = Phase("busy", 10_000, 0.62, 38, 0, 4.0, 1500, 300, 0, 0.35, 0.04)
    registry.register(StandInEngine(phases=(phase,), speed=1.0, num_gpu_blocks=26_289))
    head = generate_latest(registry)
    lines = [b"# HELP http_requests_by_user Requests per user (a label per user: unbounded).\n"]
    lines.append(b"# TYPE http_requests_by_user counter\n")
    lines += [
        b'http_requests_by_user_total{user="u%07d",path="/v1/chat",method="POST",code="200"} %d\n' % (i, i)
        for i in range(series)
    ]
    return head + b"".join(lines)


def worker(url: str, limits: bool) -> dict[str, Any]:
    """Read ``url`` once as the daemon does; CPU and peak RSS of this process."""
    import requests

    from advisor.observe import observe
    from advisor.sources.scrape import scrape

    start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    resident = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    before = resource.getrusage(resource.RUSAGE_SELF)
    kwargs: dict[str, Any] = {"max_bytes": 16 * 1024 * 1024}
    if "sample_limit" in inspect.signature(scrape).parameters:
        kwargs["sample_limit"] = 50_000 if limits else 0
    observe_kwargs: dict[str, Any] = {"strict": True}
    if "label_limit" in inspect.signature(observe).parameters:
        observe_kwargs["label_limit"] = 64 if limits else 0
    with requests.Session() as session:
        res = scrape(url, session, **kwargs)
        outcome, message = res.error_reason or "ok", res.error_message
        if res.ok and res.text is not None:
            seen = observe(res.text, "auto", **observe_kwargs)
            outcome, message = seen.error_reason or "ok", seen.error_message
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_rss_mb": after.ru_maxrss / 1024,
        "resident_before_mb": resident,
        "added_rss_mb": (after.ru_maxrss - start_rss) / 1024,
        "outcome": outcome,
        "message": (message or "")[:140],
    }


def run_worker(url: str, limits: bool, tree: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", url, "--limits", "on" if limits else "off"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True, cwd=tree)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=170_000)
    ap.add_argument("--before-tree", type=Path, default=None, help="another checkout to read the page with")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--limits", default="on", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.limits == "on")))
        return
    page = build_page(args.series)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: Any) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    lines = page.count(b"\n")
    print(f"page: {len(page) / 2**20:.1f} MiB, {lines:,} lines, {args.series:,} extra series")
    rows: list[tuple[str, bool, Path]] = []
    if args.before_tree is not None:
        rows.append((f"before ({args.before_tree})", False, args.before_tree.resolve()))
    rows += [("limits off", False, HERE), ("limits on", True, HERE)]
    print(f"{'reading':<28} {'cpu s':>7} {'peak RSS MB':>12} {'RSS before':>11} {'peak grew':>10}  outcome")
    for name, limits, tree in rows:
        r = run_worker(url, limits, tree)
        print(
            f"{name:<28} {r['cpu_seconds']:>7.3f} {r['peak_rss_mb']:>12.1f} {r['resident_before_mb']:>11.1f} "
            f"{r['added_rss_mb']:>10.1f}  "
            f"{r['outcome']}: {r['message']}"
        )
    srv.shutdown()


if __name__ == "__main__":
    main()
