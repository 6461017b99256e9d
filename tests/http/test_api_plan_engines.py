"""``POST /api/v1/plan`` sizes a deployment with ITS engine's accounting, as ``plan --engine`` does, and takes the
operator's pool settings (issue 12 classes 6 and 7), against a running daemon on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import requests

from tests.conftest import REPO_ROOT
from tests.http.conftest import Daemon

pytestmark = pytest.mark.integration

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _plan_cli(*args: str) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "plan", "--model", LLAMA, "--gpu", "H100-SXM", "--max-model-len",
         "8192", "--json", *args],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _plan_api(api: Daemon, **deployment: Any) -> dict[str, Any]:
    body = {"deployment": {"model": LLAMA, "gpu": "H100-SXM", "max_model_len": 8192, **deployment}}
    r = requests.post(api.url + "/api/v1/plan", json=body, timeout=10)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.parametrize(("engine", "tokens"), [("sglang", 414558), ("tgi", 494303), ("llamacpp", 8192)])
def test_the_api_sizes_each_engine_as_plan_engine_does(api: Daemon, engine: str, tokens: int) -> None:
    got = _plan_api(api, engine=engine)["before"]
    assert got["kv_cache_tokens"] == _plan_cli("--engine", engine)["kv_cache_tokens"] == tokens  # issue 12's
    assert got["engine"] == engine


def test_the_api_takes_the_operators_pool_settings(api: Daemon) -> None:
    assert _plan_api(api, num_gpu_blocks_override=2000)["before"]["kv_cache_tokens"] == 32000
    one = _plan_api(api)["before"]
    two = _plan_api(api, data_parallel_size=2)["before"]
    assert two["kv_cache_tokens"] == 2 * one["kv_cache_tokens"]
    trt = _plan_api(api, engine="trtllm", max_tokens=64000)["before"]
    assert trt["kv_cache_tokens"] == 64000
    r = requests.post(
        api.url + "/api/v1/plan",
        json={"deployment": {"model": LLAMA, "gpu": "H100-SXM", "max_model_len": 8192, "num_gpu_blocks_override": 0}},
        timeout=10,
    )
    assert r.status_code == 400 and "num_gpu_blocks_override" in r.text


def test_a_turned_memory_budget_moves_an_sglang_pool_as_mem_fraction_static_would(api: Daemon) -> None:
    # the budget dial is --mem-fraction-static for SGLang (advisor/rules/flags.py): 0.834 (its newest rule on a
    # 79.15 GiB H100) → 0.8 frees 0.034 × (79.15 − 0.5 CUDA context) GiB of 128 KiB tokens from the pool
    r = requests.post(
        api.url + "/api/v1/plan",
        json={
            "deployment": {"model": LLAMA, "gpu": "H100-SXM", "max_model_len": 8192, "engine": "sglang"},
            "turn": {"dial": "gpu_memory_utilization", "value": 0.8},
        },
        timeout=10,
    )
    assert r.status_code == 200, r.text
    effect = r.json()["effect"]["kv_cache_tokens"]
    assert effect["before"] == 414558  # 0.834 × 78.65 GiB − 14.99 GiB of weights, ÷ 128 KiB
    assert effect["before"] - effect["after"] == pytest.approx(0.034 * 78.65 * 2**30 / 131072, rel=0.01)


def test_a_turned_byte_budget_sizes_a_vllm_pool_and_is_refused_on_another_engine(api: Daemon) -> None:
    # vLLM --kv-cache-memory-bytes 8 GiB → 16 GiB: 8 GiB ÷ 2 MiB blocks = 4,096 blocks = 65,536 tokens, twice that
    # after; the same turn on SGLang, which has no byte budget, is refused naming the dial and the engine.
    body = {
        "deployment": {"model": LLAMA, "gpu": "H100-SXM", "max_model_len": 8192, "kv_cache_memory_bytes": 8 * 2**30},
        "turn": {"dial": "kv_cache_memory_bytes", "value": 16 * 2**30},
    }
    r = requests.post(api.url + "/api/v1/plan", json=body, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["effect"]["kv_cache_tokens"] == {"before": 65_536, "after": 131_072}
    sglang = {
        "deployment": {"model": LLAMA, "gpu": "H100-SXM", "max_model_len": 8192, "engine": "sglang"},
        "turn": {"dial": "kv_cache_memory_bytes", "value": 16 * 2**30},
    }
    r = requests.post(api.url + "/api/v1/plan", json=sglang, timeout=10)
    assert r.status_code == 400, r.text
    assert "kv_cache_memory_bytes" in r.text and "sglang" in r.text
    # JSON true is no byte count (pydantic read it as 1 and sized a 1-byte pool: found by a breaker)
    for dial in ("kv_cache_memory_bytes", "max_num_seqs", "gpu_memory_utilization"):
        r = requests.post(api.url + "/api/v1/plan", json={**body, "turn": {"dial": dial, "value": True}}, timeout=10)
        assert r.status_code == 400 and "true/false" in r.text, (dial, r.text)
