"""Reference releases' expositions and default bucket bounds: vLLM 0.33.0 and SGLang 0.5.23.

The families (names, types, ``# HELP`` text) and histogram bounds each release serves, as read from its code:

* vLLM V1 0.33.0: ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``; bounds 0.8.5 → 0.33, in 0.33
  ``vllm/v1/metrics/buckets.py``), ``vllm/config/cache.py`` (``cache_config_info`` labels).
* SGLang 0.5.23: ``python/sglang/srt/observability/metrics_collector.py``.

Bounds as in ``../shared/reference/engine-metrics-catalog.md`` §1.2 and §2.2. The simulator
(:mod:`advisor.sim.exposition`), the stand-in (:mod:`advisor.standin`) and ``rules generate`` read them from here
through the catalog entries (:data:`advisor.engines.vllm.CATALOG_ENTRIES`, …); the family sets are checked
against the real captures in ``../shared/engine-metrics`` (``tests/engines/test_catalog.py``).
"""

from __future__ import annotations

from typing import Final

from advisor.engines.catalog import Exposition, Family
from advisor.engines.common import Kind

__all__ = [
    "SGLANG_0_5_23",
    "SGLANG_E2E",
    "SGLANG_ITL",
    "SGLANG_QUEUE",
    "SGLANG_TOKENS",
    "SGLANG_TTFT",
    "VLLM_0_33",
    "VLLM_CACHE_CONFIG_LABELS",
    "VLLM_ITERATION_TOKENS",
    "VLLM_ITL",
    "VLLM_PARAMS_N",
    "VLLM_PREEMPTIONS",
    "VLLM_REQUEST_LATENCY",
    "VLLM_TTFT",
    "one_two_five",
]

# --- bucket bounds ---------------------------------------------------------------------------------------------

VLLM_TTFT: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)  # fmt: skip
"""``time_to_first_token_seconds`` (V1 0.8.5 → 0.33; vLLM PR #15202 added the tail)."""

VLLM_ITL: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""``inter_token_latency_seconds`` and ``request_time_per_output_token_seconds``."""

VLLM_REQUEST_LATENCY: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip
"""e2e, queue, inference, prefill and decode time histograms (seconds)."""

VLLM_ITERATION_TOKENS: Final = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
"""``iteration_tokens_total`` (tokens per engine step)."""

VLLM_PARAMS_N: Final = (1, 2, 5, 10, 20)
"""``request_params_n``."""

VLLM_PREEMPTIONS: Final = (1, 2, 3, 4, 5, 10, 20)
"""``request_num_preemptions`` (0.33)."""

VLLM_TTFT_BEFORE_0_8_5: Final = 10.0
"""vLLM before 0.8.5 stops its TTFT buckets here (seconds)."""

VLLM_TPOT_BEFORE_0_8_5: Final = 2.5
"""vLLM before 0.8.5 stops its TPOT buckets here (seconds)."""

SGLANG_TTFT: Final = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
"""``time_to_first_token_seconds`` (0.4.10 → 0.5.23)."""

SGLANG_ITL: Final = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
    0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
"""``inter_token_latency_seconds`` and ``request_time_per_output_token_seconds``."""

SGLANG_E2E: Final = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
)  # fmt: skip
"""``e2e_request_latency_seconds`` (0.5.4 / 0.5.23)."""

SGLANG_QUEUE: Final = (
    0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
    200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
)  # fmt: skip
"""``queue_time_seconds`` (0.5.23)."""

SGLANG_TOKENS: Final = (
    100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12500, 15000, 17500,
    20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000,
    1000000, 1100000,
)  # fmt: skip
"""``prompt_tokens_histogram`` / ``generation_tokens_histogram`` / ``uncached_prompt_tokens_histogram``."""


def one_two_five(limit: int) -> tuple[int, ...]:
    """vLLM's token-count buckets: the 1-2-5 series up to and including ``limit`` (``build_1_2_5_buckets``).

    >>> one_two_five(8192)[-3:]
    (1000, 2000, 5000)
    """
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > limit:
                return tuple(out)
            out.append(v)
        exponent += 1


# --- vLLM 0.33.0 -----------------------------------------------------------------------------------------------

VLLM_CACHE_CONFIG_LABELS: Final = (
    "_block_size_resolved", "block_size", "cache_dtype", "cache_hit_alignment_tokens",
    "effective_attention_block_size", "enable_mamba_shared_prefix_checkpoint", "enable_prefix_caching", "engine",
    "gpu_memory_utilization", "hash_block_size", "is_attention_free", "kv_cache_dtype_skip_layers",
    "kv_cache_layout", "kv_cache_max_concurrency", "kv_cache_memory_bytes", "kv_cache_size_tokens",
    "kv_offloading_backend", "kv_offloading_size", "kv_sharing_fast_prefill", "mamba_block_size",
    "mamba_cache_dtype", "mamba_cache_mode", "mamba_page_size_padded", "mamba_ssm_cache_dtype", "num_cpu_blocks",
    "num_gpu_blocks", "num_gpu_blocks_override", "prefix_cache_retention_interval", "prefix_caching_hash_algo",
    "prefix_match_unit", "replayssm_buffer_len", "simple_cpu_offload_num_blocks", "skip_page_size_padded",
    "sliding_window", "swa_bounded_replay", "use_kda_recoverssm", "use_replayssm", "user_specified_block_size",
)  # fmt: skip
"""``cache_config_info`` labels of vLLM 0.33.0 (``{str(k): str(v) for k, v in CacheConfig.__dict__}`` plus
``engine``; ``vllm/config/cache.py``)."""

_V: Final = "vllm:"


def _v(name: str, kind: Kind, help_text: str, buckets: tuple[float, ...] = ()) -> Family:
    return Family(_V + name, kind, help_text, buckets)


VLLM_0_33: Final = Exposition(
    version="0.33.0",
    source="vllm/v1/metrics/loggers.py",
    families={
        "process_start_time_seconds": Family(
            "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds."
        ),
        "num_requests_running": _v("num_requests_running", "gauge", "Number of requests in model execution batches."),
        "num_requests_waiting": _v("num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
        "num_requests_waiting_by_reason": _v(
            "num_requests_waiting_by_reason",
            "gauge",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
            "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all "
            "reasons equals " + _V + "num_requests_waiting.",
        ),
        "engine_sleep_state": _v(
            "engine_sleep_state",
            "gauge",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        ),
        "kv_cache_usage_perc": _v("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."),
        "prefix_cache_queries": _v(
            "prefix_cache_queries", "counter", "Prefix cache queries, in terms of number of queried tokens."
        ),
        "prefix_cache_hits": _v(
            "prefix_cache_hits", "counter", "Prefix cache hits, in terms of number of cached tokens."
        ),
        "num_preemptions": _v("num_preemptions", "counter", "Cumulative number of preemption from the engine."),
        "prompt_tokens": _v("prompt_tokens", "counter", "Number of prefill tokens processed."),
        "prompt_tokens_by_source": _v("prompt_tokens_by_source", "counter", "Number of prompt tokens by source."),
        "prompt_tokens_cached": _v(
            "prompt_tokens_cached", "counter", "Number of cached prompt tokens (local + external)."
        ),
        "generation_tokens": _v("generation_tokens", "counter", "Number of generation tokens processed."),
        "request_success": _v("request_success", "counter", "Count of successfully processed requests."),
        "request_prompt_tokens": _v("request_prompt_tokens", "histogram", "Number of prefill tokens processed."),
        "request_generation_tokens": _v(
            "request_generation_tokens", "histogram", "Number of generation tokens processed."
        ),
        "iteration_tokens_total": _v(
            "iteration_tokens_total",
            "histogram",
            "Histogram of number of tokens per engine_step.",
            VLLM_ITERATION_TOKENS,
        ),
        "request_max_num_generation_tokens": _v(
            "request_max_num_generation_tokens",
            "histogram",
            "Histogram of maximum number of requested generation tokens.",
        ),
        "request_params_n": _v("request_params_n", "histogram", "Histogram of the n request parameter.", VLLM_PARAMS_N),
        "request_params_max_tokens": _v(
            "request_params_max_tokens", "histogram", "Histogram of the max_tokens request parameter."
        ),
        "time_to_first_token_seconds": _v(
            "time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.", VLLM_TTFT
        ),
        "inter_token_latency_seconds": _v(
            "inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.", VLLM_ITL
        ),
        "request_time_per_output_token_seconds": _v(
            "request_time_per_output_token_seconds",
            "histogram",
            "Histogram of time_per_output_token_seconds per request.",
            VLLM_ITL,
        ),
        "e2e_request_latency_seconds": _v(
            "e2e_request_latency_seconds",
            "histogram",
            "Histogram of e2e request latency in seconds.",
            VLLM_REQUEST_LATENCY,
        ),
        "request_queue_time_seconds": _v(
            "request_queue_time_seconds",
            "histogram",
            "Histogram of time spent in WAITING phase for request.",
            VLLM_REQUEST_LATENCY,
        ),
        "request_inference_time_seconds": _v(
            "request_inference_time_seconds",
            "histogram",
            "Histogram of time spent in RUNNING phase for request.",
            VLLM_REQUEST_LATENCY,
        ),
        "request_prefill_time_seconds": _v(
            "request_prefill_time_seconds",
            "histogram",
            "Histogram of time spent in PREFILL phase for request.",
            VLLM_REQUEST_LATENCY,
        ),
        "request_decode_time_seconds": _v(
            "request_decode_time_seconds",
            "histogram",
            "Histogram of time spent in DECODE phase for request.",
            VLLM_REQUEST_LATENCY,
        ),
        "request_num_preemptions": _v(
            "request_num_preemptions",
            "histogram",
            "Histogram of the number of times a request was preempted.",
            VLLM_PREEMPTIONS,
        ),
        "request_prefill_kv_computed_tokens": _v(
            "request_prefill_kv_computed_tokens",
            "histogram",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        ),
        "spec_decode_num_drafts": _v("spec_decode_num_drafts", "counter", "Number of spec decoding drafts."),
        "spec_decode_num_draft_tokens": _v("spec_decode_num_draft_tokens", "counter", "Number of draft tokens."),
        "spec_decode_num_accepted_tokens": _v(
            "spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens."
        ),
        "spec_decode_num_accepted_tokens_per_pos": _v(
            "spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position."
        ),
        "cache_config_info": _v("cache_config_info", "gauge", "Information of the LLMEngine CacheConfig"),
    },
    not_rendered=("http_", "python_", "process_"),
)
"""vLLM 0.33.0's ``/metrics`` (single process, no MFU or connector families). Token-count histograms
(``request_prompt_tokens`` …) use :func:`one_two_five` up to ``max_model_len``; they carry ``()`` here."""

# --- SGLang 0.5.23 ---------------------------------------------------------------------------------------------

_S: Final = "sglang:"


def _s(name: str, kind: Kind, help_text: str, buckets: tuple[float, ...] = ()) -> Family:
    return Family(_S + name, kind, help_text, buckets)


SGLANG_0_5_23: Final = Exposition(
    version="0.5.23",
    source="python/sglang/srt/observability/metrics_collector.py",
    families={
        "num_retracted_reqs": _s("num_retracted_reqs", "gauge", "The number of retracted requests."),
        "num_paused_reqs": _s("num_paused_reqs", "gauge", "The number of paused requests by async weight sync."),
        "prompt_tokens_total": _s("prompt_tokens", "counter", "Number of prefill tokens processed."),
        "generation_tokens_total": _s("generation_tokens", "counter", "Number of generation tokens processed."),
        "num_requests_total": _s("num_requests", "counter", "Number of requests processed."),
        "cached_tokens_total": _s(
            "cached_tokens", "counter", "Number of cached prompt tokens by source (device/host/storage)."
        ),
        "num_retracted_requests_total": _s("num_retracted_requests", "counter", "Number of retracted requests."),
        "num_retracted_input_tokens_total": _s(
            "num_retracted_input_tokens", "counter", "Number of retracted input tokens."
        ),
        "num_retracted_output_tokens_total": _s(
            "num_retracted_output_tokens", "counter", "Number of retracted output tokens."
        ),
        "queue_time_seconds": _s(
            "queue_time_seconds", "histogram", "Histogram of queueing time in seconds.", SGLANG_QUEUE
        ),
        "time_to_first_token_seconds": _s(
            "time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.", SGLANG_TTFT
        ),
        "inter_token_latency_seconds": _s(
            "inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.", SGLANG_ITL
        ),
        "e2e_request_latency_seconds": _s(
            "e2e_request_latency_seconds",
            "histogram",
            "Histogram of End-to-end request latency in seconds",
            SGLANG_E2E,
        ),
        "request_time_per_output_token_seconds": _s(
            "request_time_per_output_token_seconds",
            "histogram",
            "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
            SGLANG_ITL,
        ),
        "prompt_tokens_histogram": _s(
            "prompt_tokens_histogram", "histogram", "Histogram of prompt token length.", SGLANG_TOKENS
        ),
        "uncached_prompt_tokens_histogram": _s(
            "uncached_prompt_tokens_histogram",
            "histogram",
            "Histogram of uncached (compute) prompt token length.",
            SGLANG_TOKENS,
        ),
        "generation_tokens_histogram": _s(
            "generation_tokens_histogram", "histogram", "Histogram of generation token length.", SGLANG_TOKENS
        ),
        "max_total_num_tokens": _s(
            "max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache pool."
        ),
        "page_size": _s("page_size", "gauge", "KV cache page size in tokens."),
        "num_pages": _s("num_pages", "gauge", "Number of KV cache pages."),
        "context_len": _s("context_len", "gauge", "Maximum context length."),
        "num_running_reqs": _s("num_running_reqs", "gauge", "The number of running requests."),
        "num_queue_reqs": _s("num_queue_reqs", "gauge", "The number of requests in the waiting queue."),
        "num_grammar_queue_reqs": _s(
            "num_grammar_queue_reqs", "gauge", "The number of requests in the grammar waiting queue."
        ),
        "gen_throughput": _s("gen_throughput", "gauge", "The generation throughput (token/s)."),
        "cache_hit_rate": _s("cache_hit_rate", "gauge", "The prefix cache hit rate."),
        "decode_sum_seq_lens": _s("decode_sum_seq_lens", "gauge", "The sum of all sequence lengths in decode."),
        "token_usage": _s("token_usage", "gauge", "The token usage."),
        "full_token_usage": _s("full_token_usage", "gauge", "The token usage for full attention layers."),
        "swa_token_usage": _s("swa_token_usage", "gauge", "The token usage for SWA layers."),
        "mamba_usage": _s("mamba_usage", "gauge", "The token usage for Mamba layers."),
        "swa_available_tokens": _s(
            "swa_available_tokens", "gauge", "Number of free token slots in the SWA pool (hybrid-SWA only)."
        ),
        "swa_evictable_tokens": _s(
            "swa_evictable_tokens", "gauge", "Number of evictable (radix-cached) token slots in the SWA pool."
        ),
        "swa_used_tokens": _s("swa_used_tokens", "gauge", "Number of actively used token slots in the SWA pool."),
        "mamba_available_tokens": _s(
            "mamba_available_tokens", "gauge", "Number of free state slots in the mamba SSM pool (hybrid-SSM only)."
        ),
        "mamba_evictable_tokens": _s(
            "mamba_evictable_tokens", "gauge", "Number of evictable (radix-cached) state slots in the mamba SSM pool."
        ),
        "mamba_used_tokens": _s(
            "mamba_used_tokens", "gauge", "Number of actively used state slots in the mamba SSM pool."
        ),
        "num_prefill_bootstrap_queue_reqs": _s(
            "num_prefill_bootstrap_queue_reqs", "gauge", "The number of requests in the prefill bootstrap queue."
        ),
        "num_prefill_inflight_queue_reqs": _s(
            "num_prefill_inflight_queue_reqs", "gauge", "The number of requests in the prefill inflight queue."
        ),
        "num_decode_prealloc_queue_reqs": _s(
            "num_decode_prealloc_queue_reqs", "gauge", "The number of requests in the decode prealloc queue."
        ),
        "num_decode_transfer_queue_reqs": _s(
            "num_decode_transfer_queue_reqs", "gauge", "The number of requests in the decode transfer queue."
        ),
        "num_decode_host_receive_queue_reqs": _s(
            "num_decode_host_receive_queue_reqs",
            "gauge",
            "Requests in the decode transfer queue receiving into host memory or waiting for device admission.",
        ),
        "num_used_tokens": _s("num_used_tokens", "gauge", "The number of used tokens."),
        "kv_available_tokens": _s("kv_available_tokens", "gauge", "Number of free token slots in the KV cache pool."),
        "kv_evictable_tokens": _s(
            "kv_evictable_tokens", "gauge", "Number of evictable (radix-cached) token slots in the KV cache pool."
        ),
        "kv_used_tokens": _s("kv_used_tokens", "gauge", "Number of actively used token slots in the KV cache pool."),
        "spec_accept_length": _s(
            "spec_accept_length",
            "gauge",
            "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
        ),
        "spec_accept_rate": _s(
            "spec_accept_rate", "gauge", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."
        ),
        "spec_num_steps": _s("spec_num_steps", "gauge", "Currently active speculative_num_steps."),
        "spec_num_draft_tokens": _s(
            "spec_num_draft_tokens",
            "gauge",
            "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
        ),
    },
)
"""SGLang 0.5.23's ``/metrics`` (multiprocess mode: no ``_created`` series, no ``process_*``)."""
