"""vLLM adapter: ``vllm:num_requests_waiting_by_reason`` (0.20+, ``vllm/v1/metrics/loggers.py``) and the hybrid
KV-group markers of ``vllm:cache_config_info`` (``CacheConfig`` fields, ``vllm/config/cache.py``). Expositions
written from those names and labels; on 4366032 the adapter left both fields empty/unknown."""

from __future__ import annotations

import pytest

from advisor.domain import EngineSnapshot
from advisor.engines import get_adapter
from advisor.sources.exposition import parse_exposition


def read(text: str, model: str | None = None) -> EngineSnapshot:
    adapter = get_adapter("vllm")
    return adapter.snapshot(parse_exposition(text, keep=adapter.wants), model)


def by_reason(rows: list[tuple[str, str, str, float]]) -> str:
    """``(engine, model, reason, value)`` rows as ``vllm:num_requests_waiting_by_reason`` samples, with the
    matching ``vllm:num_requests_waiting`` per rank and model."""
    lines = ["# TYPE vllm:num_requests_waiting_by_reason gauge"]
    totals: dict[tuple[str, str], float] = {}
    for engine, model, reason, value in rows:
        lines.append(
            f'vllm:num_requests_waiting_by_reason{{engine="{engine}",model_name="{model}",reason="{reason}"}} {value}'
        )
        totals[(engine, model)] = totals.get((engine, model), 0.0) + value
    lines.append("# TYPE vllm:num_requests_waiting gauge")
    for (engine, model), value in totals.items():
        lines.append(f'vllm:num_requests_waiting{{engine="{engine}",model_name="{model}"}} {value}')
    return "\n".join(lines) + "\n"


def test_waiting_by_reason_summed_over_ranks_of_the_selected_model_only() -> None:
    text = by_reason(
        [
            ("0", "m", "capacity", 3),
            ("0", "m", "deferred", 0),
            ("1", "m", "capacity", 2),
            ("1", "m", "deferred", 4),
            ("0", "other", "capacity", 50),
            ("0", "other", "deferred", 60),
        ]
    )
    snap = read(text, "m")
    assert dict(snap.requests_waiting_by_reason) == {"capacity": 5.0, "deferred": 4.0}
    assert snap.requests_waiting == 9.0
    assert dict(read(text, "other").requests_waiting_by_reason) == {"capacity": 50.0, "deferred": 60.0}


def test_a_reason_one_rank_does_not_report_is_unknown_not_summed_low() -> None:
    text = by_reason([("0", "m", "capacity", 3), ("0", "m", "deferred", 1), ("1", "m", "capacity", 2)])
    text += 'vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="deferred"} NaN\n'
    assert dict(read(text).requests_waiting_by_reason) == {"capacity": 5.0}


def test_no_waiting_by_reason_before_0_20_is_empty_and_not_missing() -> None:
    snap = read('vllm:num_requests_waiting{engine="0",model_name="m"} 7\n')
    assert dict(snap.requests_waiting_by_reason) == {}
    assert snap.requests_waiting == 7.0
    assert not any("by_reason" in m for m in snap.missing)


def cache_info(**labels: str) -> str:
    base = {"block_size": "16", "engine": "0", "num_gpu_blocks": "1000", **labels}
    body = ",".join(f'{k}="{v}"' for k, v in sorted(base.items()))
    return (
        'vllm:num_requests_running{engine="0",model_name="m"} 1\n'
        f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{body}}} 1.0\n"
    )


@pytest.mark.parametrize(
    ("labels", "hybrid"),
    [
        ({"mamba_page_size_padded": "1059840", "sliding_window": "None"}, True),
        ({"mamba_page_size_padded": "None", "mamba_block_size": "2048", "sliding_window": "None"}, True),
        ({"mamba_page_size_padded": "None", "sliding_window": "4096"}, True),
        ({"mamba_page_size_padded": "None", "mamba_block_size": "None", "sliding_window": "None"}, False),
        ({"sliding_window": "None"}, False),
    ],
    ids=["mamba page padded", "mamba block size", "sliding window", "plain 0.33", "plain 0.8"],
)
def test_hybrid_kv_groups_from_cache_config_labels(labels: dict[str, str], hybrid: bool) -> None:
    assert read(cache_info(**labels)).kv_cache_hybrid is hybrid


def test_hybrid_unknown_without_cache_config_info_or_its_markers() -> None:
    assert read('vllm:num_requests_running{engine="0",model_name="m"} 1\n').kv_cache_hybrid is None
    assert read(cache_info()).kv_cache_hybrid is None


def test_a_hybrid_pool_is_unknown_without_the_group_aware_size_never_blocks_times_block_size() -> None:
    hybrid = read(cache_info(block_size="672", num_gpu_blocks="48", mamba_page_size_padded="1376256"))
    assert hybrid.kv_cache_capacity_tokens is None  # 48 × 672 = 32,256 is not the pool
    assert any("kv_cache_size_tokens (hybrid model" in m for m in hybrid.missing), hybrid.missing
    group_aware = read(cache_info(mamba_page_size_padded="1376256", kv_cache_size_tokens="90000"))
    assert group_aware.kv_cache_capacity_tokens == 90000.0
    plain = read(cache_info(mamba_page_size_padded="None", sliding_window="None"))
    assert plain.kv_cache_capacity_tokens == 16000.0
