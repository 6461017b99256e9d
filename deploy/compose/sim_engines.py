"""Simulated engines for ``deploy/compose.yaml``: the demo fleet on fixed-in-file ports, and a webhook sink.

Starts :data:`advisor.sim.scenarios.DEMO_SCENARIOS` (healthy, KV-saturated, over-provisioned; vLLM format) with
:func:`advisor.sim.server.start_fleet` on ``0.0.0.0``, then writes into ``--out``:

* ``engines.json`` — a Prometheus ``file_sd`` file: one target group per deployment with its ``deployment`` label;
* ``advisor.yaml`` — the advisor's config for the same deployments (scraped directly), its state file beside it.

A tiny HTTP sink on ``--webhook-port`` prints every Alertmanager notification it receives (``docker compose logs
engines``). Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from advisor.sim.scenarios import DEMO_SCENARIOS
from advisor.sim.server import start_fleet


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            payload = json.loads(body)
            for a in payload.get("alerts", []):
                labels = a.get("labels", {})
                print(
                    f"webhook: {a.get('status')} {labels.get('alertname')} {labels.get('deployment', '')}", flush=True
                )
        except ValueError:
            print(f"webhook: {len(body)} bytes that are not JSON", flush=True)
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", type=Path, required=True, help="folder shared with Prometheus and the advisor")
    p.add_argument("--host", default="engines", help="this container's name as the others reach it")
    p.add_argument("--speed", type=float, default=10.0, help="simulated seconds per real second (10)")
    p.add_argument("--webhook-port", type=int, default=9099)
    args = p.parse_args(argv)

    fleet = start_fleet(DEMO_SCENARIOS, speed=args.speed, host="0.0.0.0")
    sink = ThreadingHTTPServer(("0.0.0.0", args.webhook_port), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()

    def reachable(url: str) -> str:
        return urlsplit(url)._replace(netloc=f"{args.host}:{urlsplit(url).port}").geturl()

    groups, deployments = [], []
    for s in DEMO_SCENARIOS:
        urls = [reachable(u) for u in fleet.urls(s.name)]
        groups.append({"targets": [urlsplit(u).netloc for u in urls], "labels": {"deployment": s.name}})
        deployments.append(s.deployment_fields(urls))
    config = {
        "scrape_interval": "15s",
        "evaluation_window": "5m",
        "deployments": deployments,
        "state_file": "advisor-state.json",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "engines.json", json.dumps(groups, indent=2) + "\n")
    _write(args.out / "advisor.yaml", yaml.safe_dump(config, sort_keys=False))
    for name, url in fleet.targets:
        print(f"engine {name}: {reachable(url)}", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    fleet.stop()
    sink.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
