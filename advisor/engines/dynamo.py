"""NVIDIA Dynamo frontend adapter: ``dynamo_frontend_*`` samples → :class:`~advisor.domain.EngineSnapshot`.

Names from ``lib/bindings/python/src/dynamo/prometheus_names.py`` (``ai-dynamo/dynamo``; fork snapshot
``wxsms/dynamo`` @2a6da14c) and the published captures ``docs/observability/metrics_examples/fe.log`` and
``trtllm.log`` (@ce30a764; catalog §7); checked against
``../shared/engine-metrics/dynamo-1.0.x-frontend-qwen3-0.6b-one-request.prom``.

Rules:

* **Model.** Label ``model``; Dynamo lower-cases it on request metrics (``qwen/qwen3-0.6b``) but not on the
  ``model_*`` config gauges (``Qwen/Qwen3-0.6B``), so models compare case-insensitively and the snapshot
  keeps the served spelling.
* running = ``inflight_requests``, waiting = ``queued_requests``; finished = ``requests_total`` summed over
  ``endpoint``, ``request_type`` and ``status``; prompt tokens = ``input_sequence_tokens_sum``; generation
  tokens = ``output_tokens_total`` (else ``output_sequence_tokens_sum``).
* **TPOT** is the frontend's inter-token latency (per token gap: ``tpot_is_itl``).
* **Capacity** = ``model_total_kv_blocks × model_kv_cache_block_size`` (0 blocks → unknown).
* **KV usage** is not on the frontend; a worker scrape's ``dynamo_component_gpu_cache_usage_percent`` (current
  ``kvstats`` names in ``lib/runtime/src/metrics/prometheus_names.rs``: ``TOTAL_BLOCKS``,
  ``GPU_CACHE_USAGE_PERCENT`` under the ``dynamo_component`` prefix), else the older
  ``dynamo_component_kvstats_gpu_cache_usage_percent`` (a 0–1 fraction despite its name) is read when present.
* **Worker pages.** A Dynamo worker serves its engine's own families (``vllm:*``, ``sglang:*``, ``trtllm_*``)
  beside ``dynamo_component_*``, so it is read by that engine's adapter; :func:`worker_kv` then supplies
  what the engine left unknown: KV usage from the usage gauge, capacity from ``total_blocks`` × the
  engine's ``block_size`` (:data:`WORKER_KV`). Ranks are the ``dp_rank`` label (``prometheus_names.rs``
  ``labels::DP_RANK``); a worker without it is one rank.
* ``engine_config``: ``max_num_seqs``, ``context_length``, ``max_num_batched_tokens``, ``kv_cache_block_size``,
  ``total_kv_blocks``, ``migration_limit``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from advisor.domain import EngineSnapshot, Exposition
from advisor.engines.common import (
    NameTable,
    Scope,
    Series,
    config_values,
    positive,
    sum_all,
    valid_ratio,
    wanted_names,
    weighted_usage,
)
from advisor.engines.tabular import TableAdapter

_NAMES: Final = "lib/bindings/python/src/dynamo/prometheus_names.py"
_V: Final = "~1.0"

_CONFIG_KEYS: Final = (
    "max_num_seqs",
    "context_length",
    "max_num_batched_tokens",
    "kv_cache_block_size",
    "total_kv_blocks",
    "migration_limit",
)

NAME_TABLE: Final[NameTable] = {
    "requests_running": (Series("dynamo_frontend_inflight_requests", "gauge", _V, _NAMES),),
    "requests_waiting": (Series("dynamo_frontend_queued_requests", "gauge", _V, _NAMES),),
    "requests_finished_total": (Series("dynamo_frontend_requests_total", "counter", _V, _NAMES),),
    "prompt_tokens_total": (
        Series("dynamo_frontend_input_sequence_tokens_sum", "counter", f"{_V} (histogram sum)", _NAMES),
    ),
    "generation_tokens_total": (
        Series("dynamo_frontend_output_tokens_total", "counter", _V, _NAMES),
        Series("dynamo_frontend_output_sequence_tokens_sum", "counter", f"{_V} (histogram sum)", _NAMES),
    ),
    "ttft": (Series("dynamo_frontend_time_to_first_token_seconds", "histogram", _V, _NAMES),),
    "tpot": (Series("dynamo_frontend_inter_token_latency_seconds", "histogram", _V, _NAMES, is_itl=True),),
    "e2e": (Series("dynamo_frontend_request_duration_seconds", "histogram", _V, _NAMES),),
    "kv_cache_usage_ratio": (
        Series("dynamo_component_gpu_cache_usage_percent", "gauge", "≥1.0 (worker; 0–1)", _NAMES),
        Series("dynamo_component_kvstats_gpu_cache_usage_percent", "gauge", "≤0.9 (worker; 0–1)", _NAMES),
    ),
    "kv_total_blocks": (
        Series("dynamo_component_total_blocks", "gauge", "≥1.0 (worker)", _NAMES),
        Series("dynamo_component_kvstats_total_blocks", "gauge", "≤0.9 (worker)", _NAMES),
    ),
    "config": tuple(Series(f"dynamo_frontend_model_{k}", "gauge", _V, _NAMES) for k in _CONFIG_KEYS),
}
"""Snapshot field → exposed names, newest first."""


class DynamoFrontendAdapter(TableAdapter):
    """Dynamo frontend (~1.0); see the module docstring for every rule."""

    engine = "dynamo"
    table: ClassVar[NameTable] = NAME_TABLE
    model_labels = ("model",)
    casefold_model = True
    not_exposed: ClassVar[Mapping[str, str]] = {
        "kv_cache_usage_ratio": "dynamo_component_gpu_cache_usage_percent (on workers, not the frontend)",
        "preemptions_total": "preemptions_total (the Dynamo frontend exposes no preemption counter)",
        "queue_time": "queue_time (the Dynamo frontend exposes no queue-time histogram)",
        "process_start_time_seconds": "process_start_time_seconds (the Dynamo frontend exposes no start time)",
    }

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Capacity from total blocks × block size; usage from a worker's kvstats gauge if scraped.

        Example (capture): ``model_total_kv_blocks 92962``, ``model_kv_cache_block_size 1`` → ``{"0": 92962.0}``.
        """
        blocks = scope.gauge(_config("total_kv_blocks"))
        size = scope.gauge(_config("kv_cache_block_size"))
        capacity: dict[str, float | None] = {}
        for r in set(blocks) | set(size):
            b, s = positive(blocks.get(r)), positive(size.get(r))
            capacity[r] = b * s if b is not None and s is not None else None
        usage: dict[str, float | None] = {}
        for alias in NAME_TABLE["kv_cache_usage_ratio"]:
            usage = {r: valid_ratio(v) for r, v in scope.gauge(alias).items()}
            if usage:
                break
        return usage, capacity

    def config(self, scope: Scope) -> dict[str, str]:
        """``{"max_num_seqs": "2", "context_length": "40960", …}`` from the ``model_*`` gauges."""
        return config_values(scope, [(k, _config(k)) for k in _CONFIG_KEYS])


def _config(key: str) -> Series:
    return NAME_TABLE["config"][_CONFIG_KEYS.index(key)]


WORKER_KV: Final[NameTable] = {k: NAME_TABLE[k] for k in ("kv_cache_usage_ratio", "kv_total_blocks")}
"""The worker KV gauges :func:`worker_kv` reads on a Dynamo worker page, newest name first."""

WORKER_KV_NAMES: Final = wanted_names(WORKER_KV)
"""Their sample names (a source parsing for an engine adapter keeps these too)."""

_WORKER_MODEL_LABELS: Final = ("model", "model_name")
_WORKER_RANK_LABEL: Final = "dp_rank"


def worker_kv(snapshot: EngineSnapshot, exposition: Exposition) -> EngineSnapshot:
    """Fill what the engine left unknown from a Dynamo worker's KV gauges; the snapshot unchanged without them.

    Usage (fraction) from ``dynamo_component_gpu_cache_usage_percent`` (else ``…_kvstats_…``), per
    ``dp_rank``, capacity-weighted; capacity (tokens) = ``total_blocks`` × the engine's ``block_size``
    (``engine_config``), summed over ranks. Gauges of another model (``model`` label) are ignored. A 0-block
    pool (TRT-LLM workers report ``total_blocks 0``) is unknown. The family names used replace the engine's in
    ``missing``; ``dynamo_total_kv_blocks`` is added to ``engine_config``.

    Example: a SGLang worker without ``sglang:token_usage`` and
    ``dynamo_component_gpu_cache_usage_percent{dynamo_component="backend"} 0.4`` → usage ``0.4``.
    """
    if not any(name in exposition for name in WORKER_KV_NAMES):
        return snapshot
    scope = Scope(
        exposition,
        wanted=WORKER_KV_NAMES,
        model_labels=_WORKER_MODEL_LABELS,
        model=snapshot.model,
        rank_label=_WORKER_RANK_LABEL,
        casefold_model=True,
    )
    ranks = scope.ranks(WORKER_KV) or ("0",)
    usage_by_rank: dict[str, float | None] = {}
    for alias in WORKER_KV["kv_cache_usage_ratio"]:
        usage_by_rank = {r: valid_ratio(v) for r, v in scope.gauge(alias).items()}
        if usage_by_rank:
            break
    blocks_by_rank: dict[str, float | None] = {}
    for alias in WORKER_KV["kv_total_blocks"]:
        blocks_by_rank = {r: positive(v) for r, v in scope.gauge(alias).items()}
        if blocks_by_rank:
            break
    block_size = _number(snapshot.engine_config.get("block_size"))
    cap_by_rank = {
        r: b * block_size if b is not None and block_size is not None else None for r, b in blocks_by_rank.items()
    }
    changes: dict[str, object] = {}
    filled: set[str] = set()
    if snapshot.kv_cache_capacity_tokens is None:
        capacity = sum_all(cap_by_rank, ranks)
        if capacity is not None:
            changes["kv_cache_capacity_tokens"] = capacity
            filled.add("kv_cache_capacity_tokens")
    if snapshot.kv_cache_usage_ratio is None and usage_by_rank:
        usage = weighted_usage(usage_by_rank, cap_by_rank, ranks)
        if usage is not None:
            changes["kv_cache_usage_ratio"] = usage
            filled.add("kv_cache_usage_ratio")
    total_blocks = sum_all(blocks_by_rank, ranks)
    if total_blocks is not None:
        changes["engine_config"] = {**snapshot.engine_config, "dynamo_total_kv_blocks": str(int(total_blocks))}
    if not changes:
        return snapshot
    if filled:
        changes["missing"] = tuple(m for m in snapshot.missing if not _names_field(m, filled))
    return dataclasses.replace(snapshot, **changes)  # type: ignore[arg-type]


_FIELD_WORDS: Final = {
    "kv_cache_usage_ratio": ("usage", "kv_cache_usage", "cache_usage", "token_usage", "utilization"),
    "kv_cache_capacity_tokens": ("cache_config_info", "max_total_num_tokens", "capacity", "kv_blocks", "max_tokens"),
}


def _names_field(missing: str, fields: set[str]) -> bool:
    """Whether a ``missing`` entry is the engine's name for one of ``fields`` (its family names it)."""
    return any(word in missing for f in fields for word in _FIELD_WORDS[f])


def _number(text: str | None) -> float | None:
    try:
        return positive(float(text)) if text is not None else None
    except ValueError:
        return None


# --- catalog entry (advisor.engines.catalog) -----------------------------------------------------------------

from advisor.engines.catalog import CatalogEntry, KVAccounting, LatencyBuckets, PromQLHandling  # noqa: E402

_WORKER_PREFIX: Final = "dynamo_component_"
"""A Dynamo worker's own families (``prometheus_names.py``): detected as ``dynamo`` only on a page carrying no
engine family (a worker passes its engine's through, and the engine wins)."""

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="dynamo",
        title="NVIDIA Dynamo frontend",
        prefixes=("dynamo_frontend_", _WORKER_PREFIX),
        name_table=NAME_TABLE,
        units={"ttft": "seconds", "tpot": "seconds (inter-token latency)", "e2e": "seconds"},
        labels={"model": DynamoFrontendAdapter.model_labels},
        buckets=LatencyBuckets(
            (0, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1, 2.2, 4.7, 10, 22, 48, 100, 220, 480),
            (0, 0.0019, 0.0035, 0.0067, 0.013, 0.024, 0.045, 0.084, 0.16, 0.3, 0.56, 1.1, 2),
            "shared/reference/engine-metrics-catalog.md §7 (Dynamo ~1.0 frontend captures; TPOT is inter-token "
            "latency)",
        ),
        promql=PromQLHandling(model_label="model", casefold_model=True),
        flags=None,
        kv=KVAccounting(
            usage="not on the frontend; a worker's dynamo_component_kvstats_gpu_cache_usage_percent (0–1) if scraped",
            capacity="model_total_kv_blocks × model_kv_cache_block_size",
        ),
        adapter=DynamoFrontendAdapter,
        # lib/llm/src/http/service/metrics.rs: ResponseMetricCollector::observe_response adds each streamed chunk's
        # tokens to dynamo_frontend_output_tokens_total (the fallback output_sequence_tokens is observed at the end)
        counters_advance_during_decode=True,
        frontend_only=True,
    ),
)
"""The Dynamo frontend's catalog entry (:mod:`advisor.engines.catalog`). Dynamo *workers* are wrappers of their
engine (see the vLLM, SGLang and TensorRT-LLM entries)."""
