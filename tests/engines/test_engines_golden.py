"""The table-driven adapters on hand-written expositions (tests/fixtures/<engine>/*.prom).

Every expected value below was worked out by hand from the fixture text (each fixture's header says what
it stands for); none was produced by running the code.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from advisor.domain import EngineSnapshot, Histogram
from advisor.engines import ENGINES, get_adapter
from advisor.sources.exposition import parse_exposition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def read(engine: str, name: str, model: str | None = None) -> EngineSnapshot:
    adapter = get_adapter(engine)
    return adapter.snapshot(
        parse_exposition((FIXTURES / engine / f"{name}.prom").read_text(), keep=adapter.wants), model
    )


def models(engine: str, name: str) -> list[str]:
    adapter = get_adapter(engine)
    return adapter.models(parse_exposition((FIXTURES / engine / f"{name}.prom").read_text(), keep=adapter.wants))


def test_sglang_underscore_prefix_dp_ranks_are_summed_tp_replicas_and_priority_series_are_not() -> None:
    snap = read("sglang", "dp2-tp2-priority-underscore")
    assert snap.requests_running == 10 + 7  # priority="" totals of dp 0 and 1; tp_rank 1 repeats tp_rank 0
    assert snap.requests_waiting == 3 + 1
    assert snap.kv_cache_capacity_tokens == 30000 + 10000
    assert snap.kv_cache_usage_ratio == pytest.approx((0.5 * 30000 + 0.25 * 10000) / 40000)
    assert snap.preemptions_total == 2 + 1
    assert snap.prompt_tokens_total == 100 + 900  # tokenizer side: no dp_rank, is_streaming summed
    assert snap.ttft == Histogram(buckets=((1.0, 3.0), (math.inf, 4.0)), count=4.0, sum=3.0)
    assert [r.rank for r in snap.ranks] == ["0", "1"]
    assert snap.ranks[0].requests_running == 10 and snap.ranks[1].kv_cache_capacity_tokens == 10000
    assert snap.model == "m"


def test_sglang_percent_scaled_usage_and_nan_are_unknown_and_models_are_separate() -> None:
    assert models("sglang", "old-0.4-percent-nan-two-models") == ["a", "b"]
    a = read("sglang", "old-0.4-percent-nan-two-models")
    assert a.model == "a"
    assert a.kv_cache_usage_ratio is None  # 42.0 is a percentage, not a 0-1 ratio: never guessed
    assert a.requests_waiting is None and "sglang:num_queue_reqs" in a.missing
    assert a.requests_running == 3
    assert 'model_name="b" (ignored)' in a.missing
    b = read("sglang", "old-0.4-percent-nan-two-models", model="b")
    assert (b.kv_cache_usage_ratio, b.requests_running, b.requests_waiting) == (0.5, 5, 2)
    assert b.tpot_source == "sglang:inter_token_latency_seconds" and b.tpot_is_itl
    assert b.tpot == Histogram(buckets=((0.05, 10.0), (math.inf, 12.0)), count=12.0, sum=0.6)


def test_tgi_counter_renamed_by_the_parser_and_reservation_usage() -> None:
    snap = read("tgi", "v3-renamed-counter")
    assert snap.model is None and models("tgi", "v3-renamed-counter") == []
    assert snap.requests_finished_total == 41  # `tgi_request_success` parsed as tgi_request_success_total
    assert (snap.requests_running, snap.requests_waiting) == (8, 3)
    assert snap.kv_cache_capacity_tokens == 48000
    assert snap.kv_cache_usage_ratio == 12000 / 48000
    assert (snap.prompt_tokens_total, snap.generation_tokens_total) == (52000, 9000)
    assert snap.tpot is not None and (snap.tpot.count, snap.tpot.sum) == (41, 1.23) and not snap.tpot_is_itl
    assert snap.e2e is not None and snap.e2e.sum == 120.5
    assert snap.ttft is None and "ttft (TGI exposes no time-to-first-token histogram)" in snap.missing
    assert snap.preemptions_total is None


def test_tgi_zero_budget_is_unknown_and_a_counter_reset_is_reported_raw() -> None:
    snap = read("tgi", "v2.2-no-budget-zero")
    assert snap.kv_cache_capacity_tokens is None and snap.kv_cache_usage_ratio is None
    assert snap.requests_finished_total == 2  # lower than before: the window (telemetry) handles resets


def test_llamacpp_old_kv_metrics_and_cached_prompt_tokens() -> None:
    snap = read("llamacpp", "2025-04-kv-and-cached")
    assert snap.prompt_tokens_total == 143 + 57
    assert snap.generation_tokens_total == 673
    assert snap.kv_cache_usage_ratio == 0.25
    assert snap.kv_cache_capacity_tokens == 1024 / 0.25
    assert (snap.requests_running, snap.requests_waiting) == (2, 1)
    assert snap.model is None


def test_triton_shifted_block_values_are_not_trusted() -> None:
    snap = read("triton-trtllm", "shifted-blocks")
    assert snap.kv_cache_usage_ratio is None and snap.kv_cache_capacity_tokens is None
    assert "values shifted" in snap.missing[0]
    assert (snap.requests_running, snap.requests_waiting) == (12, 4)
    assert snap.engine_config["max_batch_size"] == "256"


def test_triton_blocks_become_tokens() -> None:
    snap = read("triton-trtllm", "consistent-blocks")
    assert snap.kv_cache_usage_ratio == 250 / 1000
    assert snap.kv_cache_capacity_tokens == 1000 * 32
    assert snap.model == "tensorrt_llm"


def test_trtllm_serve_blocks_become_tokens() -> None:
    snap = read("trtllm", "serve-main-blocks")
    assert snap.kv_cache_usage_ratio == 0.25 and snap.kv_cache_capacity_tokens == 32000
    assert (snap.requests_running, snap.requests_waiting, snap.prompt_tokens_total) == (9, 2, 5000)


def test_dynamo_models_compare_case_insensitively_and_zero_blocks_are_unknown() -> None:
    assert models("dynamo", "two-models-zero-blocks") == ["Org/A", "Org/B"]
    a = read("dynamo", "two-models-zero-blocks")
    assert a.model == "Org/A" and a.requests_running == 3
    assert a.kv_cache_capacity_tokens == 1000 * 16
    assert a.engine_config["max_num_seqs"] == "64"
    b = read("dynamo", "two-models-zero-blocks", model="org/b")
    assert b.requests_running == 1
    assert b.kv_cache_capacity_tokens is None  # a pool of 0 blocks is not a pool
    assert b.engine_config["max_num_seqs"] == "8"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_adapter_reads_an_empty_exposition_as_all_unknown(engine: str) -> None:
    adapter = get_adapter(engine)
    snap = adapter.snapshot({})
    assert snap.engine == engine and snap.requests_running is None and snap.kv_cache_usage_ratio is None
    assert snap.missing and adapter.models({}) == []
