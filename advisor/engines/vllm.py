"""vLLM adapter: ``vllm:*`` samples → :class:`~advisor.domain.EngineSnapshot`.

Names come from vLLM's own metrics code: ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``, V1
0.7.3 → 0.33.0), ``vllm/engine/metrics.py`` (V0, ≤0.10.x), ``vllm/config/cache.py`` (the
``cache_config_info`` labels) and ``prometheus_client``'s process collector. :data:`NAME_TABLE` lists, per
snapshot field, every exposed name newest first with the versions that emit it; the adapter takes the
first alias that yields a usable value.

Rules (each a decision; change them here, in one place):

* **One model per snapshot.** The model label is ``model_name`` (vLLM, Ray Serve) or ``model`` (Triton's
  vLLM backend, ``triton-inference-server/vllm_backend`` ``src/model.py`` passes
  ``{"model": model_name, "version": model_version}`` to ``src/utils/metrics.py``). Samples of another
  model are ignored — never merged; samples without a model label (``vllm:cache_config_info``,
  ``process_start_time_seconds``) apply to it. The chosen model is the ``model`` argument, else the first
  in exposition order. Every other model is listed in ``missing`` as ``model_name="<name>" (ignored)``.
* **Replicas are ranks, never duplicates.** One scrape can carry several engines that are not processes
  of one engine: Ray Serve LLM's re-export labels each Serve replica ``ReplicaId`` (vLLM
  ``vllm/v1/metrics/ray_wrappers.py``, vllm-project/vllm PR #24267; older Ray only ``WorkerId``), and
  Triton loads one vLLM engine per model ``version``. Each such replica is its own rank, named
  ``ReplicaId=<id>`` (``…/engine=<n>`` for its DP ranks beyond 0): its usage and capacity are listed in
  ``ranks``; totals are summed and usage capacity-weighted as for DP ranks. A gauge is never maxed, nor a
  counter summed, silently across replicas.
* **Ray names.** Ray's exporter prefixes ``ray_`` and sanitizes ``:`` to ``_``: ``ray_vllm_<name>`` (and the
  unsanitized ``ray_vllm:<name>`` of Ray ≤2.46, ray-project/ray PR #52719) is read as ``vllm:<name>``.
* **Ranks.** The ``engine`` label is the data-parallel rank (V1 ≥0.8); a sample without it is rank
  ``"0"`` (V0 and V1 0.7.x). A ``cache_config_info`` without ``engine`` (0.8.x) describes every rank.
  The rank set is every ``engine`` value on the model's samples.
* **Aggregation over ranks.** Shared helpers of :mod:`advisor.engines.common` (:class:`Scope`,
  :func:`sum_all`, :func:`weighted_usage`, :func:`first_histogram`). Counters, running/waiting gauges,
  capacities and histograms are summed (:meth:`Histogram.merge`); KV usage is the capacity-weighted
  mean, or the plain mean when any rank's capacity is unknown. An aggregate is known only when *every*
  rank in the rank set has a usable value: a rank that is silent or NaN makes the total unknown rather
  than silently low.
* **Multiprocess ``pid`` label.** Under ``--api-server-count > 1`` vLLM 0.9–0.11 exposes gauges such as
  ``vllm:kv_cache_usage_perc`` once per API-server process with a ``pid`` label (gauge
  ``multiprocess_mode`` left at ``all``). Each process reports the same engine, so a rank's gauge is the
  **max** over its pids (never the sum); NaN pids are ignored. Counters are summed over every extra
  label (``finished_reason``, and ``pid`` if one ever appears, since each process counts its own).
* **Unknown, never zero.** NaN → unknown. A usage outside [0, 1] → unknown. A family absent or unusable →
  field ``None`` and the field's primary (newest) family name in ``missing``.
* **``ranks``** holds one :class:`RankValues` per rank only when more than one rank reports (as
  ``EngineSnapshot.ranks`` documents); a single-rank snapshot has ``ranks == ()``.
* **Capacity** per rank: label ``kv_cache_size_tokens`` (0.33+, correct for hybrid models) when a positive
  number, else ``num_gpu_blocks × block_size`` — except for a hybrid model (:func:`kv_cache_hybrid`), whose
  pool that product is not: unknown; ``"None"`` strings and 0 blocks are unknown.
* **Waiting by reason** (``requests_waiting_by_reason``, 0.20+): ``vllm:num_requests_waiting_by_reason``
  per ``reason`` label (``capacity`` = no KV blocks, ``deferred`` = LoRA budget, KV transfer, blocked), each
  summed over ranks; ``{}`` before 0.20 (not listed in ``missing``: ``num_requests_waiting`` stands).
* **Hybrid KV groups** (``kv_cache_hybrid``, :func:`kv_cache_hybrid`): ``cache_config_info``'s
  ``mamba_page_size_padded`` / ``mamba_block_size`` / ``sliding_window`` set → ``True`` (``block_size`` is
  then the minimum over the groups and ``num_gpu_blocks × block_size`` not the pool); present and
  ``"None"`` → ``False``; no ``cache_config_info`` → ``None``.
* **TPOT.** Per-request ``vllm:request_time_per_output_token_seconds`` (0.11+) first; else the older
  ``vllm:time_per_output_token_seconds`` (per decode step, i.e. ITL) and then
  ``vllm:inter_token_latency_seconds`` (0.10+), both with ``tpot_is_itl=True``.
* **``engine_config``** is the label set of the lowest rank's ``vllm:cache_config_info``, verbatim
  (``engine`` label included).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Final, cast

from advisor.domain import EngineSnapshot, Exposition, Histogram, RankValues, Sample
from advisor.engines.common import (
    DEFAULT_RANK,
    SHAPE_MEMO_ENTRIES,
    SHAPE_MEMO_LABELS,
    Kind,
    Scope,
    Series,
    ShapeMemo,
    first_histogram,
    first_samples,
    first_total,
    fsum_or_none,
    request_length_sums,
    spec_decode_counters,
    sum_all,
    valid_ratio,
    wanted_names,
    weighted_usage,
    why_no_histogram,
)
from advisor.listing import IGNORED_MORE, bounded

MetricName = Series
"""One exposed vLLM family (the shared :class:`~advisor.engines.common.Series`)."""

__all__ = ["BLOCK_SIZES", "NAME_TABLE", "WANTED_SAMPLE_NAMES", "Kind", "MetricName", "VLLMAdapter"]

_LOGGERS: Final = "vllm/v1/metrics/loggers.py"
_V0: Final = "vllm/engine/metrics.py"
_SPEC: Final = "vllm/v1/spec_decode/metrics.py"

NAME_TABLE: Final[Mapping[str, tuple[Series, ...]]] = {
    "kv_cache_usage_ratio": (
        Series("vllm:kv_cache_usage_perc", "gauge", "V1 0.9 → 0.33 (fraction 0–1)", _LOGGERS),
        Series(
            "vllm:gpu_cache_usage_perc",
            "gauge",
            "V0; V1 0.7 → 0.10, hidden 0.11, gone 0.14; Triton vllm_backend",
            f"{_LOGGERS}, {_V0}, vllm_backend src/utils/metrics.py",
        ),
    ),
    "requests_running": (Series("vllm:num_requests_running", "gauge", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "requests_waiting": (Series("vllm:num_requests_waiting", "gauge", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "requests_waiting_by_reason": (
        Series(
            "vllm:num_requests_waiting_by_reason",
            "gauge",
            "V1 0.20 → 0.33 (label reason: capacity = no KV blocks, deferred = LoRA budget / KV transfer / "
            "blocked; the reasons sum to num_requests_waiting)",
            _LOGGERS,
        ),
    ),
    "preemptions_total": (Series("vllm:num_preemptions_total", "counter", "V0; V1 0.8 → 0.33", _LOGGERS),),
    "prompt_tokens_total": (
        Series("vllm:prompt_tokens_total", "counter", "V0; V1 0.7 → 0.33 (cached included)", _LOGGERS),
    ),
    "generation_tokens_total": (Series("vllm:generation_tokens_total", "counter", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "requests_finished_total": (
        Series(
            "vllm:request_success_total",
            "counter",
            "V0; V1 0.7 → 0.33 (summed over finished_reason)",
            _LOGGERS,
        ),
    ),
    "request_prompt_tokens_sum": (
        Series("vllm:request_prompt_tokens_sum", "counter", "V0; V1 0.7 → 0.33 (histogram sum, at finish)", _LOGGERS),
    ),
    "request_prompt_tokens_count": (
        Series("vllm:request_prompt_tokens_count", "counter", "V0; V1 0.7 → 0.33 (histogram count)", _LOGGERS),
    ),
    "request_generation_tokens_sum": (
        Series(
            "vllm:request_generation_tokens_sum", "counter", "V0; V1 0.7 → 0.33 (histogram sum, at finish)", _LOGGERS
        ),
    ),
    "request_generation_tokens_count": (
        Series("vllm:request_generation_tokens_count", "counter", "V0; V1 0.7 → 0.33 (histogram count)", _LOGGERS),
    ),
    "ttft": (Series("vllm:time_to_first_token_seconds", "histogram", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "tpot": (
        Series(
            "vllm:request_time_per_output_token_seconds",
            "histogram",
            "V1 0.11 → 0.33 (per request)",
            _LOGGERS,
        ),
        Series(
            "vllm:time_per_output_token_seconds",
            "histogram",
            "V0; V1 0.7 → 0.11, hidden 0.12–0.14, gone 0.20 (per step = ITL)",
            _LOGGERS,
            is_itl=True,
        ),
        Series("vllm:inter_token_latency_seconds", "histogram", "V1 0.10 → 0.33", _LOGGERS, is_itl=True),
    ),
    "e2e": (Series("vllm:e2e_request_latency_seconds", "histogram", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "queue_time": (Series("vllm:request_queue_time_seconds", "histogram", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "spec_drafts_total": (
        Series("vllm:spec_decode_num_drafts_total", "counter", "V1 0.8 → 0.33 (only with a speculative_config)", _SPEC),
    ),
    "spec_draft_tokens_total": (
        Series("vllm:spec_decode_num_draft_tokens_total", "counter", "V1 0.8 → 0.33 (idem)", _SPEC),
    ),
    "spec_accepted_tokens_total": (
        Series("vllm:spec_decode_num_accepted_tokens_total", "counter", "V1 0.8 → 0.33 (idem)", _SPEC),
    ),
    "spec_accepted_tokens_by_position": (
        Series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "counter",
            "V1 0.8 → 0.33 (idem; label position 0 … num_speculative_tokens − 1)",
            _SPEC,
        ),
    ),
    "process_start_time_seconds": (
        Series(
            "process_start_time_seconds",
            "gauge",
            "single-process mode only",
            "prometheus_client/process_collector.py",
        ),
    ),
    "kv_cache_capacity_tokens": (
        Series(
            "vllm:cache_config_info",
            "info",
            "V0; V1 0.8 → 0.33 (engine label from 0.9)",
            f"{_LOGGERS}, vllm/config/cache.py",
        ),
    ),
}
"""Snapshot field → exposed names, newest first."""

_MODEL_LABELS: Final = ("model_name", "model")
"""vLLM and Ray Serve label the served model ``model_name``; Triton's vLLM backend ``model``."""
_RANK_LABEL: Final = "engine"
_REPLICA_LABELS: Final = ("ReplicaId", "WorkerId", "version")
"""Labels naming a separate engine behind one scrape: Ray Serve replica (``ReplicaId`` from vLLM 0.11 /
Ray 2.50, ``WorkerId`` before), Triton model ``version``. The first present names the replica."""
_RAY_PREFIXES: Final = ("ray_vllm_", "ray_vllm:")
"""Ray's exporter: ``ray_`` + the vLLM name with ``:`` sanitized to ``_`` (``vllm/v1/metrics/ray_wrappers.py``)."""
_CACHE_CONFIG: Final = "vllm:cache_config_info"
BLOCK_SIZES: Final = (1, 8, 16, 32, 64, 128, 256)
"""``--block-size`` values vLLM accepts (``vllm/config/cache.py`` ``BlockSize``); ``plan`` refuses others."""
_REASON_LABEL: Final = "reason"
"""``vllm:num_requests_waiting_by_reason``'s label (``capacity`` / ``deferred``, ``vllm/v1/metrics/loggers.py``)."""
_HYBRID_MARKERS: Final = ("mamba_page_size_padded", "mamba_block_size", "sliding_window")
"""``vllm:cache_config_info`` labels (``CacheConfig`` fields, ``vllm/config/cache.py``, exported by
``metrics_info()``) that are set — not ``"None"`` — only when the model has KV groups besides full attention:
``mamba_page_size_padded`` (0.11+: the Mamba state page the attention block is raised to fit),
``mamba_block_size`` (0.20+), ``sliding_window`` (sliding-window attention layers)."""
_PROCESS_START: Final = "process_start_time_seconds"
LORA_REQUESTS_INFO: Final = "vllm:lora_requests_info"
"""Not read (:meth:`VLLMAdapter.wants` rejects it): a gauge (value: unix time of its last update, V0 and V1
0.7 → 0.33, only with ``--enable-lora``; ``vllm/v1/metrics/loggers.py``) labelled :data:`LORA_INFO_LABELS`. Each
combination of running and waiting adapters becomes a series that stays on the page (vllm-project/vllm PR
#11117 shows two), so a LoRA server's page can carry thousands of them; ``bench/parse.py`` builds such a page."""
LORA_INFO_LABELS: Final = ("max_lora", "running_lora_adapters", "waiting_lora_adapters")
""":data:`LORA_REQUESTS_INFO`'s labels: ``--max-loras``, and the adapter names as comma-separated lists."""

WANTED_SAMPLE_NAMES: Final = wanted_names(NAME_TABLE)
"""Every sample name the adapter reads (histograms as ``_bucket``, ``_count``, ``_sum``)."""


def canonical_name(sample_name: str) -> str:
    """The vLLM name behind a re-exported one: ``ray_vllm_num_requests_running`` → ``vllm:num_requests_running``;
    other names unchanged."""
    for prefix in _RAY_PREFIXES:
        if sample_name.startswith(prefix):
            return "vllm:" + sample_name[len(prefix) :]
    return sample_name


class VLLMAdapter:
    """vLLM (V0 and V1 0.7 → 0.33, Triton vLLM backend, Ray Serve re-export); see the module docstring."""

    engine: str = "vllm"

    def wants(self, sample_name: str) -> bool:
        """True for the sample names in :data:`WANTED_SAMPLE_NAMES` (or their Ray re-export spelling)."""
        return sample_name in WANTED_SAMPLE_NAMES or canonical_name(sample_name) in WANTED_SAMPLE_NAMES

    def __init__(self) -> None:
        self._last: tuple[Exposition, _IndexedScope, list[str]] | None = None
        """The scope :meth:`models` built, kept for the :meth:`snapshot` of the same exposition that follows
        (``advisor.observe.observe`` asks for both); replaced whole, so a concurrent caller sees a pair or none."""

    def models(self, exposition: Exposition) -> list[str]:
        """Every served model (``model_name``, else Triton's ``model``) on the samples the adapter reads, in
        exposition order (LoRA adapters are not separate models; ``vllm:lora_requests_info`` is not read)."""
        expo, duplicates = first_samples(normalize(exposition))
        scope = indexed_scope(expo, None)
        self._last = (exposition, scope, duplicates)
        return scope.all_models

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """Read one vLLM exposition.

        Args:
            exposition: samples by sample name, e.g.
                ``{"vllm:num_requests_running": [Sample(..., {"engine": "0", "model_name": "m"}, 23.0)]}``.
            model: served model to read; ``None`` = first in exposition order.

        Returns:
            An :class:`EngineSnapshot` (ratios 0–1, request counts, cumulative counters, histograms in
            seconds, capacity in tokens). ``None`` = unknown, with the family listed in ``missing``.
        """
        last, self._last = self._last, None  # held only until this snapshot: a page is never kept
        if last is not None and last[0] is exposition and (model is None or model == last[1].model):
            _, scope, duplicates = last  # the same page, the same model: the scope models() just built
        else:
            expo, duplicates = first_samples(normalize(exposition))
            scope = indexed_scope(expo, model)
        return read_snapshot(scope, duplicates, self.engine)


def read_snapshot(scope: _VLLMScope, duplicates: Sequence[str], engine: str = "vllm") -> EngineSnapshot:
    """The snapshot of one scope (:meth:`VLLMAdapter.snapshot` after the scope is built).

    ``scope`` is an :class:`_IndexedScope` (the adapter's: every family walked once) or a plain :class:`_VLLMScope`
    (the reference it must equal, ``tests/engines/test_vllm_index.py``); ``duplicates`` are :func:`first_samples`'s
    notes, listed first in ``missing``.
    """
    ranks = scope.vllm_ranks()
    missing: list[str] = list(duplicates)

    def note(field: str, value: object, why: str | None = None) -> None:
        if value is None:
            name = NAME_TABLE[field][0].name
            missing.append(f"{name} ({why})" if why else name)

    cap_by_rank, engine_config = _capacity_per_rank(scope, ranks)
    capacity = sum_all(cap_by_rank, ranks) if cap_by_rank else None
    hybrid = kv_cache_hybrid(engine_config)
    if capacity is None and hybrid:
        missing.append(
            f"{_CACHE_CONFIG} kv_cache_size_tokens (hybrid model: num_gpu_blocks × block_size is not its pool)"
        )
    else:
        note("kv_cache_capacity_tokens", capacity)

    # KV usage: first alias giving a usable aggregate
    usage_by_rank: dict[str, float | None] = {}
    usage: float | None = None
    for alias in NAME_TABLE["kv_cache_usage_ratio"]:
        per_rank = {r: valid_ratio(v) for r, v in scope.gauge(alias).items()}
        if not per_rank:
            continue
        agg = weighted_usage(per_rank, cap_by_rank, ranks)
        if not usage_by_rank or agg is not None:
            usage_by_rank = per_rank
        if agg is not None:
            usage = agg
            break
    note("kv_cache_usage_ratio", usage)

    def total(field: str) -> tuple[Mapping[str, float | None], float | None]:
        per_rank, value = first_total(scope, NAME_TABLE[field], ranks)
        note(field, value)
        return per_rank, value

    running_by_rank, running = total("requests_running")
    waiting_by_rank, waiting = total("requests_waiting")
    waiting_by_reason = _waiting_by_reason(scope, ranks)
    preempt_by_rank, preemptions = total("preemptions_total")
    prompt_by_rank, prompt = total("prompt_tokens_total")
    gen_by_rank, generation = total("generation_tokens_total")
    _, finished = total("requests_finished_total")

    ttft, ttft_alias = first_histogram(scope, NAME_TABLE["ttft"], ranks)
    note("ttft", ttft, why_no_histogram(scope, NAME_TABLE["ttft"], ranks) if ttft is None else None)
    tpot, tpot_alias = first_histogram(scope, NAME_TABLE["tpot"], ranks)
    note("tpot", tpot, why_no_histogram(scope, NAME_TABLE["tpot"], ranks) if tpot is None else None)
    e2e, _ = first_histogram(scope, NAME_TABLE["e2e"], ranks)
    note("e2e", e2e)
    queue_time, _ = first_histogram(scope, NAME_TABLE["queue_time"], ranks)
    note("queue_time", queue_time)

    start_values = [
        s.value for s in scope.samples(NAME_TABLE["process_start_time_seconds"][0]) if not math.isnan(s.value)
    ]
    process_start = start_values[0] if start_values else None
    note("process_start_time_seconds", process_start)

    rank_values: tuple[RankValues, ...] = ()
    if len(ranks) > 1:
        rank_values = tuple(
            RankValues(
                rank=r,
                kv_cache_usage_ratio=usage_by_rank.get(r),
                kv_cache_capacity_tokens=cap_by_rank.get(r),
                requests_running=running_by_rank.get(r),
                requests_waiting=waiting_by_rank.get(r),
                preemptions_total=preempt_by_rank.get(r),
                prompt_tokens_total=prompt_by_rank.get(r),
                generation_tokens_total=gen_by_rank.get(r),
            )
            for r in ranks
        )

    spec = spec_decode_counters(scope, NAME_TABLE, ranks)
    lengths = request_length_sums(scope, NAME_TABLE, ranks)
    missing.extend(bounded([f'{scope.model_label()}="{m}" (ignored)' for m in scope.others], IGNORED_MORE))
    return EngineSnapshot(
        engine=engine,
        model=scope.model,
        kv_cache_usage_ratio=usage,
        kv_cache_capacity_tokens=capacity,
        requests_running=running,
        requests_waiting=waiting,
        preemptions_total=preemptions,
        prompt_tokens_total=prompt,
        generation_tokens_total=generation,
        requests_finished_total=finished,
        ttft=ttft,
        ttft_source=ttft_alias.name if ttft_alias else None,
        tpot=tpot,
        tpot_source=tpot_alias.name if tpot_alias else None,
        tpot_is_itl=bool(tpot_alias and tpot_alias.is_itl),
        e2e=e2e,
        queue_time=queue_time,
        process_start_time_seconds=process_start,
        engine_config=engine_config,
        ranks=rank_values,
        requests_waiting_by_reason=waiting_by_reason,
        kv_cache_hybrid=hybrid,
        replicas=scope.replicas(ranks),
        missing=tuple(missing),
        **spec,
        **lengths,
    )


# --- reshaping helpers -------------------------------------------------------------------------------


def normalize(exposition: Exposition) -> Exposition:
    """Ray's re-exported names read as vLLM's (:func:`canonical_name`); the exposition unchanged without them.

    Example: ``{"ray_vllm_num_requests_running": [...]}`` → ``{"vllm:num_requests_running": [...]}``.
    """
    if True not in [name.startswith(_RAY_PREFIXES) for name in exposition]:
        return exposition
    out: dict[str, list[Sample]] = {}
    for name, samples in exposition.items():
        out.setdefault(canonical_name(name), []).extend(samples)
    return out


class _VLLMScope(Scope):
    """:class:`Scope` with vLLM's label roles: ``engine`` is the DP rank and a replica label (``ReplicaId``,
    ``WorkerId``, Triton ``version``) names a separate engine; both make the rank.

    Example::

        vllm:num_requests_running{ReplicaId="3r4e",engine="0",model_name="m"}  → rank "ReplicaId=3r4e"
        vllm:num_requests_running{ReplicaId="3r4e",engine="1",model_name="m"}  → rank "ReplicaId=3r4e/engine=1"
        vllm:num_requests_running{engine="1",model_name="m"}                   → rank "1"
    """

    def __init__(self, exposition: Exposition, model: str | None) -> None:
        self._replicated = self._is_replicated(exposition)
        super().__init__(exposition, wanted=WANTED_SAMPLE_NAMES, model_labels=_MODEL_LABELS, model=model)

    def _is_replicated(self, exposition: Exposition) -> bool:
        """Whether a replica label names ranks: a replica label (Ray's ``ReplicaId``, Triton's ``version``) labels
        every sample of a family that has it, so the first sample of each family tells."""
        return any(
            not samples[0].labels.keys().isdisjoint(_REPLICA_LABELS) for samples in exposition.values() if samples
        )

    def rank(self, sample: Sample) -> str:
        if not self._replicated:
            return sample.labels.get(_RANK_LABEL, DEFAULT_RANK)
        engine = sample.labels.get(_RANK_LABEL)
        for label in _REPLICA_LABELS:
            value = sample.labels.get(label)
            if value:  # an empty replica label names no replica
                name = f"{label}={value}"
                return name if engine in (None, DEFAULT_RANK) else f"{name}/{_RANK_LABEL}={engine}"
        return engine if engine is not None else DEFAULT_RANK

    def _rank_list(self, samples: Sequence[Sample]) -> list[str]:
        if not self._replicated:  # the rank is the engine label alone: one comprehension
            return [s.labels.get(_RANK_LABEL, DEFAULT_RANK) for s in samples]
        rank = self.rank
        return [rank(s) for s in samples]

    def ranked(self, series: Series) -> bool:
        """Whether the series' samples name a rank (``engine`` or a replica label)."""
        key = (series.name, series.kind, series.match)
        known = self._ranked_memo.get(key)
        if known is None:
            suffixes = ("_bucket", "_count", "_sum") if series.kind == "histogram" else ("",)
            known = self._ranked_memo[key] = any(_names_rank(s) for x in suffixes for s in self.samples(series, x))
        return known

    def vllm_ranks(self) -> tuple[str, ...]:
        """Every rank on the model's samples (``"0"`` for unlabelled ones); ``process_start_time_seconds``
        and a ``cache_config_info`` naming no rank (0.8.x) name none."""
        found: set[str] = set()
        for field, aliases in NAME_TABLE.items():
            if field == "process_start_time_seconds":
                continue
            for series in aliases:
                for suffix in series.sample_names():
                    samples, ranks = self.ranked_samples(series, suffix[len(series.name) :])
                    if series.name == _CACHE_CONFIG:
                        found.update(r for r, s in zip(ranks, samples, strict=True) if _names_rank(s))
                    else:
                        found.update(ranks)
        return tuple(sorted(found, key=_rank_order))

    def replicas(self, ranks: Sequence[str]) -> tuple[str, ...]:
        """The replica names among ``ranks`` when there are several (``("ReplicaId=a", "ReplicaId=b")``), else
        ``()``: one engine behind the target."""
        names = sorted({r.split("/", 1)[0] for r in ranks if r.startswith(_REPLICA_LABELS)}, key=_rank_order)
        return tuple(names) if len(names) > 1 else ()

    def model_label(self) -> str:
        """The model label this page uses (``model_name``, or Triton's ``model``), for messages."""
        for samples in self._expo.values():
            for s in samples:
                for label in _MODEL_LABELS:
                    if label in s.labels:
                        return label
        return _MODEL_LABELS[0]


class _Family:
    """Where one sample name's samples of the scope's model are in its family (as :meth:`Scope.samples` keeps them),
    and their ranks. Read from the labels alone, so every page of the same label objects shares it (:class:`_Layout`).

    Attributes:
        keep: the positions in the family of the samples kept (the model's, then the priority total's), in exposition
            order; ``None`` when every sample is kept (the usual page).
        rank: the one rank of every kept sample (the usual page), else ``None``.
        ranks: the rank of each kept sample (as :meth:`_VLLMScope.rank`), or ``None`` when ``rank`` is set.

    Shared by the pages of a layout: never modified (nor the ``ranks`` list :meth:`_IndexedScope.ranked_samples`
    hands out).
        rank_set: every rank on the kept samples.
        named: whether any kept sample names a rank (:func:`_names_rank`).
    """

    __slots__ = ("keep", "named", "rank", "rank_set", "ranks")

    def __init__(
        self,
        keep: tuple[int, ...] | None,
        rank: str | None,
        ranks: list[str] | None,
        rank_set: frozenset[str],
        named: bool,
    ) -> None:
        self.keep = keep
        self.rank = rank
        self.ranks = ranks
        self.rank_set = rank_set
        self.named = named

    @classmethod
    def one_rank(cls, keep: tuple[int, ...] | None, rank: str, named: bool) -> _Family:
        """Every kept sample of rank ``rank``. With every sample kept (``keep`` ``None``, the usual page), one object
        per ``(rank, named)`` shared by every layout (:data:`_ONE_RANK`, while it has room): a family then costs its
        layout a reference."""
        if keep is not None:
            return cls(keep, rank, None, frozenset((rank,)), named)
        known = _ONE_RANK.get((rank, named))
        if known is None:
            known = cls(None, rank, None, frozenset((rank,)), named)
            if len(_ONE_RANK) < _ONE_RANK_LIMIT:
                _ONE_RANK[rank, named] = known
        return known


_NO_FAMILY: Final = _Family((), None, [], frozenset(), False)
_ONE_RANK: Final[dict[tuple[str, bool], _Family]] = {}
"""``(rank, named)`` → the :class:`_Family` of every sample of one rank (shared by the families of that rank)."""
_ONE_RANK_LIMIT: Final = 4096
"""Ranks :data:`_ONE_RANK` holds at most (DP ranks and replica names; past that, each family has its own object)."""


class _BucketPlan:
    """One rank's ``_bucket`` family read from its labels, for :func:`_histogram` on every page of the same labels.

    Attributes:
        rank: the family's one rank.
        valid: ``False`` when a bound is missing, not a number or NaN (never a histogram, whatever the values).
        order: the positions of the buckets in bound order when every bound appears once (the usual page); ``None``
            for repeated bounds (summed per bound: :func:`_histogram` reads them).
        inf: the position of the ``+Inf`` bucket, ``None`` without one (never a histogram).
        bounds: the bounds in order, scaled as the series says (the tuple :meth:`Histogram.bounds` keeps once one
            was built: shared, never hashed again).

    Example: buckets ``le="0.1"``, ``le="+Inf"``, ``le="1"`` → ``order=(0, 2, 1)``, ``inf=1``,
    ``bounds=(0.1, 1.0, inf)``.
    """

    __slots__ = ("bounds", "inf", "order", "rank", "valid")

    def __init__(self, rank: str, buckets: Sequence[Sample], scale: float) -> None:
        self.rank = rank
        self.valid = False
        self.order: tuple[int, ...] | None = None
        self.inf: int | None = None
        self.bounds: tuple[float, ...] = ()
        try:
            les = [_LE_FLOATS.get(x) or _le(x) for x in [s.labels["le"] for s in buckets]]
        except (KeyError, ValueError):
            return
        if any(map(math.isnan, les)):
            return
        self.valid = True
        if len(set(les)) != len(les):
            return
        order = sorted(range(len(les)), key=les.__getitem__)
        self.order = tuple(order)
        self.inf = les.index(math.inf) if math.inf in les else None
        ordered = [les[i] for i in order]
        self.bounds = (
            tuple(ordered) if scale == 1.0 else tuple(le * scale if math.isfinite(le) else le for le in ordered)
        )

    def read(
        self, buckets: Sequence[Sample], counts: Sequence[Sample], sums: Sequence[Sample], scale: float
    ) -> Histogram | None:
        """:func:`_histogram` of these samples (of this plan's labels): the values alone are read, in its order."""
        if not self.valid:
            return None
        values = [s.value for s in buckets]
        if any(map(math.isnan, values)):
            return None
        order, inf = self.order, self.inf
        if order is None:  # repeated bounds: summed per bound
            return _histogram(buckets, counts, sums, scale)
        if inf is None or not sums:
            return None
        total = _sum(sums, 1.0)
        count = _sum(counts, 1.0) if counts else None
        if total is None or (counts and count is None):
            return None
        h = Histogram.from_counts(
            self.bounds,
            [0.0 + values[i] for i in order],
            count=count if count is not None else 0.0 + values[inf],
            sum=total * scale,
        )
        self.bounds = h.bounds()  # the interned tuple: recognised by identity from now on
        return h


_UNPLANNED: Final = object()


class _Layout:
    """What one page's names and label sets fix for one model: everything :class:`_IndexedScope` derives without a
    value. Shared by every page of the same label objects (:data:`_LAYOUTS`: the next scrape of a target, and its
    replicas), which then only read their values.

    Filled as it is first needed, each part by one assignment (scopes of concurrent pages of one layout may both fill
    a part: with the same thing).

    Attributes:
        all_models: every model on the page (:meth:`Scope.models`).
        replicated: whether a replica label names the ranks (:class:`_VLLMScope`).
        families: every wanted family's :class:`_Family`, ``None`` until first read.
        ranks: :meth:`_VLLMScope.vllm_ranks`, ``None`` until first read.
        ranked: ``(name, kind)`` of a series → :meth:`_VLLMScope.ranked`.
        histograms: ``(name, scale)`` of a histogram series → its :class:`_BucketPlan`, or ``None`` where the
            reference walk reads it (several ranks, a part absent).

    (Series are keyed by the fields their reading depends on: hashing a whole :class:`Series` hashes its seven.)
    """

    __slots__ = ("all_models", "families", "histograms", "ranked", "ranks", "replicated")

    def __init__(self, all_models: list[str], replicated: bool) -> None:
        self.all_models = all_models
        self.replicated = replicated
        self.families: dict[str, _Family] | None = None
        self.ranks: tuple[str, ...] | None = None
        self.ranked: dict[tuple[str, str], bool] = {}
        self.histograms: dict[tuple[str, float], _BucketPlan | None] = {}


_LAYOUTS: Final[ShapeMemo[_Layout]] = ShapeMemo(SHAPE_MEMO_ENTRIES, SHAPE_MEMO_LABELS)
"""``(model, names, family sizes)`` and a page's label objects (every family's, in order) → its :class:`_Layout`."""


def indexed_scope(exposition: Exposition, model: str | None) -> _IndexedScope:
    """The :class:`_IndexedScope` of ``exposition`` for ``model``, with the :class:`_Layout` of an earlier page of the
    same names and label objects when :data:`_LAYOUTS` holds one (else a new one, remembered there).

    ``exposition``: as :class:`_IndexedScope` reads it (after :func:`first_samples`).
    """
    values = exposition.values()
    first = next((samples[0] for samples in values if samples), None)
    if first is None or not ShapeMemo.may_hold(first.labels):  # plain dicts (the Prometheus path): never remembered
        return _IndexedScope(exposition, model)
    shape = (model, tuple(exposition), tuple(map(len, values)))
    labels = [s.labels for samples in values for s in samples]
    layout = _LAYOUTS.get(shape, labels)
    if layout is not None:
        return _IndexedScope(exposition, model, layout)
    scope = _IndexedScope(exposition, model)
    _LAYOUTS.put(shape, labels, scope.layout)
    return scope


class _IndexedScope(_VLLMScope):
    """:class:`_VLLMScope` read in one indexed pass: each family the adapter reads is walked once (which of its samples
    are the model's, their ranks, whether they name one) into a :class:`_Family`, and every reading (the rank set,
    whether a series is ranked, gauges, counters, histograms) is computed from that index; a family of one rank (the
    usual page) is read without a per-sample rank at all.

    What the index holds depends on names and labels only: it lives in a :class:`_Layout`, which a page of the same
    label objects (:func:`indexed_scope`) takes over as it is, reading only its values.

    The readings equal :class:`_VLLMScope`'s, the reference kept beside it: ``tests/engines/test_vllm_index.py``
    holds the two equal on generated pages (also through a layout taken over from another page),
    ``tests/engines/test_snapshot_equality.py`` on every captured page and its variants.

    Example::

        vllm:num_requests_running{engine="0",model_name="m"} 3     → _Family(rank="0", named=True)
        vllm:num_requests_running{engine="1",model_name="m"} 4     (another page: two ranks)
        vllm:num_requests_running{engine="0",model_name="m"} 3     → _Family(ranks=["1", "0"], named=True)
    """

    def __init__(self, exposition: Exposition, model: str | None, layout: _Layout | None = None) -> None:
        self._given = layout
        super().__init__(exposition, model)
        self.layout = layout if layout is not None else _Layout(self.all_models, self._replicated)
        """What this page's names and labels fix (taken over from an earlier page, or filled by this scope)."""
        self._kept: dict[str, list[Sample]] = {}
        self._histograms: dict[tuple[str, float], dict[str, Histogram | None]] = {}

    def _is_replicated(self, exposition: Exposition) -> bool:
        layout = self._given
        return super()._is_replicated(exposition) if layout is None else layout.replicated

    def models(self) -> list[str]:
        layout = self._given
        return super().models() if layout is None else list(layout.all_models)

    def _index(self) -> dict[str, _Family]:
        """Every wanted family on the page, walked once (on first use: :meth:`models` alone needs none)."""
        layout = self.layout
        families = layout.families
        if families is None:
            families = layout.families = {
                name: self._family(raw) for name, raw in self._expo.items() if raw and name in WANTED_SAMPLE_NAMES
            }
        return families

    def _family(self, raw: Sequence[Sample]) -> _Family:
        """One family's walk: :meth:`Scope.samples`' model and priority filters (vLLM series match no category
        and have no replica labels), then the rank of each sample as :meth:`rank` gives it."""
        keep: list[int] | None = None
        samples: Sequence[Sample] = raw
        if self.others:
            same, model_of, model = self._same_model, self._model_of, self.model
            keep = [i for i, s in enumerate(raw) if same(model_of(s) or model, model)]
            if not keep:
                return _NO_FAMILY
            if len(keep) == len(raw):
                keep = None
            else:
                samples = [raw[i] for i in keep]
        if len(samples) == 1:  # most families: one series, kept whatever its priority label
            (sample,) = samples
            kept = None if keep is None else tuple(keep)
            if self._replicated:
                return _Family.one_rank(kept, self.rank(sample), _names_rank(sample))
            engine = sample.labels.get(_RANK_LABEL)
            if engine is not None:
                return _Family.one_rank(kept, engine, True)
            return _Family.one_rank(kept, DEFAULT_RANK, _names_rank(sample))
        labels = [s.labels for s in samples]
        if "" in [x.get("priority") for x in labels]:
            total = [i for i, x in enumerate(labels) if x.get("priority", "") == ""]
            keep = total if keep is None else [keep[i] for i in total]
            samples = [samples[i] for i in total]
            labels = [labels[i] for i in total]
        kept = None if keep is None else tuple(keep)
        if self._replicated:
            ranks = [self.rank(s) for s in samples]
            named = any(_names_rank(s) for s in samples)
        else:
            engines = [x.get(_RANK_LABEL) for x in labels]
            distinct = set(engines)
            named = len(distinct) > 1 or None not in distinct or any(x.get(k) for x in labels for k in _REPLICA_LABELS)
            if len(distinct) == 1 or distinct == {None, DEFAULT_RANK}:  # one rank (the usual page)
                engine = engines[0]
                return _Family.one_rank(kept, engine if engine is not None else DEFAULT_RANK, named)
            # without a None, the engine values are the ranks
            ranks = (
                cast("list[str]", engines)
                if None not in distinct
                else [e if e is not None else DEFAULT_RANK for e in engines]
            )
        rank_set = frozenset(ranks)
        if len(rank_set) == 1:
            return _Family.one_rank(kept, ranks[0], named)
        return _Family(kept, None, ranks, rank_set, named)

    def _kept_samples(self, name: str, fam: _Family) -> list[Sample]:
        """The family's kept samples on this page, in exposition order."""
        raw = self._expo.get(name, ())
        keep = fam.keep
        if keep is None:
            return raw if isinstance(raw, list) else list(raw)
        if not keep:
            return []
        kept = self._kept.get(name)
        if kept is None:
            kept = self._kept[name] = [raw[i] for i in keep]
        return kept

    def _get(self, series: Series, suffix: str) -> tuple[_Family, list[Sample]] | None:
        """The family of ``series`` + ``suffix`` (:data:`_NO_FAMILY` when absent) and its kept samples, or ``None``
        for a category series (none in vLLM's table: read by the reference code)."""
        if series.match:
            return None
        name = series.name + suffix
        fam = self._index().get(name, _NO_FAMILY)
        return fam, self._kept_samples(name, fam)

    def samples(self, series: Series, suffix: str = "") -> list[Sample]:
        got = self._get(series, suffix)
        return super().samples(series, suffix) if got is None else got[1]

    def ranked_samples(self, series: Series, suffix: str = "") -> tuple[list[Sample], list[str]]:
        got = self._get(series, suffix)
        if got is None:
            return super().ranked_samples(series, suffix)
        fam, samples = got
        if fam.ranks is None:
            return samples, [cast(str, fam.rank)] * len(samples)
        return samples, fam.ranks

    def ranked(self, series: Series) -> bool:
        if series.match:
            return super().ranked(series)
        key = (series.name, series.kind)
        known = self.layout.ranked.get(key)
        if known is None:
            index = self._index()
            known = self.layout.ranked[key] = any(index.get(name, _NO_FAMILY).named for name in series.sample_names())
        return known

    def vllm_ranks(self) -> tuple[str, ...]:
        layout = self.layout
        known = layout.ranks
        if known is not None:
            return known
        found: set[str] = set()
        for name, fam in self._index().items():
            if name == _PROCESS_START:
                continue
            if name == _CACHE_CONFIG:
                found.update(self.rank(s) for s in self._kept_samples(name, fam) if _names_rank(s))
            else:
                found |= fam.rank_set
        known = layout.ranks = tuple(sorted(found, key=_rank_order))
        return known

    def gauge(self, series: Series) -> dict[str, float | None]:
        got = self._get(series, "")
        if got is None or got[0].rank is None:  # a category series, or several ranks: the per-sample walk
            return super().gauge(series)
        fam, samples = got
        scale = series.scale
        best: float | None = None
        for s in samples:
            if not math.isnan(s.value):
                v = s.value * scale
                best = v if best is None else max(best, v)
        return {cast(str, fam.rank): best}

    def counter(self, series: Series, suffix: str = "") -> dict[str, float | None]:
        got = self._get(series, suffix)
        if got is None or got[0].rank is None:
            return super().counter(series, suffix)
        fam, samples = got
        return {cast(str, fam.rank): _sum(samples, series.scale)}

    def histogram(self, series: Series) -> dict[str, Histogram | None]:
        if series.match:  # a category series (none in vLLM's table): the reference
            return super().histogram(series)
        key = (series.name, series.scale)
        known = self._histograms.get(key)
        if known is not None:  # read twice when unusable (first_histogram, then why_no_histogram)
            return known
        plans = self.layout.histograms
        plan = plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = plans[key] = self._plan(series)
        if plan is None:  # several ranks: the per-sample walk
            out = super().histogram(series)
        else:
            assert isinstance(plan, _BucketPlan)
            name = series.name
            index = self._index()
            buckets, counts, sums = (
                self._kept_samples(name + x, index.get(name + x, _NO_FAMILY)) for x in ("_bucket", "_count", "_sum")
            )
            out = {plan.rank: plan.read(buckets, counts, sums, series.scale)}
        self._histograms[key] = out
        return out

    def _plan(self, series: Series) -> _BucketPlan | None:
        """How this layout's pages read ``series``: a :class:`_BucketPlan` when its parts are of one rank, the same
        for all three, with buckets; ``None`` for the reference walk."""
        parts = [self._get(series, suffix) for suffix in ("_bucket", "_count", "_sum")]
        bucket, count, total = parts
        if bucket is None or count is None or total is None:
            return None
        ranks = {r for p in parts if p is not None for r in p[0].rank_set}
        rank = bucket[0].rank
        if len(ranks) != 1 or rank is None:
            return None
        return _BucketPlan(rank, bucket[1], series.scale)


def _sum(samples: Sequence[Sample], scale: float) -> float | None:
    """The samples' values summed times ``scale``, ``None`` with a NaN or with both ``+Inf`` and ``-Inf`` (one rank
    of :meth:`Scope.counter`)."""
    values = [s.value for s in samples]
    total = None if any(map(math.isnan, values)) else fsum_or_none(values)
    return None if total is None else total * scale


def _histogram(
    buckets: Sequence[Sample], counts: Sequence[Sample], sums: Sequence[Sample], scale: float
) -> Histogram | None:
    """One rank's histogram from its ``_bucket``, ``_count`` and ``_sum`` samples, as :meth:`Scope.histogram` makes
    it: counts summed over equal bounds (``0.0 +`` each, in order), ``None`` when a bound is missing, not a number or
    NaN, a count is NaN, there is no ``+Inf`` bucket or no ``_sum``, or the ``_count``/``_sum`` hold a NaN."""
    per_le = _per_le(buckets)
    if per_le is None or math.inf not in per_le or not sums:
        return None
    total = _sum(sums, 1.0)
    count = _sum(counts, 1.0) if counts else None
    if total is None or (counts and count is None):
        return None
    les = sorted(per_le)
    # le × 1.0 is le, bit for bit (-0.0 included): no pass over the bounds for an unscaled family
    bounds = tuple(les) if scale == 1.0 else tuple(le * scale if math.isfinite(le) else le for le in les)
    return Histogram.from_counts(
        bounds,
        [per_le[le] for le in les],
        count=count if count is not None else per_le[math.inf],
        sum=total * scale,
    )


_LE_FLOATS: Final[dict[str, float]] = {}
"""``le`` label text → ``float(text)``, for the bounds seen (a fleet's pages share a few dozen); at most
:data:`_LE_FLOATS_LIMIT` entries, then new texts are parsed each time. A bound of ``0`` parses on every read
(``0.0`` is falsy), as do texts ``float`` refuses."""
_LE_FLOATS_LIMIT: Final = 4096


def _le(text: str) -> float:
    """``float(text)``, remembered in :data:`_LE_FLOATS` while it has room. Raises ``ValueError`` as ``float``."""
    value = float(text)
    if len(_LE_FLOATS) < _LE_FLOATS_LIMIT:
        _LE_FLOATS[text] = value
    return value


def _per_le(samples: Sequence[Sample]) -> dict[float, float] | None:
    """One rank's ``_bucket`` samples → cumulative count per bound (``0.0 +`` each count, summed over equal bounds
    in order, as :meth:`Scope.histogram`); ``None`` when a bound is missing, not a number or NaN, or a count NaN."""
    values = [s.value for s in samples]
    try:
        les = [_LE_FLOATS.get(x) or _le(x) for x in [s.labels["le"] for s in samples]]
    except (KeyError, ValueError):
        return None
    isnan = math.isnan
    if any(map(isnan, les)) or any(map(isnan, values)):
        return None
    if len(set(les)) == len(les):  # every bound once (the usual page)
        return dict(zip(les, [0.0 + v for v in values], strict=True))
    per_le: dict[float, float] = {}
    for le, v in zip(les, values, strict=True):
        per_le[le] = per_le.get(le, 0.0) + v
    return per_le


def _waiting_by_reason(scope: _VLLMScope, ranks: Sequence[str]) -> dict[str, float]:
    """``vllm:num_requests_waiting_by_reason`` (0.20+) → ``{reason: requests}``, each summed over ``ranks``.

    A rank's value per reason is the max over its other labels (``pid``), as for every gauge. A reason some
    rank does not report (or reports NaN or a negative count) is left out (unknown, never 0); ``{}`` when the
    family is not exposed (vLLM before 0.20).

    Example (two DP ranks)::

        vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 3.0
        vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 0.0
        vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="capacity"} 2.0
        vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="deferred"} 4.0
        → {"capacity": 5.0, "deferred": 4.0}
    """
    per_reason: dict[str, dict[str, float | None]] = {}
    for s in scope.samples(NAME_TABLE["requests_waiting_by_reason"][0]):
        reason = s.labels.get(_REASON_LABEL)
        if not reason:
            continue
        by_rank = per_reason.setdefault(reason, {})
        rank = scope.rank(s)
        prev = by_rank.get(rank)
        if math.isnan(s.value) or s.value < 0:
            by_rank.setdefault(rank, None)
        else:
            by_rank[rank] = s.value if prev is None else max(prev, s.value)
    out: dict[str, float] = {}
    for reason, by_rank in per_reason.items():
        value = sum_all(by_rank, ranks)
        if value is not None:
            out[reason] = value
    return out


def kv_cache_hybrid(cache_config: Mapping[str, str]) -> bool | None:
    """Whether the model has KV-cache groups besides full attention, from ``vllm:cache_config_info`` labels.

    For such hybrid models (Mamba layers: Qwen3-Next, Nemotron-H, Granite-4, Jamba; sliding-window layers) vLLM
    raises the attention block size to fit the Mamba state page and exports ``block_size`` as the minimum over
    the KV groups (``HybridAttentionMambaModelConfig.verify_and_update_config`` in
    ``vllm/model_executor/models/config.py`` sets ``cache_config.block_size`` and ``mamba_page_size_padded``),
    so ``num_gpu_blocks × block_size`` is not the pool (0.33 adds the group-aware ``kv_cache_size_tokens``).

    Args:
        cache_config: the labels of one ``vllm:cache_config_info`` sample (``{}`` when the family is absent).

    Returns:
        ``True`` when any of :data:`_HYBRID_MARKERS` is set (not ``"None"``/empty); ``False`` when at least one
        marker label is present and none is set; ``None`` (unknown) when the family is absent or names no
        marker.

    Example: ``{"mamba_page_size_padded": "1059840", "sliding_window": "None", …}`` → ``True``;
    ``{"mamba_page_size_padded": "None", "sliding_window": "None", …}`` → ``False``; ``{}`` → ``None``.
    """
    present = [cache_config[k] for k in _HYBRID_MARKERS if k in cache_config]
    if not present:
        return None
    return any(v.strip() not in ("", "None") for v in present)


REPORTED_SETTINGS: Final[Mapping[str, str]] = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "cache_dtype": "kv_cache_dtype",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
}
"""``vllm:cache_config_info`` labels (``CacheConfig`` fields, ``vllm/config/cache.py``) that are dials of the
capacity pass, → the :class:`~advisor.capacity.kv.CapacityInputs` field each sets (``--gpu-memory-utilization``,
``--kv-cache-dtype``, ``--kv-cache-memory-bytes``, ``--num-gpu-blocks-override``)."""


def reported_settings(cache_config: Mapping[str, str]) -> dict[str, float | int | str | None]:
    """The capacity-pass dials the engine says it runs with, from one ``vllm:cache_config_info`` label set.

    Returns ``{CapacityInputs field: value}`` for each label of :data:`REPORTED_SETTINGS` present and readable:
    ``gpu_memory_utilization`` a float in (0, 1]; ``kv_cache_dtype`` the name as vLLM prints it; the two
    overrides an int, or ``None`` where vLLM prints ``"None"`` (the engine runs without it). A label that is
    absent or unreadable is left out: unknown, never a default. Example::

        {gpu_memory_utilization="0.5", cache_dtype="fp8", kv_cache_memory_bytes="None", block_size="16"}
        → {"gpu_memory_utilization": 0.5, "kv_cache_dtype": "fp8", "kv_cache_memory_bytes": None}
    """
    out: dict[str, float | int | str | None] = {}
    for label, field_name in REPORTED_SETTINGS.items():
        text = cache_config.get(label)
        if text is None:
            continue
        if field_name == "kv_cache_dtype":
            if _DTYPE_NAME.fullmatch(text):
                out[field_name] = text
        elif text == "None" and field_name != "gpu_memory_utilization":
            out[field_name] = None
        elif _PLAIN_NUMBER.fullmatch(text):
            value = float(text)
            if field_name == "gpu_memory_utilization":
                if 0 < value <= 1:
                    out[field_name] = value
            elif value.is_integer() and math.isfinite(value):
                number = int(text) if text.isdigit() else int(value)
                # vLLM sizes the pool from the profile when the byte budget is 0 (gpu_worker.py
                # determine_available_memory: `if kv_cache_memory_bytes := ...`): 0 is no pin
                out[field_name] = None if number == 0 and field_name == "kv_cache_memory_bytes" else number
    return out


_PLAIN_NUMBER: Final = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
"""A number as Python's ``str(float)``/``str(int)`` prints it (what ``cache_config_info`` labels carry): ASCII digits
only — ``float()`` alone also takes ``"0.9_5"``, ``"nan"``, ``" 1"`` and other scripts' digits."""
_DTYPE_NAME: Final = re.compile(r"[A-Za-z0-9_]{1,32}", re.ASCII)
"""A KV-cache dtype name as vLLM spells them (``auto``, ``fp8_e4m3``, ``fp8_inc`` …): anything else is no name."""


def _names_rank(sample: Sample) -> bool:
    """Whether the sample carries ``engine`` or a non-empty replica label (``ReplicaId=""`` names none)."""
    return _RANK_LABEL in sample.labels or any(sample.labels.get(k) for k in _REPLICA_LABELS)


def _rank_order(rank: str) -> tuple[int, int, str]:
    # ASCII digits only: "²" passes str.isdigit() but int() rejects it; it sorts as a name.
    return (0, int(rank), "") if rank.isascii() and rank.isdigit() else (1, 0, rank)


def _positive_number(text: str | None) -> float | None:
    """A positive finite number from a ``str()``-ed Python value: ``"27000" → 27000.0``,
    ``"4294967296.0" → 4294967296.0``; ``"None"``, ``""``, ``"0"``, ``"nan"`` → ``None``."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def reported_block_size(labels: Mapping[str, str]) -> float | None:
    """Tokens per KV block as ``vllm:cache_config_info`` reports them (its ``block_size`` label), ``None`` when absent
    or not a positive finite number."""
    return _positive_number(labels.get("block_size"))


def _capacity_from_labels(labels: Mapping[str, str]) -> float | None:
    """KV capacity in tokens from ``vllm:cache_config_info`` labels (``vllm/config/cache.py``).

    Example::

        {kv_cache_size_tokens="432000", num_gpu_blocks="27000", block_size="16"} → 432000.0  (0.33)
        {num_gpu_blocks="2452", block_size="16"}                                → 39232.0   (0.11)
        {num_gpu_blocks="None", block_size="16"}                                → None (before profiling)
        {num_gpu_blocks="48", block_size="672", mamba_page_size_padded="1376256"} → None (hybrid, 0.11–0.20)
    """
    direct = _positive_number(labels.get("kv_cache_size_tokens"))
    if direct is not None:
        return direct
    if kv_cache_hybrid(labels):
        return None  # block_size is the minimum over the KV groups: num_gpu_blocks × block_size is not the pool
    blocks = _positive_number(labels.get("num_gpu_blocks"))
    block_size = reported_block_size(labels)
    if blocks is None or block_size is None:
        return None
    return blocks * block_size


def _capacity_per_rank(scope: _VLLMScope, ranks: Sequence[str]) -> tuple[dict[str, float | None], dict[str, str]]:
    """Capacity per rank and the engine config (labels of the lowest rank's info sample).

    Example (two DP ranks)::

        vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="2000",...} 1.0
        vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="None",...} 1.0
        → ({"0": 32000.0, "1": None}, {"block_size": "16", "engine": "0", "num_gpu_blocks": "2000", ...})

    An info sample naming no rank (vLLM 0.8.x) applies to every rank in ``ranks`` (or to ``"0"``).
    """
    samples = scope.samples(NAME_TABLE["kv_cache_capacity_tokens"][0])
    if not samples:
        return {}, {}
    by_rank: dict[str, Sample] = {}
    unranked: Sample | None = None
    for s in samples:
        if _names_rank(s):
            by_rank.setdefault(scope.rank(s), s)
        elif unranked is None:
            unranked = s
    if unranked is not None:
        for r in ranks or (DEFAULT_RANK,):
            by_rank.setdefault(r, unranked)
    capacity = {r: _capacity_from_labels(s.labels) for r, s in by_rank.items()}
    lowest = sorted(by_rank, key=_rank_order)[0]
    return capacity, dict(by_rank[lowest].labels)


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

_REFERENCE_CATALOG: Final = "shared/reference/engine-metrics-catalog.md"

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="vllm",
        title="vLLM V0 and V1",
        prefixes=("vllm:", *_RAY_PREFIXES),
        name_table=NAME_TABLE,
        units={
            "kv_cache_usage_ratio": "fraction 0–1 (despite _perc)",
            "kv_cache_capacity_tokens": "tokens (cache_config_info labels)",
            "requests_waiting_by_reason": "requests, per reason label (capacity, deferred)",
            "ttft": "seconds",
            "tpot": "seconds",
            "e2e": "seconds",
            "queue_time": "seconds",
        },
        labels={"model": _MODEL_LABELS, "rank": (_RANK_LABEL,), "replica": _REPLICA_LABELS, "process": ("pid",)},
        buckets=LatencyBuckets(
            _ref.VLLM_TTFT,
            _ref.VLLM_ITL,
            f"{_REFERENCE_CATALOG} §1.2 (vllm/v1/metrics/loggers.py, V1 0.8.5 → 0.33)",
            (_ref.VLLM_TTFT_BEFORE_0_8_5, "vLLM before 0.8.5 stops its TTFT buckets at 10 s"),
            (_ref.VLLM_TPOT_BEFORE_0_8_5, "vLLM before 0.8.5 stops its TPOT buckets at 2.5 s"),
        ),
        promql=PromQLHandling(model_label=_MODEL_LABELS[0], collapse=("pid",)),
        flags=_FLAGS["vllm"],
        kv=KVAccounting(
            usage="kv_cache_usage_perc (gpu_cache_usage_perc before 0.9): used blocks ÷ GPU blocks, 0–1",
            capacity="cache_config_info: kv_cache_size_tokens (0.33), else num_gpu_blocks × block_size",
        ),
        adapter=VLLMAdapter,
        # vllm/v1/metrics/loggers.py: generation/prompt token counters are incremented from each scheduler step's
        # IterationStats (num_generation_tokens, num_prompt_tokens), so they move while requests decode
        counters_advance_during_decode=True,
        # vllm/v1/spec_decode/metrics.py: SpecDecodingProm (the spec_decode_* counters) is built only when the engine
        # has a speculative_config (vllm/v1/metrics/loggers.py PrometheusStatLogger; vllm-project/vllm#15958)
        spec_counters_mean_configured=True,
        reported_settings=reported_settings,
        wrappers=(
            Wrapper(
                "Triton vLLM backend",
                (),
                "passes vllm:* through on Triton's metrics port beside nv_inference_*; engine: vllm",
                "triton-inference-server/vllm_backend README.md (Metrics)",
            ),
            Wrapper(
                "Ray Serve LLM",
                ("ray_vllm:", "ray_vllm_"),
                "re-exports vLLM's families through Ray's metrics agent with a ray_ prefix (ray_vllm:… / "
                "ray_vllm_…) and a ReplicaId label: read as vLLM, each ReplicaId a replica; engine: vllm",
                "ray-project/ray PR #52719 (Serve LLM dashboard, ray_vllm: names)",
            ),
            Wrapper(
                "Dynamo vLLM worker",
                ("dynamo_component_",),
                "the worker's /metrics passes vllm:* through beside dynamo_component_*; engine: vllm",
                "ai-dynamo/dynamo docs/backends/vllm/prometheus.md",
            ),
            Wrapper(
                "vLLM production-stack",
                (),
                "engine pods are plain vLLM (vllm:*); scrape the engines, not the router; engine: vllm",
                f"{_REFERENCE_CATALOG} captures vllm-*-prodstack*.prom",
            ),
        ),
        exposition=_ref.VLLM_0_33,
    ),
)
"""vLLM's catalog entry (:mod:`advisor.engines.catalog`)."""
