"""Issue 14, acceptance 3 (2,000 moving targets within half a 15 s interval): what the cycle does to cost less,
held to the behaviour it had.

* Each page is normalized as it arrives, while the other targets are still being scraped (the cycle never holds
  every target's page), on the cycle thread only; ``once``'s synchronous round still waits for every target.
* What ``requests`` reads from the environment on every request (proxies honouring ``NO_PROXY``, netrc
  credentials, the CA bundle) is read once per target when its session is made: the same proxies and
  credentials, no longer re-read on each scrape.

Stand-in targets and a stand-in proxy on loopback; no timing is asserted (a held target answers when the test
opens its gate).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from tests.conftest import reply
from tests.reliability.iso_support import PageServer, deployment, vllm_page, wait_for

pytestmark = pytest.mark.integration

PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@pytest.fixture
def page() -> Iterator[PageServer]:
    srv = PageServer(vllm_page())
    yield srv
    srv.stop()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No proxy, netrc or CA bundle from the machine running the tests."""
    for name in (*PROXY_VARS, "no_proxy", "NO_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return monkeypatch


def _service(deployments: list[dict[str, object]]) -> Service:
    # a held target stays within its deadline for as long as the test holds it
    cfg = parse_config(
        {
            "scrape_interval": "30s",
            "evaluation_window": "2m",
            "scrape": {"connect_timeout": "2s", "read_timeout": "25s"},
            "deployments": deployments,
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics)


def test_a_page_is_normalized_while_another_target_is_still_being_scraped(
    page: PageServer, http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str]
) -> None:
    """The fast target's sample is in the tracker while the held target has not answered, and the round (no
    budget, as ``once`` runs it) returns only once the held target has answered and been observed too. On
    181d611 the cycle normalized every page only after the last scrape ended: nothing was observed while one
    target was held."""
    gate = threading.Event()
    asked = threading.Event()
    body = vllm_page()

    def held(h: BaseHTTPRequestHandler) -> None:
        asked.set()
        gate.wait(20)
        reply(h, 200, body)

    held_url = http_server(held) + "/metrics"
    fast_url = page.url("/fast/metrics")
    svc = _service([deployment("fast", [fast_url]), deployment("held", [held_url])])

    def observed(name: str, url: str) -> bool:
        with svc._lock:
            return bool(svc.tracker.history(name, url))

    round_ = threading.Thread(target=svc.scrape_once, daemon=True)
    try:
        round_.start()
        assert asked.wait(10)
        seen_early = wait_for(lambda: observed("fast", fast_url), 10, every=0.05)
        still_waiting = round_.is_alive()
        held_early = observed("held", held_url)
        gate.set()
        round_.join(30)
        assert not round_.is_alive()
        assert seen_early  # observed while the held target was still in flight
        assert still_waiting and not held_early  # the round waits for every target
        assert observed("held", held_url)  # and the held target's page is observed before it returns
        states = {d.name: d.state for d in svc.evaluate_once().deployments}
    finally:
        gate.set()
        svc.close()
    assert states == {"fast": "fresh", "held": "fresh"}, states


def test_the_proxy_from_the_environment_is_used_and_read_once_per_target(
    clean_env: pytest.MonkeyPatch,
    page: PageServer,
    http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str],
) -> None:
    """``http_proxy`` set before start sends the scrape through the (stand-in) proxy; a host ``no_proxy`` names
    is scraped directly. The proxy is read when the target's session is made: unsetting the variable later does
    not move the scrapes (on 181d611 ``requests`` re-read the environment on every scrape, and the next scrape
    went direct to a host that does not resolve)."""
    proxied: list[str] = []
    body = vllm_page()

    def proxy(h: BaseHTTPRequestHandler) -> None:
        proxied.append(h.path)  # the absolute-form request line a client sends a proxy
        reply(h, 200, body)

    proxy_url = http_server(proxy)
    far = "http://engine.fleet-proxy-test.invalid:8000/metrics"
    near = page.url("/near/metrics")
    clean_env.setenv("http_proxy", proxy_url)
    clean_env.setenv("no_proxy", "127.0.0.1")
    svc = _service([deployment("far", [far]), deployment("near", [near])])
    try:
        svc.scrape_once()
        first = {d.name: d.state for d in svc.evaluate_once().deployments}
        clean_env.delenv("http_proxy")
        svc.scrape_once()
        second = {d.name: d.state for d in svc.evaluate_once().deployments}
    finally:
        svc.close()
    assert first == {"far": "fresh", "near": "fresh"}, first
    assert second == {"far": "fresh", "near": "fresh"}, second
    assert proxied == [far, far]  # through the proxy both times, and only the far target
    assert page.hits["/near/metrics"] == 2  # no_proxy: direct


def test_netrc_credentials_are_sent_as_before(
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
    http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str],
) -> None:
    """A target whose host has an entry in the ``NETRC`` file gets those credentials as basic auth, as
    ``requests`` sends them; a target of another host gets none."""
    seen: dict[str, str | None] = {}
    body = vllm_page()

    def target(h: BaseHTTPRequestHandler) -> None:
        seen[h.path] = h.headers.get("Authorization")
        reply(h, 200, body)

    base = http_server(target)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login scraper password s3cret\n")
    netrc.chmod(0o600)
    clean_env.setenv("NETRC", str(netrc))
    other = base.replace("127.0.0.1", "localhost") + "/other/metrics"
    svc = _service([deployment("auth", [base + "/auth/metrics"]), deployment("other", [other])])
    try:
        svc.scrape_once()
    finally:
        svc.close()
    assert seen["/auth/metrics"] == "Basic " + base64.b64encode(b"scraper:s3cret").decode()
    assert seen["/other/metrics"] is None
