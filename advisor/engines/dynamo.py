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
* **KV usage** is not on the frontend; a worker scrape's ``dynamo_component_kvstats_gpu_cache_usage_percent``
  (a 0–1 fraction despite its name, no model label) is read when present.
* ``engine_config``: ``max_num_seqs``, ``context_length``, ``max_num_batched_tokens``, ``kv_cache_block_size``,
  ``total_kv_blocks``, ``migration_limit``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from advisor.engines.common import NameTable, Scope, Series, config_values, positive, valid_ratio
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
        Series("dynamo_component_kvstats_gpu_cache_usage_percent", "gauge", f"{_V} (worker; 0–1)", _NAMES),
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
        "kv_cache_usage_ratio": "dynamo_component_kvstats_gpu_cache_usage_percent (on workers, not the frontend)",
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
        usage = {r: valid_ratio(v) for r, v in scope.gauge(NAME_TABLE["kv_cache_usage_ratio"][0]).items()}
        return usage, capacity

    def config(self, scope: Scope) -> dict[str, str]:
        """``{"max_num_seqs": "2", "context_length": "40960", …}`` from the ``model_*`` gauges."""
        return config_values(scope, [(k, _config(k)) for k in _CONFIG_KEYS])


def _config(key: str) -> Series:
    return NAME_TABLE["config"][_CONFIG_KEYS.index(key)]


# --- catalog entry (advisor.engines.catalog) -----------------------------------------------------------------

from advisor.engines.catalog import CatalogEntry, KVAccounting, LatencyBuckets, PromQLHandling  # noqa: E402

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="dynamo",
        title="NVIDIA Dynamo frontend",
        prefixes=("dynamo_frontend_",),
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
        frontend_only=True,
    ),
)
"""The Dynamo frontend's catalog entry (:mod:`advisor.engines.catalog`). Dynamo *workers* are wrappers of their
engine (see the vLLM, SGLang and TensorRT-LLM entries)."""
