"""The table-driven adapter: a name table per engine → :class:`~advisor.domain.EngineSnapshot`.

An engine module subclasses :class:`TableAdapter` with its :data:`NameTable` (snapshot field → exposed
names newest first), its label roles (model, DP rank, TP replicas) and, where the engine needs arithmetic
(capacity from blocks × block size, usage from used ÷ max), a :meth:`TableAdapter.kv` override.

Fields of the table (all optional; an absent or empty entry is a quantity the engine does not expose):
``requests_running``, ``requests_waiting``, ``preemptions_total``, ``prompt_tokens_total``,
``generation_tokens_total``, ``requests_finished_total`` (gauges/counters, summed over DP ranks);
``ttft``, ``tpot``, ``e2e``, ``queue_time`` (histograms, seconds); ``process_start_time_seconds``;
``kv_cache_usage_ratio``, ``kv_cache_capacity_tokens`` (read by the default :meth:`TableAdapter.kv`).
Engines with pools beside the KV pool or disaggregation queues override :meth:`TableAdapter.pools` and
:meth:`TableAdapter.queues`.

Per-rank KV usage is kept **raw** in ``ranks`` (an impossible 1.7 stays 1.7) so that
:func:`advisor.engines.sanity.sanitize` can name the rank and leave it out; the aggregate here is known only
when every rank's usage is a fraction.

``missing`` lists, for every unknown field, the field's newest exposed name — or, when the engine exposes
no such quantity, the sentence in :attr:`TableAdapter.not_exposed` saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from advisor.domain import (
    SNAPSHOT_COUNT_FIELDS,
    SNAPSHOT_HISTOGRAM_FIELDS,
    EngineSnapshot,
    Exposition,
    Histogram,
    PoolReading,
    RankValues,
)
from advisor.engines.common import (
    NameTable,
    Scope,
    Series,
    first_histogram,
    first_samples,
    first_total,
    positive,
    request_length_sums,
    spec_decode_counters,
    sum_all,
    valid_ratio,
    wanted_names,
    weighted_usage,
    why_no_histogram,
)
from advisor.listing import IGNORED_MORE, bounded

_COUNT_FIELDS = SNAPSHOT_COUNT_FIELDS
_HISTOGRAM_FIELDS = SNAPSHOT_HISTOGRAM_FIELDS


class TableAdapter:
    """Base adapter; subclasses set the class attributes below."""

    engine: str = ""
    table: ClassVar[NameTable] = {}
    model_labels: ClassVar[tuple[str, ...]] = ()
    rank_label: ClassVar[str | None] = None
    replica_labels: ClassVar[tuple[str, ...]] = ()
    casefold_model: ClassVar[bool] = False
    not_exposed: ClassVar[Mapping[str, str]] = {}
    """Field → why the engine cannot provide it (listed in ``missing`` when the field is unknown)."""

    def __init__(self) -> None:
        self._wanted = wanted_names(self.table)

    # --- the EngineAdapter protocol --------------------------------------------------------------------
    def wants(self, sample_name: str) -> bool:
        """True for the sample names of the name table (histograms as ``_bucket``/``_count``/``_sum``)."""
        return sample_name in self._wanted

    def models(self, exposition: Exposition) -> list[str]:
        """Served models in exposition order (``[]`` when the engine has no model label)."""
        return self._scope(exposition, None).all_models

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """Read one exposition; ``model`` selects one of :meth:`models` (``None``: the first)."""
        exposition, duplicates = first_samples(self.normalize(exposition))
        scope = self._scope(exposition, model)
        ranks = scope.ranks(self.table) or ("0",)
        missing: list[str] = list(duplicates)

        def note(field: str, value: object, why: str | None = None) -> None:
            if value is None:
                aliases = self.table.get(field, ())
                if field in self.not_exposed and not any(scope.samples(a, _suffix(a)) for a in aliases):
                    missing.append(self.not_exposed[field])
                elif aliases:
                    missing.append(f"{aliases[0].name} ({why})" if why else aliases[0].name)
                else:
                    missing.append(f"{field} (not exposed by {self.engine})")

        usage_by_rank, cap_by_rank = self.kv(scope, ranks)
        capacity = sum_all(cap_by_rank, ranks)
        checked = {r: valid_ratio(v) for r, v in usage_by_rank.items()}
        usage = weighted_usage(checked, cap_by_rank, ranks) if usage_by_rank else None
        note("kv_cache_capacity_tokens", capacity)
        note("kv_cache_usage_ratio", usage)

        per_rank: dict[str, Mapping[str, float | None]] = {}
        totals: dict[str, float | None] = {}
        for field in _COUNT_FIELDS:
            per_rank[field], totals[field] = self.count(field, scope, ranks)
            note(field, totals[field])

        hists: dict[str, tuple[Histogram | None, Series | None]] = {}
        for field in _HISTOGRAM_FIELDS:
            aliases = self.table.get(field, ())
            hists[field] = first_histogram(scope, aliases, ranks)
            note(field, hists[field][0], why_no_histogram(scope, aliases, ranks) if hists[field][0] is None else None)

        start = None
        for alias in self.table.get("process_start_time_seconds", ()):
            values = [v for v in scope.gauge(alias).values() if v is not None]
            if values:
                start = values[0]
                break
        note("process_start_time_seconds", start)

        rank_values: tuple[RankValues, ...] = ()
        if len(ranks) > 1:
            rank_values = tuple(
                RankValues(
                    rank=r,
                    kv_cache_usage_ratio=usage_by_rank.get(r),
                    kv_cache_capacity_tokens=cap_by_rank.get(r),
                    requests_running=per_rank["requests_running"].get(r),
                    requests_waiting=per_rank["requests_waiting"].get(r),
                    preemptions_total=per_rank["preemptions_total"].get(r),
                    prompt_tokens_total=per_rank["prompt_tokens_total"].get(r),
                    generation_tokens_total=per_rank["generation_tokens_total"].get(r),
                )
                for r in ranks
            )
        label = (self.model_labels or ("model",))[0]
        missing.extend(bounded([f'{label}="{m}" (ignored)' for m in scope.others], IGNORED_MORE))
        ttft, ttft_alias = hists["ttft"]
        tpot, tpot_alias = hists["tpot"]
        return EngineSnapshot(
            engine=self.engine,
            model=scope.model,
            kv_cache_usage_ratio=usage,
            kv_cache_capacity_tokens=capacity,
            requests_running=totals["requests_running"],
            requests_waiting=totals["requests_waiting"],
            preemptions_total=totals["preemptions_total"],
            prompt_tokens_total=totals["prompt_tokens_total"],
            generation_tokens_total=totals["generation_tokens_total"],
            requests_finished_total=totals["requests_finished_total"],
            ttft=ttft,
            ttft_source=ttft_alias.name if ttft_alias else None,
            tpot=tpot,
            tpot_source=tpot_alias.name if tpot_alias else None,
            tpot_is_itl=bool(tpot_alias and tpot_alias.is_itl),
            e2e=hists["e2e"][0],
            queue_time=hists["queue_time"][0],
            process_start_time_seconds=start,
            engine_config=self.config(scope),
            ranks=rank_values,
            pools=self.pools(scope, ranks),
            disaggregation_queues=self.queues(scope, ranks),
            missing=tuple(missing),
            **self.speculation(scope, ranks),
            **request_length_sums(scope, self.table, ranks),
            **self.extra_fields(scope, ranks),
        )

    # --- hooks -----------------------------------------------------------------------------------------
    def normalize(self, exposition: Exposition) -> Exposition:
        """Rewrite sample-name keys before reading (SGLang ``sglang_`` → ``sglang:``); identity here."""
        return exposition

    def count(self, field: str, scope: Scope, ranks: Sequence[str]) -> tuple[Mapping[str, float | None], float | None]:
        """Per-rank values and total of a gauge/counter field (first alias present)."""
        return first_total(scope, self.table.get(field, ()), ranks)

    def pools(self, scope: Scope, ranks: Sequence[str]) -> tuple[PoolReading, ...]:
        """Pools other than the KV pool (``EngineSnapshot.pools``); none by default."""
        return ()

    def queues(self, scope: Scope, ranks: Sequence[str]) -> dict[str, float]:
        """Prefill/decode-disaggregation queues in requests (``EngineSnapshot.disaggregation_queues``); none by
        default."""
        return {}

    def kv(self, scope: Scope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """KV usage (fraction, raw) and capacity (tokens) per rank; default: the first alias of each field."""
        usage: dict[str, float | None] = {}
        for alias in self.table.get("kv_cache_usage_ratio", ()):
            usage = dict(scope.gauge(alias))
            if usage:
                break
        capacity: dict[str, float | None] = {}
        for alias in self.table.get("kv_cache_capacity_tokens", ()):
            capacity = {r: positive(v) for r, v in scope.gauge(alias).items()}
            if capacity:
                break
        return usage, capacity

    def speculation(self, scope: Scope, ranks: Sequence[str]) -> dict[str, Any]:
        """The snapshot's speculative-decoding fields (``spec_*``): the counters of the table's ``spec_*`` entries
        (:func:`~advisor.engines.common.spec_decode_counters`); none for a table without them."""
        return spec_decode_counters(scope, self.table, ranks)

    def extra_fields(self, scope: Scope, ranks: Sequence[str]) -> dict[str, Any]:
        """Other :class:`~advisor.domain.EngineSnapshot` fields an engine's own reading gives (TensorRT-LLM's
        capacity queue and paused requests: :class:`advisor.engines.trtllm.ExecutorStatsAdapter`); none by
        default."""
        return {}

    def config(self, scope: Scope) -> dict[str, str]:
        """The engine's self-reported configuration (``engine_config``); none by default."""
        return {}

    def _scope(self, exposition: Exposition, model: str | None) -> Scope:
        return Scope(
            self.normalize(exposition),
            wanted=self._wanted,
            model_labels=self.model_labels,
            model=model,
            rank_label=self.rank_label,
            replica_labels=self.replica_labels,
            casefold_model=self.casefold_model,
        )


def _suffix(series: Series) -> str:
    return "_count" if series.kind == "histogram" else ""
