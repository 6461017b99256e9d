"""SGLang adapter: ``sglang:*`` (or ``sglang_*``) samples → :class:`~advisor.domain.EngineSnapshot`.

Names from SGLang's metrics collectors: ``python/sglang/srt/metrics/collector.py`` (0.3 → 0.5.4;
``SchedulerMetricsCollector``, ``TokenizerMetricsCollector``) and
``python/sglang/srt/observability/metrics_collector.py`` (0.5.23), as read from the PyPI wheels 0.4.3.post4,
0.4.10.post2, 0.5.4 and 0.5.23 (``../shared/reference/engine-metrics-catalog.md`` §2) and checked against the
captures in ``../shared/engine-metrics/sglang-*.prom``.

Rules beyond :mod:`advisor.engines.common`:

* **Prefix.** SGLang registers ``sglang:<name>``; scraped through some relabelling or exporters the colon
  becomes ``sglang_``. Both are read; ``sglang:`` wins when both are present.
* **Labels.** ``model_name`` is the model; ``dp_rank`` the data-parallel rank (summed); ``tp_rank``,
  ``pp_rank``, ``moe_ep_rank`` are replicas (only the lowest is read — with
  ``--enable-metrics-for-all-schedulers`` every TP rank repeats the same numbers). ``priority=""`` is the
  total when priority scheduling also writes per-priority series. ``is_streaming`` series are summed.
* **KV usage excludes the evictable radix cache** (SGLang's own definition:
  ``(max_total_num_tokens − available − evictable) / max_total_num_tokens``). It is the **full-attention
  KV pool alone**: the exact ``full_token_usage`` (0.5.23) first. ``token_usage`` is the max over the full,
  SWA and Mamba pools (``SchedulerStats`` in the collector: "max(full, swa, mamba) — the bottleneck across
  all pools"), so pressure on a state pool would read as KV pressure; without ``full_token_usage`` it is
  taken as the KV pool's only when it exceeds every other pool's usage (or is 0), else KV usage is unknown.
* **Other pools** (``EngineSnapshot.pools``): ``swa`` (``swa_token_usage``, hybrid sliding-window models)
  and ``mamba`` (``mamba_usage``, hybrid SSM / linear-attention models: Qwen3-Next, Nemotron-H, Jamba), with
  used and capacity from ``swa_*_tokens`` / ``mamba_*_tokens`` where exposed (0.5.23). A pool is listed only
  when the model has it (usage or held/free units above 0): SGLang exports both gauges as 0 for every model.
  Across DP ranks the usage is the highest rank's (one request lives on one rank).
* **Disaggregation queues** (``EngineSnapshot.disaggregation_queues``, requests, summed over DP ranks):
  ``prefill_bootstrap`` / ``prefill_prealloc`` (waiting for the decode side to take the request),
  ``prefill_inflight`` (KV being sent), ``decode_prealloc`` (waiting for decode-side KV memory),
  ``decode_transfer`` (KV arriving), ``decode_host_receive`` (0.5.23: received into host memory, waiting for
  device admission). 0.4.10 spells the inflight gauge ``num_prefill_infight_queue_reqs``.
  Read only on a ``prefill``/``decode`` server (``engine_type`` label) or when a queue is non-empty.
* **Capacity** is ``max_total_num_tokens`` (0.5.23). Older releases expose none; ``num_used_tokens ÷
  token_usage`` would divide by a rounded (or zero) ratio, so capacity stays unknown there.
* **Preemptions** are the retraction counter ``num_retracted_requests_total`` (0.5.23). The gauge
  ``num_retracted_reqs`` counts the last batch's retractions, not a cumulative total, and is not used;
  under multiprocess mode a labelled counter that was never incremented is absent from the scrape, so a
  healthy 0.5.23 engine shows the counter as missing.
* **Speculative decoding** (``EngineSnapshot.spec_accept_length``, ``spec_verify_tokens``): SGLang keeps gauges,
  not counters — the mean acceptance length over its last logging interval and the tokens verified per round —
  and writes them at 0 without speculation (:meth:`SGLangAdapter.speculation`).
* ``engine_config``: ``context_len``, ``max_total_num_tokens``, ``page_size`` and the latest
  ``cache_hit_rate`` (a 0–1 gauge over SGLang's recent window), as strings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Final

from advisor.domain import Exposition, PoolReading, Sample
from advisor.engines.common import NameTable, Scope, Series, config_values, positive, valid_ratio
from advisor.engines.tabular import TableAdapter

_OLD: Final = "python/sglang/srt/metrics/collector.py"
_NEW: Final = "python/sglang/srt/observability/metrics_collector.py"
_BOTH: Final = f"{_OLD} (≤0.5.4), {_NEW} (0.5.23)"

NAME_TABLE: Final[NameTable] = {
    "requests_running": (Series("sglang:num_running_reqs", "gauge", "0.3 → 0.5.23", _BOTH),),
    "requests_waiting": (Series("sglang:num_queue_reqs", "gauge", "0.3 → 0.5.23", _BOTH),),
    "preemptions_total": (Series("sglang:num_retracted_requests_total", "counter", "0.5.23", _NEW),),
    "prompt_tokens_total": (Series("sglang:prompt_tokens_total", "counter", "0.3 → 0.5.23", _BOTH),),
    "generation_tokens_total": (Series("sglang:generation_tokens_total", "counter", "0.3 → 0.5.23", _BOTH),),
    "requests_finished_total": (Series("sglang:num_requests_total", "counter", "0.4 → 0.5.23", _BOTH),),
    "ttft": (Series("sglang:time_to_first_token_seconds", "histogram", "0.3 → 0.5.23", _BOTH),),
    "tpot": (
        Series("sglang:request_time_per_output_token_seconds", "histogram", "0.5.23 (per request)", _NEW),
        Series("sglang:time_per_output_token_seconds", "histogram", "0.3 → 0.4.3 (per token)", _OLD, is_itl=True),
        Series("sglang:inter_token_latency_seconds", "histogram", "0.4.3 → 0.5.23", _BOTH, is_itl=True),
    ),
    "e2e": (Series("sglang:e2e_request_latency_seconds", "histogram", "0.3 → 0.5.23", _BOTH),),
    "queue_time": (Series("sglang:queue_time_seconds", "histogram", "0.5.4 → 0.5.23", _BOTH),),
    "kv_cache_usage_ratio": (
        Series("sglang:full_token_usage", "gauge", "0.5.23 (exact)", _NEW),
        Series("sglang:token_usage", "gauge", "0.3 → 0.5.23 (rounded to 0.01 in 0.5.23)", _BOTH),
    ),
    "pool_swa": (Series("sglang:swa_token_usage", "gauge", "0.5.4 → 0.5.23", _BOTH),),
    "pool_swa_used": (Series("sglang:swa_used_tokens", "gauge", "0.5.23", _NEW),),
    "pool_swa_free": (
        Series("sglang:swa_available_tokens", "gauge", "0.5.23", _NEW),
        Series("sglang:swa_evictable_tokens", "gauge", "0.5.23", _NEW),
    ),
    "pool_mamba": (Series("sglang:mamba_usage", "gauge", "0.5.x → 0.5.23", _BOTH),),
    "pool_mamba_used": (Series("sglang:mamba_used_tokens", "gauge", "0.5.23", _NEW),),
    "pool_mamba_free": (
        Series("sglang:mamba_available_tokens", "gauge", "0.5.23", _NEW),
        Series("sglang:mamba_evictable_tokens", "gauge", "0.5.23", _NEW),
    ),
    "queue_prefill_bootstrap": (Series("sglang:num_prefill_bootstrap_queue_reqs", "gauge", "0.5.23", _NEW),),
    "queue_prefill_prealloc": (Series("sglang:num_prefill_prealloc_queue_reqs", "gauge", "0.4.10 → 0.5.x", _OLD),),
    "queue_prefill_inflight": (
        Series("sglang:num_prefill_inflight_queue_reqs", "gauge", "0.5 → 0.5.23", _BOTH),
        Series("sglang:num_prefill_infight_queue_reqs", "gauge", "0.4.10 (misspelt)", _OLD),
    ),
    "queue_decode_prealloc": (Series("sglang:num_decode_prealloc_queue_reqs", "gauge", "0.4.10 → 0.5.23", _BOTH),),
    "queue_decode_transfer": (Series("sglang:num_decode_transfer_queue_reqs", "gauge", "0.4.10 → 0.5.23", _BOTH),),
    "queue_decode_host_receive": (Series("sglang:num_decode_host_receive_queue_reqs", "gauge", "0.5.23", _NEW),),
    "kv_cache_capacity_tokens": (Series("sglang:max_total_num_tokens", "gauge", "0.5.23", _NEW),),
    "config": (
        Series("sglang:context_len", "gauge", "0.5.23", _NEW),
        Series("sglang:page_size", "gauge", "0.5.23", _NEW),
        Series("sglang:cache_hit_rate", "gauge", "0.3 → 0.5.23", _BOTH),
    ),
    "spec_accept_length": (
        Series("sglang:spec_accept_length", "gauge", "0.4.3 → 0.5.23 (0 without speculation)", _BOTH),
    ),
    "spec_verify_tokens": (Series("sglang:spec_num_draft_tokens", "gauge", "0.5.23 (0 without speculation)", _NEW),),
    "spec_steps": (Series("sglang:spec_num_steps", "gauge", "0.5.23 (0 without speculation)", _NEW),),
    "process_start_time_seconds": (
        Series("process_start_time_seconds", "gauge", "single-process only", "prometheus_client/process_collector.py"),
    ),
}
"""Snapshot field → exposed names (``sglang:`` form), newest first."""

USAGE_EPSILON: Final = 1e-9
"""Usages this close are equal (``token_usage`` against a state pool's)."""

_PREFIX: Final = "sglang:"
_ALT_PREFIX: Final = "sglang_"


class SGLangAdapter(TableAdapter):
    """SGLang 0.3 → 0.5.23; see the module docstring for every rule."""

    engine = "sglang"
    table: ClassVar[NameTable] = NAME_TABLE
    model_labels = ("model_name",)
    rank_label = "dp_rank"
    replica_labels = ("tp_rank", "pp_rank", "moe_ep_rank", "attn_cp_rank")
    not_exposed: ClassVar[Mapping[str, str]] = {
        "kv_cache_capacity_tokens": "sglang:max_total_num_tokens (SGLang < 0.5.23 exposes no KV capacity)",
        "process_start_time_seconds": "process_start_time_seconds (SGLang scrapes are multiprocess: none)",
    }

    def __init__(self) -> None:
        super().__init__()
        self._wanted = self._wanted | {_ALT_PREFIX + n[len(_PREFIX) :] for n in self._wanted if n.startswith(_PREFIX)}

    def normalize(self, exposition: Exposition) -> Exposition:
        """``sglang_x`` keys → ``sglang:x`` unless the colon form is also present.

        Example: ``{"sglang_num_running_reqs": [...]}`` → ``{"sglang:num_running_reqs": [...]}``.
        """
        if not any(k.startswith(_ALT_PREFIX) for k in exposition):
            return exposition
        out: dict[str, Sequence[Sample]] = {k: v for k, v in exposition.items() if not k.startswith(_ALT_PREFIX)}
        for k, v in exposition.items():
            if k.startswith(_ALT_PREFIX):
                out.setdefault(_PREFIX + k[len(_ALT_PREFIX) :], v)
        return out

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """KV usage per DP rank (the full-attention pool: ``full_token_usage``, else ``token_usage`` when it is
        not a state pool's) and capacity ``max_total_num_tokens``. Usage values are raw (the table adapter
        checks them); a rank whose KV share cannot be told apart is ``None``.

        Example (0.5.23 capture): ``full_token_usage 0.35566902178521853``, ``swa_token_usage 0.0``,
        ``token_usage 0.36`` → usage ``{"0": 0.35566902178521853}``; ``max_total_num_tokens 448102`` →
        capacity ``{"0": 448102.0}``. 0.5.4, Qwen3-Next: ``token_usage 0.97``, ``mamba_usage 0.97`` → ``{"0":
        None}`` (the 0.97 is the Mamba pool's); ``token_usage 0.5``, ``mamba_usage 0.2`` → ``{"0": 0.5}``.
        """
        full, rounded = NAME_TABLE["kv_cache_usage_ratio"]
        usage: dict[str, float | None] = dict(scope.gauge(full))
        if not usage:
            others = [scope.gauge(NAME_TABLE[k][0]) for k in ("pool_swa", "pool_mamba")]
            for r, v in scope.gauge(rounded).items():
                states = [o[r] for o in others if o.get(r) is not None]
                if v is None or v <= USAGE_EPSILON or all(v > s + USAGE_EPSILON for s in states if s is not None):
                    usage[r] = v
                else:
                    usage[r] = None
        capacity = {r: positive(v) for r, v in scope.gauge(NAME_TABLE["kv_cache_capacity_tokens"][0]).items()}
        return usage, capacity

    def pools(self, scope: Scope, ranks: Sequence[str]) -> tuple[PoolReading, ...]:
        """The SWA and Mamba pools the model has (see the module docstring).

        Example (0.5.23, Qwen3-Next, one rank): ``mamba_usage 0.98``, ``mamba_used_tokens 49``,
        ``mamba_available_tokens 1`` → ``(PoolReading("mamba", 0.98, 49.0, 50.0, "slots", "sglang:mamba_usage"),)``.
        """
        out: list[PoolReading] = []
        for pool, unit in (("swa", "tokens"), ("mamba", "slots")):
            alias = NAME_TABLE[f"pool_{pool}"][0]
            usage = {r: v for r, v in scope.gauge(alias).items() if v is not None}
            used = _total(scope.gauge(NAME_TABLE[f"pool_{pool}_used"][0]).values())
            free = [_total(scope.gauge(a).values()) for a in NAME_TABLE[f"pool_{pool}_free"]]
            capacity = None
            if used is not None and free[0] is not None:
                parts = (used, free[0], free[1] or 0.0)
                bad_part = [v for v in parts if not math.isfinite(v) or v < 0]
                capacity = bad_part[0] if bad_part else math.fsum(parts)
            if not usage and used is None:
                continue
            if all(abs(u) <= USAGE_EPSILON for u in usage.values()) and not capacity:
                continue  # SGLang exports the gauge as 0 for models without this pool
            # An impossible rank value is passed on, not hidden under a max or a sum: the sanitizer
            # (advisor.engines.sanity) makes it unknown and names it in missing.
            bad = [u for u in usage.values() if valid_ratio(u) is None]
            out.append(
                PoolReading(
                    pool=pool,
                    usage_ratio=bad[0] if bad else (max(usage.values()) if usage else None),
                    used=used,
                    capacity=capacity,
                    unit=unit,
                    source=alias.name,
                )
            )
        return tuple(out)

    def queues(self, scope: Scope, ranks: Sequence[str]) -> dict[str, float]:
        """The prefill/decode-disaggregation queues, requests summed over ranks (see the module docstring).

        Example (a decode server): ``num_decode_prealloc_queue_reqs{engine_type="decode"} 12``,
        ``num_decode_transfer_queue_reqs{engine_type="decode"} 3`` → ``{"decode_prealloc": 12.0,
        "decode_transfer": 3.0}``.
        """
        out: dict[str, float] = {}
        disaggregated = False
        for key, aliases in NAME_TABLE.items():
            if not key.startswith("queue_"):
                continue
            for alias in aliases:
                samples = scope.samples(alias)
                if not samples:
                    continue
                disaggregated = disaggregated or any(
                    s.labels.get("engine_type") in ("prefill", "decode") for s in samples
                )
                total = _total(scope.gauge(alias).values())
                if total is not None:
                    out[key[len("queue_") :]] = total
                break
        if not disaggregated and not any(v > 0 for v in out.values()):
            return {}
        return out

    def speculation(self, scope: Scope, ranks: Sequence[str]) -> dict[str, float | None]:
        """``spec_accept_length`` (the ranks that speculate, a gauge above 0, weighted by the requests each runs) and
        ``spec_verify_tokens``
        (``spec_num_draft_tokens``, else ``spec_num_steps`` + 1: a chain draft of that many steps scores one token
        more; a tree under ``--speculative-eagle-topk`` > 1 scores more than that, which the bound then prices low);
        both ``None`` without speculation (SGLang writes the gauges at 0 whatever it serves).

        Example: ``spec_accept_length 2.43``, ``spec_num_draft_tokens 4`` → ``{"spec_accept_length": 2.43,
        "spec_verify_tokens": 4.0}``.
        """
        by_rank = {r: v for r, v in scope.gauge(NAME_TABLE["spec_accept_length"][0]).items() if v is not None and v > 0}
        if not by_rank or not all(math.isfinite(v) for v in by_rank.values()):
            return {}
        # a rank updates its gauge only while it decodes: one that runs nothing shows its last batch's length, so the
        # ranks are weighted by the requests they run (a plain mean when the page does not say)
        running = scope.gauge(NAME_TABLE["requests_running"][0])
        weights = {r: running.get(r) for r in by_rank}
        known = {r: w for r, w in weights.items() if w is not None and math.isfinite(w) and w >= 0}
        if len(known) == len(by_rank) and math.fsum(known.values()) > 0:
            length = math.fsum(by_rank[r] * w for r, w in known.items()) / math.fsum(known.values())
        else:
            length = math.fsum(by_rank.values()) / len(by_rank)
        verify = [v for v in scope.gauge(NAME_TABLE["spec_verify_tokens"][0]).values() if v is not None and v > 0]
        steps = [v for v in scope.gauge(NAME_TABLE["spec_steps"][0]).values() if v is not None and v > 0]
        tokens = max(verify) if verify else (max(steps) + 1 if steps else None)
        return {"spec_accept_length": length, "spec_verify_tokens": tokens}

    def config(self, scope: Scope) -> dict[str, str]:
        """``{"context_len": "8192", "page_size": "1", "cache_hit_rate": "0.0", "max_total_num_tokens": …}``."""
        ctx, page, hit = NAME_TABLE["config"]
        cap = NAME_TABLE["kv_cache_capacity_tokens"][0]
        return config_values(
            scope,
            [("context_len", ctx), ("page_size", page), ("max_total_num_tokens", cap), ("cache_hit_rate", hit)],
        )


def _total(values: Iterable[float | None]) -> float | None:
    """Sum of the known per-rank values, or the first impossible one (negative or not finite) so that the
    sanitizer names it: ``[3, None, 4] → 7``, ``[3, -10] → -10``, ``[None] → None``."""
    known = [v for v in values if v is not None]
    bad = [v for v in known if not math.isfinite(v) or v < 0]
    if bad:
        return bad[0]
    return math.fsum(known) if known else None


# --- catalog entry (advisor.engines.catalog) -----------------------------------------------------------------

from advisor.engines import reference as _ref  # noqa: E402
from advisor.engines.catalog import (  # noqa: E402
    CatalogEntry,
    KVAccounting,
    LatencyBuckets,
    PromQLHandling,
    Wrapper,
)
from advisor.engines.flags import FLAGS as _FLAGS  # noqa: E402

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="sglang",
        title="SGLang",
        prefixes=(_PREFIX, _ALT_PREFIX),
        name_table=NAME_TABLE,
        units={
            "kv_cache_usage_ratio": "fraction 0–1",
            "kv_cache_capacity_tokens": "tokens",
            "ttft": "seconds",
            "tpot": "seconds",
            "e2e": "seconds",
            "queue_time": "seconds",
        },
        labels={
            "model": SGLangAdapter.model_labels,
            "rank": (SGLangAdapter.rank_label,) if SGLangAdapter.rank_label else (),
            "replica": SGLangAdapter.replica_labels,
            "process": ("pid",),
        },
        buckets=LatencyBuckets(
            _ref.SGLANG_TTFT,
            _ref.SGLANG_ITL,
            "shared/reference/engine-metrics-catalog.md §2.2 (SGLang 0.4.10 → 0.5.23 defaults; 0.4.3 differs; "
            "--bucket-* flags override)",
        ),
        promql=PromQLHandling(
            model_label="model_name",
            collapse=SGLangAdapter.replica_labels,
            collapse_counters=SGLangAdapter.replica_labels,
            extra_matchers=(("priority", ""),),
            alt_prefix=(_PREFIX, _ALT_PREFIX),
        ),
        flags=_FLAGS["sglang"],
        kv=KVAccounting(
            usage="full_token_usage (max with swa_token_usage), else token_usage: used ÷ pool, evictable excluded",
            capacity="max_total_num_tokens (0.5.23); older releases expose none",
        ),
        adapter=SGLangAdapter,
        # python/sglang/srt/metrics/collector.py TokenizerMetricsCollector.observe_one_finished_request increments
        # prompt_tokens_total / generation_tokens_total / num_requests_total, called from
        # python/sglang/srt/managers/tokenizer_manager.py only when a request finishes
        counters_advance_during_decode=False,
        tokens_counted_per_finished_request=True,  # the same call adds the request and its tokens
        itl_per_token=True,  # collector.py observe_inter_token_latency: interval ÷ tokens, observed once per token
        # python/sglang/srt/managers/scheduler.py _get_new_batch_prefill_raw: the in-flight chunked request is in the
        # adder's can_run_list while its req_to_token_pool slot is already out of available_size(), so the batch is
        # declared full one request early and batch_is_full sticks until a request finishes (sgl-project/sglang#30294,
        # #38118: "every rank plateaus at #running-req: 15" of 16; #35537: 3 of --max-running-requests 4)
        running_cap_slack=1,
        wrappers=(
            Wrapper(
                "Dynamo SGLang worker",
                ("dynamo_component_",),
                "the worker passes sglang:* through beside dynamo_component_*; engine: sglang",
                "ai-dynamo/dynamo docs/backends/sglang",
            ),
            Wrapper(
                "Ray Serve LLM (SGLang)",
                (),
                "routes SGLang's metrics through Ray's Prometheus backend with application/deployment/replica "
                "labels; engine: sglang",
                "ray-project/ray PR #65083",
            ),
        ),
        exposition=_ref.SGLANG_0_5_23,
    ),
)
"""SGLang's catalog entry (:mod:`advisor.engines.catalog`)."""
