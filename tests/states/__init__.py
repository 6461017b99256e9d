"""Engine expositions for the operator states of issue 5, acceptance item 1.

Each state is two scrapes of a real engine's ``/metrics`` text, written here from the engines' own metric
definitions (``../shared/reference/engine-metrics-catalog.md`` §1 vLLM V1, §2 SGLang, §11 pitfalls), not copied
from any capture:

* :class:`VLLMEngine` — vLLM V1 as the ``PrometheusStatLogger`` of 0.11.x or 0.33.x exposes it (single
  process: ``_created`` gauges, ``process_*``), labels ``engine`` + ``model_name``, the V1 bucket bounds
  (TTFT to 2560 s, ITL/TPOT to 80 s, request latency to 7680 s, 1-2-5 token buckets capped at
  ``max_model_len``), ``vllm:cache_config_info`` with ``num_gpu_blocks``/``block_size``
  (+ ``kv_cache_size_tokens``/``kv_cache_max_concurrency`` in 0.33).
* :class:`SGLangEngine` — SGLang 0.5.x (multiprocess: no ``_created``, scheduler gauges labelled
  ``engine_type, model_name, moe_ep_rank, pp_rank, tp_rank``, tokenizer families labelled
  ``engine_type, is_streaming, model_name``), ``max_total_num_tokens``, ``full_token_usage`` /
  ``swa_token_usage`` / ``token_usage``, ``num_retracted_requests_total``, SGLang's own bucket bounds.

An engine object is mutable: set its history, :meth:`render` scrape #1, apply what happens over the one-second
window (counters advance by rate × 1 s, gauges move, histograms gain the window's observations), render
scrape #2. :class:`TwoScrapeServer` serves them over loopback.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --- number formatting as prometheus_client does it (utils.floatToGoString) -------------------------------


def go_float(value: float) -> str:
    """``1.0`` → ``"1.0"``, ``inf`` → ``"+Inf"``, ``1488504.0`` → ``"1.488504e+06"`` (prometheus_client)."""
    d = float(value)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


# --- bucket bounds ---------------------------------------------------------------------------------------

VLLM_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
VLLM_TPOT_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
VLLM_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
VLLM_ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
VLLM_N_BUCKETS = (1, 2, 5, 10, 20)

SGLANG_TTFT_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
)  # fmt: skip
SGLANG_ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
SGLANG_E2E_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
)  # fmt: skip
SGLANG_QUEUE_BUCKETS = (
    0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80,
    90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
)  # fmt: skip


def one_two_five(limit: int) -> tuple[int, ...]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, … up to ``limit`` (``max_model_len``)."""
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > limit:
                return tuple(out)
            out.append(v)
        exponent += 1


@dataclass
class Hist:
    """A cumulative Prometheus histogram: per-bucket counts (non-cumulative internally), sum, count."""

    bounds: Sequence[float]
    counts: list[float] = field(default_factory=list)
    total: float = 0.0
    n: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0.0] * (len(self.bounds) + 1)

    def observe(self, value: float, times: float = 1) -> None:
        """Add ``times`` observations of ``value`` (placed in the first bucket whose ``le`` ≥ value)."""
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.counts[i] += times
                break
        else:
            self.counts[-1] += times
        self.total += value * times
        self.n += times

    def observe_many(self, values: Iterable[float]) -> None:
        for v in values:
            self.observe(v)

    def lines(self, name: str, labels: Mapping[str, str], *, created: float | None) -> list[str]:
        out: list[str] = []
        running = 0.0
        for b, c in zip([*self.bounds, math.inf], self.counts, strict=True):
            running += c
            out.append(f"{name}_bucket{_labels({**labels, 'le': go_float(b)})} {go_float(running)}")
        out.append(f"{name}_count{_labels(labels)} {go_float(self.n)}")
        out.append(f"{name}_sum{_labels(labels)} {go_float(self.total)}")
        if created is not None:
            out.append(f"{name}_created{_labels(labels)} {go_float(created)}")
        return out


def spread(center: float, n: int, rel: float = 0.15) -> list[float]:
    """``n`` deterministic values spread ±``rel`` around ``center`` (no randomness: reproducible)."""
    if n <= 0:
        return []
    if n == 1:
        return [center]
    return [center * (1 - rel + 2 * rel * i / (n - 1)) for i in range(n)]


# --- vLLM V1 ------------------------------------------------------------------------------------------------

_VLLM_HELP = {
    "vllm:num_requests_running": ("gauge", "Requests in model execution batches."),
    "vllm:num_requests_waiting": ("gauge", "Requests waiting to be processed."),
    "vllm:num_requests_waiting_by_reason": ("gauge", "Waiting requests by reason."),
    "vllm:kv_cache_usage_perc": ("gauge", "KV-cache usage; 1 means 100 percent."),
    "vllm:prefix_cache_queries": ("counter", "Prefix cache queries, in queried tokens."),
    "vllm:prefix_cache_hits": ("counter", "Prefix cache hits, in cached tokens."),
    "vllm:num_preemptions": ("counter", "Cumulative preemptions from the engine."),
    "vllm:prompt_tokens": ("counter", "Prefill tokens processed."),
    "vllm:generation_tokens": ("counter", "Generation tokens processed."),
    "vllm:request_success": ("counter", "Successfully processed requests."),
    "vllm:request_prompt_tokens": ("histogram", "Prompt tokens per request."),
    "vllm:request_generation_tokens": ("histogram", "Generation tokens per request."),
    "vllm:iteration_tokens_total": ("histogram", "Tokens per engine step."),
    "vllm:request_max_num_generation_tokens": ("histogram", "Maximum requested generation tokens."),
    "vllm:request_params_n": ("histogram", "The n request parameter."),
    "vllm:request_params_max_tokens": ("histogram", "The max_tokens request parameter."),
    "vllm:time_to_first_token_seconds": ("histogram", "Time to first token, seconds."),
    "vllm:time_per_output_token_seconds": ("histogram", "Time per output token, seconds. DEPRECATED."),
    "vllm:inter_token_latency_seconds": ("histogram", "Inter-token latency, seconds."),
    "vllm:request_time_per_output_token_seconds": ("histogram", "Mean time per output token per request."),
    "vllm:e2e_request_latency_seconds": ("histogram", "End-to-end request latency, seconds."),
    "vllm:request_queue_time_seconds": ("histogram", "Time spent WAITING, seconds."),
    "vllm:request_inference_time_seconds": ("histogram", "Time spent RUNNING, seconds."),
    "vllm:request_prefill_time_seconds": ("histogram", "Time spent in PREFILL, seconds."),
    "vllm:request_decode_time_seconds": ("histogram", "Time spent in DECODE, seconds."),
}

_VLLM_011_CACHE_LABELS = {
    "cache_dtype": "auto",
    "calculate_kv_scales": "False",
    "cpu_kvcache_space_bytes": "None",
    "cpu_offload_gb": "0.0",
    "enable_prefix_caching": "True",
    "is_attention_free": "False",
    "kv_cache_memory_bytes": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_cache_dtype": "auto",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "auto",
    "num_cpu_blocks": "None",
    "num_gpu_blocks_override": "None",
    "prefix_caching_hash_algo": "sha256",
    "sliding_window": "None",
    "swap_space": "4.0",
    "swap_space_bytes": "4294967296.0",
}
_VLLM_033_CACHE_LABELS = {
    "_block_size_resolved": "True",
    "cache_dtype": "auto",
    "cache_hit_alignment_tokens": "None",
    "enable_mamba_shared_prefix_checkpoint": "False",
    "enable_prefix_caching": "True",
    "hash_block_size": "None",
    "is_attention_free": "False",
    "kv_cache_dtype_skip_layers": "[]",
    "kv_cache_layout": "None",
    "kv_cache_memory_bytes": "None",
    "kv_offloading_backend": "native",
    "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "auto",
    "num_cpu_blocks": "None",
    "num_gpu_blocks_override": "None",
    "prefix_caching_hash_algo": "sha256",
    "prefix_match_unit": "None",
    "sliding_window": "None",
    "user_specified_block_size": "False",
}


class VLLMEngine:
    """One vLLM V1 API server (one DP engine, ``engine="0"``) as its ``/metrics`` shows it.

    ``version`` is ``"0.11"`` (the 0.11.x label set; the deprecated ``time_per_output_token_seconds`` still
    exposed) or ``"0.33"`` (``kv_cache_size_tokens``/``kv_cache_max_concurrency`` labels,
    ``num_requests_waiting_by_reason``; the deprecated family gone).
    """

    def __init__(
        self,
        *,
        model_name: str,
        num_gpu_blocks: int,
        max_model_len: int,
        gpu_memory_utilization: float,
        version: str = "0.11",
        block_size: int = 16,
        started: float = 1.7624e9,
    ) -> None:
        assert version in ("0.11", "0.33"), version
        self.version = version
        self.model_name = model_name
        self.num_gpu_blocks = num_gpu_blocks
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.gpu_memory_utilization = gpu_memory_utilization
        self.started = started
        self.running = 0.0
        self.waiting = 0.0
        self.deferred = 0.0
        """Of ``waiting``, requests deferred (LoRA budget, KV transfer), not waiting for capacity (0.33)."""
        self.kv_usage = 0.0
        self.cache_labels: dict[str, str] = {}
        """``cache_config_info`` labels set on top of the version's (hybrid markers, …)."""
        self.counters: dict[str, float] = {
            "vllm:prefix_cache_queries": 0.0,
            "vllm:prefix_cache_hits": 0.0,
            "vllm:num_preemptions": 0.0,
            "vllm:prompt_tokens": 0.0,
            "vllm:generation_tokens": 0.0,
        }
        self.success = {"stop": 0.0, "length": 0.0, "abort": 0.0}
        tok = one_two_five(max_model_len)
        self.hists: dict[str, Hist] = {
            "vllm:request_prompt_tokens": Hist(tok),
            "vllm:request_generation_tokens": Hist(tok),
            "vllm:iteration_tokens_total": Hist(VLLM_ITERATION_BUCKETS),
            "vllm:request_max_num_generation_tokens": Hist(tok),
            "vllm:request_params_n": Hist(VLLM_N_BUCKETS),
            "vllm:request_params_max_tokens": Hist(tok),
            "vllm:time_to_first_token_seconds": Hist(VLLM_TTFT_BUCKETS),
            "vllm:inter_token_latency_seconds": Hist(VLLM_TPOT_BUCKETS),
            "vllm:request_time_per_output_token_seconds": Hist(VLLM_TPOT_BUCKETS),
            "vllm:e2e_request_latency_seconds": Hist(VLLM_LATENCY_BUCKETS),
            "vllm:request_queue_time_seconds": Hist(VLLM_LATENCY_BUCKETS),
            "vllm:request_inference_time_seconds": Hist(VLLM_LATENCY_BUCKETS),
            "vllm:request_prefill_time_seconds": Hist(VLLM_LATENCY_BUCKETS),
            "vllm:request_decode_time_seconds": Hist(VLLM_LATENCY_BUCKETS),
        }
        if version == "0.11":
            self.hists["vllm:time_per_output_token_seconds"] = Hist(VLLM_TPOT_BUCKETS)

    # -- what the engine does -----------------------------------------------------------------------------
    @property
    def kv_cache_size_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    def first_tokens(self, ttfts: Iterable[float]) -> None:
        """Requests that produced their first token (vLLM observes TTFT then, not at finish)."""
        self.hists["vllm:time_to_first_token_seconds"].observe_many(ttfts)

    def decode(self, tokens: float, itl: float, *, steps: float | None = None, batch: float | None = None) -> None:
        """``tokens`` generated at inter-token latency ``itl`` (one ITL observation per token after a first one)."""
        self.counters["vllm:generation_tokens"] += tokens
        self.hists["vllm:inter_token_latency_seconds"].observe(itl, tokens)
        if "vllm:time_per_output_token_seconds" in self.hists:
            self.hists["vllm:time_per_output_token_seconds"].observe(itl, tokens)
        if steps:
            self.hists["vllm:iteration_tokens_total"].observe(batch if batch is not None else tokens / steps, steps)

    def prefill(self, tokens: float, *, cached: float = 0.0) -> None:
        """Prompt tokens scheduled (cached ones included, as vLLM counts them)."""
        self.counters["vllm:prompt_tokens"] += tokens
        self.counters["vllm:prefix_cache_queries"] += tokens
        self.counters["vllm:prefix_cache_hits"] += cached

    def preempt(self, n: float) -> None:
        self.counters["vllm:num_preemptions"] += n

    def finish(
        self,
        n: int,
        *,
        prompt: float,
        output: float,
        ttft: float,
        tpot: float,
        queue: float,
        reason: str = "stop",
        max_tokens: float | None = None,
    ) -> None:
        """``n`` requests finished in this window, each with the given shape (values spread ±15 %).

        e2e = ttft + tpot × (output − 1); prefill = ttft − queue; decode = tpot × (output − 1).
        """
        self.success[reason] += n
        for f in spread(1.0, n):
            p, o = max(1.0, round(prompt * f)), max(1.0, round(output * f))
            t1, tp, q = ttft * f, tpot * f, queue * f
            decode = tp * (o - 1)
            prefill = max(0.001, t1 - q)
            h = self.hists
            h["vllm:request_prompt_tokens"].observe(p)
            h["vllm:request_generation_tokens"].observe(o)
            h["vllm:request_max_num_generation_tokens"].observe(max_tokens or o)
            h["vllm:request_params_max_tokens"].observe(max_tokens or o)
            h["vllm:request_params_n"].observe(1)
            h["vllm:request_time_per_output_token_seconds"].observe(tp)
            h["vllm:e2e_request_latency_seconds"].observe(t1 + decode)
            h["vllm:request_queue_time_seconds"].observe(q)
            h["vllm:request_inference_time_seconds"].observe(prefill + decode)
            h["vllm:request_prefill_time_seconds"].observe(prefill)
            h["vllm:request_decode_time_seconds"].observe(decode)

    # -- exposition -----------------------------------------------------------------------------------------
    def cache_config_labels(self) -> dict[str, str]:
        base = dict(_VLLM_011_CACHE_LABELS if self.version == "0.11" else _VLLM_033_CACHE_LABELS)
        base.update(
            block_size=str(self.block_size),
            engine="0",
            gpu_memory_utilization=str(self.gpu_memory_utilization),
            num_gpu_blocks=str(self.num_gpu_blocks),
        )
        if self.version == "0.33":
            base.update(
                effective_attention_block_size=str(self.block_size),
                kv_cache_size_tokens=str(self.kv_cache_size_tokens),
                kv_cache_max_concurrency=str(self.kv_cache_size_tokens / self.max_model_len),
            )
        base.update(self.cache_labels)
        return base

    def render(self) -> str:
        ml = {"engine": "0", "model_name": self.model_name}
        created = self.started + 55.0
        out: list[str] = [
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
            "# TYPE process_start_time_seconds gauge",
            f"process_start_time_seconds {go_float(self.started)}",
        ]

        def head(name: str) -> None:
            kind, text = _VLLM_HELP[name]
            out.append(f"# HELP {name} {text}")
            out.append(f"# TYPE {name} {kind}")

        for name, value in (
            ("vllm:num_requests_running", self.running),
            ("vllm:num_requests_waiting", self.waiting),
        ):
            head(name)
            out.append(f"{name}{_labels(ml)} {go_float(value)}")
        if self.version == "0.33":
            head("vllm:num_requests_waiting_by_reason")
            for reason, v in (("capacity", self.waiting - self.deferred), ("deferred", self.deferred)):
                out.append(f"vllm:num_requests_waiting_by_reason{_labels({**ml, 'reason': reason})} {go_float(v)}")
        head("vllm:kv_cache_usage_perc")
        out.append(f"vllm:kv_cache_usage_perc{_labels(ml)} {go_float(self.kv_usage)}")
        for base, value in self.counters.items():
            head(base)
            out.append(f"{base}_total{_labels(ml)} {go_float(value)}")
            out.append(f"# HELP {base}_created {_VLLM_HELP[base][1]}")
            out.append(f"# TYPE {base}_created gauge")
            out.append(f"{base}_created{_labels(ml)} {go_float(created)}")
        head("vllm:request_success")
        for reason, value in self.success.items():
            out.append(f"vllm:request_success_total{_labels({**ml, 'finished_reason': reason})} {go_float(value)}")
        for reason in self.success:
            out.append(f"vllm:request_success_created{_labels({**ml, 'finished_reason': reason})} {go_float(created)}")
        for name, hist in self.hists.items():
            head(name)
            out.extend(hist.lines(name, ml, created=created))
        out.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
        out.append("# TYPE vllm:cache_config_info gauge")
        out.append(f"vllm:cache_config_info{_labels(self.cache_config_labels())} 1.0")
        return "\n".join(out) + "\n"


# --- SGLang 0.5.x -------------------------------------------------------------------------------------------

_SGL_SCHED_GAUGES = (
    ("num_running_reqs", "The number of running requests."),
    ("num_queue_reqs", "The number of requests in the waiting queue."),
    ("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue."),
    ("num_retracted_reqs", "The number of retracted requests."),
    ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
    ("page_size", "KV cache page size in tokens."),
    ("num_pages", "Number of KV cache pages."),
    ("context_len", "Maximum context length."),
    ("gen_throughput", "The generation throughput (token/s)."),
    ("cache_hit_rate", "The prefix cache hit rate."),
    ("token_usage", "The token usage."),
    ("full_token_usage", "The token usage for full attention layers."),
    ("swa_token_usage", "The token usage for SWA layers."),
    ("num_used_tokens", "The number of used tokens."),
    ("kv_available_tokens", "Available KV token slots."),
    ("kv_evictable_tokens", "Evictable KV token slots."),
    ("kv_used_tokens", "Used KV token slots."),
    ("swa_available_tokens", "Available SWA token slots."),
    ("swa_evictable_tokens", "Evictable SWA token slots."),
    ("swa_used_tokens", "Used SWA token slots."),
)


class SGLangEngine:
    """One SGLang 0.5.x server (``--enable-metrics``; multiprocess exposition, TP rank 0 reporting)."""

    def __init__(self, *, model_name: str, max_total_num_tokens: int, context_len: int, swa_tokens: int) -> None:
        self.model_name = model_name
        self.g: dict[str, float] = {name: 0.0 for name, _ in _SGL_SCHED_GAUGES}
        self.g["max_total_num_tokens"] = float(max_total_num_tokens)
        self.g["page_size"] = 1.0
        self.g["num_pages"] = float(max_total_num_tokens)
        self.g["context_len"] = float(context_len)
        self.swa_tokens = swa_tokens
        self.prompt = {"false": 0.0, "true": 0.0}
        self.generation = {"false": 0.0, "true": 0.0}
        self.requests = {"false": 0.0, "true": 0.0}
        self.retracted = 0.0
        self.retracted_in = 0.0
        self.retracted_out = 0.0
        self.ttft = {s: Hist(SGLANG_TTFT_BUCKETS) for s in ("false", "true")}
        self.e2e = {s: Hist(SGLANG_E2E_BUCKETS) for s in ("false", "true")}
        self.tpot = {s: Hist(SGLANG_ITL_BUCKETS) for s in ("false", "true")}
        self.itl = Hist(SGLANG_ITL_BUCKETS)
        self.queue = Hist(SGLANG_QUEUE_BUCKETS)

    def set_usage(self, *, full_used: int, swa_used: int) -> None:
        """Token slots in use in the full-attention and the sliding-window pools (nothing evictable)."""
        cap = self.g["max_total_num_tokens"]
        self.g["full_token_usage"] = full_used / cap
        self.g["swa_token_usage"] = swa_used / self.swa_tokens
        self.g["token_usage"] = round(max(self.g["full_token_usage"], self.g["swa_token_usage"]), 2)
        self.g["num_used_tokens"] = float(full_used)
        self.g["kv_used_tokens"] = float(full_used)
        self.g["kv_available_tokens"] = cap - full_used
        self.g["kv_evictable_tokens"] = 0.0
        self.g["swa_used_tokens"] = float(swa_used)
        self.g["swa_available_tokens"] = float(self.swa_tokens - swa_used)
        self.g["swa_evictable_tokens"] = 0.0

    def retract(self, n: float, *, input_tokens: float, output_tokens: float) -> None:
        self.retracted += n
        self.retracted_in += input_tokens
        self.retracted_out += output_tokens
        self.g["num_retracted_reqs"] = n

    def finish(self, n: int, *, prompt: float, output: float, ttft: float, tpot: float, queue: float) -> None:
        for f in spread(1.0, n):
            self.requests["true"] += 1
            self.ttft["true"].observe(ttft * f)
            self.tpot["true"].observe(tpot * f)
            self.e2e["true"].observe(ttft * f + tpot * f * (output * f - 1))
            self.queue.observe(queue * f)

    def render(self) -> str:
        sched = {"engine_type": "unified", "model_name": self.model_name, "moe_ep_rank": "0", "pp_rank": "0"}
        sched["tp_rank"] = "0"
        out: list[str] = []
        for name, text in _SGL_SCHED_GAUGES:
            out.append(f"# HELP sglang:{name} {text}")
            out.append(f"# TYPE sglang:{name} gauge")
            out.append(f"sglang:{name}{_labels(sched)} {go_float(self.g[name])}")

        def counter(name: str, text: str, by_stream: Mapping[str, float] | None, value: float = 0.0) -> None:
            out.append(f"# HELP sglang:{name} {text}")
            out.append(f"# TYPE sglang:{name} counter")
            if by_stream is None:
                out.append(f"sglang:{name}{_labels(sched)} {go_float(value)}")
                return
            for s, v in by_stream.items():
                labels = {"engine_type": "unified", "is_streaming": s, "model_name": self.model_name}
                out.append(f"sglang:{name}{_labels(labels)} {go_float(v)}")

        counter("prompt_tokens_total", "Number of prefill tokens processed.", self.prompt)
        counter("generation_tokens_total", "Number of generation tokens processed.", self.generation)
        counter("num_requests_total", "Number of requests processed.", self.requests)
        counter("num_retracted_requests_total", "Total number of retracted requests.", None, self.retracted)
        counter("num_retracted_input_tokens_total", "Input tokens of retracted requests.", None, self.retracted_in)
        counter("num_retracted_output_tokens_total", "Output tokens of retracted requests.", None, self.retracted_out)

        def hist(name: str, text: str, by_stream: Mapping[str, Hist] | None, single: Hist | None = None) -> None:
            out.append(f"# HELP sglang:{name} {text}")
            out.append(f"# TYPE sglang:{name} histogram")
            if by_stream is None:
                assert single is not None
                labels = {k: v for k, v in sched.items()}
                out.extend(single.lines(f"sglang:{name}", labels, created=None))
                return
            for s, h in by_stream.items():
                labels = {"engine_type": "unified", "is_streaming": s, "model_name": self.model_name}
                out.extend(h.lines(f"sglang:{name}", labels, created=None))

        hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.ttft)
        hist("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", self.e2e)
        hist("request_time_per_output_token_seconds", "Per-request TPOT in seconds.", self.tpot)
        out.append("# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.")
        out.append("# TYPE sglang:inter_token_latency_seconds histogram")
        out.extend(
            self.itl.lines(
                "sglang:inter_token_latency_seconds",
                {"engine_type": "unified", "model_name": self.model_name},
                created=None,
            )
        )
        hist("queue_time_seconds", "Histogram of queueing time in seconds.", None, self.queue)
        return "\n".join(out) + "\n"


# --- loopback server ----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: TwoScrapeServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        srv = self.server
        if self.path.split("?")[0] != "/metrics":
            body, code = b"not found\n", 404
        else:
            with srv.lock:
                body = srv.pages[min(srv.hits, len(srv.pages) - 1)].encode()
                srv.hits += 1
            code = 200
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class TwoScrapeServer(ThreadingHTTPServer):
    """Serves scrape #1, then scrape #2, then #2 again for ever, on ``127.0.0.1:<free port>/metrics``."""

    daemon_threads = True

    def __init__(self, first: str, second: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pages = [first, second]
        self.hits = 0
        self.lock = threading.Lock()
        # a short poll: stop() waits for the loop to look again (0.5 s by default, per replica of every state)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/metrics"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
