"""Hugging Face TGI adapter: ``tgi_*`` samples → :class:`~advisor.domain.EngineSnapshot`.

Names from ``huggingface/text-generation-inference`` @db931fcf (v3.3.7): ``router/src/server.rs``
(request histograms and counters, bucket set-up), ``router/src/validation.rs`` (input/max-new-token
histograms), ``backends/v3/src/queue.rs`` (``tgi_queue_size``), ``backends/v3/src/backend.rs``
(``tgi_batch_current_size``, ``tgi_batch_current_max_tokens``) and ``backends/v3/src/lib.rs``
(``tgi_batch_max_total_tokens``, since v2.3.1) — catalog §3. No real capture exists; the golden fixtures
are written from those files.

Rules:

* **No labels.** TGI exposes no model label: ``model`` is ``None`` and :meth:`TGIAdapter.models` is empty
  (the configured model names the deployment).
* **Counters without ``_total``.** The Rust exporter declares ``# TYPE tgi_request_success counter`` and
  samples ``tgi_request_success``; ``prometheus_client``'s parser (hence ours) renames such samples to
  ``tgi_request_success_total``. Both spellings are read.
* **Usage is a reservation ratio**: ``tgi_batch_current_max_tokens ÷ tgi_batch_max_total_tokens`` — the
  tokens the running batch has reserved (prompt + max new tokens) over the KV token budget. TGI has no
  occupancy gauge, so this is an upper bound of the true usage.
* **Derived counters.** Prompt and generated tokens are the ``_sum`` of the per-request histograms
  ``tgi_request_input_length`` and ``tgi_request_generated_tokens`` (they grow when requests finish).
* **TPOT** is ``tgi_request_mean_time_per_token_duration`` (one mean per request, seconds).
* **Not exposed** (listed in ``missing``): TTFT (no histogram; the queue + prefill durations are separate
  per-batch histograms and cannot be combined per request), preemptions, process start time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from advisor.engines.common import NameTable, Scope, Series, positive, valid_ratio
from advisor.engines.tabular import TableAdapter

_SERVER: Final = "router/src/server.rs"
_VALIDATION: Final = "router/src/validation.rs"
_BACKEND: Final = "backends/v3/src/backend.rs"
_QUEUE: Final = "backends/v3/src/queue.rs"
_LIB: Final = "backends/v3/src/lib.rs"

NAME_TABLE: Final[NameTable] = {
    "requests_running": (Series("tgi_batch_current_size", "gauge", "v1 → v3.3", _BACKEND),),
    "requests_waiting": (Series("tgi_queue_size", "gauge", "v1 → v3.3", _QUEUE),),
    "prompt_tokens_total": (
        Series("tgi_request_input_length_sum", "counter", "v1 → v3.3 (histogram sum)", _VALIDATION),
    ),
    "generation_tokens_total": (
        Series("tgi_request_generated_tokens_sum", "counter", "v1 → v3.3 (histogram sum)", _SERVER),
    ),
    "requests_finished_total": (
        Series("tgi_request_success_total", "counter", "as renamed by the text parser", _SERVER),
        Series("tgi_request_success", "counter", "v1 → v3.3 (declared name)", _SERVER),
    ),
    "request_prompt_tokens_sum": (
        Series("tgi_request_input_length_sum", "counter", "v1 → v3.3 (histogram sum, at validation)", _VALIDATION),
    ),
    "request_prompt_tokens_count": (
        Series("tgi_request_input_length_count", "counter", "v1 → v3.3 (histogram count)", _VALIDATION),
    ),
    "request_generation_tokens_sum": (
        Series("tgi_request_generated_tokens_sum", "counter", "v1 → v3.3 (histogram sum, at success)", _SERVER),
    ),
    "request_generation_tokens_count": (
        Series("tgi_request_generated_tokens_count", "counter", "v1 → v3.3 (histogram count)", _SERVER),
    ),
    "tpot": (Series("tgi_request_mean_time_per_token_duration", "histogram", "v1 → v3.3 (per request)", _SERVER),),
    "e2e": (Series("tgi_request_duration", "histogram", "v1 → v3.3", _SERVER),),
    "queue_time": (Series("tgi_request_queue_duration", "histogram", "v1 → v3.3", _SERVER),),
    "kv_cache_reserved_tokens": (Series("tgi_batch_current_max_tokens", "gauge", "v1 → v3.3", _BACKEND),),
    "kv_cache_capacity_tokens": (Series("tgi_batch_max_total_tokens", "gauge", "v2.3.1 → v3.3", _LIB),),
}
"""Snapshot field → exposed names, newest first."""


class TGIAdapter(TableAdapter):
    """TGI v1 → v3.3; see the module docstring for every rule."""

    engine = "tgi"
    table: ClassVar[NameTable] = NAME_TABLE
    not_exposed: ClassVar[Mapping[str, str]] = {
        "ttft": "ttft (TGI exposes no time-to-first-token histogram)",
        "preemptions_total": "preemptions_total (TGI exposes no preemption counter)",
        "process_start_time_seconds": "process_start_time_seconds (TGI exposes no start time)",
        "kv_cache_capacity_tokens": "tgi_batch_max_total_tokens (TGI < 2.3.1 exposes no KV budget)",
    }

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Reservation ratio and token budget.

        Example: ``tgi_batch_current_max_tokens 12000``, ``tgi_batch_max_total_tokens 48000`` →
        usage ``{"0": 0.25}``, capacity ``{"0": 48000.0}``; a budget of 0 → both unknown.
        """
        capacity = {r: positive(v) for r, v in scope.gauge(NAME_TABLE["kv_cache_capacity_tokens"][0]).items()}
        reserved = scope.gauge(NAME_TABLE["kv_cache_reserved_tokens"][0])
        usage: dict[str, float | None] = {}
        for r, used in reserved.items():
            cap = capacity.get(r)
            usage[r] = valid_ratio(used / cap) if used is not None and cap else None
        return usage, capacity


# --- catalog entry (advisor.engines.catalog) -----------------------------------------------------------------

from advisor.engines.catalog import CatalogEntry, KVAccounting, LatencyBuckets, PromQLHandling, RatioTerm  # noqa: E402
from advisor.engines.flags import FLAGS as _FLAGS  # noqa: E402


def _duration_buckets() -> tuple[float, ...]:
    """TGI ``router/src/server.rs``: ``value = 0.0001; 35 × { value *= 1.5; push(value) }`` (0.00015 … ≈146 s)."""
    out, value = [], 0.0001
    for _ in range(35):
        value *= 1.5
        out.append(value)
    return tuple(out)


CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="tgi",
        title="Hugging Face TGI",
        prefixes=("tgi_",),
        name_table=NAME_TABLE,
        units={"kv_cache_usage_ratio": "fraction 0–1 (reservation ratio)", "tpot": "seconds", "e2e": "seconds"},
        labels={},
        buckets=LatencyBuckets(
            (),
            _duration_buckets(),
            "shared/reference/engine-metrics-catalog.md §3 (router/src/server.rs, 0.0001·1.5^k)",
        ),
        promql=PromQLHandling(),
        flags=_FLAGS["tgi"],
        kv=KVAccounting(
            usage="batch_current_max_tokens ÷ batch_max_total_tokens (reserved, an upper bound of the occupancy)",
            capacity="batch_max_total_tokens (v2.3.1+)",
            derived=(RatioTerm("kv_cache_reserved_tokens", "kv_cache_capacity_tokens"),),
        ),
        adapter=TGIAdapter,
        # router/src/server.rs: tgi_request_generated_tokens (whose _sum is the generation counter) and
        # tgi_request_success are recorded when a request ends; nothing counts tokens while a request decodes
        counters_advance_during_decode=False,
        # backends/v3/src/queue.rs next_batch: a request enters the batch only when the block allocator grants blocks
        # for its input + max_new_tokens; the usage read is that reservation (module docstring)
        usage_is_whole_request_reservation=True,
    ),
)
"""TGI's catalog entry (:mod:`advisor.engines.catalog`)."""
