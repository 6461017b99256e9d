"""The Triton ``tensorrtllm`` backend's request gauges read as the executor writes them, and the TensorRT-LLM token
pin lifted by the pool turns.

Engine facts (``NVIDIA/TensorRT-LLM`` ``cpp/tensorrt_llm/executor/executorImpl.cpp`` ``getCurrentIterationStats``,
``trtGptModelInflightBatching.cpp``): ``request_type="active"`` is the executor's active list, filled from its queue
up to ``max`` (``mMaxNumActiveRequests = getMaxNumSequences()``) whether or not the capacity scheduler runs them;
``scheduled`` is what the last iteration ran; ``waiting`` (2025+) is the executor's own queue. So running =
scheduled and waiting = active − scheduled + waiting; without the waiting gauge, the executor's queue is known empty
only while active < max. Every expected value is worked out by hand from the page text below.
"""

from __future__ import annotations

import pytest

from advisor.capacity.deployment import DeploymentSpec, deployment_inputs
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.engines import get_adapter
from advisor.engines.flags import token_pin_flag
from advisor.rules.turns import token_pin_turn
from advisor.sources.exposition import parse_exposition


def _page(**requests: float) -> str:
    rows = ["# TYPE nv_trt_llm_request_metrics gauge"]
    rows += [
        f'nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="{kind}",version="1"}} {value:g}'
        for kind, value in requests.items()
    ]
    return "\n".join(rows) + "\n"


def _read(text: str) -> tuple[float | None, float | None, dict[str, float]]:
    adapter = get_adapter("triton-trtllm")
    snap = adapter.snapshot(parse_exposition(text, keep=adapter.wants))
    return snap.requests_running, snap.requests_waiting, dict(snap.requests_waiting_by_reason)


def test_scheduled_is_running_and_the_rest_of_the_active_list_waits_for_capacity() -> None:
    # triton-inference-server/tensorrtllm_backend#453 moment: 76 active of max 256, 5 scheduled, 2024 backend
    assert _read(_page(context=1, scheduled=5, max=256, active=76)) == (5, 71, {"capacity": 71})


def test_a_full_active_list_leaves_the_executor_queue_unknown() -> None:
    # triton-inference-server/server#7676: "Active Request Count":8, "Max Request Count":8, one scheduled
    assert _read(_page(context=0, scheduled=1, max=8, active=8)) == (1, None, {"capacity": 7})


def test_the_waiting_gauge_adds_the_executor_queue() -> None:
    # 2025+ backend: 3 queued outside the active list, 10 active, 4 scheduled → 6 + 3 wait
    assert _read(_page(waiting=3, context=1, scheduled=4, max=64, active=10)) == (4, 9, {"capacity": 6})


def test_a_request_the_last_iteration_finished_is_not_running() -> None:
    # the gauges keep the last iteration's values: the 23.11 README page reads active 0, scheduled 1
    assert _read(_page(context=1, scheduled=1, max=512, active=0)) == (0, 0, {"capacity": 0})


def test_without_scheduled_active_stands_for_running_as_before() -> None:
    assert _read(_page(waiting=4, active=12)) == (12, 4, {})
    assert _read(_page(active=12, max=64)) == (12, None, {})


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
A100_80GB_BYTES = 85_899_345_920  # 80 GiB: the round number keeps the arithmetic by hand


def _trtllm_inputs(max_tokens: int | None) -> CapacityInputs:
    return deployment_inputs(
        DeploymentSpec(
            engine="trtllm",
            model=get_preset(LLAMA),
            gpu_memory_bytes=A100_80GB_BYTES,
            max_model_len=2560,
            free_gpu_memory_fraction=0.5,
            max_tokens=max_tokens,
        )
    )


def test_the_token_pin_turn_lifts_the_cap_to_the_fraction_pool() -> None:
    pinned = _trtllm_inputs(2560)
    t = token_pin_turn(pinned)
    assert t is not None and t.dial == "kv_cache_memory_bytes"
    before, after = t.values()
    # 2,560 tokens = 80 blocks of 32 at Llama-3.1-8B's 128 KiB a token (32 layers × 8 KV heads × 128 × 2 × 2 B)
    assert before == 2560 * 131_072
    # lifted: the pool of the same deployment without the pin, whole MiB
    free = capacity_pass(_trtllm_inputs(None))
    assert after == free.kv_pool_bytes_per_gpu // 2**20 * 2**20 and after % 2**20 == 0
    # half of ~80 GiB less ~15 GiB of weights is ~32 GiB: ~250,000 tokens, ~100× the pin
    assert t.after.kv_cache_tokens == free.kv_cache_tokens
    assert 200_000 < t.after.kv_cache_tokens < 270_000
    assert t.kv_gain_ratio() > 80


def test_no_pin_no_turn_and_the_flag_names_each_engine_key() -> None:
    assert token_pin_turn(_trtllm_inputs(None)) is None
    triton = token_pin_flag("triton-trtllm", 258_144)
    serve = token_pin_flag("trtllm", 258_144)
    assert triton is not None and "max_tokens_in_paged_kv_cache" in triton and "258,144" in triton
    assert serve is not None and "kv_cache_config.max_tokens" in serve and "258,144" in serve
    assert token_pin_flag("vllm", 1) is None


@pytest.mark.parametrize("fraction", [0.5, 0.9])
def test_a_pin_above_the_fraction_pool_is_no_turn(fraction: float) -> None:
    """A cap larger than what the fraction gives does not bind: lifting it changes nothing (the turn's gain is 1)."""
    inputs = deployment_inputs(
        DeploymentSpec(
            engine="trtllm",
            model=get_preset(LLAMA),
            gpu_memory_bytes=A100_80GB_BYTES,
            max_model_len=2560,
            free_gpu_memory_fraction=fraction,
            max_tokens=10**9,
        )
    )
    t = token_pin_turn(inputs)
    assert t is not None and t.kv_gain_ratio() == 1.0


def test_paused_requests_are_read_from_both_tensorrt_llm_expositions() -> None:
    """TensorRT-LLM pauses running requests (frees their KV, recomputes later) only under MAX_UTILIZATION: the Triton
    backend's inflight-batcher gauge and trtllm-serve's ``trtllm_num_paused_requests`` say how many; absent is
    unknown, not 0."""
    triton = get_adapter("triton-trtllm")
    page = _page(scheduled=4, max=64, active=4) + (
        "# TYPE nv_trt_llm_inflight_batcher_metrics gauge\n"
        'nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests",'
        'model="tensorrt_llm",version="1"} 2\n'
    )
    assert triton.snapshot(parse_exposition(page, keep=triton.wants)).requests_paused == 2
    assert triton.snapshot(parse_exposition(_page(active=4), keep=triton.wants)).requests_paused is None
    serve = get_adapter("trtllm")
    text = (
        "# TYPE trtllm_num_requests_running gauge\n"
        'trtllm_num_requests_running{engine_type="trtllm",model_name="m"} 24\n'
        "# TYPE trtllm_num_paused_requests gauge\n"
        'trtllm_num_paused_requests{engine_type="trtllm",model_name="m"} 3\n'
    )
    assert serve.snapshot(parse_exposition(text, keep=serve.wants)).requests_paused == 3
    assert (
        serve.snapshot(parse_exposition(text.split("# TYPE trtllm_num_paused")[0], keep=serve.wants)).requests_paused
        is None
    )


def test_trtllm_serve_reads_the_same_executor_statistics() -> None:
    """``collector.py`` ``log_iteration_stats``: ``num_requests_running`` is ``numActiveRequests`` (the active list),
    ``num_scheduled_requests`` what the last iteration ran, ``num_requests_waiting`` ``numQueuedRequests``: 8 active,
    1 scheduled, 2 queued → running 1, waiting 7 + 2, 7 held back for capacity."""
    serve = get_adapter("trtllm")
    lab = 'engine_type="trtllm",model_name="m"'
    rows = {
        "num_requests_running": 8,
        "num_scheduled_requests": 1,
        "num_requests_waiting": 2,
        "max_num_active_requests": 64,
    }
    text = "".join(f"# TYPE trtllm_{k} gauge\ntrtllm_{k}{{{lab}}} {v}\n" for k, v in rows.items())
    snap = serve.snapshot(parse_exposition(text, keep=serve.wants))
    assert (snap.requests_running, snap.requests_waiting) == (1, 9)
    assert dict(snap.requests_waiting_by_reason) == {"capacity": 7}
    older = text.replace(f"# TYPE trtllm_num_scheduled_requests gauge\ntrtllm_num_scheduled_requests{{{lab}}} 1\n", "")
    snap = serve.snapshot(parse_exposition(older, keep=serve.wants))
    assert (snap.requests_running, snap.requests_waiting, dict(snap.requests_waiting_by_reason)) == (8, 2, {})


def test_triton_success_counter_is_read_under_the_name_the_parser_gives_it() -> None:
    """``nv_inference_request_success`` is typed a counter without ``_total``: prometheus-client's text parser names
    its sample ``nv_inference_request_success_total``; a Prometheus store keeps the name as scraped. Both read."""
    triton = get_adapter("triton-trtllm")
    text = (
        "# TYPE nv_inference_request_success counter\n"
        'nv_inference_request_success{model="tensorrt_llm",version="1"} 23\n'
    )
    assert triton.snapshot(parse_exposition(text, keep=triton.wants)).requests_finished_total == 23
    stored = 'nv_inference_request_success{model="tensorrt_llm",version="1"} 23\n'  # untyped, as a store answers
    assert triton.snapshot(parse_exposition(stored, keep=triton.wants)).requests_finished_total == 23
