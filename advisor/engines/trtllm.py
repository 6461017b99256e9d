"""TensorRT-LLM adapters: the Triton ``tensorrtllm`` backend (``nv_trt_llm_*``) and ``trtllm-serve`` (``trtllm_*``).

**Triton backend** (:class:`TritonTRTLLMAdapter`, engine ``triton-trtllm``). Names from
``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc``
(``NVIDIA/TensorRT-LLM`` @0d5352f5) and the README history of ``triton-inference-server/tensorrtllm_backend``
(@e8ae70c 2023-11 → 0b9d7d5a 2026; catalog §4.1); checked against
``../shared/engine-metrics/trtllm-triton-23.11-inflight-batcher-readme.prom``.

* Every family is a gauge with a category label: ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type}``
  ∈ max, free, used, tokens_per, reused, fraction; ``nv_trt_llm_request_metrics{request_type}`` ∈ active,
  max, scheduled, context, waiting (waiting from 2025). Triton 23.11 named them ``*_statistics``
  (renamed to ``*_metrics`` in Dec 2023, commit 3a61c37); both are read, the new name first.
* Labels ``model`` (the Triton model, usually ``tensorrt_llm``) and ``version``: the model is ``model``.
* **Blocks → tokens:** capacity = ``max`` × ``tokens_per``; usage = ``used ÷ max``.
* **Array-shift check:** the reporter fills a group's gauges positionally and skips missing JSON keys, so one
  missing stat shifts every later value onto the wrong label (the 2025 README example shows
  ``fraction 0.4875`` beside ``used 1``/``max 6239``). The block counts are trusted when each is a whole number
  and ``used + free`` is at most ``max`` + one block (:func:`blocks_consistent`); otherwise the family is not
  trusted: usage and capacity are unknown, and ``missing`` says why. A shift moves whole values — a fraction into
  a count, or ``max`` into a smaller label, so the sum overshoots. One block over is tolerated (the 23.11 example
  reads used 1 + free 6239 against max 6239). A sum *under* ``max`` is the engine's own: the blocks a context
  scheduled in that iteration took from the free list before they count as used (tensorrtllm_backend#217's log:
  used 1 + free 480 of 513 with a 2,048-token context, 32 blocks of 64, just scheduled); usage reads ``used``,
  the lower figure, so a shifted value landing there can only under-read the pool, never page on it.
* ``request_type="max"`` (the max batch size) goes to ``engine_config["max_batch_size"]``.
* **Running and waiting** (:meth:`TritonTRTLLMAdapter.count`). The gauges are the executor's ``IterationStats``
  (``cpp/tensorrt_llm/executor/executorImpl.cpp`` ``getCurrentIterationStats``): ``active`` is the executor's
  active list (``activeRequests.size()``), which it fills from its queue up to ``max``
  (``mMaxNumActiveRequests = getMaxNumSequences()``) whether or not the capacity scheduler can run them;
  ``scheduled`` is what the last iteration ran (``numScheduledRequests``,
  ``trtGptModelInflightBatching.cpp``); ``waiting`` (2025+) is the executor's queue (``numQueuedRequests``). So
  running = ``scheduled``, and waiting = ``active − scheduled`` (admitted to the batcher, refused by the capacity
  scheduler: KV blocks or the token budget) + ``waiting``. The gauges hold the last iteration's values, so a
  request that finished in it was scheduled but has left the active list (the 23.11 README page: active 0,
  scheduled 1): running is ``min(scheduled, active)``. Without the ``waiting`` gauge the queue outside the
  active list is known empty only while ``active < max``; at ``max`` waiting is unknown. Without ``scheduled``,
  running is ``active`` and waiting the ``waiting`` gauge (or unknown). triton-inference-server/server#7676:
  "Active Request Count":8 with one scheduled.
* Not exposed: TTFT/TPOT/e2e histograms (Triton core has only cumulative µs totals), preemptions, token
  counters (``nv_llm_input_token_len``/``output`` histograms exist only in some builds; their ``_sum`` is
  read when present).

**trtllm-serve** (:class:`TRTLLMServeAdapter`, engine ``trtllm``). Names from
``tensorrt_llm/metrics/collector.py`` (``NVIDIA/TensorRT-LLM`` @050f80de; 1.1.0rc5 exposes only the five
request families) served at ``/prometheus/metrics``, labels ``model_name`` and ``engine_type="trtllm"``;
checked against ``../shared/engine-metrics/trtllm-1.1.x-trtllm-serve-via-dynamo-worker-qwen3-0.6b.prom``.
``trtllm_time_per_output_token_seconds`` observes one mean per finished request (the capture has count 2
after 2 requests). Its request gauges are the same executor statistics as Triton's (``collector.py``
``log_iteration_stats``: ``trtllm_num_requests_running`` is ``numActiveRequests``, ``trtllm_num_scheduled_requests``
``numScheduledRequests``, ``trtllm_num_requests_waiting`` ``numQueuedRequests``, ``trtllm_max_num_active_requests``,
``trtllm_num_paused_requests``), read the same way (:class:`ExecutorStatsAdapter`). KV:
``trtllm_kv_cache_utilization`` (0–1) else ``used ÷ max`` blocks; capacity
``trtllm_kv_cache_max_blocks × trtllm_kv_cache_tokens_per_block``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Final

from advisor import conventions as c
from advisor.domain import EngineSnapshot, Exposition
from advisor.engines.common import (
    NameTable,
    Scope,
    Series,
    config_values,
    first_total,
    positive,
    sum_all,
    valid_ratio,
)
from advisor.engines.tabular import TableAdapter

_REPORTER: Final = "triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc"
_TRITON: Final = "triton-inference-server/core (nv_inference_*)"
_COLLECTOR: Final = "tensorrt_llm/metrics/collector.py"
_BLOCK_SLACK: Final = 1.0
"""Blocks by which ``used + free`` may differ from ``max`` before the values count as shifted."""


def _cat(family: str, label: str, value: str, versions: str) -> Series:
    return Series(family, "gauge", versions, _REPORTER, match=((label, value),))


def _block(kind: str) -> tuple[Series, ...]:
    return (
        _cat("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", kind, "Dec 2023 → 2026"),
        _cat("nv_trt_llm_kv_cache_block_statistics", "kv_cache_block_type", kind, "23.11"),
    )


def _request(kind: str, versions: str = "Dec 2023 → 2026") -> tuple[Series, ...]:
    return (
        _cat("nv_trt_llm_request_metrics", "request_type", kind, versions),
        _cat("nv_trt_llm_request_statistics", "request_type", kind, "23.11"),
    )


TRITON_NAME_TABLE: Final[NameTable] = {
    # running is what the last iteration scheduled; active (the executor's active list) stands in where no
    # scheduled gauge is exposed: TritonTRTLLMAdapter.count reads both (and waiting = active − scheduled)
    "requests_running": (*_request("scheduled"), *_request("active")),
    "requests_waiting": _request("waiting", "2025 → 2026")[:1],
    "max_batch_size": _request("max"),
    "requests_finished_total": (
        # typed a counter without _total: the text parser names its sample nv_inference_request_success_total (as
        # prometheus-client does); a Prometheus store keeps the name as scraped
        Series("nv_inference_request_success_total", "counter", "Triton ≥ 23.12 (as parsed)", _TRITON),
        Series("nv_inference_request_success", "counter", "Triton ≥ 23.12 (as a Prometheus store keeps it)", _TRITON),
    ),
    "prompt_tokens_total": (
        Series(
            "nv_llm_input_token_len_sum",
            "counter",
            "2024 → 2026 (histogram sum)",
            _REPORTER,
            match=(("response_metric_type", "total_input_tokens"),),
        ),
    ),
    "generation_tokens_total": (
        Series(
            "nv_llm_output_token_len_sum",
            "counter",
            "2024 → 2026 (histogram sum)",
            _REPORTER,
            match=(("response_metric_type", "total_output_tokens"),),
        ),
    ),
    "requests_paused": (
        _cat(
            "nv_trt_llm_inflight_batcher_metrics",
            "inflight_batcher_specific_metric",
            "paused_requests",
            "Dec 2023 → 2026",
        ),
        _cat(
            "nv_trt_llm_inflight_batcher_statistics",
            "inflight_batcher_specific_metric",
            "paused_requests",
            "23.11",
        ),
    ),
    "blocks_max": _block("max"),
    "blocks_free": _block("free"),
    "blocks_used": _block("used"),
    "tokens_per_block": _block("tokens_per"),
}
"""Snapshot field (or block quantity) → exposed series, newest first."""


class ExecutorStatsAdapter(TableAdapter):
    """The TensorRT-LLM executor's iteration statistics, as both servers export them (module docstring): running =
    ``min(scheduled, active)``, waiting = ``active − scheduled`` + the executor's queue, ``active − scheduled`` the
    capacity queue, and the paused requests. :attr:`executor` names each statistic's aliases in the table."""

    executor: ClassVar[Mapping[str, tuple[Series, ...]]] = {}
    """``active``, ``scheduled``, ``queued``, ``max`` (the active list's bound) and ``paused`` → aliases."""

    def _stat(self, name: str, scope: Scope, ranks: Sequence[str]) -> dict[str, float | None]:
        per_rank, _ = first_total(scope, self.executor.get(name, ()), ranks)
        return per_rank

    def count(self, field: str, scope: Scope, ranks: Sequence[str]) -> tuple[Mapping[str, float | None], float | None]:
        """Running = ``min(scheduled, active)``, waiting = ``active − scheduled`` + the executor's queue; other fields
        as the table says.

        Example (Triton 24.09, no ``waiting`` gauge): active 8, scheduled 1, max 8 → running 1, waiting unknown (the
        active list is full, so the executor's own queue may hold more); active 8, scheduled 1, max 64 → running 1,
        waiting 7; active 0, scheduled 1 (the last iteration finished it), max 512 → running 0, waiting 0.
        """
        if field not in ("requests_running", "requests_waiting"):
            return super().count(field, scope, ranks)
        active, scheduled = self._stat("active", scope, ranks), self._stat("scheduled", scope, ranks)
        maximum, queued = self._stat("max", scope, ranks), self._stat("queued", scope, ranks)
        keys = _rank_keys(active, ranks) or tuple(ranks)
        per_rank: dict[str, float | None] = {}
        for r in keys:
            a, sch, m = active.get(r), scheduled.get(r), maximum.get(r)
            q = queued.get(r) if queued else None
            if field == "requests_running":
                # the gauges stay at the last iteration's: finished requests leave the active list but were scheduled
                per_rank[r] = min(sch, a) if sch is not None and a is not None else (a if sch is None else None)
                continue
            if a is None or sch is None:
                per_rank[r] = q
            elif q is not None:
                per_rank[r] = max(a - sch, 0.0) + q
            else:  # the executor's queue is empty only while the active list has room
                per_rank[r] = max(a - sch, 0.0) if m is not None and a < m else None
        return per_rank, sum_all(per_rank, keys)

    def refused_by_capacity(self, scope: Scope, ranks: Sequence[str]) -> float | None:
        """Requests in the executor's active list that the last iteration did not run (``active − scheduled``,
        summed over ``ranks``): admitted to the batcher and refused by its capacity scheduler (module docstring),
        known even when the executor's own queue is not; ``None`` without both gauges."""
        active, scheduled = self._stat("active", scope, ranks), self._stat("scheduled", scope, ranks)
        keys = _rank_keys(active, ranks)
        gaps: dict[str, float | None] = {}
        for r in keys:
            a, sch = active.get(r), scheduled.get(r)
            gaps[r] = max(a - sch, 0.0) if a is not None and sch is not None else None
        return sum_all(gaps, keys) if keys else None

    def extra_fields(self, scope: Scope, ranks: Sequence[str]) -> dict[str, Any]:
        """The capacity queue (``requests_waiting_by_reason``) and ``requests_paused``, each where known."""
        out: dict[str, Any] = {}
        refused = self.refused_by_capacity(scope, ranks)
        if refused is not None:
            out["requests_waiting_by_reason"] = {c.WAITING_REASON_CAPACITY: refused}
        _, paused = first_total(scope, self.executor.get("paused", ()), ranks)
        if paused is not None:
            out["requests_paused"] = paused
        return out


def _rank_keys(active: Mapping[str, float | None], ranks: Sequence[str]) -> tuple[str, ...]:
    """The ranks to read: ``ranks`` where the active gauge carries them, else the ranks it carries."""
    return tuple(ranks) if any(r in active for r in ranks) else tuple(active)


class TritonTRTLLMAdapter(ExecutorStatsAdapter):
    """Triton ``tensorrtllm`` backend 23.11 → 2026; see the module docstring."""

    engine = "triton-trtllm"
    table: ClassVar[NameTable] = TRITON_NAME_TABLE
    executor: ClassVar[Mapping[str, tuple[Series, ...]]] = {
        "active": _request("active"),
        "scheduled": _request("scheduled"),
        "queued": TRITON_NAME_TABLE["requests_waiting"],
        "max": _request("max"),
        "paused": TRITON_NAME_TABLE["requests_paused"],
    }
    model_labels = ("model",)
    not_exposed: ClassVar[Mapping[str, str]] = {
        "ttft": "ttft (the Triton TRT-LLM backend exposes no latency histograms)",
        "tpot": "tpot (the Triton TRT-LLM backend exposes no latency histograms)",
        "e2e": "e2e (Triton exposes only cumulative nv_inference_request_duration_us)",
        "queue_time": "queue_time (Triton exposes only cumulative nv_inference_queue_duration_us)",
        "preemptions_total": "preemptions_total (the Triton TRT-LLM backend exposes no preemption counter)",
        "process_start_time_seconds": "process_start_time_seconds (Triton exposes no start time)",
        "requests_waiting": 'nv_trt_llm_request_metrics{request_type="waiting"} (backend before 2025)',
    }

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Blocks → tokens with the ``used + free == max`` check.

        Example (23.11 README)::

            kv_cache_block_type="tokens_per" 64, "used" 1, "free" 6239, "max" 6239
            → usage 1/6239, capacity 6239 × 64 = 399296 tokens (one block off is tolerated)

            "fraction" 0.4875, "tokens_per" 64, "used" 1, "free" 0.4875, "max" 6239 (shifted)
            → usage and capacity unknown
        """
        values = {k: _first_gauge(scope, TRITON_NAME_TABLE[k]) for k in ("blocks_max", "blocks_free", "blocks_used")}
        per = _first_gauge(scope, TRITON_NAME_TABLE["tokens_per_block"])
        mx, free, used = values["blocks_max"], values["blocks_free"], values["blocks_used"]
        usage: dict[str, float | None] = {}
        capacity: dict[str, float | None] = {}
        for r in ranks:
            m, f, u, t = positive(mx.get(r)), free.get(r), used.get(r), positive(per.get(r))
            consistent = blocks_consistent(m, f, u)
            usage[r] = valid_ratio(u / m) if consistent and u is not None and m else None
            capacity[r] = m * t if consistent and m is not None and t is not None else None
        return usage, capacity

    def snapshot_missing_reason(self, scope: Scope, ranks: Sequence[str]) -> str | None:
        """Why usage is unknown although the block family is present (the array-shift check), if it is."""
        values = {k: _first_gauge(scope, TRITON_NAME_TABLE[k]) for k in ("blocks_max", "blocks_free", "blocks_used")}
        for r in ranks:
            m, f, u = values["blocks_max"].get(r), values["blocks_free"].get(r), values["blocks_used"].get(r)
            if m is not None and f is not None and u is not None and not blocks_consistent(m, f, u):
                return f"nv_trt_llm_kv_cache_block_metrics (used {u:g}, free {f:g}, max {m:g}: values shifted)"
        return None

    def config(self, scope: Scope) -> dict[str, str]:
        """``{"max_batch_size": "512", "tokens_per_block": "64"}``."""
        out: dict[str, str] = {}
        for key, field in (("max_batch_size", "max_batch_size"), ("tokens_per_block", "tokens_per_block")):
            for alias in TRITON_NAME_TABLE[field]:
                got = config_values(scope, [(key, alias)])
                if got:
                    out.update(got)
                    break
        return out

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """As :meth:`TableAdapter.snapshot`, naming the array-shift check first in ``missing`` when it fails."""
        snap = super().snapshot(exposition, model)
        scope = self._scope(exposition, model)
        reason = self.snapshot_missing_reason(scope, scope.ranks(self.table) or ("0",))
        return snap if reason is None else replace(snap, missing=(reason, *snap.missing))


def blocks_consistent(maximum: float | None, free: float | None, used: float | None) -> bool:
    """The Triton backend's block counts as the engine writes them, not shifted (module docstring): each a whole
    number, ``used + free ≤ max`` + one block.

    Examples: ``(6239, 6239, 1)`` → True (one over); ``(513, 480, 1)`` → True (32 blocks just taken for a context);
    ``(1000, 0.7, 700)`` → False (a fraction in a count); ``(300, 700, 64)`` → False (the sum overshoots).
    """
    if maximum is None or free is None or used is None:
        return False
    whole = all(math.isfinite(v) and v >= 0 and v == int(v) for v in (maximum, free, used))
    return whole and used + free <= maximum + _BLOCK_SLACK


def _first_gauge(scope: Scope, aliases: Sequence[Series]) -> dict[str, float | None]:
    for alias in aliases:
        got = scope.gauge(alias)
        if got:
            return got
    return {}


SERVE_NAME_TABLE: Final[NameTable] = {
    # collector.py log_iteration_stats: num_requests_running is numActiveRequests (the active list),
    # num_scheduled_requests inflightBatchingStats.numScheduledRequests, num_requests_waiting numQueuedRequests
    "requests_running": (
        Series("trtllm_num_scheduled_requests", "gauge", "main 2026 (what the last iteration ran)", _COLLECTOR),
        Series("trtllm_num_requests_running", "gauge", "main 2026 (the executor's active list)", _COLLECTOR),
    ),
    "requests_waiting": (Series("trtllm_num_requests_waiting", "gauge", "main 2026", _COLLECTOR),),
    "prompt_tokens_total": (Series("trtllm_prompt_tokens_total", "counter", "main 2026", _COLLECTOR),),
    "generation_tokens_total": (Series("trtllm_generation_tokens_total", "counter", "main 2026", _COLLECTOR),),
    "requests_finished_total": (
        Series("trtllm_request_success_total", "counter", "1.1.0rc5 → main (summed over finished_reason)", _COLLECTOR),
    ),
    "ttft": (Series("trtllm_time_to_first_token_seconds", "histogram", "1.1.0rc5 → main", _COLLECTOR),),
    "tpot": (Series("trtllm_time_per_output_token_seconds", "histogram", "1.1.0rc5 → main (per request)", _COLLECTOR),),
    "e2e": (Series("trtllm_e2e_request_latency_seconds", "histogram", "1.1.0rc5 → main", _COLLECTOR),),
    "queue_time": (Series("trtllm_request_queue_time_seconds", "histogram", "1.1.0rc5 → main", _COLLECTOR),),
    "kv_cache_usage_ratio": (Series("trtllm_kv_cache_utilization", "gauge", "main 2026 (0–1)", _COLLECTOR),),
    "blocks_max": (Series("trtllm_kv_cache_max_blocks", "gauge", "main 2026", _COLLECTOR),),
    "blocks_used": (Series("trtllm_kv_cache_used_blocks", "gauge", "main 2026", _COLLECTOR),),
    "tokens_per_block": (Series("trtllm_kv_cache_tokens_per_block", "gauge", "main 2026", _COLLECTOR),),
    "max_batch_size": (Series("trtllm_max_batch_size_runtime", "gauge", "main 2026", _COLLECTOR),),
    "requests_paused": (Series("trtllm_num_paused_requests", "gauge", "main 2026", _COLLECTOR),),
    "max_active_requests": (Series("trtllm_max_num_active_requests", "gauge", "main 2026", _COLLECTOR),),
    "process_start_time_seconds": (
        Series("process_start_time_seconds", "gauge", "single-process only", "prometheus_client/process_collector.py"),
    ),
}
"""Snapshot field (or block quantity) → exposed names, newest first."""


class TRTLLMServeAdapter(ExecutorStatsAdapter):
    """``trtllm-serve`` ``/prometheus/metrics`` (1.1.0rc5 → main 2026); see the module docstring."""

    engine = "trtllm"
    table: ClassVar[NameTable] = SERVE_NAME_TABLE
    executor: ClassVar[Mapping[str, tuple[Series, ...]]] = {
        "active": SERVE_NAME_TABLE["requests_running"][1:],
        "scheduled": SERVE_NAME_TABLE["requests_running"][:1],
        "queued": SERVE_NAME_TABLE["requests_waiting"],
        "max": SERVE_NAME_TABLE["max_active_requests"],
        "paused": SERVE_NAME_TABLE["requests_paused"],
    }
    model_labels = ("model_name",)
    not_exposed: ClassVar[Mapping[str, str]] = {
        "preemptions_total": "preemptions_total (trtllm-serve exposes only a paused-requests gauge)",
        "kv_cache_capacity_tokens": "trtllm_kv_cache_max_blocks (trtllm-serve 1.1 exposes no KV metrics)",
    }

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Usage from ``trtllm_kv_cache_utilization`` else used ÷ max blocks; capacity max × tokens per block.

        Example: ``max_blocks 1000``, ``used_blocks 250``, ``tokens_per_block 32`` → usage 0.25, capacity 32000.
        """
        mx = scope.gauge(SERVE_NAME_TABLE["blocks_max"][0])
        used = scope.gauge(SERVE_NAME_TABLE["blocks_used"][0])
        per = scope.gauge(SERVE_NAME_TABLE["tokens_per_block"][0])
        direct = scope.gauge(SERVE_NAME_TABLE["kv_cache_usage_ratio"][0])
        usage: dict[str, float | None] = {}
        capacity: dict[str, float | None] = {}
        for r in set(mx) | set(used) | set(per) | set(direct):
            m, u, t = positive(mx.get(r)), used.get(r), positive(per.get(r))
            d = direct.get(r)
            usage[r] = valid_ratio(d) if d is not None else (valid_ratio(u / m) if u is not None and m else None)
            capacity[r] = m * t if m is not None and t is not None else None
        return usage, capacity

    def config(self, scope: Scope) -> dict[str, str]:
        """``{"max_batch_size": "256", "tokens_per_block": "32"}`` where exposed."""
        return config_values(
            scope,
            [
                ("max_batch_size", SERVE_NAME_TABLE["max_batch_size"][0]),
                ("tokens_per_block", SERVE_NAME_TABLE["tokens_per_block"][0]),
            ],
        )


# --- catalog entries (advisor.engines.catalog) ---------------------------------------------------------------

from advisor.engines import reference as _ref  # noqa: E402
from advisor.engines.catalog import (  # noqa: E402
    CatalogEntry,
    KVAccounting,
    LatencyBuckets,
    PromQLHandling,
    RatioTerm,
    Wrapper,
)
from advisor.engines.flags import FLAGS as _FLAGS  # noqa: E402

_REFERENCE_CATALOG: Final = "shared/reference/engine-metrics-catalog.md"

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="triton-trtllm",
        title="Triton tensorrtllm backend",
        prefixes=("nv_trt_llm_",),
        name_table=TRITON_NAME_TABLE,
        units={
            "kv_cache_usage_ratio": "fraction 0–1 (used ÷ max blocks)",
            "kv_cache_capacity_tokens": "tokens (max blocks × tokens per block)",
            "nv_inference_*_duration_us": "microseconds (cumulative counters)",
        },
        labels={"model": TritonTRTLLMAdapter.model_labels, "replica": ("version",)},
        buckets=LatencyBuckets((), (), f"{_REFERENCE_CATALOG} §4.1 (no latency histograms)"),
        promql=PromQLHandling(model_label="model"),
        flags=_FLAGS["triton-trtllm"],
        kv=KVAccounting(
            usage="kv_cache_block_type used ÷ max, trusted only when used + free is within one block of max",
            capacity="max blocks × tokens_per",
            derived=(RatioTerm("blocks_used", "blocks_max", free="blocks_free"),),
        ),
        adapter=TritonTRTLLMAdapter,
        # inflight_batcher_llm/src/custom_metrics_reporter: nv_llm_output_token_len / nv_llm_input_token_len are
        # histograms observed once per finished request, nv_inference_request_success on completion
        counters_advance_during_decode=False,
        tokens_counted_per_finished_request=True,
        # triton_backend docs/model_config.md: batch_scheduler_policy "Set to guaranteed_no_evict to guarantee that a
        # started request is never paused. (default=guaranteed_no_evict)" — the executor's GUARANTEED_NO_EVICT
        # capacity scheduler, as trtllm-serve's below
        reserves_max_length_at_admission=True,
    ),
    CatalogEntry(
        engine="trtllm",
        title="TensorRT-LLM trtllm-serve",
        prefixes=("trtllm_",),
        name_table=SERVE_NAME_TABLE,
        units={
            "kv_cache_usage_ratio": "fraction 0–1",
            "kv_cache_capacity_tokens": "tokens (max blocks × tokens per block)",
            "ttft": "seconds",
            "tpot": "seconds",
            "e2e": "seconds",
            "queue_time": "seconds",
        },
        labels={"model": TRTLLMServeAdapter.model_labels},
        buckets=LatencyBuckets(
            _ref.VLLM_TTFT,
            _ref.VLLM_ITL,
            f"{_REFERENCE_CATALOG} §4.2 (tensorrt_llm/metrics/collector.py: vLLM's buckets)",
        ),
        promql=PromQLHandling(model_label="model_name"),
        flags=_FLAGS["trtllm"],
        kv=KVAccounting(
            usage="kv_cache_utilization (0–1), else used ÷ max blocks",
            capacity="kv_cache_max_blocks × kv_cache_tokens_per_block",
            derived=(RatioTerm("blocks_used", "blocks_max"),),
        ),
        adapter=TRTLLMServeAdapter,
        # tensorrt_llm/metrics/collector.py: trtllm_prompt_tokens_total / trtllm_generation_tokens_total are
        # per-request metrics, logged from a request's final output
        counters_advance_during_decode=False,
        tokens_counted_per_finished_request=True,
        # tensorrt_llm/llmapi/llm_args.py SchedulerConfig: capacity_scheduler_policy defaults to GUARANTEED_NO_EVICT,
        # which admits a request only with blocks for its whole length; a request without max_tokens gets
        # max_seq_len − prompt (NVIDIA/TensorRT-LLM#9412: "executed sequentially if max_tokens is not provided")
        reserves_max_length_at_admission=True,
        wrappers=(
            Wrapper(
                "Dynamo TensorRT-LLM worker",
                ("dynamo_component_",),
                "the worker passes trtllm_* through beside dynamo_component_*; engine: trtllm",
                f"{_REFERENCE_CATALOG} capture trtllm-1.1.x-trtllm-serve-via-dynamo-worker-qwen3-0.6b.prom",
            ),
        ),
    ),
)
"""The Triton backend's and trtllm-serve's catalog entries (:mod:`advisor.engines.catalog`)."""
