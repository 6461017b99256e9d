"""vLLM adapter: ``vllm:*`` samples → :class:`~advisor.domain.EngineSnapshot`.

Names come from vLLM's own metrics code: ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``, V1
0.7.3 → 0.33.0), ``vllm/engine/metrics.py`` (V0, ≤0.10.x), ``vllm/config/cache.py`` (the
``cache_config_info`` labels) and ``prometheus_client``'s process collector. :data:`NAME_TABLE` lists, per
snapshot field, every exposed name newest first with the versions that emit it; the adapter takes the
first alias that yields a usable value.

Rules (each a decision; change them here, in one place):

* **One model per snapshot.** Samples whose ``model_name`` differs from the chosen model are ignored;
  samples without ``model_name`` (``vllm:cache_config_info``, ``process_start_time_seconds``) apply to
  it. The chosen model is the ``model`` argument, else the first ``model_name`` in exposition order.
  Every other ``model_name`` is listed in ``missing`` as ``model_name="<name>" (ignored)``.
* **Ranks.** The ``engine`` label is the data-parallel rank (V1 ≥0.8); a sample without it is rank
  ``"0"`` (V0 and V1 0.7.x). A ``cache_config_info`` without ``engine`` (0.8.x) describes every rank.
  The rank set is every ``engine`` value on the model's samples.
* **Aggregation over ranks.** Counters, running/waiting gauges, capacities and histograms are summed
  (:meth:`Histogram.merge`); KV usage is the capacity-weighted mean, or the plain mean when any rank's
  capacity is unknown. An aggregate is known only when *every* rank in the rank set has a usable value:
  a rank that is silent or NaN makes the total unknown rather than silently low.
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
  number, else ``num_gpu_blocks × block_size``; ``"None"`` strings and 0 blocks are unknown.
* **TPOT.** Per-request ``vllm:request_time_per_output_token_seconds`` (0.11+) first; else the older
  ``vllm:time_per_output_token_seconds`` (per decode step, i.e. ITL) and then
  ``vllm:inter_token_latency_seconds`` (0.10+), both with ``tpot_is_itl=True``.
* **``engine_config``** is the label set of the lowest rank's ``vllm:cache_config_info``, verbatim
  (``engine`` label included).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from advisor.domain import EngineSnapshot, Exposition, Histogram, RankValues, Sample

Kind = Literal["gauge", "counter", "histogram", "info"]

_USAGE_TOLERANCE: Final = 1e-6


@dataclass(frozen=True, slots=True)
class MetricName:
    """One exposed vLLM family and where it comes from.

    Attributes:
        name: the family as scraped; counters include ``_total``; histograms are the base name whose
            ``_bucket``/``_count``/``_sum`` samples are read.
        kind: ``gauge``, ``counter``, ``histogram`` or ``info`` (a gauge = 1 carrying labels).
        versions: vLLM versions that emit it (from the released wheels).
        source: the vLLM file that declares it.
        is_itl: for TPOT aliases, true when the family observes per-token gaps (ITL) rather than one
            mean per request.
    """

    name: str
    kind: Kind
    versions: str
    source: str
    is_itl: bool = False


_LOGGERS: Final = "vllm/v1/metrics/loggers.py"
_V0: Final = "vllm/engine/metrics.py"

NAME_TABLE: Final[Mapping[str, tuple[MetricName, ...]]] = {
    "kv_cache_usage_ratio": (
        MetricName("vllm:kv_cache_usage_perc", "gauge", "V1 0.9 → 0.33 (fraction 0–1)", _LOGGERS),
        MetricName(
            "vllm:gpu_cache_usage_perc",
            "gauge",
            "V0; V1 0.7 → 0.10, hidden 0.11, gone 0.14",
            f"{_LOGGERS}, {_V0}",
        ),
    ),
    "requests_running": (MetricName("vllm:num_requests_running", "gauge", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "requests_waiting": (MetricName("vllm:num_requests_waiting", "gauge", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "preemptions_total": (MetricName("vllm:num_preemptions_total", "counter", "V0; V1 0.8 → 0.33", _LOGGERS),),
    "prompt_tokens_total": (
        MetricName("vllm:prompt_tokens_total", "counter", "V0; V1 0.7 → 0.33 (cached included)", _LOGGERS),
    ),
    "generation_tokens_total": (MetricName("vllm:generation_tokens_total", "counter", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "requests_finished_total": (
        MetricName(
            "vllm:request_success_total",
            "counter",
            "V0; V1 0.7 → 0.33 (summed over finished_reason)",
            _LOGGERS,
        ),
    ),
    "ttft": (MetricName("vllm:time_to_first_token_seconds", "histogram", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "tpot": (
        MetricName(
            "vllm:request_time_per_output_token_seconds",
            "histogram",
            "V1 0.11 → 0.33 (per request)",
            _LOGGERS,
        ),
        MetricName(
            "vllm:time_per_output_token_seconds",
            "histogram",
            "V0; V1 0.7 → 0.11, hidden 0.12–0.14, gone 0.20 (per step = ITL)",
            _LOGGERS,
            is_itl=True,
        ),
        MetricName("vllm:inter_token_latency_seconds", "histogram", "V1 0.10 → 0.33", _LOGGERS, is_itl=True),
    ),
    "e2e": (MetricName("vllm:e2e_request_latency_seconds", "histogram", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "queue_time": (MetricName("vllm:request_queue_time_seconds", "histogram", "V0; V1 0.7 → 0.33", _LOGGERS),),
    "process_start_time_seconds": (
        MetricName(
            "process_start_time_seconds",
            "gauge",
            "single-process mode only",
            "prometheus_client/process_collector.py",
        ),
    ),
    "kv_cache_capacity_tokens": (
        MetricName(
            "vllm:cache_config_info",
            "info",
            "V0; V1 0.8 → 0.33 (engine label from 0.9)",
            f"{_LOGGERS}, vllm/config/cache.py",
        ),
    ),
}
"""Snapshot field → exposed names, newest first."""

_HISTOGRAM_SUFFIXES: Final = ("_bucket", "_count", "_sum")
_MODEL_LABEL: Final = "model_name"
_RANK_LABEL: Final = "engine"
_DEFAULT_RANK: Final = "0"
_CACHE_CONFIG: Final = "vllm:cache_config_info"
_PROCESS_START: Final = "process_start_time_seconds"


def _wanted_names() -> frozenset[str]:
    names: set[str] = set()
    for aliases in NAME_TABLE.values():
        for m in aliases:
            if m.kind == "histogram":
                names.update(m.name + suffix for suffix in _HISTOGRAM_SUFFIXES)
            else:
                names.add(m.name)
    return frozenset(names)


WANTED_SAMPLE_NAMES: Final = _wanted_names()
"""Every sample name the adapter reads (histograms as ``_bucket``, ``_count``, ``_sum``)."""


class VLLMAdapter:
    """vLLM (V0 and V1 0.7 → 0.33) adapter; see the module docstring for every rule."""

    engine: str = "vllm"

    def wants(self, sample_name: str) -> bool:
        """True for the sample names in :data:`WANTED_SAMPLE_NAMES`; ``_created`` and others are skipped."""
        return sample_name in WANTED_SAMPLE_NAMES

    def models(self, exposition: Exposition) -> list[str]:
        """Every ``model_name`` on the samples the adapter reads, in exposition order (LoRA adapters are not
        separate ``model_name`` values in vLLM; ``vllm:lora_requests_info`` lists them but is not read)."""
        chosen, others = _choose_model(exposition, None)
        return [] if chosen is None else [chosen, *others]

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """Read one vLLM exposition.

        Args:
            exposition: samples by sample name, e.g.
                ``{"vllm:num_requests_running": [Sample(..., {"engine": "0", "model_name": "m"}, 23.0)]}``.
            model: served model (``model_name`` label) to read; ``None`` = first in exposition order.

        Returns:
            An :class:`EngineSnapshot` (ratios 0–1, request counts, cumulative counters, histograms in
            seconds, capacity in tokens). ``None`` = unknown, with the family listed in ``missing``.
        """
        chosen, others = _choose_model(exposition, model)
        view = _ModelView(exposition, chosen)
        ranks = view.ranks()
        missing: list[str] = []

        def note(field: str, value: object) -> None:
            if value is None:
                missing.append(NAME_TABLE[field][0].name)

        # capacity (per rank) and engine config
        cap_by_rank, engine_config = _capacity_per_rank(view.samples(_CACHE_CONFIG), ranks)
        capacity = _sum_all(cap_by_rank, ranks) if cap_by_rank else None
        note("kv_cache_capacity_tokens", capacity)

        # KV usage: first alias giving a usable aggregate
        usage_by_rank: dict[str, float | None] = {}
        usage: float | None = None
        for alias in NAME_TABLE["kv_cache_usage_ratio"]:
            per_rank = {r: _valid_ratio(v) for r, v in _gauge_per_rank(view.samples(alias.name)).items()}
            if not per_rank:
                continue
            agg = _weighted_usage(per_rank, cap_by_rank, ranks)
            if not usage_by_rank or agg is not None:
                usage_by_rank = per_rank
            if agg is not None:
                usage = agg
                break
        note("kv_cache_usage_ratio", usage)

        def gauge(field: str) -> tuple[dict[str, float | None], float | None]:
            per_rank = _gauge_per_rank(view.samples(NAME_TABLE[field][0].name))
            total = _sum_all(per_rank, ranks) if per_rank else None
            note(field, total)
            return per_rank, total

        def counter(field: str) -> tuple[dict[str, float | None], float | None]:
            per_rank = _counter_per_rank(view.samples(NAME_TABLE[field][0].name))
            total = _sum_all(per_rank, ranks) if per_rank else None
            note(field, total)
            return per_rank, total

        running_by_rank, running = gauge("requests_running")
        waiting_by_rank, waiting = gauge("requests_waiting")
        preempt_by_rank, preemptions = counter("preemptions_total")
        prompt_by_rank, prompt = counter("prompt_tokens_total")
        gen_by_rank, generation = counter("generation_tokens_total")
        _, finished = counter("requests_finished_total")

        def histogram(field: str) -> tuple[Histogram | None, MetricName | None]:
            for alias in NAME_TABLE[field]:
                h = _merged_histogram(view, alias.name, ranks)
                if h is not None:
                    return h, alias
            note(field, None)
            return None, None

        ttft, ttft_alias = histogram("ttft")
        tpot, tpot_alias = histogram("tpot")
        e2e, _ = histogram("e2e")
        queue_time, _ = histogram("queue_time")

        start_values = [s.value for s in view.samples(_PROCESS_START) if not math.isnan(s.value)]
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

        missing.extend(f'{_MODEL_LABEL}="{m}" (ignored)' for m in others)
        return EngineSnapshot(
            engine=self.engine,
            model=chosen,
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
            missing=tuple(missing),
        )


# --- reshaping helpers -------------------------------------------------------------------------------


def _choose_model(exposition: Exposition, model: str | None) -> tuple[str | None, list[str]]:
    """Pick the snapshot's model and list the others, in exposition order.

    Example::

        vllm:num_requests_running{engine="0",model_name="a"} 1
        vllm:num_requests_running{engine="0",model_name="b"} 2
        model=None → ("a", ["b"])      model="b" → ("b", ["a"])      no model_name labels → (None, [])
    """
    seen: list[str] = []
    for name, samples in exposition.items():
        if name not in WANTED_SAMPLE_NAMES:
            continue
        for s in samples:
            m = s.labels.get(_MODEL_LABEL)
            if m is not None and m not in seen:
                seen.append(m)
    chosen = model if model is not None else (seen[0] if seen else None)
    return chosen, [m for m in seen if m != chosen]


class _ModelView:
    """The exposition restricted to one model: samples with that ``model_name`` or none at all."""

    def __init__(self, exposition: Exposition, model: str | None) -> None:
        self._exposition = exposition
        self._model = model

    def samples(self, name: str) -> list[Sample]:
        return [s for s in self._exposition.get(name, ()) if s.labels.get(_MODEL_LABEL, self._model) == self._model]

    def ranks(self) -> tuple[str, ...]:
        """Every rank (``engine`` label) on the model's samples, ``"0"`` for unlabelled ones.

        ``process_start_time_seconds`` and an unlabelled ``cache_config_info`` name no rank.
        """
        found: set[str] = set()
        for name in WANTED_SAMPLE_NAMES:
            if name == _PROCESS_START:
                continue
            for s in self.samples(name):
                if name == _CACHE_CONFIG and _RANK_LABEL not in s.labels:
                    continue
                found.add(_rank(s))
        return tuple(sorted(found, key=_rank_order))


def _rank(sample: Sample) -> str:
    return sample.labels.get(_RANK_LABEL, _DEFAULT_RANK)


def _rank_order(rank: str) -> tuple[int, int, str]:
    return (0, int(rank), "") if rank.isdigit() else (1, 0, rank)


def _gauge_per_rank(samples: Iterable[Sample]) -> dict[str, float | None]:
    """Gauge value per rank: the max over the rank's samples (``pid`` series), NaN ignored.

    Example (vLLM 0.10, ``--api-server-count 2``)::

        vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="101"} 0.42
        vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="102"} 0.0
        vllm:kv_cache_usage_perc{engine="1",model_name="m",pid="101"} NaN
        → {"0": 0.42, "1": None}
    """
    out: dict[str, float | None] = {}
    for s in samples:
        r = _rank(s)
        prev = out.get(r)
        if math.isnan(s.value):
            out.setdefault(r, None)
        else:
            out[r] = s.value if prev is None else max(prev, s.value)
    return out


def _counter_per_rank(samples: Iterable[Sample]) -> dict[str, float | None]:
    """Counter value per rank: the sum over the rank's other labels; any NaN makes the rank unknown.

    Example::

        vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 287.0
        vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 13.0
        vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 5.0
        → {"0": 300.0, "1": 5.0}
    """
    values: dict[str, list[float]] = {}
    for s in samples:
        values.setdefault(_rank(s), []).append(s.value)
    return {r: None if any(math.isnan(v) for v in vs) else math.fsum(vs) for r, vs in values.items()}


def _sum_all(per_rank: Mapping[str, float | None], ranks: Sequence[str]) -> float | None:
    """Sum over every rank of the rank set; unknown when any rank is missing or unknown.

    Example: ``({"0": 3.0, "1": 4.0}, ("0", "1")) → 7.0``; ``({"0": 3.0}, ("0", "1")) → None``.
    """
    values = [per_rank.get(r) for r in ranks]
    if not values or any(v is None for v in values):
        return None
    return math.fsum(v for v in values if v is not None)


def _valid_ratio(value: float | None) -> float | None:
    """A usage fraction in [0, 1] (within 1e-6, then clamped), else unknown: ``1.2 → None``."""
    if value is None or not -_USAGE_TOLERANCE <= value <= 1 + _USAGE_TOLERANCE:
        return None
    return min(max(value, 0.0), 1.0)


def _weighted_usage(
    usage: Mapping[str, float | None], capacity: Mapping[str, float | None], ranks: Sequence[str]
) -> float | None:
    """KV usage over ranks: capacity-weighted mean, or the plain mean if any capacity is unknown.

    Example: usage ``{"0": 0.5, "1": 0.1}``, capacity ``{"0": 30000, "1": 10000}`` →
    ``(0.5·30000 + 0.1·10000) / 40000 = 0.4``; capacity ``{"0": 30000}`` only → ``(0.5 + 0.1) / 2 = 0.3``.
    """
    us = [usage.get(r) for r in ranks]
    if not us or any(u is None for u in us):
        return None
    known_us = [u for u in us if u is not None]
    caps = [capacity.get(r) for r in ranks]
    known_caps = [c for c in caps if c is not None]
    if len(known_caps) == len(caps) and math.fsum(known_caps) > 0:
        return math.fsum(u * c for u, c in zip(known_us, known_caps, strict=True)) / math.fsum(known_caps)
    return math.fsum(known_us) / len(known_us)


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


def _capacity_from_labels(labels: Mapping[str, str]) -> float | None:
    """KV capacity in tokens from ``vllm:cache_config_info`` labels (``vllm/config/cache.py``).

    Example::

        {kv_cache_size_tokens="432000", num_gpu_blocks="27000", block_size="16"} → 432000.0  (0.33)
        {num_gpu_blocks="2452", block_size="16"}                                → 39232.0   (0.11)
        {num_gpu_blocks="None", block_size="16"}                                → None (before profiling)
    """
    direct = _positive_number(labels.get("kv_cache_size_tokens"))
    if direct is not None:
        return direct
    blocks = _positive_number(labels.get("num_gpu_blocks"))
    block_size = _positive_number(labels.get("block_size"))
    if blocks is None or block_size is None:
        return None
    return blocks * block_size


def _capacity_per_rank(
    samples: Sequence[Sample], ranks: Sequence[str]
) -> tuple[dict[str, float | None], dict[str, str]]:
    """Capacity per rank and the engine config (labels of the lowest rank's info sample).

    Example (two DP ranks)::

        vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="2000",...} 1.0
        vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="None",...} 1.0
        → ({"0": 32000.0, "1": None}, {"block_size": "16", "engine": "0", "num_gpu_blocks": "2000", ...})

    An info sample without ``engine`` (vLLM 0.8.x) applies to every rank in ``ranks`` (or to ``"0"``).
    """
    if not samples:
        return {}, {}
    by_rank: dict[str, Sample] = {}
    unranked: Sample | None = None
    for s in samples:
        if _RANK_LABEL in s.labels:
            by_rank.setdefault(s.labels[_RANK_LABEL], s)
        elif unranked is None:
            unranked = s
    if unranked is not None:
        for r in ranks or (_DEFAULT_RANK,):
            by_rank.setdefault(r, unranked)
    capacity = {r: _capacity_from_labels(s.labels) for r, s in by_rank.items()}
    lowest = sorted(by_rank, key=_rank_order)[0]
    return capacity, dict(by_rank[lowest].labels)


def _histogram_per_rank(view: _ModelView, base: str) -> dict[str, Histogram | None]:
    """Cumulative histogram per rank from ``<base>_bucket{le}``, ``<base>_count`` and ``<base>_sum``.

    Bounds are read from the ``le`` labels (vLLM lets operators change them), sorted, ``+Inf`` last.
    Buckets of equal ``le`` within a rank are summed (extra labels such as ``pid``). ``_count`` falls back
    to the ``+Inf`` bucket. A rank is unknown (``None``) when it lacks a ``+Inf`` bucket or a ``_sum``, has
    an unparseable ``le``, or any NaN.

    Example::

        vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 3.0
        vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
        vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
        vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.25
        → {"0": Histogram(buckets=((0.5, 3.0), (inf, 4.0)), count=4.0, sum=1.25)}
    """
    buckets: dict[str, dict[float, float]] = {}
    bad: set[str] = set()
    for s in view.samples(base + "_bucket"):
        r = _rank(s)
        try:
            le = float(s.labels["le"])
        except (KeyError, ValueError):
            bad.add(r)
            continue
        if math.isnan(le) or math.isnan(s.value):
            bad.add(r)
            continue
        per_le = buckets.setdefault(r, {})
        per_le[le] = per_le.get(le, 0.0) + s.value
    counts = _counter_per_rank(view.samples(base + "_count"))
    sums = _counter_per_rank(view.samples(base + "_sum"))
    out: dict[str, Histogram | None] = {}
    for r in set(buckets) | bad | set(counts) | set(sums):
        per_le = buckets.get(r, {})
        total = sums.get(r)
        if r in bad or math.inf not in per_le or total is None or (r in counts and counts[r] is None):
            out[r] = None
            continue
        count = counts.get(r)
        pairs = tuple(sorted(per_le.items()))
        out[r] = Histogram(buckets=pairs, count=count if count is not None else per_le[math.inf], sum=total)
    return out


def _merged_histogram(view: _ModelView, base: str, ranks: Sequence[str]) -> Histogram | None:
    """The histogram summed over every rank (:meth:`Histogram.merge`); unknown when the family is absent,
    any rank lacks a usable histogram, or the ranks' bounds differ."""
    per_rank = _histogram_per_rank(view, base)
    if not per_rank:
        return None
    hs = [per_rank.get(r) for r in ranks]
    if not hs or any(h is None for h in hs):
        return None
    try:
        return Histogram.merge([h for h in hs if h is not None])
    except ValueError:
        return None


# --- catalog entry (advisor.engines.catalog) -----------------------------------------------------------------

from advisor.engines import reference as _ref  # noqa: E402
from advisor.engines.catalog import (  # noqa: E402
    CatalogEntry,
    KVAccounting,
    LatencyBuckets,
    PromQLHandling,
    Wrapper,
)
from advisor.engines.common import Series as _Series  # noqa: E402
from advisor.engines.flags import FLAGS as _FLAGS  # noqa: E402

_REFERENCE_CATALOG: Final = "shared/reference/engine-metrics-catalog.md"

CATALOG_ENTRIES: Final = (
    CatalogEntry(
        engine="vllm",
        title="vLLM V0 and V1",
        prefixes=("vllm:",),
        name_table={
            key: tuple(_Series(m.name, m.kind, m.versions, m.source, is_itl=m.is_itl) for m in aliases)
            for key, aliases in NAME_TABLE.items()
        },
        units={
            "kv_cache_usage_ratio": "fraction 0–1 (despite _perc)",
            "kv_cache_capacity_tokens": "tokens (cache_config_info labels)",
            "ttft": "seconds",
            "tpot": "seconds",
            "e2e": "seconds",
            "queue_time": "seconds",
        },
        labels={"model": (_MODEL_LABEL,), "rank": (_RANK_LABEL,), "process": ("pid",)},
        buckets=LatencyBuckets(
            _ref.VLLM_TTFT,
            _ref.VLLM_ITL,
            f"{_REFERENCE_CATALOG} §1.2 (vllm/v1/metrics/loggers.py, V1 0.8.5 → 0.33)",
            (_ref.VLLM_TTFT_BEFORE_0_8_5, "vLLM before 0.8.5 stops its TTFT buckets at 10 s"),
            (_ref.VLLM_TPOT_BEFORE_0_8_5, "vLLM before 0.8.5 stops its TPOT buckets at 2.5 s"),
        ),
        promql=PromQLHandling(model_label=_MODEL_LABEL, collapse=("pid",)),
        flags=_FLAGS["vllm"],
        kv=KVAccounting(
            usage="kv_cache_usage_perc (gpu_cache_usage_perc before 0.9): used blocks ÷ GPU blocks, 0–1",
            capacity="cache_config_info: kv_cache_size_tokens (0.33), else num_gpu_blocks × block_size",
        ),
        adapter=VLLMAdapter,
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
                "re-exports vLLM's families through Ray's metrics agent with a ray_ prefix (ray_vllm:…); "
                "the adapter does not read the prefixed names: scrape the engine or relabel; engine: vllm",
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
