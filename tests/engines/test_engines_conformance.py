"""Real captures in ../shared/engine-metrics/ (not vLLM: see test_vllm_conformance.py) → detect → adapt.

Each case names its capture; the values were read from the capture by hand (and, for the rendered SGLang
0.5.23 file, from SOURCES.md's ground-truth table). ``trtllm-triton-backend-readme-2025-…`` is marked "use
for shape only" in SOURCES.md: only its engine detection is checked. Skipped with the reason when
../shared is absent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor.engines import detect_engine, get_adapter
from advisor.sources.exposition import parse_exposition

pytestmark = pytest.mark.conformance

SHARED_METRICS = Path(__file__).resolve().parents[2].parent / "shared" / "engine-metrics"

SHAPE_ONLY = {"trtllm-triton-backend-readme-2025-inflight-batcher.prom"}

# capture → (engine, {snapshot field: value}); histograms as (count, sum); "missing" lists required entries.
EXPECTED: dict[str, tuple[str, dict[str, Any]]] = {
    # SOURCES.md: token_usage 0.36 rounded, exact full_token_usage 0.35567; running 24; queued 0; prompt
    # 1,876,085 and generation 198,808 (is_streaming false+true: 387581+1488504, 42795+156013); TTFT count 323
    # (255+68), sum 80.26 (63.33562171852827+16.926034442258242); max_total_num_tokens 448,102.
    # Retractions: only the per-batch gauge num_retracted_reqs 0.0 is in the file; the cumulative counter is
    # absent, so preemptions_total is unknown (see the adapter docstring).
    "sglang-0.5.23-engine-code-healthy-llama3.1-8b.prom": (
        "sglang",
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "kv_cache_usage_ratio": 0.35566902178521853,
            "kv_cache_capacity_tokens": 448102,
            "requests_running": 24,
            "requests_waiting": 0,
            "prompt_tokens_total": 1876085,
            "generation_tokens_total": 198808,
            "requests_finished_total": 61 + 238,
            "ttft": (323, 63.33562171852827 + 16.926034442258242),
            "tpot_source": "sglang:request_time_per_output_token_seconds",
            "preemptions_total": None,
            "missing": ["sglang:num_retracted_requests_total"],
        },
    ),
    # Docs sample: token_usage 0.28, num_running_reqs 162, num_queue_reqs 2826, prompt 8.128902e+06,
    # generation 7.557572e+06, TTFT _count 11008 _sum 2.3518979474117756e+06, TPOT per token (7.400757e+06).
    "sglang-0.3.x-llama3.1-8b-heavy-load-docs.prom": (
        "sglang",
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "kv_cache_usage_ratio": 0.28,
            "kv_cache_capacity_tokens": None,
            "requests_running": 162,
            "requests_waiting": 2826,
            "prompt_tokens_total": 8128902,
            "generation_tokens_total": 7557572,
            "ttft": (11008, 2.3518979474117756e06),
            "tpot": (7400757, 866964.5791549598),
            "tpot_source": "sglang:time_per_output_token_seconds",
            "tpot_is_itl": True,
            "e2e": (11228, 3.116093850019932e06),
        },
    ),
    # Excerpt: num_running_reqs 0.0, token_usage 0.0 for /shared/public/models/Meta-Llama-3-8B-Instruct.
    "sglang-0.4.4-idle-llama3-8b-pr4412-excerpt.prom": (
        "sglang",
        {
            "model": "/shared/public/models/Meta-Llama-3-8B-Instruct",
            "kv_cache_usage_ratio": 0.0,
            "requests_running": 0,
            "requests_waiting": None,
        },
    ),
    # trtllm_request_success_total{finished_reason="length"} 2.0; TTFT count 2 sum 0.06795299984514713;
    # TPOT count 2 sum 0.005558789299682629; e2e count 2 sum 1.7300310004502535; queue count 2.
    "trtllm-1.1.x-trtllm-serve-via-dynamo-worker-qwen3-0.6b.prom": (
        "trtllm",
        {
            "model": "Qwen/Qwen3-0.6B",
            "requests_finished_total": 2,
            "ttft": (2, 0.06795299984514713),
            "tpot": (2, 0.005558789299682629),
            "tpot_is_itl": False,
            "e2e": (2, 1.7300310004502535),
            "queue_time": (2, 0.01181500032544136),
            "requests_running": None,
            "kv_cache_capacity_tokens": None,
        },
    ),
    # Frontend after one request: inflight 0, queued 0, input tokens _sum 33, output_tokens_total 300,
    # requests_total 1, TTFT 1 / 1.5625701570000001, ITL 299 / 0.6126917290000005, duration 1 / 2.177646729,
    # total_kv_blocks 92962 × kv_cache_block_size 1, max_num_seqs 2, context_length 40960.
    "dynamo-1.0.x-frontend-qwen3-0.6b-one-request.prom": (
        "dynamo",
        {
            "model": "Qwen/Qwen3-0.6B",
            "requests_running": 0,
            "requests_waiting": 0,
            "prompt_tokens_total": 33,
            "generation_tokens_total": 300,
            "requests_finished_total": 1,
            "ttft": (1, 1.5625701570000001),
            "tpot": (299, 0.6126917290000005),
            "tpot_is_itl": True,
            "e2e": (1, 2.177646729),
            "kv_cache_capacity_tokens": 92962,
            "kv_cache_usage_ratio": None,
            "engine_config": {"max_num_seqs": "2", "context_length": "40960"},
        },
    ),
    # 23.11 README: request_type active 0, scheduled 1 (the last iteration's, whose request finished), max 512;
    # blocks tokens_per 64, used 1, free 6239, max 6239. Running min(1, 0) = 0; waiting 0: the active list (0) is
    # below max, so the executor's queue is empty (advisor/engines/trtllm.py).
    "trtllm-triton-23.11-inflight-batcher-readme.prom": (
        "triton-trtllm",
        {
            "model": "tensorrt_llm",
            "requests_running": 0,
            "requests_waiting": 0,
            "kv_cache_capacity_tokens": 6239 * 64,
            "kv_cache_usage_ratio": 1 / 6239,
            "engine_config": {"max_batch_size": "512", "tokens_per_block": "64"},
        },
    ),
    # Excerpt after KV metrics were removed: prompt_tokens_total 143, tokens_predicted_total 673.
    "llamacpp-unknown-2025-06-vulkan-pr13196-excerpt.prom": (
        "llamacpp",
        {
            "model": None,
            "prompt_tokens_total": 143,
            "generation_tokens_total": 673,
            "kv_cache_usage_ratio": None,
            "missing": ["llamacpp:kv_cache_usage_ratio (removed from llama.cpp in May 2025)"],
        },
    ),
}

DETECTED = {name: engine for name, (engine, _) in EXPECTED.items()} | {
    "trtllm-triton-backend-readme-2025-inflight-batcher.prom": "triton-trtllm",
    "dcgm-exporter-unknown-h100-mig-k8s-issue512-excerpt.prom": "dcgm",
    "dcgm-exporter-unknown-rtx2000ada-a30mig-pr736-excerpt.prom": "dcgm",
    "dcgm-exporter-unknown-v100-issue250-excerpt.prom": "dcgm",
}


def capture(name: str) -> str:
    if not SHARED_METRICS.is_dir():
        pytest.skip(f"../shared/engine-metrics absent: {SHARED_METRICS} is not a directory")
    return (SHARED_METRICS / name).read_text()


def test_every_non_vllm_capture_is_covered() -> None:
    if not SHARED_METRICS.is_dir():
        pytest.skip(f"../shared/engine-metrics absent: {SHARED_METRICS} is not a directory")
    files = {p.name for p in SHARED_METRICS.glob("*.prom") if not p.name.startswith("vllm-")}
    assert files == set(DETECTED), "add the new capture to EXPECTED or DETECTED"
    assert set(DETECTED) - set(EXPECTED) >= SHAPE_ONLY


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_engine_is_detected_from_the_capture(name: str) -> None:
    assert detect_engine(parse_exposition(capture(name))) == DETECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_adapts_to_the_values_in_the_file(name: str) -> None:
    engine, expected = EXPECTED[name]
    adapter = get_adapter(engine)
    snap = adapter.snapshot(parse_exposition(capture(name), keep=adapter.wants))
    for field, want in expected.items():
        got = getattr(snap, field)
        if field == "missing":
            assert set(want) <= set(got), got
        elif field == "engine_config":
            assert {k: got.get(k) for k in want} == want
        elif field in ("ttft", "tpot", "e2e", "queue_time"):
            assert got is not None, field
            assert got.count == want[0] and got.sum == pytest.approx(want[1], rel=1e-12), field
            assert got.buckets[-1] == (float("inf"), want[0]), field
        elif isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-12), field
        else:
            assert got == want, field
