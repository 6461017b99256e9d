"""Issue 19 (breaker sibling): a page whose every value the advisor reads is NaN is not ``fresh``.

A NaN sample is absent, not a value: a vLLM page whose gauges, counters and histograms all read ``NaN`` (as
prometheus_client renders a gauge set to ``float("nan")``) gives the advisor nothing, so the deployment is
``unavailable`` with a reason that says so, no rule advises, and every quantity stays unknown (never 0). A page
with only some NaN values still evaluates the others.

Served by a stand-in HTTP server on loopback and read through the real scrape path (``once``, ``inspect``). The
families and labels are vLLM's (``vllm/v1/metrics/loggers.py``: ``vllm:kv_cache_usage_perc``,
``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``, ``vllm:time_to_first_token_seconds``; labels ``engine``, ``model_name``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.conftest import reply
from tests.inprocess import run_cli

Start = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
L = f'engine="0",model_name="{MODEL}"'


def _page(waiting: str = "NaN", prompt: str = "NaN") -> str:
    """A vLLM page with NaN everywhere but ``waiting`` and ``prompt`` (the waiting gauge, the prompt counter) and
    the ``cache_config_info`` series (value 1, the pool in its labels)."""
    return (
        f"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{L}}} NaN\n"
        f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{L}}} NaN\n"
        f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{L}}} {waiting}\n"
        f"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{L}}} {prompt}\n"
        f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{L}}} NaN\n"
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        f'vllm:time_to_first_token_seconds_bucket{{{L},le="0.1"}} NaN\n'
        f'vllm:time_to_first_token_seconds_bucket{{{L},le="+Inf"}} NaN\n'
        f"vllm:time_to_first_token_seconds_count{{{L}}} NaN\n"
        f"vllm:time_to_first_token_seconds_sum{{{L}}} NaN\n"
        # an info series: its value is a constant 1 and its labels configuration, not a reading of the load
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="2000"} 1.0\n'
    )


ALL_NAN = _page()
SOME_NAN = _page(waiting="4.0", prompt="1000.0")


def _serve(http_server: Start, page: str) -> str:
    return http_server(lambda h: reply(h, 200, page.encode())) + "/metrics"


def _config(tmp_path: Path, url: str) -> str:
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(
        "deployments:\n"
        "  - name: box\n"
        "    model: llama-3.1-8b\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 8192\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
        f'    targets: ["{url}"]\n'
    )
    return str(cfg)


def test_once_on_an_all_nan_page_is_unavailable_saying_why(http_server: Start, tmp_path: Path) -> None:
    cfg = _config(tmp_path, _serve(http_server, ALL_NAN))
    r = run_cli("once", "--config", cfg, "--interval", "0.3")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("== box (vllm) — unavailable: ") and "every value the advisor reads is NaN" in first, (
        r.stdout
    )
    assert r.stdout.count("every value the advisor reads is NaN") == 1, r.stdout
    assert "no recommendation" in r.stdout

    j = run_cli("once", "--config", cfg, "--interval", "0.3", "--json")
    assert j.returncode == 0, j.stderr
    (d,) = json.loads(j.stdout)["deployments"]
    assert d["state"] == "unavailable" and "every value the advisor reads is NaN" in d["snapshot"]["state_reason"]
    assert d["recommendations"] == []
    (t,) = d["targets"]
    assert t["up"] is False and t["error_reason"] == "nan_values", t
    for key in ("requests_running", "requests_waiting", "kv_cache_usage_ratio", "generation_tokens_per_second"):
        assert d["snapshot"][key] is None, (key, d["snapshot"][key])  # unknown, never 0
    # the batch cap the capacity pass took (unstated here: vLLM's default on an H100), as plan --json names it
    inputs = d["capacity"]["inputs"]
    assert inputs["max_num_seqs_given"] is False and inputs["max_num_seqs"] == 1024, inputs


def test_inspect_on_an_all_nan_page_names_it_once(http_server: Start) -> None:
    r = run_cli("inspect", _serve(http_server, ALL_NAN), "--interval", "0.2")
    assert r.returncode == 0, r.stderr
    assert "state unavailable" in r.stdout.splitlines()[0], r.stdout
    assert "  not read: nan_values — every value the advisor reads is NaN" in r.stdout, r.stdout
    assert "scrape failed" not in r.stdout, r.stdout
    # no row of "unknown" per quantity
    assert not [ln for ln in r.stdout.splitlines() if ln.startswith("  requests_running ")], r.stdout


def test_an_all_infinite_page_is_unavailable_saying_why(http_server: Start, tmp_path: Path) -> None:
    """The same with ``+Inf``/``-Inf`` in place of NaN: the adapters read neither as a value (on fe4c55f this page
    was ``fresh`` with every quantity unknown)."""
    page = ALL_NAN.replace(" NaN\n", " +Inf\n").replace("_sum{" + L + "} +Inf", "_sum{" + L + "} -Inf")
    assert "NaN" not in page
    cfg = _config(tmp_path, _serve(http_server, page))
    j = run_cli("once", "--config", cfg, "--interval", "0.3", "--json")
    assert j.returncode == 0, j.stderr
    (d,) = json.loads(j.stdout)["deployments"]
    assert d["state"] == "unavailable" and "is NaN or infinite" in d["snapshot"]["state_reason"], d["snapshot"]
    assert d["recommendations"] == []
    assert d["targets"][0]["error_reason"] == "nan_values"


def test_a_page_with_some_nan_values_still_evaluates_the_others(http_server: Start, tmp_path: Path) -> None:
    cfg = _config(tmp_path, _serve(http_server, SOME_NAN))
    j = run_cli("once", "--config", cfg, "--interval", "0.3", "--json")
    assert j.returncode == 0, j.stderr
    (d,) = json.loads(j.stdout)["deployments"]
    assert d["state"] == "fresh", d["snapshot"]["state_reason"]
    (t,) = d["targets"]
    assert t["up"] is True and t["error_reason"] is None
    s = d["snapshot"]
    assert s["requests_waiting"] == 4.0  # the page's own value
    assert s["requests_running"] is None and s["kv_cache_usage_ratio"] is None  # NaN: unknown, never 0


def test_every_reading_field_is_a_snapshot_field() -> None:
    """The reading fields that the NaN check, the sanity checks and the adapters share are snapshot fields, each
    once (a misspelt name would make ``getattr`` raise in the NaN check, or leave a field unchecked)."""
    import dataclasses

    from advisor.domain import SNAPSHOT_READING_FIELDS, EngineSnapshot

    fields = {f.name for f in dataclasses.fields(EngineSnapshot)}
    assert set(SNAPSHOT_READING_FIELDS) <= fields, set(SNAPSHOT_READING_FIELDS) - fields
    assert len(set(SNAPSHOT_READING_FIELDS)) == len(SNAPSHOT_READING_FIELDS)
