"""Issue 12, classes 3–5, the engine side: pools beside the KV pool, disaggregation queues, and a bad DP rank
left out (not silencing the deployment). Expositions written from the engines' own metric names (SGLang
``metrics/collector.py``, llama.cpp ``server-task.cpp``, vLLM ``v1/metrics/loggers.py``)."""

from __future__ import annotations

import pytest

from advisor.domain import EngineSnapshot, PoolReading, RankValues
from advisor.engines import get_adapter
from advisor.engines.sanity import sanitize
from advisor.sources.exposition import parse_exposition


def read(engine: str, text: str) -> EngineSnapshot:
    adapter = get_adapter(engine)
    return adapter.snapshot(parse_exposition(text, keep=adapter.wants))


def sglang(ranks: list[dict[str, float]], engine_type: str = "unified") -> str:
    lines = []
    for i, gauges in enumerate(ranks):
        dp = f',dp_rank="{i}"' if len(ranks) > 1 else ""
        labels = f'engine_type="{engine_type}",model_name="m",tp_rank="0"{dp}'
        lines += [f"sglang:{name}{{{labels}}} {value}" for name, value in gauges.items()]
    return "\n".join(lines) + "\n"


# --- SGLang: the KV pool alone, the state pools beside it ------------------------------------------------


def test_sglang_kv_usage_is_the_full_pool_alone_not_the_max_with_swa() -> None:
    snap = read("sglang", sglang([{"full_token_usage": 0.22, "swa_token_usage": 0.99, "token_usage": 0.99}]))
    assert snap.kv_cache_usage_ratio == 0.22  # 4366032 read max(full, swa) = 0.99 as KV usage
    assert snap.pools == (PoolReading("swa", 0.99, None, None, "tokens", "sglang:swa_token_usage"),)


def test_sglang_token_usage_equal_to_the_mamba_pool_is_not_kv_usage() -> None:
    snap = read("sglang", sglang([{"token_usage": 0.97, "mamba_usage": 0.97, "swa_token_usage": 0.0}]))
    assert snap.kv_cache_usage_ratio is None  # token_usage = max(full, mamba): the 0.97 is the Mamba pool's
    assert [(p.pool, p.usage_ratio) for p in snap.pools] == [("mamba", 0.97)]


@pytest.mark.parametrize(
    ("token_usage", "mamba", "kv"),
    [(0.5, 0.2, 0.5), (0.0, 0.0, 0.0), (0.36, None, 0.36)],
    ids=["above the mamba pool: the KV pool's", "idle", "no mamba gauge"],
)
def test_sglang_token_usage_is_kv_usage_when_no_state_pool_could_be_it(
    token_usage: float, mamba: float | None, kv: float
) -> None:
    gauges = {"token_usage": token_usage} | ({"mamba_usage": mamba} if mamba is not None else {})
    assert read("sglang", sglang([gauges])).kv_cache_usage_ratio == kv


def test_sglang_mamba_pool_with_its_slots_and_a_non_hybrid_model_has_no_extra_pool() -> None:
    hybrid = read(
        "sglang",
        sglang([{"full_token_usage": 0.3, "mamba_usage": 0.98, "mamba_used_tokens": 49, "mamba_available_tokens": 1}]),
    )
    assert hybrid.pools == (PoolReading("mamba", 0.98, 49.0, 50.0, "slots", "sglang:mamba_usage"),)
    plain = read("sglang", sglang([{"full_token_usage": 0.3, "mamba_usage": 0.0, "swa_token_usage": 0.0}]))
    assert plain.pools == ()  # SGLang exports both gauges as 0 for every model


def test_sglang_state_pool_usage_across_ranks_is_the_hottest_rank() -> None:
    snap = read("sglang", sglang([{"full_token_usage": 0.3, "mamba_usage": m} for m in (0.2, 0.95, 0.4)]))
    assert [(p.pool, p.usage_ratio) for p in snap.pools] == [("mamba", 0.95)]


def test_sglang_disaggregation_queues_on_a_decode_server_summed_over_ranks() -> None:
    ranks = [
        {"full_token_usage": 0.4, "num_decode_prealloc_queue_reqs": 9, "num_decode_transfer_queue_reqs": 1},
        {"full_token_usage": 0.4, "num_decode_prealloc_queue_reqs": 3, "num_decode_transfer_queue_reqs": 0},
    ]
    snap = read("sglang", sglang(ranks, engine_type="decode"))
    assert snap.disaggregation_queues == {"decode_prealloc": 12.0, "decode_transfer": 1.0}


def test_sglang_disaggregation_queues_older_spelling_and_unified_zeros() -> None:
    old = read("sglang", sglang([{"token_usage": 0.1, "num_prefill_infight_queue_reqs": 4}], engine_type="prefill"))
    assert old.disaggregation_queues == {"prefill_inflight": 4.0}
    unified = read("sglang", sglang([{"token_usage": 0.1, "num_decode_prealloc_queue_reqs": 0}]))
    assert unified.disaggregation_queues == {}


# --- llama.cpp: the slots ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deferred", "usage"), [(46, 1.0), (0, None)], ids=["deferred: every slot busy", "none deferred: unknown"]
)
def test_llamacpp_slots(deferred: float, usage: float | None) -> None:
    snap = read("llamacpp", f"llamacpp:requests_processing 4\nllamacpp:requests_deferred {deferred}\n")
    assert snap.pools == (PoolReading("slots", usage, 4.0, None, "requests", "llamacpp:requests_processing"),)


# --- one bad rank left out ------------------------------------------------------------------------------


def test_sglang_rank_with_impossible_usage_is_named_and_left_out() -> None:
    ranks = [
        {"full_token_usage": u, "num_running_reqs": r, "num_queue_reqs": q, "max_total_num_tokens": c}
        for u, r, q, c in ((0.9, 30, 5, 100000), (1.7, 28, 4, 100000), (0.96, 31, 7, 50000))
    ]
    snap = read("sglang", sglang(ranks))
    # capacity-weighted over ranks 0 and 2: (0.9 × 100,000 + 0.96 × 50,000) ÷ 150,000 = 0.92
    assert snap.kv_cache_usage_ratio == pytest.approx(0.92)
    assert snap.ranks_excluded == ("1: kv_cache_usage_ratio value 1.7 is not a fraction in [0, 1]",)
    assert "rank 1 left out (kv_cache_usage_ratio value 1.7 is not a fraction in [0, 1])" in snap.missing
    assert snap.requests_running == 89 and snap.requests_waiting == 16  # counts of rank 1 were sound: kept


def test_vllm_rank_with_negative_usage_is_left_out() -> None:
    lines = []
    for engine, usage in (("0", 0.97), ("1", 0.95), ("2", -0.3875395987328405)):
        labels = f'engine="{engine}",model_name="m"'
        lines += [
            f"vllm:kv_cache_usage_perc{{{labels}}} {usage}",
            f"vllm:num_requests_running{{{labels}}} 10",
            f"vllm:num_requests_waiting{{{labels}}} 3",
        ]
    snap = read("vllm", "\n".join(lines) + "\n")
    assert snap.kv_cache_usage_ratio == pytest.approx(0.96)  # plain mean of ranks 0 and 1 (capacities unknown)
    assert [e.split(":")[0] for e in snap.ranks_excluded] == ["2"]
    assert snap.requests_waiting == 9


def test_a_rank_with_an_impossible_count_is_left_out_of_that_total() -> None:
    snap = EngineSnapshot(
        engine="x",
        kv_cache_usage_ratio=None,
        requests_running=-2.0 + 10 + 12,
        ranks=(RankValues("0", 0.5, None, 10, 1), RankValues("1", 0.7, None, 12, 2), RankValues("2", 0.6, None, -2, 0)),
    )
    clean = sanitize(snap)
    assert clean.requests_running == 22 and clean.kv_cache_usage_ratio == pytest.approx(0.6)
    assert clean.ranks_excluded == ("2: requests_running value -2 is negative",)


def test_every_rank_bad_or_a_single_rank_changes_nothing_but_the_value() -> None:
    all_bad = sanitize(EngineSnapshot(engine="x", ranks=(RankValues("0", 1.5), RankValues("1", 2.0))))
    assert all_bad.kv_cache_usage_ratio is None and all_bad.ranks_excluded == ()
    one = sanitize(EngineSnapshot(engine="x", kv_cache_usage_ratio=1.5))
    assert one.kv_cache_usage_ratio is None and one.ranks_excluded == ()


def test_sglang_0523_decode_host_receive_queue() -> None:
    ranks = [{"full_token_usage": 0.9, "num_decode_host_receive_queue_reqs": 5, "num_decode_transfer_queue_reqs": 2}]
    snap = read("sglang", sglang(ranks, engine_type="decode"))
    assert snap.disaggregation_queues == {"decode_transfer": 2.0, "decode_host_receive": 5.0}
