"""Writes without auth on a loopback daemon and DNS rebinding (issue 13: hostile Origin on the status page's
POSTs). A web page on ``rebind.example`` whose name is re-pointed at 127.0.0.1 reaches the loopback socket with
``Host: rebind.example:<port>`` and a matching ``Origin`` (it is same-origin to itself, and can even read the page's
CSRF token); Origin == Host proves nothing then. A snooze or ack without auth must name a local host."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest
import requests

from tests.http.conftest import Daemon

pytestmark = pytest.mark.integration


def _ack(d: Daemon, rid: str, host: str, reason: str) -> requests.Response:
    return requests.post(
        f"{d.url}/api/v1/recommendations/{quote(rid, safe='')}/ack",
        json={"reason": reason},
        headers={"Host": host, "Origin": f"http://{host}"},
        timeout=10,
    )


def test_a_rebound_host_with_its_own_origin_cannot_acknowledge(daemon: Daemon) -> None:
    rid = str(daemon.wait_open()[0]["id"])
    port = urlsplit(daemon.url).port
    r = _ack(daemon, rid, f"rebind.example:{port}", "rebound")
    assert r.status_code == 403, (r.status_code, r.text)
    assert "rebind.example" in r.json()["error"]
    sup = requests.get(f"{daemon.url}/api/v1/recommendations/{quote(rid, safe='')}", timeout=30).json()["suppression"]
    assert sup is None or sup["reason"] != "rebound"
    # the same request naming the advisor by a local name is its own page's: accepted
    ok = _ack(daemon, rid, f"localhost:{port}", "local name")
    assert ok.status_code == 200, ok.text
