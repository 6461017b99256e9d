"""``capacity-advisor inspect`` on a page with several models (issue 12, acceptance 3), against a loopback server.

The page is Triton's vLLM backend serving two models (``model``/``version`` labels, as
``triton-inference-server/vllm_backend`` ``src/utils/metrics.py`` registers them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from tests.conftest import reply
from tests.inprocess import CliRun, run_cli
from tests.read_pages import TRITON_TWO_MODELS

Start = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


def _inspect(*args: str) -> CliRun:
    return run_cli("inspect", *args, "--interval", "0.2")


def _url(http_server: Start) -> str:
    body = TRITON_TWO_MODELS.encode()
    return http_server(lambda h: reply(h, 200, body)) + "/metrics"


def test_inspect_lists_both_models_and_names_the_flag(http_server: Start) -> None:
    r = _inspect(_url(http_server))
    assert r.returncode == 0, r.stderr
    assert "mistral7b" in r.stdout and "llama2" in r.stdout
    assert "inspect" in r.stdout and "--served-model NAME" in r.stdout


def test_inspect_json_lists_models_and_hint(http_server: Start) -> None:
    out = json.loads(_inspect(_url(http_server), "--json").stdout)
    assert out["models"] == ["mistral7b", "llama2"]
    assert "--served-model" in out["hint"]


def test_inspect_served_model_reads_that_model_only(http_server: Start) -> None:
    r = _inspect(_url(http_server), "--served-model", "llama2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    s = out["snapshot"]
    assert (s["model"], s["requests_running"], s["requests_waiting"]) == ("llama2", 48, 31)
    assert s["kv_cache_usage_ratio"] == 0.99
    assert out["hint"] is None


def test_inspect_served_model_not_found_names_the_models(http_server: Start) -> None:
    out = json.loads(_inspect(_url(http_server), "--served-model", "mixtral", "--json").stdout)
    t = out["targets"][0]
    assert out["state"] == "unavailable" and t["error_reason"] == "served_model_not_found"
    assert "mistral7b" in t["error"] and "llama2" in t["error"]


def test_inspect_empty_served_model_is_refused_not_read_as_none() -> None:
    """Breaker 13: ``--served-model ""`` was accepted and read the first model silently, as if none was named."""
    for blank in ("", "  "):
        r = _inspect("http://127.0.0.1:9/metrics", "--served-model", blank)
        assert r.returncode == 2, r.stdout
        assert "--served-model" in r.stderr and "must not be empty" in r.stderr
