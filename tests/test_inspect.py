"""`capacity-advisor inspect URL` against real loopback servers."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest

from tests.conftest import REPO_ROOT, SHARED, reply
from tests.inprocess import CliRun, run_cli

Start = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


def _inspect(*args: str) -> CliRun:
    return run_cli("inspect", *args, "--interval", "0.5")


def test_inspect_json_on_an_sglang_fixture(http_server: Start) -> None:
    body = (REPO_ROOT / "tests/fixtures/sglang/dp2-tp2-priority-underscore.prom").read_bytes()
    url = http_server(lambda h: reply(h, 200, body)) + "/metrics"
    r = _inspect(url, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["detected_engine"] == "sglang"
    assert any("sglang_ prefix" in h for h in out["version_hints"])
    # the same keys as a `once --json` deployment, plus missing
    assert {"name", "engine", "state", "snapshot", "recommendations", "missing"} <= set(out)
    s = out["snapshot"]
    # DP ranks summed over dp_rank, never over tp_rank; the priority="" totals only: 10 + 7 running, 3 + 1 queued
    assert (s["requests_running"], s["requests_waiting"]) == (17, 4)
    assert s["kv_cache_capacity_tokens"] == 40_000


def test_inspect_pinned_to_another_engine_reports_the_engine_the_page_shows(http_server: Start) -> None:
    """Breaker, 2026-12-04: ``inspect --engine tgi --json`` on an SGLang page said ``detected_engine: tgi`` while its
    own message said the page looks like sglang."""
    body = (REPO_ROOT / "tests/fixtures/sglang/dp2-tp2-priority-underscore.prom").read_bytes()
    url = http_server(lambda h: reply(h, 200, body)) + "/metrics"
    out = json.loads(_inspect(url, "--engine", "tgi", "--json").stdout)
    assert (out["engine"], out["detected_engine"], out["state"]) == ("tgi", "sglang", "unavailable")


@pytest.mark.conformance
def test_inspect_on_the_vllm_0_11_capture_hints_the_release(http_server: Start) -> None:
    capture = SHARED / "engine-metrics" / "vllm-0.11.x-v1-idle-qwen1.5-0.5b-chat.prom"
    if not capture.exists():
        pytest.skip(f"../shared/engine-metrics absent: {capture} not found")
    body = capture.read_bytes()
    r = _inspect(http_server(lambda h: reply(h, 200, body)) + "/metrics", "--json")
    out = json.loads(r.stdout)
    assert out["detected_engine"] == "vllm"
    assert "vLLM ≥ 0.11 (per-request TPOT histogram)" in out["version_hints"]
    assert out["snapshot"]["kv_cache_capacity_tokens"] == 2452 * 16
    assert out["snapshot"]["model"] == "Qwen/Qwen1.5-0.5B-Chat"


def test_inspect_an_unreachable_target_reports_why() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = _inspect(f"http://127.0.0.1:{port}/metrics")
    assert r.returncode == 0
    assert "state unavailable" in r.stdout and "connection_refused" in r.stdout


def test_inspect_rejects_a_bad_url() -> None:
    r = _inspect("ftp://x/metrics")
    assert r.returncode == 2 and "http" in r.stderr


def test_a_base_url_that_answers_404_gets_a_hint_to_add_metrics(http_server: Start) -> None:
    base = http_server(lambda h: reply(h, 404, b"<html><body>Not Found</body></html>", "text/html"))
    r = _inspect(base)
    assert r.returncode == 0
    assert "http_status" in r.stdout
    assert f"hint: engines serve /metrics; try {base}/metrics" in r.stdout
    r = _inspect(base + "/metrics")  # already the metrics path: no hint
    assert "hint:" not in r.stdout


def test_a_parse_error_never_echoes_credentials_or_terminal_escapes(http_server: Start) -> None:
    # a proxy's 200 error page that echoes the request line and its Authorization header, then a terminal escape
    def handle(h: BaseHTTPRequestHandler) -> None:
        auth = h.headers.get("Authorization")
        reply(h, 200, f"<html>bad request {h.path} {auth}\x1b]0;pwned\x07\x1b[2J{'x' * 2000}</html>".encode())

    base = http_server(handle).replace("http://", "http://admin:hunter2@")
    for args in ((base + "/echo200?api_key=SEKRIT",), (base + "/echo200?api_key=SEKRIT", "--json")):
        r = _inspect(*args)
        assert r.returncode == 0, r.stderr
        out = r.stdout + r.stderr
        assert "parse_error" in out
        for secret in ("SEKRIT", "YWRtaW46aHVudGVyMg==", "hunter2", "\x1b", "\x07"):
            assert secret not in out, (secret, args)
        assert "\\x1b" in out and "<redacted>" in out
        assert "x" * 400 not in out  # the quoted excerpt is bounded


def test_a_model_label_never_writes_terminal_escapes(http_server: Start) -> None:
    """Bad-input breaker, 2026-12-06: a scraped ``model_name`` label holding ``ESC ] 0 ; … BEL`` was printed raw by
    ``inspect``'s text output (it could set the terminal's title or colours), while ``once`` and the log escaped it."""
    body = (REPO_ROOT / "tests/fixtures/vllm/cache-config-none.prom").read_text()
    body = body.replace('model_name="org/model-a"', 'model_name="org/\x1b]0;pwned\x07model"')
    url = http_server(lambda h: reply(h, 200, body.encode())) + "/metrics"
    r = _inspect(url)
    assert r.returncode == 0, r.stderr
    assert "pwned" in r.stdout  # the model is named…
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout  # …with its control characters escaped
    assert "\\x1b" in r.stdout
