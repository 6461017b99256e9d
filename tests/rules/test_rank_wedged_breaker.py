"""rank_wedged against a breaker's states of 2026-12-05 (the first three failed on 5fe5ce5): a rank draining a
prefill-only queue (SGLang logs ``num_running_reqs`` as the batch before the prefill, and finished prompts' KV is
evictable radix cache), a vLLM before 0.20 whose waiting count includes grammar compilation and remote KV loads, and
a rank whose own prompt counter moved. The fourth keeps credentials out of the rank's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.domain import EngineSnapshot, RankValues
from advisor.evaluate import TargetView, _stuck_ranks, window_snapshots
from tests.states import VLLMEngine
from tests.states.field import matching, run_once_on
from tests.states.test_field_pools import sglang_text, vllm_dp_text

RESTART = ("engine_process", "restart")
SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}


def _restart(result: dict[str, Any]) -> list[dict[str, Any]]:
    return matching(result.get("recommendations") or [], RESTART)


# 1. SGLang: a rank saturated with prefill-only requests (max_new_tokens=1 classifier / LLM-judge scoring).
#    They finish at prefill, never join running_batch; log_prefill_stats writes num_running_reqs = running_bs = 0,
#    num_queue_reqs = what the adder could not fit, token usage ~0 (finished KV is evictable radix cache).
def test_sglang_rank_draining_a_prefill_only_queue_is_not_paged_for_restart(tmp_path: Path) -> None:
    model = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    common = {"max_total_num_tokens": 190_784.0, "context_len": 262_144.0, "page_size": 64.0}

    def ranks(queue: float) -> list[dict[str, float]]:
        out = []
        for i in range(8):
            if i == 7:  # scoring-only rank: admits ~2 x 8k-token prompts per step, queue drains 14 -> 9
                out.append({"num_running_reqs": 0.0, "num_queue_reqs": queue, "token_usage": 0.0} | common)
            else:
                out.append({"num_running_reqs": 6.0, "num_queue_reqs": 0.0, "token_usage": 0.35} | common)
        return out

    scrapes = [
        (
            sglang_text(model, ranks(14.0), prompt=4.0e8, generation=6.0e7, requests=90_000),
            sglang_text(model, ranks(9.0), prompt=4.0012e8, generation=6.00002e7, requests=90_015),
        )
    ]
    dep = {
        "name": "judge-dp8",
        "engine": "sglang",
        "model": model,
        "gpu": "h200",
        "tensor_parallel_size": 8,
        "max_model_len": 262_144,
        "slo": SLO,
    }
    result = run_once_on(tmp_path, dep, scrapes)
    assert not _restart(result), f"restart proposed for a rank whose queue drained 14 -> 9: {_restart(result)}"


# 2. vLLM 0.11 (no num_requests_waiting_by_reason): requests waiting for structured-output grammar compilation
#    (WAITING_FOR_FSM) or remote KV (WAITING_FOR_REMOTE_KVS) stay in self.waiting and count in
#    num_requests_waiting, with no blocks; the rank runs nothing meanwhile.
def test_vllm_pre_020_rank_compiling_grammars_is_not_paged_for_restart(tmp_path: Path) -> None:
    def engines() -> list[Any]:
        out = []
        for running, waiting, usage in ((6.0, 0.0, 0.30), (0.0, 2.0, 0.0)):  # rank 1: 2 JSON-schema requests
            e = VLLMEngine(
                model_name="deepseek-ai/DeepSeek-V3",
                num_gpu_blocks=60_000,
                max_model_len=32_768,
                gpu_memory_utilization=0.9,
                version="0.11",
            )
            e.running, e.waiting, e.kv_usage = running, waiting, usage
            out.append(e)
        return out

    a, b = engines(), engines()
    for e in a + b:
        e.prefill(2_000_000)
        e.decode(300_000, 0.03)
    b[0].prefill(20_000)
    b[0].decode(2_000, 0.03)
    dep = {
        "name": "json-dp2",
        "engine": "vllm",
        "model": "deepseek-ai/DeepSeek-V3",
        "gpu": "h200",
        "tensor_parallel_size": 8,
        "data_parallel_size": 2,
        "max_model_len": 32_768,
        "slo": SLO,
    }
    result = run_once_on(tmp_path, dep, [(vllm_dp_text(a), vllm_dp_text(b))])
    assert not _restart(result), f"restart proposed on vLLM 0.11 without a deferred breakdown: {_restart(result)}"


# 3. vLLM: the 'stuck' rank's own counters moved (per-engine prompt/generation counters are in RankValues).
def test_a_rank_whose_own_prompt_counter_moved_is_not_stuck() -> None:
    def snap(prompt1: float) -> EngineSnapshot:
        return EngineSnapshot(
            engine="vllm",
            ranks=(
                RankValues(
                    "0",
                    kv_cache_usage_ratio=0.3,
                    requests_running=6,
                    requests_waiting=0,
                    prompt_tokens_total=1e6,
                    generation_tokens_total=1e5,
                ),
                RankValues(
                    "1",
                    kv_cache_usage_ratio=0.0,
                    requests_running=0,
                    requests_waiting=5,
                    prompt_tokens_total=prompt1,
                    generation_tokens_total=5e3,
                ),
            ),
        )

    view = _view("http://x:1/metrics", (10.0, snap(2.0e6)), (11.0, snap(2.04e6)))
    assert _stuck_ranks(window_snapshots([view], 9.0, 11.0)) == ()


# 4. credentials in the target URL never reach the proposal
def test_stuck_rank_names_no_credentials() -> None:
    def snap(q: float) -> EngineSnapshot:
        return EngineSnapshot(
            engine="sglang",
            ranks=(
                RankValues("0", kv_cache_usage_ratio=0.3, requests_running=6, requests_waiting=0),
                RankValues("5", kv_cache_usage_ratio=0.0, requests_running=0, requests_waiting=q),
            ),
        )

    view = _view("http://admin:s3cr3t@10.0.0.5:30000/metrics", (10.0, snap(9)), (11.0, snap(11)))
    (name,) = _stuck_ranks(window_snapshots([view], 9.0, 11.0))
    assert "s3cr3t" not in name and "admin" not in name


def _view(url: str, *points: tuple[float, EngineSnapshot]) -> TargetView:
    from tests.test_evaluate_window_readings import _view as v  # reuse the repo's helper if it fits

    return v(url, *[(t, {"ranks": s.ranks}) for t, s in points])
