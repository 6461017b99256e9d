"""Impossible values from any engine become unknown, and say why (hand-written expositions)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.domain import Histogram
from advisor.engines import get_adapter
from advisor.engines.sanity import histogram_problem
from advisor.sources.exposition import parse_exposition

HEAD = 'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1.0\n'


def _snap(body: str):  # type: ignore[no-untyped-def]
    adapter = get_adapter("vllm")
    return adapter.snapshot(parse_exposition(HEAD + body, keep=adapter.wants))


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('vllm:num_requests_running{engine="0",model_name="m"} +Inf', "requests_running"),
        ('vllm:num_requests_waiting{engine="0",model_name="m"} -Inf', "requests_waiting"),
        ('vllm:num_requests_running{engine="0",model_name="m"} -5', "requests_running"),
        ('vllm:num_preemptions_total{engine="0",model_name="m"} -1', "preemptions_total"),
        ('vllm:generation_tokens_total{engine="0",model_name="m"} +Inf', "generation_tokens_total"),
        # bad-input breaker, 2026-12-06: a finite but absurd gauge was read as a load
        ('vllm:num_requests_running{engine="0",model_name="m"} 1e308', "requests_running"),
        ('vllm:num_requests_waiting{engine="0",model_name="m"} 2e7', "requests_waiting"),
        ('vllm:generation_tokens_total{engine="0",model_name="m"} 1e17', "generation_tokens_total"),
    ],
)
def test_non_finite_or_negative_counts_are_unknown(line: str, field: str) -> None:
    s = _snap(line + "\n")
    assert getattr(s, field) is None
    assert any(m.startswith(field) for m in s.missing)


@pytest.mark.parametrize("value", ["1.7", "85", "-0.2", "+Inf"])
def test_usage_outside_zero_to_one_is_unknown(value: str) -> None:
    s = _snap(f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {value}\n')
    assert s.kv_cache_usage_ratio is None


def test_usage_at_the_edges_is_kept() -> None:
    assert _snap('vllm:kv_cache_usage_perc{engine="0",model_name="m"} 1.0\n').kv_cache_usage_ratio == 1.0
    assert _snap('vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0\n').kv_cache_usage_ratio == 0.0


def test_a_histogram_whose_cumulative_counts_decrease_is_unknown() -> None:
    body = "".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {n}\n'
        for le, n in [("0.1", 90), ("0.5", 50), ("1.0", 10), ("+Inf", 100)]
    )
    body += 'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 100\n'
    body += 'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 20\n'
    s = _snap(body)
    assert s.ttft is None
    assert any("decrease" in m for m in s.missing)


def test_a_sound_histogram_is_kept() -> None:
    body = "".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {n}\n'
        for le, n in [("0.1", 10), ("0.5", 50), ("1.0", 90), ("+Inf", 100)]
    )
    body += 'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 100\n'
    body += 'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 40\n'
    s = _snap(body)
    assert s.ttft is not None and s.ttft.count == 100


def _reference_histogram_problem(h: Histogram) -> str | None:
    """``histogram_problem`` as it was before its C-speed check of the usual histogram (one bucket at a time)."""
    if not math.isfinite(h.sum) or not math.isfinite(h.count) or h.count < 0:
        return "count or sum is not finite"
    prev = 0.0
    for bound, count in h.buckets:
        if not math.isfinite(count) or count < 0:
            return f"bucket le={bound} has count {count}"
        if count < prev - max(1e-9, 1e-9 * prev):
            return f"cumulative counts decrease at le={bound} ({prev:g} → {count:g})"
        prev = count
    return None


COUNTS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 5.0, 5.0 - 1e-12, 1e308, -1.0, -1e-12, math.nan, math.inf, -math.inf]),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(COUNTS, max_size=8), st.sampled_from([0.0, 7.0, math.nan]), st.sampled_from([3.0, -1.0, math.inf]))
def test_a_histogram_problem_is_the_one_the_bucket_walk_names(counts: list[float], total: float, n: float) -> None:
    """Sorted, overflowing, negative, within-tolerance and non-finite counts: the same verdict, the same words."""
    bounds = (*(float(i) for i in range(len(counts) - 1)), math.inf) if counts else ()
    h = Histogram(tuple(zip(bounds, counts, strict=True)), count=n, sum=total)
    assert histogram_problem(h) == _reference_histogram_problem(h)
    ordered = Histogram(tuple(zip(bounds, sorted(counts), strict=True)), count=3.0, sum=7.0)
    assert histogram_problem(ordered) == _reference_histogram_problem(ordered)


def test_large_but_possible_counts_are_kept() -> None:
    """A queue of a million and a lifetime of 10^15 generated tokens are counts (below 10^7 and 2^53 ≈ 9.0 × 10^15)."""
    s = _snap(
        'vllm:num_requests_waiting{engine="0",model_name="m"} 1000000\n'
        'vllm:generation_tokens_total{engine="0",model_name="m"} 1e15\n'
    )
    assert (s.requests_waiting, s.generation_tokens_total) == (1_000_000, 1e15)


@pytest.mark.parametrize(("blocks", "known"), [("1e30", False), ("99999999999", False), ("6250000", True)])
def test_a_pool_beyond_any_engines_memory_is_unknown(blocks: str, known: bool) -> None:
    """Breaker 13: ``num_gpu_blocks`` 1e30 (× 16 tokens) was read as a pool of 10³¹ tokens and fp8 KV proposed to
    double it. Above 10¹⁰ tokens (≥ 10 TB of KV at ~1 KiB a token) it is unknown; 10⁸ tokens (16 × 6.25 M blocks,
    a small model's pool on eight large GPUs) is kept."""
    adapter = get_adapter("vllm")
    page = f'vllm:cache_config_info{{block_size="16",engine="0",num_gpu_blocks="{blocks}"}} 1.0\n'
    s = adapter.snapshot(parse_exposition(page, keep=adapter.wants))
    if known:
        assert s.kv_cache_capacity_tokens == 16 * float(blocks)
    else:
        assert s.kv_cache_capacity_tokens is None
        assert any(m.startswith("kv_cache_capacity_tokens") and "memory" in m for m in s.missing), s.missing


def test_the_usage_of_a_pool_that_is_not_a_pool_size_is_unknown_too() -> None:
    """Breaker 14: TGI's usage is its reserved tokens ÷ its budget; a budget of 1.1e10 was rejected while the 95 %
    reservation share was kept, and fp8 KV proposed on it. The page's usage is unknown with its pool."""
    adapter = get_adapter("vllm")
    page = (
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1e30"} 1.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.95\n'
    )
    s = adapter.snapshot(parse_exposition(page, keep=adapter.wants))
    assert s.kv_cache_capacity_tokens is None and s.kv_cache_usage_ratio is None
    assert any(m.startswith("kv_cache_usage_ratio") for m in s.missing), s.missing
