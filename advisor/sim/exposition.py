"""A simulated replica's ``/metrics``, as vLLM 0.33 or SGLang 0.5.23 renders it (the edge: prometheus-client).

:class:`VLLMCollector` renders vLLM V1's families (``vllm/v1/metrics/loggers.py`` 0.33.0): names, types,
labels ``model_name`` and ``engine`` (``"0"``), histogram bucket bounds (catalog §1.2), the
``vllm:cache_config_info`` label set of 0.33's ``CacheConfig`` (with ``num_gpu_blocks``, ``block_size``,
``kv_cache_size_tokens`` and ``kv_cache_max_concurrency`` from the simulated pool), ``_created`` series as a
single-process engine has them, and ``process_start_time_seconds``. ``vllm:spec_decode_*`` counters appear
only with speculative decoding, as in vLLM. Not rendered: ``http_*``, ``python_*`` and ``process_*`` other
than the start time, the MFU counters (``--enable-mfu-metrics``) and connector families.

:class:`SGLangCollector` renders SGLang 0.5.23's (``python/sglang/srt/observability/metrics_collector.py``):
``sglang:`` names; scheduler series labelled ``engine_type="unified"``, ``model_name``, ``moe_ep_rank``,
``pp_rank``, ``tp_rank`` (``pid`` too on the two gauges left in multiprocess mode ``all``); tokenizer series
``engine_type``, ``model_name`` (and ``is_streaming="true"`` on token counters, TTFT, TPOT and e2e); no
``_created`` series (SGLang runs prometheus-client in multiprocess mode); the retraction counters only once
non-zero (a labelled counter never incremented is absent from a multiprocess scrape).

Both read the replica and its metrics under the caller's lock; every value is what the simulation holds at the
moment of the scrape. The scheduling model behind both formats is vLLM's (:mod:`advisor.sim.engine`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from advisor.sim.buckets import BucketHistogram
from advisor.sim.engine import Replica
from advisor.sim.metrics import FINISH_REASONS, SGLangMetrics, VLLMMetrics

__all__ = ["CACHE_CONFIG_LABELS", "SGLangCollector", "VLLMCollector", "render"]

CACHE_CONFIG_LABELS = (
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
"""``vllm:cache_config_info`` labels of vLLM 0.33.0 (``{str(k): str(v) for k, v in CacheConfig.__dict__}`` plus
``engine``; ``vllm/config/cache.py``)."""


_go_float = cast(Callable[[float], str], floatToGoString)
"""prometheus-client's ``le`` formatting (``1.0``, ``+Inf``, ``1e+06``), as the engines print it."""


def _histogram(
    name: str, doc: str, labels: list[str], values: list[str], h: BucketHistogram, created: float | None
) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=labels)
    fam.add_metric(values, [(_go_float(le), float(n)) for le, n in h.cumulative()], h.sum)
    if created is not None:
        fam.samples.append(Sample(name + "_created", dict(zip(labels, values, strict=True)), created))
    return fam


def render(collector: Collector) -> bytes:
    """The exposition text (format 0.0.4) of one collector, in a fresh registry."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


class VLLMCollector(Collector):
    """vLLM 0.33 ``/metrics`` of one simulated replica.

    ``created`` is the Unix time the engine "started" (``_created`` series and ``process_start_time_seconds``);
    ``before_collect`` (e.g. advancing the simulation to now) runs before each render, under ``lock``.
    """

    def __init__(
        self,
        replica: Replica,
        metrics: VLLMMetrics,
        *,
        created: float,
        lock: AbstractContextManager[object] | None = None,
        before_collect: Callable[[], None] | None = None,
    ) -> None:
        self.replica = replica
        self.metrics = metrics
        self.created = created
        self._lock: AbstractContextManager[object] = lock if lock is not None else nullcontext()
        self._before = before_collect

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._before is not None:
                self._before()
            return iter(list(self._families()))

    def _families(self) -> Iterator[Metric]:
        r = self.replica
        m = self.metrics
        cfg = r.config
        created = self.created
        labels = ["engine", "model_name"]
        lv = ["0", cfg.model_name]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(lv, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric(lv, float(value), created=created)
            return c

        def labelled_counter(name: str, doc: str, extra: str, values: dict[str, int]) -> CounterMetricFamily:
            names = sorted([*labels, extra])
            c = CounterMetricFamily(name, doc, labels=names)
            for key, v in values.items():
                by_name = {"engine": "0", "model_name": cfg.model_name, extra: key}
                c.add_metric([by_name[n] for n in names], float(v), created=created)
            return c

        def histo(name: str, doc: str, h: BucketHistogram) -> HistogramMetricFamily:
            return _histogram(name, doc, labels, lv, h, created)

        yield GaugeMetricFamily(
            "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", value=created
        )
        yield gauge("vllm:num_requests_running", "Number of requests in model execution batches.", r.num_running)
        yield gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", r.num_waiting)
        wbr = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
            "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all "
            "reasons equals vllm:num_requests_waiting.",
            labels=[*labels, "reason"],
        )
        wbr.add_metric([*lv, "capacity"], r.num_waiting)
        wbr.add_metric([*lv, "deferred"], 0.0)
        yield wbr
        sleep = GaugeMetricFamily(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            labels=[*labels, "sleep_state"],
        )
        for state, v in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
            sleep.add_metric([*lv, state], v)
        yield sleep
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", r.kv_usage)
        yield counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", m.prefix_queries
        )
        yield counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", m.prefix_hits
        )
        yield counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", m.preemptions)
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
        yield labelled_counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            "source",
            {
                "local_compute": m.prompt_tokens - m.prompt_tokens_cached,
                "local_cache_hit": m.prompt_tokens_cached,
                "external_kv_transfer": 0,
            },
        )
        yield counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", m.prompt_tokens_cached
        )
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", m.generation_tokens)
        yield labelled_counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            "finished_reason",
            {k: m.success[k] for k in FINISH_REASONS},
        )
        yield histo("vllm:request_prompt_tokens", "Number of prefill tokens processed.", m.request_prompt_tokens)
        yield histo(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", m.request_generation_tokens
        )
        yield histo("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", m.iteration_tokens)
        yield histo(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            m.request_max_num_generation_tokens,
        )
        yield histo("vllm:request_params_n", "Histogram of the n request parameter.", m.request_params_n)
        yield histo(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            m.request_params_max_tokens,
        )
        yield histo("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft)
        yield histo("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl)
        yield histo(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            m.tpot,
        )
        yield histo("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m.e2e)
        yield histo("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", m.queue)
        yield histo(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            m.inference,
        )
        yield histo(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", m.prefill
        )
        yield histo(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", m.decode
        )
        yield histo(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            m.request_num_preemptions,
        )
        yield histo(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            m.request_prefill_kv_computed_tokens,
        )
        spec = cfg.speculative
        if spec is not None:
            yield counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", m.spec_drafts)
            yield counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", m.spec_draft_tokens)
            yield counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", m.spec_accepted)
            yield labelled_counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                "position",
                {str(i): n for i, n in enumerate(m.spec_accepted_per_pos)},
            )
        blocks = cfg.kv_cache_blocks
        per_request = math.ceil(cfg.max_model_len / cfg.block_size)
        values = {
            "_block_size_resolved": "True",
            "block_size": str(cfg.block_size),
            "cache_dtype": cfg.cache_dtype,
            "cache_hit_alignment_tokens": "None",
            "effective_attention_block_size": str(cfg.block_size),
            "enable_mamba_shared_prefix_checkpoint": "False",
            "enable_prefix_caching": str(cfg.prefix_caching is not None),
            "engine": "0",
            "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
            "hash_block_size": "None",
            "is_attention_free": "False",
            "kv_cache_dtype_skip_layers": "[]",
            "kv_cache_layout": "None",
            "kv_cache_max_concurrency": str(blocks / per_request),
            "kv_cache_memory_bytes": "None",
            "kv_cache_size_tokens": str(cfg.kv_cache_tokens),
            "kv_offloading_backend": "native",
            "kv_offloading_size": "None",
            "kv_sharing_fast_prefill": "False",
            "mamba_block_size": "None",
            "mamba_cache_dtype": "auto",
            "mamba_cache_mode": "none",
            "mamba_page_size_padded": "None",
            "mamba_ssm_cache_dtype": "auto",
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(blocks),
            "num_gpu_blocks_override": "None",
            "prefix_cache_retention_interval": "0",
            "prefix_caching_hash_algo": "sha256",
            "prefix_match_unit": "None",
            "replayssm_buffer_len": "16",
            "simple_cpu_offload_num_blocks": "None",
            "skip_page_size_padded": "None",
            "sliding_window": "None",
            "swa_bounded_replay": "True",
            "use_kda_recoverssm": "False",
            "use_replayssm": "False",
            "user_specified_block_size": "False",
        }
        info = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(CACHE_CONFIG_LABELS)
        )
        info.add_metric([values[k] for k in CACHE_CONFIG_LABELS], 1.0)
        yield info


class SGLangCollector(Collector):
    """SGLang 0.5.23 ``/metrics`` of one simulated replica (see the module docstring for the label rules)."""

    def __init__(
        self,
        replica: Replica,
        metrics: SGLangMetrics,
        *,
        pid: int = 1,
        lock: AbstractContextManager[object] | None = None,
        before_collect: Callable[[], None] | None = None,
    ) -> None:
        self.replica = replica
        self.metrics = metrics
        self.pid = str(pid)
        self._lock: AbstractContextManager[object] = lock if lock is not None else nullcontext()
        self._before = before_collect

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._before is not None:
                self._before()
            return iter(list(self._families()))

    def _families(self) -> Iterator[Metric]:
        r = self.replica
        m = self.metrics
        cfg = r.config
        model = cfg.model_name
        sched = ["engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"]
        sv = ["unified", model, "0", "0", "0"]
        tok = ["engine_type", "model_name"]
        tv = ["unified", model]
        stream = ["engine_type", "is_streaming", "model_name"]
        stv = ["unified", "true", model]

        def gauge(name: str, doc: str, value: float, pid: bool = False) -> GaugeMetricFamily:
            names = sorted([*sched, "pid"]) if pid else sched
            g = GaugeMetricFamily(name, doc, labels=names)
            by = dict(zip(sched, sv, strict=True)) | {"pid": self.pid}
            g.add_metric([by[n] for n in names], value)
            return g

        def counter(name: str, doc: str, names: list[str], values: list[str], value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(values, float(value))
            return c

        yield gauge("sglang:num_retracted_reqs", "The number of retracted requests.", 0.0, pid=True)
        yield gauge("sglang:num_paused_reqs", "The number of paused requests by async weight sync.", 0.0, pid=True)
        yield counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", stream, stv, m.prompt_tokens)
        yield counter(
            "sglang:generation_tokens_total", "Number of generation tokens processed.", stream, stv, m.generation_tokens
        )
        yield counter("sglang:num_requests_total", "Number of requests processed.", stream, stv, m.requests)
        yield counter(
            "sglang:cached_tokens_total",
            "Number of cached prompt tokens.",
            ["cache_source", *tok],
            ["device", *tv],
            m.cached_tokens,
        )
        if m.retracted_requests:
            yield counter(
                "sglang:num_retracted_requests_total",
                "Number of retracted requests.",
                sched,
                sv,
                m.retracted_requests,
            )
            yield counter(
                "sglang:num_retracted_input_tokens_total",
                "Number of retracted input tokens.",
                sched,
                sv,
                m.retracted_input_tokens,
            )
            yield counter(
                "sglang:num_retracted_output_tokens_total",
                "Number of retracted output tokens.",
                sched,
                sv,
                m.retracted_output_tokens,
            )
        yield _histogram(
            "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sched, sv, m.queue, None
        )
        yield _histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            stream,
            stv,
            m.ttft,
            None,
        )
        yield _histogram(
            "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok, tv, m.itl, None
        )
        yield _histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            stream,
            stv,
            m.e2e,
            None,
        )
        yield _histogram(
            "sglang:request_time_per_output_token_seconds",
            "Histogram of time per output token in seconds (per request).",
            stream,
            stv,
            m.tpot,
            None,
        )
        yield _histogram(
            "sglang:prompt_tokens_histogram",
            "Histogram of prompt token length.",
            tok,
            tv,
            m.prompt_tokens_histogram,
            None,
        )
        yield _histogram(
            "sglang:uncached_prompt_tokens_histogram",
            "Histogram of uncached prompt token length.",
            tok,
            tv,
            m.uncached_prompt_tokens_histogram,
            None,
        )
        yield _histogram(
            "sglang:generation_tokens_histogram",
            "Histogram of generation token length.",
            tok,
            tv,
            m.generation_tokens_histogram,
            None,
        )
        capacity = cfg.kv_cache_tokens
        used = (r.usable_blocks - r.free_blocks) * cfg.block_size
        available = max(0, capacity - used)
        full = used / capacity if capacity else 0.0
        context = sum(q.prompt_tokens + q.generated for q in r.running)
        yield gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", capacity)
        yield gauge("sglang:page_size", "The page size of the KV cache.", cfg.block_size)
        yield gauge("sglang:num_pages", "The number of pages in the KV cache pool.", cfg.kv_cache_blocks)
        yield gauge("sglang:context_len", "The context length of the model.", cfg.max_model_len)
        yield gauge("sglang:num_running_reqs", "The number of running requests.", r.num_running)
        yield gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", r.num_waiting)
        yield gauge("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0.0)
        yield gauge("sglang:gen_throughput", "The generation throughput (token/s).", m.gen_throughput)
        yield gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", m.cache_hit_rate)
        yield gauge("sglang:decode_sum_seq_lens", "The sum of all sequence lengths in decode.", context)
        yield gauge("sglang:token_usage", "The token usage.", round(full, 2))
        yield gauge("sglang:full_token_usage", "The token usage of the full attention KV pool.", full)
        yield gauge("sglang:swa_token_usage", "The token usage for SWA layers.", 0.0)
        yield gauge("sglang:num_used_tokens", "The number of used tokens.", used)
        yield gauge("sglang:kv_available_tokens", "The number of available KV tokens.", available)
        yield gauge("sglang:kv_evictable_tokens", "The number of evictable KV tokens.", 0.0)
        yield gauge("sglang:kv_used_tokens", "The number of used KV tokens.", used)
        yield gauge(
            "sglang:spec_accept_length", "The average acceptance length of speculative decoding.", m.spec_accept_length
        )
        yield gauge(
            "sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.", m.spec_accept_rate
        )
        yield gauge("sglang:spec_num_steps", "The number of speculative decoding steps.", m.spec_steps)
