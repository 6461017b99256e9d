"""A series repeated on one page (a Ray Serve re-export listing one ``ReplicaId``'s series twice) is read once,
its first sample kept as Prometheus keeps it, and the repetition is named in ``missing``; an empty replica
label (``ReplicaId=""``) is no replica label. Names as Ray Serve LLM re-exports vLLM's (``ray_vllm_*``,
python/ray/llm/_internal/serve/…; vLLM families from vllm/v1/metrics/loggers.py).
"""

from __future__ import annotations

from advisor.domain import EngineSnapshot
from advisor.engines import get_adapter
from advisor.sources.exposition import parse_exposition


def _replica(labels: str, running: str, prompt: str) -> str:
    return (
        f"ray_vllm_num_requests_running{{{labels}}} {running}\n"
        f"ray_vllm_num_requests_waiting{{{labels}}} 1\n"
        f"ray_vllm_kv_cache_usage_perc{{{labels}}} 0.5\n"
        f"ray_vllm_prompt_tokens_total{{{labels}}} {prompt}\n"
    )


def read(engine: str, text: str) -> EngineSnapshot:
    adapter = get_adapter(engine)
    return adapter.snapshot(parse_exposition(text, keep=adapter.wants))


def test_a_repeated_replica_series_keeps_the_first_sample_and_is_named() -> None:
    labels = 'model_name="m",ReplicaId="a"'
    snap = read("vllm", _replica(labels, "3", "100") + _replica(labels, "7", "900"))
    assert snap.requests_running == 3  # first wins (c80483b: 7, the last)
    assert snap.prompt_tokens_total == 100  # not 1,000: a repeated counter is not a second replica
    assert any(m.startswith("vllm:num_requests_running: 1 duplicate series") for m in snap.missing), snap.missing
    assert snap.replicas == ()


def test_an_empty_replica_label_is_no_replica() -> None:
    snap = read("vllm", _replica('model_name="m",ReplicaId=""', "3", "100"))
    assert snap.requests_running == 3
    assert not any("ReplicaId=" in r for r in (*snap.replicas, *(rv.rank for rv in snap.ranks)))
    assert not any("ReplicaId=" in m for m in (*snap.missing, *snap.ranks_excluded)), snap.missing


def test_an_empty_and_a_named_replica_are_one_unnamed_and_one_named() -> None:
    snap = read(
        "vllm",
        _replica('model_name="m",ReplicaId=""', "3", "100") + _replica('model_name="m",ReplicaId="b"', "4", "50"),
    )
    assert snap.requests_running == 7
    assert {rv.rank for rv in snap.ranks} == {"0", "ReplicaId=b"}


def test_a_repeated_sglang_series_is_read_once() -> None:
    line = 'sglang:num_running_reqs{model_name="m",tp_rank="0"} '
    snap = read("sglang", line + "5\n" + line + "9\n")
    assert snap.requests_running == 5
    assert any(m.startswith("sglang:num_running_reqs: 1 duplicate series") for m in snap.missing), snap.missing


def test_every_family_read_through_observe_keeps_the_first_sample_of_a_repeated_series() -> None:
    """The kind of error, wherever samples are read: a Dynamo worker's KV gauge repeated on an SGLang worker's page
    (0.354, then 0.97) read the larger before issue 14 (worker_kv took the max of the repeats). Names:
    ``dynamo_component_gpu_cache_usage_percent`` (ai-dynamo/dynamo lib/bindings/python/src/dynamo/prometheus_names.py),
    SGLang's from python/sglang/srt/metrics/collector.py."""
    from advisor.observe import observe

    page = (
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 5\n'
        'sglang:num_queue_reqs{model_name="m",tp_rank="0"} 3\n'
        'dynamo_component_gpu_cache_usage_percent{dynamo_component="backend",model="m"} 0.354\n'
        'dynamo_component_gpu_cache_usage_percent{model="m",dynamo_component="backend"} 0.97\n'
        'sglang:num_queue_reqs{tp_rank="0",model_name="m"} 40\n'
    )
    seen = observe(page, "auto", strict=True)
    assert seen.snapshot is not None
    assert seen.snapshot.kv_cache_usage_ratio == 0.354
    assert seen.snapshot.requests_waiting == 3
    assert seen.duplicate_series == 2
    assert any(m.startswith("dynamo_component_gpu_cache_usage_percent: 1 duplicate") for m in seen.snapshot.missing)


def test_a_repeated_vllm_page_counts_every_repeated_gauge_counter_and_bucket() -> None:
    from advisor.observe import observe

    page = (
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0",model_name="m"} 0\n'
        "# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 100\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 1\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2\n'
        'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2\n'
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5\n'
    )
    once = observe(page, "vllm")
    twice = observe(page + page.replace(" 100\n", " 900\n"), "vllm")
    assert once.duplicate_series == 0 and twice.duplicate_series == 6
    assert twice.snapshot is not None and twice.snapshot.prompt_tokens_total == 100
    assert twice.snapshot.ttft is not None and twice.snapshot.ttft.count == 2
