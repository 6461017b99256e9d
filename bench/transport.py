"""Scrape CPU per request: ``RequestsTransport`` (``requests`` over ``target_session``, the daemon's path before
issue 15) against ``PooledTransport`` (``http.client`` on a kept connection,
:func:`advisor.http_edge.target_transport`), side by side against one loopback server.

The server runs in a child process (``--serve``), so the CPU measured here is the client's alone
(``time.process_time`` of this process, which runs nothing else while timing). It serves the 62 KB vLLM 0.33 page,
``shared/engine-metrics/vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom`` (``shared`` beside the checkout or a
folder above it; read at run time, never copied), over
HTTP/1.1 keep-alive with ``Content-Length``; ``--gzip`` serves it gzip-encoded (as ``prometheus_client`` does for a
client that accepts gzip), so the decoding is timed too.

Each round times a batch of ``--batch`` scrapes through one transport then the other (the order alternating between
rounds), so machine noise hits both alike; the figures are the medians over rounds of CPU per request, and the ratio
is the median of the per-round ratios. Two levels are timed: ``scrape()`` (``advisor.sources.scrape.scrape``: the
edge request plus the sample-limit count and UTF-8 decode, the same for both) and ``transport.request`` alone.
Every answer is checked to be the whole page.

Usage: ``PYTHONPATH=$PWD .venv/bin/python bench/transport.py [--rounds N] [--batch N] [--gzip] [--page FILE]``.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CAPTURE = Path("shared", "engine-metrics", "vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom")
PAGE = next((p / CAPTURE for p in REPO.parents if (p / CAPTURE).is_file()), REPO.parent / CAPTURE)


def serve(page: Path, encode: bool) -> None:
    """Child process: serve ``page`` at every path (keep-alive), print the port, run until stdin closes."""
    body = page.read_bytes()
    packed = gzip.compress(body, 6)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as uvicorn (vLLM's server) does: no 40 ms delayed-ACK stall per answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            gz = encode and "gzip" in self.headers.get("Accept-Encoding", "")
            data = packed if gz else body
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            if gz:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # the parent closes it to stop us


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch", type=int, default=200, help="scrapes per transport per round")
    ap.add_argument("--gzip", action="store_true", help="serve the page gzip-encoded")
    ap.add_argument("--page", type=Path, default=PAGE)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.page, args.gzip)
        return 0
    if not args.page.is_file():
        print(f"page not found: {args.page} (../shared/engine-metrics is read at run time)", file=sys.stderr)
        return 2

    from advisor.http_edge import EdgeLimits, PooledTransport, RequestsTransport, target_session, target_transport
    from advisor.sources.scrape import scrape

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--page", str(args.page), *(["--gzip"] if args.gzip else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = f"http://127.0.0.1:{int(child.stdout.readline())}/metrics"
        page = args.page.read_bytes()
        pooled = target_transport(url)
        assert isinstance(pooled, PooledTransport), "a proxy applies to 127.0.0.1: unset it (no_proxy) to compare"
        transports = {"requests": RequestsTransport(target_session(url)), "pooled": pooled}
        limits = EdgeLimits(3.0, 10.0, 16 * 1024 * 1024)

        def via_scrape(t: Any) -> Callable[[], None]:
            def one() -> None:
                r = scrape(url, t)
                assert r.ok and r.text is not None and len(r.text) == len(page), r

            return one

        def via_request(t: Any) -> Callable[[], None]:
            def one() -> None:
                a = t.request("GET", url, limits, headers={"Accept": "text/plain"})
                assert a.status == 200 and a.body == page

            return one

        print(f"page {args.page.name}: {len(page):,} bytes{' (served gzip)' if args.gzip else ''}; {url}")
        print(f"{args.rounds} rounds x {args.batch} requests per transport, process CPU per request")
        for level, make in (("scrape()", via_scrape), ("transport.request", via_request)):
            calls = {name: make(t) for name, t in transports.items()}
            for call in calls.values():  # warm: connections made, imports done
                for _ in range(5):
                    call()
            per: dict[str, list[float]] = {name: [] for name in calls}
            ratios: list[float] = []
            for r in range(args.rounds):
                order = list(calls) if r % 2 == 0 else list(reversed(calls))
                got: dict[str, float] = {}
                for name in order:
                    call = calls[name]
                    start = time.process_time()
                    for _ in range(args.batch):
                        call()
                    got[name] = (time.process_time() - start) / args.batch
                    per[name].append(got[name])
                ratios.append(got["requests"] / got["pooled"])
            req, pool = statistics.median(per["requests"]), statistics.median(per["pooled"])
            print(
                f"{level:<18} requests {req * 1e3:6.3f} ms   pooled {pool * 1e3:6.3f} ms   "
                f"requests/pooled {statistics.median(ratios):5.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})"
            )
        for t in transports.values():
            t.close()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
