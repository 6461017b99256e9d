"""Immutable domain values shared by every layer.

Nothing here performs I/O or reads the clock. Times are unix seconds passed in by the caller.

Shapes:

* :class:`Sample` — one exposition line: sample name, labels, value.
* :data:`Exposition` — every sample the source kept from one scrape, keyed by sample name
  (``vllm:time_to_first_token_seconds_bucket`` and ``..._count`` are separate keys).
* :class:`Histogram` — one cumulative histogram: ``buckets`` as ``(le, cumulative count)`` sorted by
  ``le`` with ``+Inf`` last, plus ``count`` and ``sum``.
* :class:`EngineSnapshot` — what an engine adapter makes of one exposition: the engine-neutral
  quantities the advisor reasons about. ``None`` always means *unknown* (the engine does not expose it),
  never zero.
"""

from __future__ import annotations

import datetime
import math
from array import array
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass, field, fields
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, ClassVar, Final, TypeVar


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample line of the Prometheus text format.

    Attributes:
        name: the sample name as exposed (``vllm:num_preemptions_total``).
        labels: label name → value.
        value: the sample value (may be NaN or ±Inf as the text format allows).
    """

    name: str
    labels: Mapping[str, str]
    value: float


Exposition = Mapping[str, Sequence[Sample]]
"""Samples of one scrape keyed by sample name."""


_T = TypeVar("_T")
_first = itemgetter(0)
_second = itemgetter(1)


_BOUNDS: dict[tuple[float, ...], tuple[float, ...]] = {}
"""Interned bucket bounds: every histogram of one layout holds one tuple (an engine has a handful of layouts)."""
_BOUNDS_LIMIT: Final = 4096
"""Layouts interned at most; past that (a target inventing bounds) a histogram keeps its own tuple."""


_INTERNED_IDS: dict[int, tuple[float, ...]] = {}
"""``id(t)`` → ``t`` for every tuple ``t`` in :data:`_BOUNDS` (which holds it forever, so its id is never reused):
bounds already interned — every histogram built from another's :meth:`Histogram.bounds`, as every delta and window
sum is — are recognised by identity, without hashing ~20 floats."""


_WIRE_LAYOUTS: dict[type, tuple[tuple[str, ...], attrgetter[Any]]] = {}
"""Per frozen dataclass sent through a pipe: its field names in order, and a getter of all their values."""


def _wire_layout(cls: type) -> tuple[tuple[str, ...], attrgetter[Any]]:
    layout = _WIRE_LAYOUTS.get(cls)
    if layout is None:
        names = tuple(f.name for f in fields(cls))
        layout = _WIRE_LAYOUTS[cls] = (names, attrgetter(*names))
    return layout


def reduce_frozen(obj: Any) -> tuple[Any, ...]:
    """``__reduce__`` for a frozen slots dataclass of two or more fields, whose pickle is the class and one tuple of
    its field values in order, rebuilt by :func:`rebuild_frozen` — rather than the dataclass default (a state list
    restored one ``object.__setattr__`` per field after a ``dataclasses.fields`` call). Measured on the parent of
    ``run --workers 2`` (issue 15, vLLM 0.33 page): unpickling a scrape result takes about half the time.

    Example: ``pickle.loads(pickle.dumps(snap)) == snap`` for any :class:`EngineSnapshot`, field by field."""
    return (rebuild_frozen, (type(obj), _wire_layout(type(obj))[1](obj)))


def rebuild_frozen(cls: type[_T], values: tuple[Any, ...]) -> _T:
    """The instance of frozen dataclass ``cls`` whose fields hold ``values`` in field order (no ``__init__``, no
    ``__post_init__``: the values are those of an instance that was valid). Raises ``ValueError`` when the count
    differs from the class's fields (a pickle of another version of the class)."""
    names = _wire_layout(cls)[0]
    if len(values) != len(names):
        raise ValueError(f"{cls.__name__}: {len(values)} values for {len(names)} fields")
    obj = cls.__new__(cls)
    deque(map(object.__setattr__, repeat(obj, len(names)), names, values), maxlen=0)
    return obj


def _histogram_from_wire(bounds: tuple[float, ...], counts: array[float], count: float, sum: float) -> Histogram:
    """:meth:`Histogram.__reduce__`'s rebuild: the unpickled ``counts`` array is the histogram's own."""
    h = Histogram.__new__(Histogram)
    h._init(bounds, counts, count, sum)
    return h


def _interned(bounds: tuple[float, ...]) -> tuple[float, ...]:
    """The one tuple of :data:`_BOUNDS` equal to ``bounds`` (interned now if there is none and room is left)."""
    if _INTERNED_IDS.get(id(bounds)) is bounds:
        return bounds
    known = _BOUNDS.get(bounds)
    if known is not None:
        return known
    if len(_BOUNDS) < _BOUNDS_LIMIT and all(b == b for b in bounds):  # NaN never equals itself: not a key
        _BOUNDS[bounds] = bounds
        _INTERNED_IDS[id(bounds)] = bounds
    return bounds


@dataclass(frozen=True)
class _HistogramFields:
    """The fields :class:`Histogram` shows ``dataclasses`` (``fields``, ``asdict``, ``replace``)."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


class Histogram:
    """A cumulative Prometheus histogram. Immutable.

    Attributes:
        buckets: ``(upper bound, cumulative count)`` pairs sorted by bound; the last bound is ``+Inf``.
        count: total observations (equals the ``+Inf`` bucket).
        sum: sum of observed values, in the histogram's unit (seconds for latency families).

    Stored packed, since a fleet of thousands of targets keeps ~12 snapshots of 3–4 histograms per target: the
    bounds as one tuple shared by every histogram of that layout, the counts as one ``array('d')`` (8 bytes a
    count, rather than a pair tuple and a float object per bucket: ~300 bytes a histogram instead of ~1,900);
    :attr:`buckets` builds the pairs when read. To ``dataclasses`` it is the frozen dataclass it was
    (``buckets``, ``count``, ``sum``): ``asdict`` and ``replace`` work as before.
    """

    __dataclass_fields__: ClassVar[dict[str, Any]] = _HistogramFields.__dataclass_fields__
    __slots__ = ("_bounds", "_counts", "count", "sum")
    _bounds: tuple[float, ...]
    _counts: array[float]
    count: float
    sum: float

    def __init__(self, buckets: Iterable[tuple[float, float]], count: float, sum: float) -> None:
        pairs = tuple(buckets)
        self._init(tuple(map(_first, pairs)), array("d", map(_second, pairs)), count, sum)

    def _init(self, bounds: tuple[float, ...], counts: array[float], count: float, sum: float) -> None:
        set_ = object.__setattr__
        set_(self, "_bounds", _interned(bounds))
        set_(self, "_counts", counts)
        set_(self, "count", count)
        set_(self, "sum", sum)

    @classmethod
    def from_counts(cls, bounds: tuple[float, ...], counts: Iterable[float], count: float, sum: float) -> Histogram:
        """A histogram of ``bounds`` (as :meth:`bounds` gives them) and one cumulative count per bound."""
        h = cls.__new__(cls)
        h._init(bounds, array("d", counts), count, sum)
        return h

    @property
    def buckets(self) -> tuple[tuple[float, float], ...]:
        """``(upper bound, cumulative count)`` pairs, ``+Inf`` last."""
        return tuple(zip(self._bounds, self._counts, strict=True))

    def bounds(self) -> tuple[float, ...]:
        """The bucket upper bounds, ``+Inf`` included."""
        return self._bounds

    def counts(self) -> array[float]:
        """The cumulative count of each bound, in :meth:`bounds` order (never modify it)."""
        return self._counts

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Histogram):
            return NotImplemented
        return self.count == other.count and self.sum == other.sum and self.buckets == other.buckets

    def __hash__(self) -> int:
        return hash((self._bounds, tuple(self._counts), self.count, self.sum))

    def __repr__(self) -> str:
        return f"Histogram(buckets={self.buckets!r}, count={self.count!r}, sum={self.sum!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # bounds (one interned tuple: pickled once per message) and the packed counts (one bytes copy), not pairs
        return (_histogram_from_wire, (self._bounds, self._counts, self.count, self.sum))

    @staticmethod
    def merge(histograms: Sequence[Histogram]) -> Histogram | None:
        """Sum histograms that share one set of bounds (DP ranks of one engine).

        Returns ``None`` for an empty input. Raises ``ValueError`` when the bounds differ, since adding
        buckets of different bounds silently changes every quantile.
        """
        if not histograms:
            return None
        if len(histograms) == 1:  # one rank (no data parallelism): the sum is the histogram itself
            return histograms[0]
        first = histograms[0].bounds()
        for h in histograms[1:]:
            if h.bounds() != first:
                raise ValueError(f"histogram bounds differ: {first} vs {h.bounds()}")
        return Histogram.from_counts(
            first,
            map(math.fsum, zip(*(h.counts() for h in histograms), strict=True)),
            count=math.fsum(h.count for h in histograms),
            sum=math.fsum(h.sum for h in histograms),
        )


@dataclass(frozen=True, slots=True)
class RankValues:
    """One data-parallel rank's own values behind a target (vLLM ``engine`` label).

    All counts are raw values as the engine reports them; ``None`` is unknown.
    """

    rank: str
    kv_cache_usage_ratio: float | None = None
    kv_cache_capacity_tokens: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready mapping of every field."""
        return {
            "rank": self.rank,
            "kv_cache_usage_ratio": self.kv_cache_usage_ratio,
            "kv_cache_capacity_tokens": self.kv_cache_capacity_tokens,
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "preemptions_total": self.preemptions_total,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
        }


@dataclass(frozen=True, slots=True)
class PoolReading:
    """One pool other than the KV-token pool, or a count of slots, behind one target.

    A request can be refused by any pool it needs: SGLang hybrid models keep a sliding-window KV pool
    (``swa``) and a Mamba/linear-attention state pool (``mamba``) beside the full-attention KV pool;
    llama.cpp runs at most ``--parallel`` requests at once (``slots``). Each saturates for its own reason and
    is cured by its own dial, so the snapshot keeps it apart from ``kv_cache_usage_ratio``.

    Attributes:
        pool: ``swa``, ``mamba`` or ``slots``.
        usage_ratio: fraction of the pool held, 0–1 (``None`` unknown); across DP ranks the highest rank's.
        used: units held (tokens for ``swa``, states for ``mamba``, busy slots for ``slots``), summed over
            ranks; ``None`` unknown.
        capacity: the pool's size in the same unit, summed over ranks; ``None`` when the engine does not
            expose it (llama.cpp's ``--parallel`` is not exported: the deployment's ``max_num_seqs`` stands in).
        unit: ``tokens``, ``states`` or ``slots``.
        source: the exposed family read (``sglang:mamba_usage``).
    """

    pool: str
    usage_ratio: float | None = None
    used: float | None = None
    capacity: float | None = None
    unit: str = "tokens"
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready mapping of every field."""
        return {
            "pool": self.pool,
            "usage_ratio": self.usage_ratio,
            "used": self.used,
            "capacity": self.capacity,
            "unit": self.unit,
            "source": self.source,
        }


SNAPSHOT_COUNT_FIELDS: Final = (
    "requests_running",
    "requests_waiting",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "requests_finished_total",
)
""":class:`EngineSnapshot`'s request gauges and token/preemption counters: the engine's counts of its load."""
SNAPSHOT_REQUEST_LENGTH_FIELDS: Final = (
    "request_prompt_tokens_sum",
    "request_prompt_tokens_count",
    "request_generation_tokens_sum",
    "request_generation_tokens_count",
)
""":class:`EngineSnapshot`'s per-request length histograms' sums and counts: (sum, count) of the prompt's, then of the
generation's."""
SNAPSHOT_SECONDS_FIELDS: Final = ("generation_seconds_total", "prompt_seconds_total")
""":class:`EngineSnapshot`'s cumulative seconds counters (llama.cpp's)."""
SNAPSHOT_HISTOGRAM_FIELDS: Final = ("ttft", "tpot", "e2e", "queue_time")
""":class:`EngineSnapshot`'s latency histograms (seconds)."""
SNAPSHOT_READING_FIELDS: Final = (
    "kv_cache_usage_ratio",
    *SNAPSHOT_COUNT_FIELDS,
    *SNAPSHOT_HISTOGRAM_FIELDS,
    *SNAPSHOT_SECONDS_FIELDS,
)
""":class:`EngineSnapshot`'s readings of the engine's load — not its configuration (``kv_cache_capacity_tokens``,
``engine_config``, ``process_start_time_seconds`` come from info series and labels, whose value is a constant 1)."""


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The engine-neutral reading of one scrape of one target.

    Units: ratios 0–1, counts of requests, cumulative token and preemption counters, seconds for
    histograms. Counters are cumulative since the engine process started (they reset on restart).

    Attributes:
        engine: adapter id (``vllm``).
        model: served model name, or ``None`` when the engine has no model label.
        kv_cache_usage_ratio: fraction of the KV pool held by requests; evictable cached blocks count as
            free (vLLM ``kv_cache_usage_perc``). Across DP ranks, the capacity-weighted mean (plain mean when
            capacities are unknown).
        kv_cache_capacity_tokens: the pool in tokens as the engine reports it, summed over DP ranks.
        requests_running / requests_waiting: latest gauges summed over DP ranks.
        preemptions_total / prompt_tokens_total / generation_tokens_total / requests_finished_total:
            cumulative counters summed over DP ranks.
        ttft / tpot: cumulative histograms (seconds) summed over ranks; ``ttft_source`` and
            ``tpot_source`` name the engine family used; ``tpot_is_itl`` is true when the engine has no
            per-request TPOT histogram and inter-token latency stands in.
        e2e / queue_time: request latency and queue time histograms where exposed.
        process_start_time_seconds: engine process start (unix s), for restart detection.
        generation_seconds_total: cumulative seconds the engine's sequences spent generating, summed over sequences
            (llama.cpp ``tokens_predicted_seconds_total``: each finished request's time from its first to its last
            token); with ``generation_tokens_total`` it gives the mean time per generated token where the engine has
            no TPOT histogram. ``None``: not exposed.
        prompt_seconds_total: cumulative seconds the engine spent processing prompts (llama.cpp
            ``prompt_seconds_total``); its rate is the prefill's share of the engine's time. ``None``: not exposed.
        spec_drafts_total / spec_draft_tokens_total / spec_accepted_tokens_total: speculative decoding's cumulative
            counters summed over ranks (vLLM V1 and llama.cpp ``spec_decode_num_drafts_total``,
            ``…_num_draft_tokens_total``, ``…_num_accepted_tokens_total``): verification steps of one sequence that
            carried draft tokens, the draft tokens proposed, and those the target model accepted. ``None``: not
            exposed (the engine runs no speculation, or predates the counters).
        spec_accepted_tokens_by_position: ``…_num_accepted_tokens_per_pos_total{position}`` summed over ranks, index
            = draft position (0 = the first draft token); ``()`` when not exposed. Position ``i`` accepted means
            every earlier one was, so ``accepted[i] ÷ drafts`` is the chance a draft yields ``i + 1`` tokens or more.
        spec_accept_length: the engine's own recent mean of tokens a verification round yields per sequence, the
            bonus token included, for engines that keep gauges instead of counters (SGLang ``spec_accept_length``,
            over its last logging interval; 0 without speculation); the mean over DP ranks. ``None``: not exposed.
        longest_sequence_tokens: the longest sequence (prompt and generated tokens in one slot) the engine has held
            since it started (llama.cpp ``n_tokens_max``, a running maximum it types as a counter): a request that
            long was served. ``None``: not exposed.
        requests_paused: requests the engine paused in its last iteration — their KV blocks freed to make room,
            to be recomputed later — which TensorRT-LLM does only under its ``MAX_UTILIZATION`` capacity scheduler
            (``GUARANTEED_NO_EVICT``, the default, "guarantee[s] that a started request is never paused",
            triton_backend docs/model_config.md): ``trtllm_num_paused_requests``, the Triton backend's
            ``nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests"}``. ``None``:
            not exposed (SGLang's ``num_paused_reqs`` counts a weight update's pauses, not this).
        request_prompt_tokens_sum / request_prompt_tokens_count / request_generation_tokens_sum /
            request_generation_tokens_count: the ``_sum`` (tokens) and ``_count`` (requests) of the engine's
            per-request length histograms, summed over ranks: one observation per request, so each sum ÷ its count is
            a mean length over the same requests (vLLM ``vllm:request_prompt_tokens`` / ``request_generation_tokens``,
            observed when a request finishes, with ``request_success``; TGI ``tgi_request_input_length`` at
            validation and ``tgi_request_generated_tokens`` at success). The token counters cannot give that mean
            on those engines: vLLM counts a prompt at its first token and keeps a client-aborted request's tokens out
            of ``request_success``. ``None``: not exposed.
        spec_verify_tokens: tokens the target model scores per sequence per round (SGLang
            ``spec_num_draft_tokens``; ``spec_num_steps`` + 1 for a chain draft where only the steps are exposed);
            ``None``: not exposed or no speculation.
        engine_config: the engine's self-reported configuration (vLLM ``cache_config_info`` labels).
        ranks: per-rank values when more than one rank reports.
        pools: pools other than the KV-token pool (SGLang ``swa``/``mamba``, llama.cpp ``slots``), each with
            its own saturation meaning (:class:`PoolReading`); ``kv_cache_usage_ratio`` is the KV pool alone.
        requests_waiting_by_reason: waiting requests split by why they wait (vLLM 0.20+
            ``vllm:num_requests_waiting_by_reason{reason}``: ``capacity`` = the scheduler's ``waiting`` queue, not
            yet admitted for want of a step's token budget, a sequence slot or KV blocks; ``deferred`` = its
            ``skipped_waiting`` queue: a LoRA adapter slot, a structured-output grammar, a remote KV load or a paused
            streaming input, ``vllm/v1/core/sched/scheduler.py``), summed over ranks; empty when not exposed.
        disaggregation_queues: prefill/decode-disaggregation queues in requests, summed over ranks (SGLang
            ``prefill_bootstrap``, ``prefill_prealloc``, ``prefill_inflight``, ``decode_prealloc``,
            ``decode_transfer``); empty when the engine is not disaggregated or does not expose them.
        kv_cache_hybrid: the engine reports several KV-cache groups (hybrid attention + Mamba/SWA models:
            vLLM's ``cache_config_info`` ``block_size`` is then the minimum over the groups, so
            ``num_gpu_blocks × block_size`` is not the pool); ``None`` unknown.
        ranks_excluded: DP ranks left out of the aggregates because their values are impossible or unknown
            while other ranks report, each as ``"<rank>: <why>"``; the aggregates cover the other ranks.
        replicas: names of the separate engines behind this one target (Ray Serve ``ReplicaId``, Triton model
            ``version``) when there are several, each also a rank; ``()`` = one engine.
        missing: quantities the adapter looked for and did not find.
    """

    engine: str
    model: str | None = None
    kv_cache_usage_ratio: float | None = None
    kv_cache_capacity_tokens: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    requests_finished_total: float | None = None
    ttft: Histogram | None = None
    ttft_source: str | None = None
    tpot: Histogram | None = None
    tpot_source: str | None = None
    tpot_is_itl: bool = False
    e2e: Histogram | None = None
    queue_time: Histogram | None = None
    process_start_time_seconds: float | None = None
    engine_config: Mapping[str, str] = field(default_factory=dict)
    ranks: tuple[RankValues, ...] = ()
    pools: tuple[PoolReading, ...] = ()
    requests_waiting_by_reason: Mapping[str, float] = field(default_factory=dict)
    disaggregation_queues: Mapping[str, float] = field(default_factory=dict)
    kv_cache_hybrid: bool | None = None
    ranks_excluded: tuple[str, ...] = ()
    replicas: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    # out of the repr: tests/engines/test_snapshot_equality.py holds every adapter to the reference code's snapshots
    # by their repr (written before these fields existed); equality still compares them
    generation_seconds_total: float | None = field(default=None, repr=False)
    prompt_seconds_total: float | None = field(default=None, repr=False)
    spec_drafts_total: float | None = field(default=None, repr=False)
    spec_draft_tokens_total: float | None = field(default=None, repr=False)
    spec_accepted_tokens_total: float | None = field(default=None, repr=False)
    spec_accepted_tokens_by_position: tuple[float | None, ...] = field(default=(), repr=False)
    spec_accept_length: float | None = field(default=None, repr=False)
    spec_verify_tokens: float | None = field(default=None, repr=False)
    longest_sequence_tokens: float | None = field(default=None, repr=False)
    requests_paused: float | None = field(default=None, repr=False)
    request_prompt_tokens_sum: float | None = field(default=None, repr=False)
    request_prompt_tokens_count: float | None = field(default=None, repr=False)
    request_generation_tokens_sum: float | None = field(default=None, repr=False)
    request_generation_tokens_count: float | None = field(default=None, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        # one tuple of field values (a worker's result crossing a pipe, advisor.workers): reduce_frozen
        return reduce_frozen(self)


@dataclass(frozen=True, slots=True)
class TimedSnapshot:
    """A snapshot with the unix time it was scraped at, and the target it came from; ``duplicate_series``: samples
    the page repeated (a series already seen; the first kept, :attr:`advisor.observe.Observation.duplicate_series`),
    which lowers the confidence of what is read from it; ``requests_running_peak``: the most running requests of
    this snapshot and of the snapshots a history thinned into it since the point before (``None``: this snapshot's
    own, :func:`advisor.tracker.record`), so a window's peak survives the thinning."""

    target: str
    timestamp: float
    snapshot: EngineSnapshot
    duplicate_series: int = 0
    requests_running_peak: float | None = None

    @property
    def running_peak(self) -> float | None:
        """The most running requests this point stands for: :attr:`requests_running_peak`, else the snapshot's."""
        own = self.snapshot.requests_running
        peak = self.requests_running_peak
        if peak is None or (own is not None and math.isfinite(own) and own >= peak):
            return own
        return peak


@dataclass(frozen=True, slots=True)
class Recommendation:
    """An open (or resolved) recommendation: one dial turn for one deployment.

    Since issue 13 a recommendation is an *incident*: one per deployment and ``problem``; ``rule``/``dial``/…
    describe its ``suggested`` (best) turn, ``alternatives`` the other turns ranked (each a mapping with ``rule``,
    ``dial``, ``action``, ``current``, ``suggested``, ``flag``, ``predicted_effect``, ``confidence`` and
    ``why_rank``), ``withheld`` the turns a rule's own evidence contradicted (``rule``, ``dial``, ``reason``).
    Records written before issue 13 read with ``problem`` empty (the lifecycle maps their rule to its problem)
    and no alternatives.

    ``id`` is stable while the recommendation stays open and doubles as the notification fingerprint.
    ``predicted_effect`` maps a quantity to ``{"before": x, "after": y}``; ``evidence`` maps metric names
    to the values seen, with ``window_seconds``. Times are unix seconds.
    """

    id: str
    deployment: str
    rule: str
    dial: str
    action: str
    current: Any
    suggested: Any
    flag: str | None
    severity: str
    confidence: float
    summary: str
    description: str
    runbook: str
    opened_at: float
    predicted_effect: Mapping[str, Mapping[str, Any]]
    evidence: Mapping[str, Any]
    rank: int = 0
    resolved_at: float | None = None
    problem: str = ""
    alternatives: tuple[Mapping[str, Any], ...] = ()
    withheld: tuple[Mapping[str, Any], ...] = ()
    updated_at: float | None = None
    resolved_reason: str = ""
    """Why it resolved, when not because its condition cleared: ``removed`` (a reload removed its deployment or
    every rule of its problem; :data:`advisor.rules.lifecycle.RESOLVED_REMOVED`) or ``escalated`` (a ``warning``
    incident capped for low confidence reopened as ``critical``; :data:`advisor.rules.lifecycle.RESOLVED_ESCALATED`).
    Notified (the ``resolved_reason`` annotation) and kept in the outbox (:meth:`to_record`); empty otherwise."""

    def dial_values(self) -> list[tuple[str, Any]]:
        """``(dial, suggested)`` of the suggested turn, then of each alternative, best first.

        Example: an incident suggesting ``gpu_memory_utilization`` 0.9 with a replicas alternative of 2 →
        ``[("gpu_memory_utilization", 0.9), ("replicas", 2)]``.
        """
        out: list[tuple[str, Any]] = [(self.dial, self.suggested)]
        for a in self.alternatives:
            dial = a.get("dial")
            if isinstance(dial, str):
                out.append((dial, a.get("suggested")))
        return out

    def to_record(self) -> dict[str, Any]:
        """Every field, times as unix seconds: the lossless form the outbox persists."""
        return {
            "id": self.id,
            "deployment": self.deployment,
            "rule": self.rule,
            "dial": self.dial,
            "action": self.action,
            "current": self.current,
            "suggested": self.suggested,
            "flag": self.flag,
            "severity": self.severity,
            "confidence": self.confidence,
            "summary": self.summary,
            "description": self.description,
            "runbook": self.runbook,
            "opened_at": self.opened_at,
            "predicted_effect": {k: dict(v) for k, v in self.predicted_effect.items()},
            "evidence": dict(self.evidence),
            "rank": self.rank,
            "resolved_at": self.resolved_at,
            "problem": self.problem,
            "alternatives": [dict(a) for a in self.alternatives],
            "withheld": [dict(w) for w in self.withheld],
            "updated_at": self.updated_at,
            "resolved_reason": self.resolved_reason,
        }

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> Recommendation:
        """Inverse of :meth:`to_record`; also reads :meth:`as_dict`'s form (the state file's), whose unix
        times are ``opened_at_seconds`` (and whose resolved recommendations are never persisted).

        Raises:
            KeyError, TypeError, ValueError: a field is missing or of the wrong type.
        """
        opened = d["opened_at_seconds"] if "opened_at_seconds" in d else d["opened_at"]
        resolved = None if "opened_at_seconds" in d else d.get("resolved_at")
        return cls(
            id=str(d["id"]),
            deployment=str(d["deployment"]),
            rule=str(d["rule"]),
            dial=str(d["dial"]),
            action=str(d["action"]),
            current=d["current"],
            suggested=d["suggested"],
            flag=None if d["flag"] is None else str(d["flag"]),
            severity=str(d["severity"]),
            confidence=_finite_number("confidence", d["confidence"]),
            summary=str(d["summary"]),
            description=str(d["description"]),
            runbook=str(d["runbook"]),
            opened_at=_unix_time("opened_at", opened),
            predicted_effect=dict(d["predicted_effect"]),
            evidence=dict(d["evidence"]),
            rank=int(d.get("rank", 0)),
            resolved_at=None if resolved is None else _unix_time("resolved_at", resolved),
            problem=str(d.get("problem") or ""),
            alternatives=tuple(dict(a) for a in d.get("alternatives") or ()),
            withheld=tuple(dict(w) for w in d.get("withheld") or ()),
            updated_at=_updated_at(d),
            resolved_reason=str(d.get("resolved_reason") or ""),
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready mapping with every field (``opened_at``/``resolved_at`` as RFC 3339 strings and
        unix seconds)."""
        return {
            "id": self.id,
            "deployment": self.deployment,
            "rule": self.rule,
            "dial": self.dial,
            "action": self.action,
            "current": self.current,
            "suggested": self.suggested,
            "flag": self.flag,
            "severity": self.severity,
            "confidence": self.confidence,
            "summary": self.summary,
            "description": self.description,
            "runbook": self.runbook,
            "opened_at": rfc3339(self.opened_at),
            "opened_at_seconds": self.opened_at,
            "resolved_at": rfc3339(self.resolved_at) if self.resolved_at is not None else None,
            "rank": self.rank,
            "predicted_effect": {k: dict(v) for k, v in self.predicted_effect.items()},
            "evidence": dict(self.evidence),
            "problem": self.problem,
            "alternatives": [dict(a) for a in self.alternatives],
            "withheld": [dict(w) for w in self.withheld],
            "updated_at": rfc3339(self.updated_at) if self.updated_at is not None else None,
            "updated_at_seconds": self.updated_at,
        }


def _updated_at(d: Mapping[str, Any]) -> float | None:
    """When the suggested turn last changed (unix s): ``updated_at_seconds`` of :meth:`Recommendation.as_dict`'s
    form, or ``updated_at`` of :meth:`Recommendation.to_record`'s; ``None`` when it never changed."""
    v = d["updated_at_seconds"] if "updated_at_seconds" in d else d.get("updated_at")
    return None if v is None else _unix_time("updated_at", v)


LATEST_UNIX_TIME = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the last second :func:`rfc3339` can write (``datetime.MAXYEAR``)."""


def _finite_number(name: str, value: Any) -> float:
    """``value`` as a finite float (a bool is no number). Raises ``ValueError`` naming ``name``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def _unix_time(name: str, value: Any) -> float:
    """``value`` as unix seconds that :func:`rfc3339` can write: finite, 0 to :data:`LATEST_UNIX_TIME`. A record
    with another time (NaN, ±Inf, 1e20: a damaged file) would be read and then fail every notification and API
    answer that shows it. Raises ``ValueError`` naming ``name``."""
    t = _finite_number(name, value)
    if not 0 <= t <= LATEST_UNIX_TIME:
        raise ValueError(f"{name} must be unix seconds from 0 to {LATEST_UNIX_TIME:.0f}, got {value!r}")
    return t


def rfc3339(ts: float) -> str:
    """Unix seconds → ``2026-11-30T10:00:00Z``."""
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat().replace("+00:00", "Z")
