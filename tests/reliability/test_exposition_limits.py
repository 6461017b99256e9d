"""Issue 14 trials against a running daemon (``run_daemon`` in-process, loopback stand-in targets): pages that cost
too much, pages that repeat a series, and secrets planted in a target URL.

Prometheus's behaviour, as ``scrape/scrape.go`` has it: a page over ``sample_limit`` samples (or with a series over
``label_limit`` labels) fails the scrape and its target is down while the other targets are scraped as usual; a
series repeated on one page keeps its first sample and the repetitions are counted. Alertmanager's notifiers redact
URLs, which carry secrets.
"""

from __future__ import annotations

import io
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.logfmt import TextFormatter
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.standin import Phase, StandInEngine
from tests.conftest import Receiver, reply

pytestmark = pytest.mark.integration

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BLOCKS = 26_289  # the capacity pass's own pool for the model on an H100 (no model-disagreement confidence cut)
HOT = Phase("saturated", 10_000, 0.97, 48, 12, 3.0, 1500, 300, 1.0, 0.5, 0.05)
COOL = Phase("cool", 10_000, 0.354, 20, 0, 3.0, 1500, 300, 0.0, 0.3, 0.04)
Serve = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


class Page:
    """A stand-in vLLM engine's page, rendered fresh (its counters move) at each scrape."""

    def __init__(self, phase: Phase) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StandInEngine(phases=(phase,), speed=1.0, num_gpu_blocks=BLOCKS))

    def __call__(self) -> str:
        return generate_latest(self.registry).decode()


def serving(serve: Serve, body: Callable[[], str | bytes], code: int = 200) -> str:
    """Start a stand-in target answering every GET with ``body()``; its ``/metrics`` URL."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        got = body()
        reply(h, code, got.encode() if isinstance(got, str) else got)

    return serve(handle) + "/metrics"


def deployment(name: str, *targets: str) -> dict[str, Any]:
    return {
        "name": name,
        "engine": "vllm",
        "targets": list(targets),
        "model": MODEL,
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }


@contextmanager
def daemon(config: dict[str, Any]) -> Iterator[tuple[str, io.StringIO]]:
    """Run the daemon on ``config`` (0.5 s interval) until the block ends; its base URL and its text log."""
    cfg = parse_config({"scrape_interval": "0.5s", "evaluation_window": "2s", **config})
    registry, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    log_text = io.StringIO()
    handler = logging.StreamHandler(log_text)
    handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    saved_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    stop = threading.Event()
    urls: list[str] = []
    t = threading.Thread(
        target=run_daemon,
        args=(svc, registry, "127.0.0.1:0"),
        kwargs={"stop_event": stop, "on_listening": urls.append},
        daemon=True,
    )
    t.start()
    try:
        deadline = time.monotonic() + 10
        while not urls and time.monotonic() < deadline:
            time.sleep(0.05)
        assert urls, "the daemon did not listen"
        yield urls[0], log_text
    finally:
        stop.set()
        t.join(timeout=15)
        root.removeHandler(handler)
        root.setLevel(saved_level)


def deployments(base: str) -> dict[str, dict[str, Any]]:
    body = requests.get(base + "/api/v1/deployments", timeout=5).json()
    return {d["name"]: d for d in body["deployments"]}


def wait_until(pred: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except (KeyError, IndexError):  # before the first cycle: no deployment listed yet
            pass
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the daemon's ``/metrics``; ``None`` when absent."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


# --- sample_limit / label_limit --------------------------------------------------------------------------------


def test_a_page_over_sample_limit_or_label_limit_is_unavailable_while_its_neighbours_stay_fresh(
    http_server: Serve,
) -> None:
    good = Page(COOL)
    # 60,000 samples beside a healthy vLLM page: over the default sample_limit of 50,000
    flood = good() + "".join(f"junk_series_{i} 1\n" for i in range(60_000))
    wide_labels = ",".join(f'l{i}="v"' for i in range(70))  # 70 labels on one series the adapter reads
    wide = good().replace(
        f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}}',
        f'vllm:num_requests_running{{engine="0",model_name="{MODEL}",{wide_labels}}}',
    )
    assert wide_labels in wide
    config = {
        "deployments": [
            deployment("flood", serving(http_server, lambda: flood)),
            deployment("wide", serving(http_server, lambda: wide)),
            deployment("neighbour", serving(http_server, good)),
        ]
    }
    got: dict[str, Any] = {}

    def settled(base: str) -> bool:
        got["seen"] = d = deployments(base)
        got["metrics"] = requests.get(base + "/metrics", timeout=5).text
        return d["neighbour"]["state"] == "fresh" and all(d[n]["targets"][0]["error_reason"] for n in ("flood", "wide"))

    with daemon(config) as (base, _log):
        wait_until(lambda: settled(base), timeout=30)  # (a loaded machine may time a scrape out: poll)
    seen, metrics = got["seen"], got["metrics"]
    for name, which in (("flood", "sample_limit"), ("wide", "label_limit")):
        dep = seen[name]
        assert dep["state"] == "unavailable", (name, dep["state"])
        target = dep["targets"][0]
        assert target["error_reason"] == "sample_limit", (name, target)
        assert f"{which} exceeded" in target["error"], target["error"]
        assert (metric(metrics, "advisor_scrape_errors_total", deployment=name, reason="sample_limit") or 0) >= 1
    assert "50,000" in seen["flood"]["targets"][0]["error"]  # the limit, and the count it passed
    assert re.search(r"\b5\d,\d{3} samples", seen["flood"]["targets"][0]["error"])
    assert "72 labels; label_limit is 64" in seen["wide"]["targets"][0]["error"]
    assert seen["neighbour"]["state"] == "fresh"
    assert seen["neighbour"]["targets"][0]["error_reason"] is None


# --- duplicate series ------------------------------------------------------------------------------------------


def test_a_page_repeating_its_series_keeps_the_first_samples_counts_them_and_lowers_confidence(
    http_server: Serve,
) -> None:
    hot, hot_again, cool, cool_again = Page(HOT), Page(HOT), Page(COOL), Page(COOL)
    config = {
        "deployments": [
            deployment("clean-hot", serving(http_server, hot)),
            # the page: KV usage 0.97 then the same series 0.354 (and every counter and bucket repeated)
            deployment("dup-hot", serving(http_server, lambda: hot_again() + cool_again())),
            # and the other way round: 0.354 first, then 0.97 with waiting requests and preemptions
            deployment("dup-cool", serving(http_server, lambda: cool() + hot_again())),
        ],
        "rules": {"kv_saturation": {"for": "0.5s"}},
    }

    def open_recs(base: str) -> dict[str, list[dict[str, Any]]]:
        body = requests.get(base + "/api/v1/recommendations", timeout=5).json()
        recs = body["recommendations"] if isinstance(body, dict) else body
        out: dict[str, list[dict[str, Any]]] = {}
        for r in recs:
            out.setdefault(r["deployment"], []).append(r)
        return out

    def settled(base: str) -> bool:
        text = requests.get(base + "/metrics", timeout=5).text
        names = ("clean-hot", "dup-hot", "dup-cool")
        gauges = [metric(text, "advisor_target_duplicate_series", deployment=n) for n in names]
        fresh = all(d["state"] == "fresh" for d in deployments(base).values())
        return fresh and None not in gauges and {"clean-hot", "dup-hot"} <= set(open_recs(base))

    with daemon(config) as (base, _log):
        wait_until(lambda: settled(base), timeout=30)
        time.sleep(1.5)  # a few more cycles: dup-cool must stay quiet
        wait_until(lambda: settled(base), timeout=30)  # a scrape slowed by a loaded machine passes
        recs = open_recs(base)
        seen = deployments(base)
        metrics = requests.get(base + "/metrics", timeout=5).text
    # first sample kept: the cool page's 0.354, never the repeated 0.97
    assert seen["dup-cool"]["snapshot"]["kv_cache_usage_ratio"] == pytest.approx(0.354)
    assert seen["dup-cool"]["snapshot"]["requests_waiting"] == 0
    assert "dup-cool" not in recs, recs.get("dup-cool")
    assert any("duplicate series" in m for m in seen["dup-cool"]["snapshot"]["missing"])
    for name in ("dup-hot", "dup-cool"):
        dups = metric(metrics, "advisor_target_duplicate_series", deployment=name)
        assert dups is not None and dups >= 40, (name, dups)  # every gauge, counter and bucket repeated once
    assert metric(metrics, "advisor_target_duplicate_series", deployment="clean-hot") == 0
    # the same saturation on both, the contradicting page with less confidence
    clean = {r["problem"]: r["confidence"] for r in recs["clean-hot"]}
    dup = {r["problem"]: r["confidence"] for r in recs["dup-hot"]}
    assert set(dup) & set(clean), (clean, dup)
    for problem in set(dup) & set(clean):
        assert dup[problem] < clean[problem], (problem, dup[problem], clean[problem])
    for r in recs["dup-hot"]:  # and says why
        assert r["evidence"]["duplicate_series"] >= 40, r["evidence"]
        assert "repeated" in r["evidence"]["confidence_lowered"]
    assert not any("duplicate_series" in r["evidence"] for r in recs["clean-hot"])


# --- secrets ---------------------------------------------------------------------------------------------------

SECRETS = ("S3CRETKEY", "PASSW0RDX", "opsuserx")


def with_secrets(url: str) -> str:
    return url.replace("http://", "http://opsuserx:PASSW0RDX@") + "?apikey=S3CRETKEY"


def test_a_target_url_s_secrets_never_leave_the_daemon_whatever_the_failure(
    http_server: Serve, webhook_receiver: Receiver
) -> None:
    # bodies that echo what they were sent, as proxies and frameworks do
    echo_html = "<html>GET /metrics?apikey=S3CRETKEY by opsuserx:PASSW0RDX: not found</html>\n"
    echo_json = '{"error": "invalid apikey S3CRETKEY for user opsuserx (password PASSW0RDX)"}\n'
    with socket.socket() as sock:  # a port nothing listens on: refused
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def slow() -> str:
        time.sleep(3)
        return ""

    config = {
        "deployments": [
            deployment("hot", with_secrets(serving(http_server, Page(HOT)))),
            deployment("parse-html", with_secrets(serving(http_server, lambda: echo_html))),
            deployment("parse-json", with_secrets(serving(http_server, lambda: echo_json))),
            deployment("status", with_secrets(serving(http_server, lambda: echo_json, code=403))),
            deployment("timeout", with_secrets(serving(http_server, slow))),
            deployment("refused", with_secrets(dead + "/metrics")),
        ],
        "scrape": {"connect_timeout": "0.2s", "read_timeout": "0.2s"},
        "receivers": [{"name": "ops", "url": webhook_receiver.url, "backoff_seconds": "0.1s"}],
        "rules": {"kv_saturation": {"for": "0.5s"}},
    }
    with daemon(config) as (base, log_text):
        assert webhook_receiver.wait_for(lambda bodies: bool(bodies), timeout=20), "no notification delivered"
        expected = {
            "hot": None,
            "parse-html": "parse_error",
            "parse-json": "parse_error",
            "status": "http_status",
            "timeout": "timeout",
            "refused": "connection_refused",
        }
        reasons: dict[str, str | None] = {}

        def every_failure_seen() -> bool:  # each class at least once (a loaded machine may time one out: poll)
            reasons.update({n: d["targets"][0]["error_reason"] for n, d in deployments(base).items()})
            return reasons == expected

        wait_until(every_failure_seen, timeout=30)
        pages = ["/", "/metrics", "/api/v1/deployments", "/api/v1/recommendations"]
        text = "".join(requests.get(base + p, timeout=5).text for p in pages)
    bodies = repr(webhook_receiver.bodies)
    for secret in SECRETS:
        assert secret not in text, secret
        assert secret not in log_text.getvalue(), secret
        assert secret not in bodies, secret


# --- forged log lines ------------------------------------------------------------------------------------------

FORGED = "2026-01-01 00:00:00,000 CRITICAL advisor.service: FORGED"


def test_a_receiver_error_body_cannot_forge_a_log_line(http_server: Serve) -> None:
    recovered = threading.Event()  # once the failure is logged, the receiver recovers: the daemon stops at once

    def handle(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers.get("Content-Length", "0")))
        if recovered.is_set():
            reply(h, 200, b"{}", "application/json")
        else:
            reply(h, 500, f"upstream down\n{FORGED}\r\n\x1b[2J".encode())

    hook = http_server(handle) + "/hook"
    config = {
        "deployments": [deployment("hot", serving(http_server, Page(HOT)))],
        "receivers": [{"name": "ops", "url": hook, "backoff_seconds": "0.1s"}],
        "rules": {"kv_saturation": {"for": "0.5s"}},
    }
    with daemon(config) as (_base, log_text):
        wait_until(lambda: "FORGED" in log_text.getvalue())
        recovered.set()
    lines = log_text.getvalue().splitlines()
    assert [ln for ln in lines if "FORGED" in ln and ln.startswith("2026-01-01")] == []
    assert not any("\x1b" in ln for ln in lines)
