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
