"""The advisor's HTTP server: ``/metrics``, ``/healthz``, ``/readyz``, ``/api/v1/*`` and a status page.

Standard library ``ThreadingHTTPServer``; prometheus-client renders ``/metrics`` from the injected
registry. Read-only: nothing here makes the daemon fetch a URL.
"""

from __future__ import annotations

import html
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from advisor import __version__
from advisor.service import Service

log = logging.getLogger(__name__)


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9090`` for IPv6; ``:9090`` for all interfaces) → ``(host, port)``.

    Raises:
        ValueError: naming the expected form.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen must be HOST:PORT (e.g. 127.0.0.1:9188), got {listen!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class AdvisorHTTPServer(ThreadingHTTPServer):
    """Serves one :class:`Service` and registry."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], service: Service, registry: CollectorRegistry) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.service = service
        self.registry = registry
        super().__init__(address, _Handler)

    def url(self) -> str:
        """``http://host:port`` the server listens on."""
        host, port = self.server_address[:2]
        h = str(host)
        return f"http://[{h}]:{port}" if ":" in h else f"http://{h}:{port}"

    def start_background(self) -> threading.Thread:
        """Serve on a daemon thread; returns it."""
        t = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        t.start()
        return t


class _Handler(BaseHTTPRequestHandler):
    server: AdvisorHTTPServer
    server_version = f"capacity-advisor/{__version__}"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s", format % args)

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: Any) -> None:
        self._send(code, json.dumps(obj, indent=2, default=str).encode(), "application/json")

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        svc = self.server.service
        if path == "/metrics":
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok = svc.healthy(time.time())
            self._send(200 if ok else 503, b"ok\n" if ok else b"evaluation loop stalled\n", "text/plain")
        elif path == "/readyz":
            ready = svc.result is not None
            self._send(200 if ready else 503, b"ready\n" if ready else b"no evaluation yet\n", "text/plain")
        elif path == "/api/v1/deployments":
            res = svc.result
            self._json(200, {"deployments": [d.as_dict() for d in res.deployments] if res else []})
        elif path == "/api/v1/recommendations":
            res = svc.result
            recs = [r.as_dict() for d in res.deployments for r in d.recommendations] if res else []
            self._json(200, {"recommendations": recs})
        elif path == "/":
            self._send(200, _status_page(svc).encode(), "text/html; charset=utf-8")
        else:
            self._json(404, {"error": f"no such path: {path}"})


def _status_page(svc: Service) -> str:
    res = svc.result
    rows = []
    if res is not None:
        for d in res.deployments:
            s = d.snapshot
            usage = s.get("kv_cache_usage_ratio")
            ceiling = d.concurrency_ceiling()
            good = d.evaluation.goodput.ratio
            recs = (
                "".join(
                    f"<li><b>{html.escape(r.severity)}</b> {html.escape(r.summary)}<br>"
                    f"<code>{html.escape(r.flag)}</code>"
                    f"<p>{html.escape(r.description)}</p></li>"
                    for r in d.recommendations
                )
                or "<li>none</li>"
            )
            rows.append(
                f"<section><h2>{html.escape(d.name)} <small>({html.escape(d.engine)}, {html.escape(d.state)})"
                f"</small></h2><p>KV usage {'' if usage is None else f'{usage:.1%}'} · running "
                f"{s.get('requests_running')} / ceiling {'' if ceiling is None else f'{ceiling:.1f}'} · waiting "
                f"{s.get('requests_waiting')} · goodput {'unknown' if good is None else f'{good:.1%}'}</p>"
                f"<h3>Open recommendations</h3><ul>{recs}</ul></section>"
            )
    body = "".join(rows) or "<p>No evaluation yet.</p>"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>capacity-advisor</title></head><body>"
        f"<h1>capacity-advisor {__version__}</h1>{body}"
        "<p><a href='/metrics'>/metrics</a> · <a href='/api/v1/deployments'>/api/v1/deployments</a> · "
        "<a href='/api/v1/recommendations'>/api/v1/recommendations</a></p></body></html>"
    )
