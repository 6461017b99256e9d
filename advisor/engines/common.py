"""Shared reading rules for the table-driven adapters (SGLang, TGI, TensorRT-LLM, llama.cpp, Dynamo).

Every adapter declares, per snapshot field, a tuple of :class:`Series` — the exposed names newest first,
with the versions that emit them and the engine source file that declares them — and reads them through a
:class:`Scope`: the exposition restricted to one model, grouped by data-parallel rank.

Rules (the vLLM adapter's, generalised; each adapter's docstring says which labels play which role):

* **Model.** ``model_labels`` name the label carrying the served model (``model_name``; Dynamo and Triton
  ``model``). A sample without it applies to every model. :meth:`Scope.models` lists the models in
  exposition order; ``Scope(..., model=None)`` reads the first. Dynamo lower-cases the label on request
  metrics but not on its config gauges, so its scope compares models case-insensitively.
* **Ranks.** ``rank_label`` (SGLang ``dp_rank``) is the data-parallel rank, ``"0"`` when absent; counters,
  queue gauges, capacities and histograms are **summed** over ranks, usage is capacity-weighted.
* **Replicas.** ``replica_labels`` (SGLang ``tp_rank``, ``pp_rank``, ``moe_ep_rank``) repeat the same value
  on every tensor-parallel rank when all schedulers report: only the lowest replica per DP rank is read,
  never a sum.
* **Categories.** Triton puts several quantities in one family under a category label
  (``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used"}``); :attr:`Series.match` selects one.
* **Priority.** SGLang with priority scheduling writes the total under ``priority=""`` *and* one series per
  priority: when a ``priority=""`` series exists only it (and unlabelled series) is read.
* **Unknown, never zero.** NaN → unknown; a rank that is silent makes the total unknown; scaled values
  (µs → s, percent → fraction) are multiplied by :attr:`Series.scale`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any, Final, Generic, Literal, TypeVar

from advisor.domain import SNAPSHOT_REQUEST_LENGTH_FIELDS, Exposition, Histogram, Sample
from advisor.sources.selective_parser import FrozenLabels

Kind = Literal["gauge", "counter", "histogram", "info"]

USAGE_TOLERANCE: Final = 1e-6
DEFAULT_RANK: Final = "0"
_HISTOGRAM_SUFFIXES: Final = ("_bucket", "_count", "_sum")


@dataclass(frozen=True, slots=True)
class Series:
    """One exposed quantity and where it comes from.

    Attributes:
        name: the sample name as scraped (counters with ``_total``; histograms the base name).
        kind: ``gauge``, ``counter``, ``histogram`` or ``info``.
        versions: engine versions that emit it.
        source: the engine source file that declares it.
        match: label values selecting the series inside a category family (Triton ``request_type``).
        scale: factor to the snapshot's unit (``1e-6`` for µs → s, ``0.01`` for percent → fraction).
        is_itl: for TPOT aliases, the family observes token gaps (ITL) rather than one mean per request.
    """

    name: str
    kind: Kind
    versions: str
    source: str
    match: tuple[tuple[str, str], ...] = ()
    scale: float = 1.0
    is_itl: bool = False

    def sample_names(self) -> tuple[str, ...]:
        """``name`` for gauges and counters; ``_bucket``, ``_count``, ``_sum`` for histograms."""
        if self.kind == "histogram":
            return tuple(self.name + s for s in _HISTOGRAM_SUFFIXES)
        return (self.name,)


NameTable = Mapping[str, tuple[Series, ...]]


def wanted_names(table: NameTable, extra: Iterable[str] = ()) -> frozenset[str]:
    """Every sample name a table reads (histograms expanded), plus ``extra``."""
    names = set(extra)
    for aliases in table.values():
        for s in aliases:
            names.update(s.sample_names())
    return frozenset(names)


class Scope:
    """One model's samples, grouped by rank, with replica and priority series folded away."""

    def __init__(
        self,
        exposition: Exposition,
        *,
        wanted: frozenset[str],
        model_labels: Sequence[str] = (),
        model: str | None = None,
        rank_label: str | None = None,
        replica_labels: Sequence[str] = (),
        casefold_model: bool = False,
    ) -> None:
        self._expo = exposition
        self._wanted = wanted
        self._model_labels = tuple(model_labels)
        self._rank_label = rank_label
        self._replica_labels = tuple(replica_labels)
        self._fold = casefold_model
        self._memo: dict[tuple[str, tuple[tuple[str, str], ...]], list[Sample]] = {}
        self._rank_memo: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[list[Sample], list[str]]] = {}
        self._ranked_memo: dict[tuple[str, str, tuple[tuple[str, str], ...]], bool] = {}
        found = self.models()
        self.all_models: list[str] = found
        """Every model on the wanted samples (:meth:`models`, computed once)."""
        self.model = model if model is not None else (found[0] if found else None)
        self.others = [m for m in found if not self._same_model(m, self.model)]

    @property
    def exposition(self) -> Exposition:
        """The exposition this scope reads."""
        return self._expo

    # --- models ----------------------------------------------------------------------------------------
    def _model_of(self, sample: Sample) -> str | None:
        for label in self._model_labels:
            value = sample.labels.get(label)
            if value is not None:
                return value
        return None

    def _same_model(self, a: str | None, b: str | None) -> bool:
        if a is None or b is None:
            return a is b
        return a.casefold() == b.casefold() if self._fold else a == b

    def models(self) -> list[str]:
        """Models on the wanted samples, in exposition order (case-folded duplicates merged, keeping the
        spelling that is not all lower case: Dynamo's config gauges keep the served name's case)."""
        seen: dict[str, str] = {}
        labels = self._model_labels
        if not labels:
            return []
        first = labels[0]
        for name, samples in self._expo.items():
            if name not in self._wanted:
                continue
            found = [s.labels.get(first) for s in samples]
            if None in found:  # another model label (Triton's ``model``), or none
                found = [m if m is not None else self._model_of(s) for m, s in zip(found, samples, strict=True)]
            # the distinct spellings in order of first appearance: a spelling seen again changes nothing below
            for m in dict.fromkeys(found):
                if m is None:
                    continue
                key = m.casefold() if self._fold else m
                prev = seen.get(key)
                if prev is None or (prev != m and prev == prev.lower() and m != m.lower()):
                    seen[key] = m
        return list(seen.values())

    # --- samples ---------------------------------------------------------------------------------------
    def rank(self, sample: Sample) -> str:
        if self._rank_label is None:
            return DEFAULT_RANK
        return sample.labels.get(self._rank_label, DEFAULT_RANK)

    def samples(self, series: Series, suffix: str = "") -> list[Sample]:
        """The model's samples of ``series`` (``suffix`` picks a histogram part), category-matched, with
        only the lowest replica per rank and the priority total when one exists.

        Example (SGLang, two TP ranks reporting, priority scheduling)::

            sglang:num_queue_reqs{dp_rank="0",priority="",tp_rank="0"} 5
            sglang:num_queue_reqs{dp_rank="0",priority="1",tp_rank="0"} 2
            sglang:num_queue_reqs{dp_rank="0",priority="",tp_rank="1"} 5
            → [the first line only]
        """
        key = (series.name + suffix, series.match)
        memo = self._memo.get(key)
        if memo is not None:  # a snapshot asks for one series many times (ranks, gauges, histograms)
            return memo
        raw = self._expo.get(series.name + suffix, ())
        if not raw:  # a family the page does not expose (an older alias, a histogram part): nothing to filter
            out: list[Sample] = []
            self._memo[key] = out
            return out
        if self.others or series.match:
            out = [
                s
                for s in raw
                if self._same_model(self._model_of(s) or self.model, self.model)
                and all(s.labels.get(k) == v for k, v in series.match)
            ]
        else:  # one model on the page (the usual case): every sample is the model's
            out = list(raw)
        if "" in [s.labels.get("priority") for s in out]:
            out = [s for s in out if s.labels.get("priority", "") == ""]
        for label in self._replica_labels:
            lowest: dict[str, str] = {}
            for s in out:
                value = s.labels.get(label)
                if value is not None:
                    r = self.rank(s)
                    if r not in lowest or _order(value) < _order(lowest[r]):
                        lowest[r] = value
            out = [s for s in out if s.labels.get(label) in (None, lowest.get(self.rank(s)))]
        self._memo[key] = out
        return out

    def ranked_samples(self, series: Series, suffix: str = "") -> tuple[list[Sample], list[str]]:
        """:meth:`samples` and the :meth:`rank` of each, in the same order (computed once per series and suffix:
        a snapshot reads one family for several fields, its ranks and its histogram parts)."""
        key = (series.name + suffix, series.match)
        memo = self._rank_memo.get(key)
        if memo is None:
            samples = self.samples(series, suffix)
            memo = self._rank_memo[key] = (samples, self._rank_list(samples))
        return memo

    def _rank_list(self, samples: Sequence[Sample]) -> list[str]:
        """``[self.rank(s) for s in samples]``; without a subclass's :meth:`rank`, one comprehension."""
        if type(self).rank is not Scope.rank:
            rank = self.rank
            return [rank(s) for s in samples]
        label = self._rank_label
        if label is None:
            return [DEFAULT_RANK] * len(samples)
        return [s.labels.get(label, DEFAULT_RANK) for s in samples]

    def ranked(self, series: Series) -> bool:
        """Whether any of the series' samples carries the rank label. SGLang's tokenizer-side families
        (token counters, TTFT, e2e) have no ``dp_rank``: they already cover every rank."""
        if self._rank_label is None:
            return False
        key = (series.name, series.kind, series.match)
        known = self._ranked_memo.get(key)
        if known is None:
            label = self._rank_label
            known = self._ranked_memo[key] = any(
                label in s.labels for suffix in _suffixes(series) for s in self.samples(series, suffix)
            )
        return known

    def ranks(self, table: NameTable) -> tuple[str, ...]:
        """Every rank on the model's samples of the table's series (``"0"`` without a rank label)."""
        found: set[str] = set()
        for aliases in table.values():
            for series in aliases:
                for suffix in _suffixes(series):
                    found.update(self.ranked_samples(series, suffix)[1])
        return tuple(sorted(found, key=_order))

    def gauge(self, series: Series) -> dict[str, float | None]:
        """Gauge per rank: max over other labels (multiprocess ``pid`` series), NaN ignored, scaled.

        Example: ``x{pid="1"} 0.4``, ``x{pid="2"} 0.0`` → ``{"0": 0.4}``; only NaN → ``{"0": None}``.
        """
        out: dict[str, float | None] = {}
        scale = series.scale
        samples, ranks = self.ranked_samples(series)
        for r, s in zip(ranks, samples, strict=True):
            prev = out.get(r)
            if math.isnan(s.value):
                out.setdefault(r, None)
            else:
                v = s.value * scale
                out[r] = v if prev is None else max(prev, v)
        return out

    def counter(self, series: Series, suffix: str = "") -> dict[str, float | None]:
        """Counter per rank: sum over other labels (``is_streaming``, ``finished_reason``); NaN → unknown.

        Example: ``x{is_streaming="false"} 61``, ``x{is_streaming="true"} 238`` → ``{"0": 299.0}``; a rank
        holding both ``+Inf`` and ``-Inf`` is unknown too (:func:`fsum_or_none`).
        """
        return _sums(*self.ranked_samples(series, suffix), series.scale)

    def histogram(self, series: Series) -> dict[str, Histogram | None]:
        """Cumulative histogram per rank, summed over other labels with equal ``le``; bounds from the scrape.

        A rank lacking a ``+Inf`` bucket or a ``_sum``, or with a NaN, is unknown. Example::

            x_bucket{is_streaming="true",le="1.0"} 2     x_bucket{is_streaming="false",le="1.0"} 1
            x_bucket{is_streaming="true",le="+Inf"} 3    x_bucket{is_streaming="false",le="+Inf"} 1
            x_count{…true} 3  x_count{…false} 1          x_sum{…true} 2.5  x_sum{…false} 0.5
            → {"0": Histogram(buckets=((1.0, 3.0), (inf, 4.0)), count=4.0, sum=3.0)}

        A rank whose ``_count`` or ``_sum`` samples hold both ``+Inf`` and ``-Inf`` is unknown (:meth:`counter`).
        """
        buckets: dict[str, dict[float, float]] = {}
        bad: set[str] = set()
        isnan = math.isnan
        samples, ranks = self.ranked_samples(series, "_bucket")
        for r, s in zip(ranks, samples, strict=True):
            try:
                le = float(s.labels["le"])
            except (KeyError, ValueError):
                bad.add(r)
                continue
            if isnan(le) or isnan(s.value):
                bad.add(r)
                continue
            per_le = buckets.get(r)
            if per_le is None:
                per_le = buckets[r] = {}
            per_le[le] = per_le.get(le, 0.0) + s.value
        scale = series.scale
        counts = _sums(*self.ranked_samples(series, "_count"), 1.0)  # unscaled: a count of observations
        sums = _sums(*self.ranked_samples(series, "_sum"), 1.0)
        out: dict[str, Histogram | None] = {}
        for r in set(buckets) | bad | set(counts) | set(sums):
            per_le = buckets.get(r, {})
            total = sums.get(r)
            if r in bad or math.inf not in per_le or total is None or (r in counts and counts[r] is None):
                out[r] = None
                continue
            count = counts.get(r)
            les = sorted(per_le)
            # le × 1.0 is le, bit for bit (-0.0 included): no pass over the bounds for an unscaled family
            bounds = tuple(les) if scale == 1.0 else tuple(le * scale if math.isfinite(le) else le for le in les)
            out[r] = Histogram.from_counts(
                bounds,
                [per_le[le] for le in les],
                count=count if count is not None else per_le[math.inf],
                sum=total * scale,
            )
        return out


def fsum_or_none(values: Iterable[float]) -> float | None:
    """``math.fsum(values)``, or ``None`` (unknown) when they hold both ``+Inf`` and ``-Inf``: their sum is undefined
    and ``math.fsum`` raises ``ValueError`` (``-inf + inf in fsum``), as the window code
    (``advisor.telemetry``, ``Histogram.merge`` there) also reads as unknown. Also ``None`` when finite values
    overflow the float range (``math.fsum`` raises ``OverflowError``, "intermediate overflow"; no engine counts
    near 1.8e308, so such values are garbage, not a measurement). ``[3, 4] → 7.0``, ``[inf, 1] → inf``,
    ``[inf, -inf] → None``, ``[1.7e308, 1.7e308] → None``."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return None


def _sums(samples: Sequence[Sample], ranks: Sequence[str], scale: float) -> dict[str, float | None]:
    """Per rank, the sum of the samples' values times ``scale``; ``None`` for a rank with a NaN, or with both
    ``+Inf`` and ``-Inf`` (:func:`fsum_or_none`)."""
    values: dict[str, list[float]] = {}
    for r, s in zip(ranks, samples, strict=True):
        vs = values.get(r)
        if vs is None:
            values[r] = [s.value]
        else:
            vs.append(s.value)
    out: dict[str, float | None] = {}
    for r, vs in values.items():
        total = None if any(math.isnan(v) for v in vs) else fsum_or_none(vs)
        out[r] = None if total is None else total * scale
    return out


def _suffixes(series: Series) -> tuple[str, ...]:
    return _HISTOGRAM_SUFFIXES if series.kind == "histogram" else ("",)


def _order(value: str) -> tuple[int, int, str]:
    """Sort key for rank label values: ASCII decimal numbers first, by value, then names.

    Only ASCII digits are numbers: ``"²"`` passes ``str.isdigit()`` but ``int()`` rejects it, so it
    sorts as a name: ``["10", "2", "²", "a"] → ["2", "10", "a", "²"]``.
    """
    return (0, int(value), "") if value.isascii() and value.isdigit() else (1, 0, value)


_V = TypeVar("_V")
_Entry = tuple[Hashable, tuple[Mapping[str, str], ...], _V]
"""A :class:`ShapeMemo` entry: ``extra``, the label objects (held), the value."""


class ShapeMemo(Generic[_V]):
    """What was computed from a sequence of label sets (one family's, or a whole page's), remembered per sequence of
    label *objects*.

    The selective parser's series cache (``advisor.sources.selective_parser.SERIES_CACHE``) hands out one
    :class:`~advisor.sources.selective_parser.FrozenLabels` object per series text, process-wide: the next scrape of
    a target, and every replica serving the same model, carry the very same label objects, in the same order, with
    new values. Whatever depends only on the names and labels (which samples repeat a series, the models, each
    family's rank, the histogram bounds) is then the same, and only the values need reading again, as Prometheus's
    scrape cache skips a known series' label parsing (``scrape/scrape.go``, ``scrapeCache``).

    Exact: a hit needs ``extra`` equal and every label object the *same object* (``is``) as the one stored, in order;
    an entry holds its label objects (so none is freed and its address reused), and only label sets that are
    :class:`~advisor.sources.selective_parser.FrozenLabels` (read-only) are stored: a plain dict could be edited
    after. Anything else is never found, and the caller computes as it would without the memo.

    Bounded: two generations, as the series cache. An entry goes to ``young``; when ``young`` holds ``entries``
    entries or ``labels`` label references, it becomes ``old`` and the former ``old`` is dropped; a hit in ``old``
    moves the entry to ``young``. At most ``2 × labels`` references (8 bytes each) are held, to objects the series
    cache mostly holds too (its own bound is 2 × 32,768 series).

    No lock: every step is one dict operation or one assignment (atomic under the GIL); a race with a rotation at
    worst loses an entry, which is computed again. A stored value is never changed by the memo.

    Example: the vLLM 0.33 capture (``vllm-0.33.0-engine-code-healthy-llama3.1-8b.prom``, 132 series kept): the first
    scrape of a target checks the label sets of its families of several samples for repeats (:func:`first_samples`)
    and walks every family for models and ranks (``advisor.engines.vllm``); the later scrapes, and the replicas',
    find the same 132 label objects in the memo (a tuple of 132 ids hashed, 132 ``is``) and read values only.
    """

    __slots__ = ("entries", "labels", "old", "young", "young_labels")

    def __init__(self, entries: int, labels: int) -> None:
        """``entries``, ``labels``: one generation's bounds (entries, label references)."""
        self.entries = entries
        self.labels = labels
        self.young: dict[int, _Entry[_V]] = {}
        self.old: dict[int, _Entry[_V]] = {}
        self.young_labels = 0

    @staticmethod
    def may_hold(first: Mapping[str, str]) -> bool:
        """Whether a sequence of label sets beginning with ``first`` may be stored: ``False`` for a plain dict (the
        Prometheus path, tests), so a caller need not build the sequence to learn it is not."""
        return type(first) is FrozenLabels

    def get(self, extra: Hashable, labels: Sequence[Mapping[str, str]]) -> _V | None:
        """The value stored for ``extra`` and these label objects (in this order), else ``None``."""
        if not labels or type(labels[0]) is not FrozenLabels:  # never stored
            return None
        key = hash((extra, tuple(map(id, labels))))
        entry = self.young.get(key)
        if entry is None:
            entry = self.old.get(key)
            if entry is None or not _same(entry, extra, labels):
                return None
            self._store(key, entry)
            return entry[2]
        return entry[2] if _same(entry, extra, labels) else None

    def put(self, extra: Hashable, labels: Sequence[Mapping[str, str]], value: _V) -> None:
        """Remember ``value`` for ``extra`` and these label objects; nothing when one is not a ``FrozenLabels``."""
        if not labels or type(labels[0]) is not FrozenLabels or len(labels) > self.labels:
            return
        held = tuple(labels)
        if not all(type(x) is FrozenLabels for x in held):
            return
        self._store(hash((extra, tuple(map(id, held)))), (extra, held, value))

    def _store(self, key: int, entry: _Entry[_V]) -> None:
        size = len(entry[1])
        if len(self.young) >= self.entries or self.young_labels + size > self.labels:
            self.old, self.young, self.young_labels = self.young, {}, 0
        self.young[key] = entry
        self.young_labels += size

    def clear(self) -> None:
        """Forget every entry."""
        self.old, self.young, self.young_labels = {}, {}, 0


def _same(entry: _Entry[object], extra: Hashable, labels: Sequence[object]) -> bool:
    """Whether ``entry`` was stored for ``extra`` and exactly these label objects."""
    held = entry[1]
    return len(held) == len(labels) and entry[0] == extra and all(map(is_, held, labels))


SHAPE_MEMO_ENTRIES: Final = 4096
"""Entries one generation of a :class:`ShapeMemo` holds at most."""
SHAPE_MEMO_LABELS: Final = 32_768
"""Label references one generation of a :class:`ShapeMemo` holds at most: as many as the series cache's generation
(``SERIES_CACHE_ENTRIES``) holds series, so the memo remembers the pages whose series the cache still knows (about
250 vLLM pages of 132 series per generation), at 8 bytes a reference (256 KB a generation)."""

_REPEATS: Final[ShapeMemo[tuple[tuple[int, ...], ...]]] = ShapeMemo(SHAPE_MEMO_ENTRIES, SHAPE_MEMO_LABELS)
"""The label objects of a page's families of several samples (in order; ``extra``: their sizes) → per family, the
positions :func:`first_samples` keeps (``()`` when it keeps them all)."""


def first_samples(exposition: Exposition) -> tuple[dict[str, list[Sample]], list[str]]:
    """The exposition with each series (name + label set) kept once, its first sample, as Prometheus keeps
    it; and one ``missing`` note per family that repeated a series. A label with an empty value is the same as no
    label (Prometheus's data model), so ``x{a="1",b=""}`` repeats ``x{a="1"}``.

    Which samples a family keeps depends on its label sets alone: it is remembered per page's label objects
    (:class:`ShapeMemo`, :data:`_REPEATS`), so the families of a page seen at an earlier scrape are not hashed again.

    Example: ``ray_vllm_num_requests_running{ReplicaId="a"} 3`` twice (a Ray Serve re-export) → one sample
    (3) and ``["ray_vllm_num_requests_running: 1 duplicate series ignored (the first sample kept)"]``.
    """
    # families of several samples not kept by an earlier pass (observe, then the adapter): the ones that may repeat
    several = [x for x in exposition.values() if len(x) > 1 and type(x) is not _FirstSamples]
    verdicts: tuple[tuple[int, ...], ...] = ()
    if several and ShapeMemo.may_hold(several[0][0].labels):
        sizes = tuple(map(len, several))
        labels = [s.labels for samples in several for s in samples]
        known = _REPEATS.get(sizes, labels)
        if known is None:
            known = tuple(_kept_positions([s.labels for s in samples]) for samples in several)
            _REPEATS.put(sizes, labels, known)
        verdicts = known
    elif several:
        verdicts = tuple(_kept_positions([s.labels for s in samples]) for samples in several)
    out: dict[str, list[Sample]] = {}
    notes: list[str] = []
    verdict = iter(verdicts)
    for name, samples in exposition.items():
        if type(samples) is _FirstSamples:  # kept by an earlier pass: nothing repeats
            out[name] = samples
            continue
        if len(samples) < 2:  # one series: nothing to repeat
            out[name] = _FirstSamples(samples)
            continue
        positions = next(verdict)
        if not positions:  # every series once (the usual page): kept whole
            out[name] = _FirstSamples(samples)
            continue
        kept = _FirstSamples([samples[i] for i in positions])
        notes.append(f"{name}: {len(samples) - len(kept)} duplicate series ignored (the first sample kept)")
        out[name] = kept
    return out, notes


def _kept_positions(labels: Sequence[Mapping[str, str]]) -> tuple[int, ...]:
    """The positions of the first label set of each series (equal sets, an empty value being no label), ``()`` when
    no series repeats."""
    if True in ["" in x.values() for x in labels]:  # an empty value is no label (Prometheus)
        keys = [frozenset((k, v) for k, v in x.items() if v) for x in labels]
    else:
        keys = [frozenset(x.items()) for x in labels]
    if len(set(keys)) == len(keys):
        return ()
    seen: set[frozenset[tuple[str, str]]] = set()
    kept: list[int] = []
    for i, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            kept.append(i)
    return tuple(kept)


class _FirstSamples(list[Sample]):
    """A family's samples as :func:`first_samples` kept them (each series once): a second pass over the same list
    (``advisor.observe.observe`` keeps the first samples, then the adapter does) returns it as it is instead of
    hashing every label set again. A list built any other way (a Ray rename merging two families) is checked."""

    __slots__ = ()


# --- aggregation -----------------------------------------------------------------------------------------


def sum_all(per_rank: Mapping[str, float | None], ranks: Sequence[str]) -> float | None:
    """Sum over every rank; unknown when a rank is missing or unknown, or when one rank holds ``+Inf`` and another
    ``-Inf`` (:func:`fsum_or_none`): ``({"0": 3, "1": 4}, ("0", "1")) → 7``."""
    if not per_rank:
        return None
    values = [per_rank.get(r) for r in ranks]
    if not values or any(v is None for v in values):
        return None
    return fsum_or_none(v for v in values if v is not None)


def sum_known(values: Iterable[float | None]) -> float | None:
    """Sum of the known values, ``None`` when none is known (or they hold ``+Inf`` and ``-Inf``,
    :func:`fsum_or_none`): ``[3, None, 4] → 7``, ``[None] → None``."""
    known = [v for v in values if v is not None]
    return fsum_or_none(known) if known else None


def valid_ratio(value: float | None) -> float | None:
    """A fraction in [0, 1] (within 1e-6, then clamped), else unknown: ``1.2 → None``, ``NaN → None``."""
    if value is None or not -USAGE_TOLERANCE <= value <= 1 + USAGE_TOLERANCE:
        return None
    return min(max(value, 0.0), 1.0)


def positive(value: float | None) -> float | None:
    """A positive finite number, else unknown: an engine's pool of 0 blocks is not a pool."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def weighted_usage(
    usage: Mapping[str, float | None], capacity: Mapping[str, float | None], ranks: Sequence[str]
) -> float | None:
    """Usage over ranks: capacity-weighted mean, else the plain mean (see the vLLM adapter).

    Example: usage ``{"0": 0.5, "1": 0.1}``, capacity ``{"0": 30000, "1": 10000}`` → ``0.4``. Capacities holding
    ``+Inf`` and ``-Inf`` (:func:`fsum_or_none`) make the weights undefined: the plain mean.
    """
    us = [usage.get(r) for r in ranks]
    if not us or any(u is None for u in us):
        return None
    known = [u for u in us if u is not None]
    caps = [capacity.get(r) for r in ranks]
    known_caps = [c for c in caps if c is not None]
    weight = fsum_or_none(known_caps) if len(known_caps) == len(caps) else None
    if weight is not None and weight > 0:  # no -Inf weight: the products cannot hold +Inf and -Inf
        return math.fsum(u * c for u, c in zip(known, known_caps, strict=True)) / weight
    total = fsum_or_none(known)
    return None if total is None else total / len(known)


def merged(per_rank: Mapping[str, Histogram | None], ranks: Sequence[str]) -> Histogram | None:
    """The histogram summed over every rank; unknown when a rank lacks one or the bounds differ."""
    hs = [per_rank.get(r) for r in ranks]
    if not per_rank or not hs or any(h is None for h in hs):
        return None
    try:
        return Histogram.merge([h for h in hs if h is not None])
    except ValueError:
        return None


def first_histogram(
    scope: Scope, aliases: Sequence[Series], ranks: Sequence[str]
) -> tuple[Histogram | None, Series | None]:
    """The first alias (newest first) giving a usable merged histogram, with the alias used."""
    for alias in aliases:
        h = merged(scope.histogram(alias), ranks if scope.ranked(alias) else (DEFAULT_RANK,))
        if h is not None:
            return h, alias
    return None, None


def why_no_histogram(scope: Scope, aliases: Sequence[Series], ranks: Sequence[str]) -> str | None:
    """Why :func:`first_histogram` found nothing usable across data-parallel ranks although the family is
    exposed, or ``None`` (absent, or one rank only).

    Example: rank 0 with bounds ``(0.1, 1, +Inf)`` and rank 1 with ``(0.5, +Inf)`` →
    ``"bucket bounds differ across data-parallel ranks (0: 3 bounds, 1: 2 bounds)"``; rank 1 without a ``+Inf``
    bucket or ``_sum`` → ``"rank 1 has no usable histogram (no +Inf bucket or _sum, or a NaN)"``.
    """
    for alias in aliases:
        per_rank = scope.histogram(alias)
        if not per_rank:
            continue
        rs = ranks if scope.ranked(alias) else (DEFAULT_RANK,)
        if len(rs) < 2:
            continue  # one rank: the family name in missing says it all
        unusable = [r for r in rs if per_rank.get(r) is None]
        if unusable:
            return f"rank {', '.join(unusable)} has no usable histogram (no +Inf bucket or _sum, or a NaN)"
        bounds = {r: tuple(le for le, _ in h.buckets) for r in rs if (h := per_rank.get(r)) is not None}
        if len(set(bounds.values())) > 1:
            sizes = ", ".join(f"{r}: {len(b)} bounds" for r, b in bounds.items())
            return f"bucket bounds differ across data-parallel ranks ({sizes})"
    return None


def first_total(
    scope: Scope, aliases: Sequence[Series], ranks: Sequence[str]
) -> tuple[dict[str, float | None], float | None]:
    """Per-rank values and their sum from the first alias present (gauges: max per rank, counters: sum)."""
    for alias in aliases:
        per_rank = scope.counter(alias) if alias.kind == "counter" else scope.gauge(alias)
        if per_rank:
            return per_rank, sum_all(per_rank, ranks if scope.ranked(alias) else (DEFAULT_RANK,))
    return {}, None


def config_values(scope: Scope, series: Iterable[tuple[str, Series]]) -> dict[str, str]:
    """Self-reported configuration gauges as strings (``engine_config``): ``{"context_len": "8192"}``."""
    out: dict[str, str] = {}
    for key, s in series:
        values = [v for v in scope.gauge(s).values() if v is not None]
        if values:
            v = values[0]
            out[key] = str(int(v)) if float(v).is_integer() else repr(v)
    return out


SPEC_COUNTER_FIELDS: Final = ("spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_tokens_total")
"""Speculative decoding's cumulative counters, as :class:`~advisor.domain.EngineSnapshot` names them."""
SPEC_POSITION_FIELD: Final = "spec_accepted_tokens_by_position"
""":class:`~advisor.domain.EngineSnapshot`'s accepted draft tokens by draft position."""
SPEC_POSITION_LABEL: Final = "position"
"""The draft position label of ``…spec_decode_num_accepted_tokens_per_pos_total`` (vLLM V1
``vllm/v1/spec_decode/metrics.py``, llama.cpp ``tools/server/server-task.cpp``): ``"0"`` … ``"k − 1"``."""


MAX_SPEC_POSITIONS: Final = 64
"""Draft positions read at most: vLLM's and llama.cpp's drafts are a few tokens to a few dozen; a page labelling a
larger position is not read (its tuple would be mostly unknown)."""


def spec_decode_counters(scope: Scope, table: NameTable, ranks: Sequence[str]) -> dict[str, Any]:
    """The snapshot's speculative-decoding fields read from ``table``'s :data:`SPEC_COUNTER_FIELDS` and
    :data:`SPEC_POSITION_FIELD` entries (each absent entry leaves its field unknown).

    Counters are summed over ranks (:func:`first_total`); the per-position counter is summed over every other label
    by its :data:`SPEC_POSITION_LABEL`, giving a tuple indexed by position (a position the page skips, a NaN or a
    label that is not a whole number ≥ 0 makes that position ``None``; no sample: ``()``).

    Example: ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 80``, ``{position="1"} 35`` →
    ``spec_accepted_tokens_by_position == (80.0, 35.0)``.
    """
    out: dict[str, Any] = {}
    for name in SPEC_COUNTER_FIELDS:
        aliases = table.get(name, ())
        if aliases:
            out[name] = first_total(scope, aliases, ranks)[1]
    by_position: dict[int, list[float]] = {}
    for alias in table.get(SPEC_POSITION_FIELD, ()):
        for s in scope.samples(alias):
            label = s.labels.get(SPEC_POSITION_LABEL, "")
            if label.isdecimal() and label.isascii():
                by_position.setdefault(int(label), []).append(s.value)
        if by_position:
            break
    if by_position:
        top = max(by_position)
        if top < MAX_SPEC_POSITIONS:
            values = [by_position.get(i) for i in range(top + 1)]
            out[SPEC_POSITION_FIELD] = tuple(
                None if vs is None or any(math.isnan(v) for v in vs) else fsum_or_none(vs) for vs in values
            )
    return out


def request_length_sums(scope: Scope, table: NameTable, ranks: Sequence[str]) -> dict[str, Any]:
    """The snapshot's per-request length fields (:data:`~advisor.domain.SNAPSHOT_REQUEST_LENGTH_FIELDS`) that
    ``table`` declares and the page gives, each summed over ranks (:func:`first_total`); a missing, NaN, infinite or
    negative total is left out (unknown), never 0.

    Example: ``vllm:request_prompt_tokens_sum 9000``, ``vllm:request_prompt_tokens_count 3`` →
    ``{"request_prompt_tokens_sum": 9000.0, "request_prompt_tokens_count": 3.0}``.
    """
    out: dict[str, Any] = {}
    for name in SNAPSHOT_REQUEST_LENGTH_FIELDS:
        aliases = table.get(name, ())
        total = first_total(scope, aliases, ranks)[1] if aliases else None
        if total is not None and math.isfinite(total) and total >= 0:
            out[name] = total
    return out
