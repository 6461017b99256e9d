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
from typing import Final, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from advisor.engines.catalog import Family, reference_exposition
from advisor.engines.reference import VLLM_CACHE_CONFIG_LABELS
from advisor.sim.buckets import BucketHistogram
from advisor.sim.engine import ReferenceReplica
from advisor.sim.metrics import FINISH_REASONS, SGLangMetrics, VLLMMetrics

__all__ = ["CACHE_CONFIG_LABELS", "SGLangCollector", "VLLMCollector", "render"]


CACHE_CONFIG_LABELS: Final = VLLM_CACHE_CONFIG_LABELS
"""``cache_config_info`` labels of vLLM 0.33.0 (from the catalog: :mod:`advisor.engines.reference`)."""

V: Final = reference_exposition("vllm")
S: Final = reference_exposition("sglang")


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
        replica: ReferenceReplica,
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

        def gauge(f: Family, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(f.name, f.help, labels=labels)
            g.add_metric(lv, value)
            return g

        def counter(f: Family, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(f.name, f.help, labels=labels)
            c.add_metric(lv, float(value), created=created)
            return c

        def labelled_counter(f: Family, extra: str, values: dict[str, int]) -> CounterMetricFamily:
            names = sorted([*labels, extra])
            c = CounterMetricFamily(f.name, f.help, labels=names)
            for key, v in values.items():
                by_name = {"engine": "0", "model_name": cfg.model_name, extra: key}
                c.add_metric([by_name[n] for n in names], float(v), created=created)
            return c

        def histo(f: Family, h: BucketHistogram) -> HistogramMetricFamily:
            return _histogram(f.name, f.help, labels, lv, h, created)

        start = V["process_start_time_seconds"]
        yield GaugeMetricFamily(start.name, start.help, value=created)
        yield gauge(V["num_requests_running"], r.num_running)
        yield gauge(V["num_requests_waiting"], r.num_waiting)
        by_reason = V["num_requests_waiting_by_reason"]
        wbr = GaugeMetricFamily(by_reason.name, by_reason.help, labels=[*labels, "reason"])
        wbr.add_metric([*lv, "capacity"], r.num_waiting)
        wbr.add_metric([*lv, "deferred"], 0.0)
        yield wbr
        sleep_state = V["engine_sleep_state"]
        sleep = GaugeMetricFamily(sleep_state.name, sleep_state.help, labels=[*labels, "sleep_state"])
        for state, v in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
            sleep.add_metric([*lv, state], v)
        yield sleep
        yield gauge(V["kv_cache_usage_perc"], r.kv_usage)
        yield counter(V["prefix_cache_queries"], m.prefix_queries)
        yield counter(V["prefix_cache_hits"], m.prefix_hits)
        yield counter(V["num_preemptions"], m.preemptions)
        yield counter(V["prompt_tokens"], m.prompt_tokens)
        yield labelled_counter(
            V["prompt_tokens_by_source"],
            "source",
            {
                "local_compute": m.prompt_tokens - m.prompt_tokens_cached,
                "local_cache_hit": m.prompt_tokens_cached,
                "external_kv_transfer": 0,
            },
        )
        yield counter(V["prompt_tokens_cached"], m.prompt_tokens_cached)
        yield counter(V["generation_tokens"], m.generation_tokens)
        yield labelled_counter(V["request_success"], "finished_reason", {k: m.success[k] for k in FINISH_REASONS})
        yield histo(V["request_prompt_tokens"], m.request_prompt_tokens)
        yield histo(V["request_generation_tokens"], m.request_generation_tokens)
        yield histo(V["iteration_tokens_total"], m.iteration_tokens)
        yield histo(V["request_max_num_generation_tokens"], m.request_max_num_generation_tokens)
        yield histo(V["request_params_n"], m.request_params_n)
        yield histo(V["request_params_max_tokens"], m.request_params_max_tokens)
        yield histo(V["time_to_first_token_seconds"], m.ttft)
        yield histo(V["inter_token_latency_seconds"], m.itl)
        yield histo(V["request_time_per_output_token_seconds"], m.tpot)
        yield histo(V["e2e_request_latency_seconds"], m.e2e)
        yield histo(V["request_queue_time_seconds"], m.queue)
        yield histo(V["request_inference_time_seconds"], m.inference)
        yield histo(V["request_prefill_time_seconds"], m.prefill)
        yield histo(V["request_decode_time_seconds"], m.decode)
        yield histo(V["request_num_preemptions"], m.request_num_preemptions)
        yield histo(V["request_prefill_kv_computed_tokens"], m.request_prefill_kv_computed_tokens)
        spec = cfg.speculative
        if spec is not None:
            yield counter(V["spec_decode_num_drafts"], m.spec_drafts)
            yield counter(V["spec_decode_num_draft_tokens"], m.spec_draft_tokens)
            yield counter(V["spec_decode_num_accepted_tokens"], m.spec_accepted)
            yield labelled_counter(
                V["spec_decode_num_accepted_tokens_per_pos"],
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
        cache_config = V["cache_config_info"]
        info = GaugeMetricFamily(cache_config.name, cache_config.help, labels=list(CACHE_CONFIG_LABELS))
        info.add_metric([values[k] for k in CACHE_CONFIG_LABELS], 1.0)
        yield info


class SGLangCollector(Collector):
    """SGLang 0.5.23 ``/metrics`` of one simulated replica (see the module docstring for the label rules)."""

    def __init__(
        self,
        replica: ReferenceReplica,
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

        def gauge(f: Family, value: float, pid: bool = False) -> GaugeMetricFamily:
            names = sorted([*sched, "pid"]) if pid else sched
            g = GaugeMetricFamily(f.name, f.help, labels=names)
            by = dict(zip(sched, sv, strict=True)) | {"pid": self.pid}
            g.add_metric([by[n] for n in names], value)
            return g

        def counter(f: Family, names: list[str], values: list[str], value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(f.name, f.help, labels=names)
            c.add_metric(values, float(value))
            return c

        def histo(f: Family, names: list[str], values: list[str], h: BucketHistogram) -> HistogramMetricFamily:
            return _histogram(f.name, f.help, names, values, h, None)

        yield gauge(S["num_retracted_reqs"], 0.0, pid=True)
        yield gauge(S["num_paused_reqs"], 0.0, pid=True)
        yield counter(S["prompt_tokens_total"], stream, stv, m.prompt_tokens)
        yield counter(S["generation_tokens_total"], stream, stv, m.generation_tokens)
        yield counter(S["num_requests_total"], stream, stv, m.requests)
        yield counter(S["cached_tokens_total"], ["cache_source", *tok], ["device", *tv], m.cached_tokens)
        if m.retracted_requests:
            yield counter(S["num_retracted_requests_total"], sched, sv, m.retracted_requests)
            yield counter(S["num_retracted_input_tokens_total"], sched, sv, m.retracted_input_tokens)
            yield counter(S["num_retracted_output_tokens_total"], sched, sv, m.retracted_output_tokens)
        yield histo(S["queue_time_seconds"], sched, sv, m.queue)
        yield histo(S["time_to_first_token_seconds"], stream, stv, m.ttft)
        yield histo(S["inter_token_latency_seconds"], tok, tv, m.itl)
        yield histo(S["e2e_request_latency_seconds"], stream, stv, m.e2e)
        yield histo(S["request_time_per_output_token_seconds"], stream, stv, m.tpot)
        yield histo(S["prompt_tokens_histogram"], tok, tv, m.prompt_tokens_histogram)
        yield histo(S["uncached_prompt_tokens_histogram"], tok, tv, m.uncached_prompt_tokens_histogram)
        yield histo(S["generation_tokens_histogram"], tok, tv, m.generation_tokens_histogram)
        capacity = cfg.kv_cache_tokens
        used = (r.usable_blocks - r.free_blocks) * cfg.block_size
        available = max(0, capacity - used)
        full = used / capacity if capacity else 0.0
        context = sum(q.prompt_tokens + q.generated for q in r.running)
        yield gauge(S["max_total_num_tokens"], capacity)
        yield gauge(S["page_size"], cfg.block_size)
        yield gauge(S["num_pages"], cfg.kv_cache_blocks)
        yield gauge(S["context_len"], cfg.max_model_len)
        yield gauge(S["num_running_reqs"], r.num_running)
        yield gauge(S["num_queue_reqs"], r.num_waiting)
        yield gauge(S["num_grammar_queue_reqs"], 0.0)
        yield gauge(S["gen_throughput"], m.gen_throughput)
        yield gauge(S["cache_hit_rate"], m.cache_hit_rate)
        yield gauge(S["decode_sum_seq_lens"], context)
        yield gauge(S["token_usage"], round(full, 2))
        yield gauge(S["full_token_usage"], full)
        yield gauge(S["swa_token_usage"], 0.0)
        # a full-attention model in one unified server: 0.5.23 still serves the SWA and Mamba pools and the
        # disaggregation queues, all at 0 (the engine-code capture shows the same)
        for name in (
            "mamba_usage",
            "swa_available_tokens",
            "swa_evictable_tokens",
            "swa_used_tokens",
            "mamba_available_tokens",
            "mamba_evictable_tokens",
            "mamba_used_tokens",
            "num_prefill_bootstrap_queue_reqs",
            "num_prefill_inflight_queue_reqs",
            "num_decode_prealloc_queue_reqs",
            "num_decode_transfer_queue_reqs",
            "num_decode_host_receive_queue_reqs",
        ):
            yield gauge(S[name], 0.0)
        yield gauge(S["num_used_tokens"], used)
        yield gauge(S["kv_available_tokens"], available)
        yield gauge(S["kv_evictable_tokens"], 0.0)
        yield gauge(S["kv_used_tokens"], used)
        yield gauge(S["spec_accept_length"], m.spec_accept_length)
        yield gauge(S["spec_accept_rate"], m.spec_accept_rate)
        yield gauge(S["spec_num_steps"], m.spec_steps)
        # a chain draft (the simulator's): the round verifies the steps' tokens and the one the target adds
        yield gauge(S["spec_num_draft_tokens"], m.spec_steps + 1 if m.spec_steps else 0)
