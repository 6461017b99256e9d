"""``missing`` and ``ranks_excluded`` say exactly what was left out and why (vLLM V1 with
``--data-parallel-size 2``: every family carries ``engine="<rank>"``, vllm/v1/metrics/loggers.py).

On c80483b: a rank with ``num_requests_running -5`` made ``missing`` report the tainted sum
(``requests_running (value -2 is negative)``) while the snapshot said 3; a rank with NaN usage left
``vllm:kv_cache_usage_perc`` in ``missing`` though usage was known from the other rank; ranks whose TTFT/TPOT
buckets differ made the histograms unknown with no reason given.
"""

from __future__ import annotations

from advisor.domain import EngineSnapshot
from advisor.engines import get_adapter
from advisor.sources.exposition import parse_exposition


def _rank(rank: str, *, running: str = "3", usage: str = "0.5", bounds: tuple[str, ...] = ("0.1", "1.0")) -> str:
    lab = f'model_name="m",engine="{rank}"'
    lines = [
        f"vllm:num_requests_running{{{lab}}} {running}",
        f"vllm:num_requests_waiting{{{lab}}} 1",
        f"vllm:kv_cache_usage_perc{{{lab}}} {usage}",
        f"vllm:num_preemptions_total{{{lab}}} 0",
        f"vllm:prompt_tokens_total{{{lab}}} 100",
        f"vllm:generation_tokens_total{{{lab}}} 200",
        f'vllm:cache_config_info{{engine="{rank}",block_size="16",num_gpu_blocks="1000"}} 1.0',
    ]
    for family in ("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"):
        lines += [f'{family}_bucket{{{lab},le="{b}"}} {2 * (i + 1)}' for i, b in enumerate(bounds)]
        lines += [
            f'{family}_bucket{{{lab},le="+Inf"}} 8',
            f"{family}_count{{{lab}}} 8",
            f"{family}_sum{{{lab}}} 1.6",
        ]
    return "\n".join(lines) + "\n"


def read(text: str) -> EngineSnapshot:
    adapter = get_adapter("vllm")
    return adapter.snapshot(parse_exposition(text, keep=adapter.wants))


def test_a_negative_rank_is_named_not_the_tainted_sum() -> None:
    snap = read(_rank("0", running="-5") + _rank("1"))
    assert snap.requests_running == 3
    assert snap.ranks_excluded == ("0: requests_running value -5 is negative",)
    assert "rank 0 left out (requests_running value -5 is negative)" in snap.missing
    assert not any(m.startswith("requests_running (value") for m in snap.missing), snap.missing


def test_usage_known_from_the_other_rank_is_not_listed_missing() -> None:
    snap = read(_rank("0", usage="NaN") + _rank("1", usage="0.5"))
    assert snap.kv_cache_usage_ratio == 0.5
    assert "vllm:kv_cache_usage_perc" not in snap.missing
    assert any(m.startswith("rank 0 left out (kv_cache_usage_ratio unknown") for m in snap.missing), snap.missing


def test_usage_unknown_on_every_rank_stays_missing() -> None:
    snap = read(_rank("0", usage="NaN") + _rank("1", usage="NaN"))
    assert snap.kv_cache_usage_ratio is None
    assert "vllm:kv_cache_usage_perc" in snap.missing


def test_ranks_with_different_buckets_say_so() -> None:
    snap = read(_rank("0", bounds=("0.1", "0.5", "1.0")) + _rank("1", bounds=("0.2", "0.4")))
    assert snap.ttft is None and snap.tpot is None
    for family in ("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"):
        assert f"{family} (bucket bounds differ across data-parallel ranks (0: 4 bounds, 1: 3 bounds))" in snap.missing


def test_sglang_ranks_with_different_buckets_say_so() -> None:
    def rank(r: str, bounds: tuple[str, ...]) -> str:
        lab = f'model_name="m",dp_rank="{r}",tp_rank="0"'
        fam = "sglang:inter_token_latency_seconds"
        out = [f'{fam}_bucket{{{lab},le="{b}"}} {i + 1}' for i, b in enumerate(bounds)]
        return "\n".join(
            [*out, f'{fam}_bucket{{{lab},le="+Inf"}} 5', f"{fam}_count{{{lab}}} 5", f"{fam}_sum{{{lab}}} 1"]
        )

    adapter = get_adapter("sglang")
    text = rank("0", ("0.1", "1.0")) + "\n" + rank("1", ("0.2",)) + "\n"
    snap = adapter.snapshot(parse_exposition(text, keep=adapter.wants))
    assert snap.tpot is None
    assert any("bucket bounds differ across data-parallel ranks" in m for m in snap.missing), snap.missing
