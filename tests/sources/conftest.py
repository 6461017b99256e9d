"""A real HTTP server on 127.0.0.1, port 0, in a thread; each test gives it a handler function."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

Handle = Callable[[BaseHTTPRequestHandler], None]


class _Handler(BaseHTTPRequestHandler):
    handle_fn: Handle

    def do_GET(self) -> None:
        # the client giving up mid-response is what several tests intend
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            type(self).handle_fn(self)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def serve() -> Iterator[Callable[[Handle], str]]:
    """``serve(handler) -> "http://127.0.0.1:PORT"``; servers stop at the end of the test."""
    servers: list[ThreadingHTTPServer] = []

    def start(handle: Handle) -> str:
        handler = type("H", (_Handler,), {"handle_fn": staticmethod(handle)})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
