"""Values no engine can mean: turned into *unknown*, and said so in ``missing``. Pure.

Every adapter's snapshot passes through :func:`sanitize` (``get_adapter`` wraps each adapter with
:class:`SanitizedAdapter`), so one rule holds for all engines:

==============================  ====================================================================
quantity                        unknown when
==============================  ====================================================================
KV usage ratio                  not finite, or outside [0, 1] (a percent left unscaled, pitfall 4)
KV capacity (tokens)            not finite, ≤ 0 (an engine's pool of 0 is not a pool), or above 10¹⁰
                                (``MAX_POOL_TOKENS_IN_ONE_ENGINE``); KV usage is then unknown too
requests running / waiting      not finite, negative, or above 10⁷ (``MAX_REQUESTS_IN_ONE_ENGINE``)
cumulative counters             not finite, negative, or above 2⁵³ (``MAX_COUNT``)
histograms                      a bucket count or the sum is not finite, a count is negative, or the
                                cumulative counts decrease with the bound (more than rounding)
other pools (``pools``)         usage: as KV usage; used: as a count; capacity: as KV capacity
                                (SGLang ``swa``/``mamba``, llama.cpp ``slots``)
queues by reason / PD queues    not finite, or negative (the entry is dropped)
==============================  ====================================================================

Example: ``vllm:num_requests_running +Inf`` → ``requests_running`` None and
``missing`` gains ``"requests_running (value +Inf is not a count)"``.

**One bad rank does not silence the deployment** (issue 12, class 4). When several data-parallel ranks report
(``snap.ranks``) and some rank's KV usage is impossible or unknown while others report a fraction, or a rank's
running/waiting count is impossible, that rank is **left out**: it is named in ``ranks_excluded``
(``"3: kv_cache_usage_ratio value 1.7 is not a fraction in [0, 1]"``) and in ``missing``, and KV usage
(capacity-weighted, else the plain mean) and any unknown or tainted running/waiting total are recomputed over
the other ranks. Counters are left as the adapter summed them (a rank dropping in and out of a sum would look
like a restart). Usage is a mean, so leaving a rank out does not bias it; running/waiting then undercount,
which the rules answer with lower confidence (``advisor.rules.common.confidence``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

from advisor.domain import (
    SNAPSHOT_COUNT_FIELDS,
    SNAPSHOT_HISTOGRAM_FIELDS,
    SNAPSHOT_SECONDS_FIELDS,
    EngineSnapshot,
    Exposition,
    Histogram,
    PoolReading,
    RankValues,
)
from advisor.engines.base import EngineAdapter

_COUNTS = (*SNAPSHOT_COUNT_FIELDS, *SNAPSHOT_SECONDS_FIELDS)
_RANK_COUNTS = (
    "requests_running",
    "requests_waiting",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
)
_HISTOGRAMS = SNAPSHOT_HISTOGRAM_FIELDS
_RECOMPUTED = ("kv_cache_usage_ratio", "requests_running", "requests_waiting")
"""Aggregates :func:`_without_ranks` recomputes over the ranks left in."""
_TOLERANCE = 1e-9


MAX_COUNT = float(2**53)
"""Largest value read as a count: beyond 2⁵³ a float64 no longer holds every integer (IEEE 754 binary64's 53-bit
significand), so no counter an engine increments by one can reach it (a token counter at 10⁶ tokens/s would take
285 years)."""
MAX_REQUESTS_IN_ONE_ENGINE = 1e7
"""Largest running or waiting count read from one target: ten million requests in one engine's batch or queue is
beyond what any engine holds in memory (each waiting request keeps its prompt's token ids and sampling state; the
largest batches, ``max_num_seqs``, are thousands). A gauge above it is a broken exporter, not a load (bad-input
breaker, 2026-12-06: ``vllm:num_requests_running 1e308`` was reported as a count and read by the rules)."""
_REQUEST_GAUGES = frozenset({"requests_running", "requests_waiting"})
MAX_POOL_TOKENS_IN_ONE_ENGINE = 1e10
"""Largest KV pool, in tokens, read from one target: a pool of 10¹⁰ tokens at the smallest per-token KV of a
served model (~1 KiB: MLA's 576-wide latent at fp8 over a few layers; a 0.5B model's 12 KiB in bf16) is ≥ 10 TB,
beyond any one engine's device memory (eight 288 GB accelerators are 2.3 TB). A larger figure is a broken exporter,
and advice built on it is wrong (breaker 13: ``num_gpu_blocks`` 1e30 read as 'KV usage 98 % of 10³⁰ tokens', and fp8
KV proposed to double it)."""


def _bad_count(v: float | None, name: str = "") -> str | None:
    """Why ``v`` is not a count (of the snapshot field ``name``), or ``None``: not finite, negative, above
    :data:`MAX_COUNT`, or, for the running and waiting gauges, above :data:`MAX_REQUESTS_IN_ONE_ENGINE`."""
    if v is None:
        return None
    if not math.isfinite(v):
        return f"value {v} is not a count"
    if v < 0:
        return f"value {v:g} is negative"
    if v > MAX_COUNT:
        return f"value {v:g} is beyond any count (2^53)"
    if name in _REQUEST_GAUGES and v > MAX_REQUESTS_IN_ONE_ENGINE:
        return f"value {v:g} is more requests than one engine holds ({MAX_REQUESTS_IN_ONE_ENGINE:g})"
    return None


def _bad_ratio(v: float | None) -> str | None:
    if v is None:
        return None
    if not math.isfinite(v) or not -_TOLERANCE <= v <= 1 + _TOLERANCE:
        return f"value {v} is not a fraction in [0, 1]"
    return None


def _bad_capacity(v: float | None) -> str | None:
    if v is None:
        return None
    if not math.isfinite(v) or v <= 0:
        return f"value {v} is not a pool size"
    if v > MAX_POOL_TOKENS_IN_ONE_ENGINE:
        return f"value {v:g} is more tokens than one engine's memory holds ({MAX_POOL_TOKENS_IN_ONE_ENGINE:g})"
    return None


def histogram_problem(h: Histogram | None) -> str | None:
    """Why a histogram cannot be trusted, or ``None`` when it can (or is absent)."""
    if h is None:
        return None
    if not math.isfinite(h.sum) or not math.isfinite(h.count) or h.count < 0:
        return "count or sum is not finite"
    counts = h.counts().tolist()
    # the usual histogram, checked in C: every count finite (else the sum is not), none negative, none below the one
    # before; the loop below then says nothing either
    if not counts or (math.isfinite(sum(counts)) and min(counts) >= 0 and counts == sorted(counts)):
        return None
    prev = 0.0
    for bound, count in zip(h.bounds(), h.counts(), strict=True):  # h.buckets, without building the pairs
        if not math.isfinite(count) or count < 0:
            return f"bucket le={bound} has count {count}"
        if count < prev - max(_TOLERANCE, 1e-9 * prev):
            return f"cumulative counts decrease at le={bound} ({prev:g} → {count:g})"
        prev = count
    return None


def _clean_pool(p: PoolReading, why: list[str]) -> PoolReading:
    """``p`` with impossible usage/used/capacity made unknown, each named in ``why`` as
    ``"pool mamba usage_ratio (value 7.5 is not a fraction in [0, 1])"``."""
    changes: dict[str, float | None] = {}
    for name, check in (("usage_ratio", _bad_ratio), ("used", _bad_count), ("capacity", _bad_capacity)):
        problem = check(getattr(p, name))
        if problem:
            changes[name] = None
            why.append(f"pool {p.pool} {name} ({problem})")
    return dataclasses.replace(p, **changes) if changes else p  # type: ignore[arg-type]


def _clean_counts(field: str, counts: Mapping[str, float], why: list[str]) -> dict[str, float]:
    """``counts`` without the entries that are not a count, each named in ``why``."""
    out: dict[str, float] = {}
    for key, v in counts.items():
        problem = _bad_count(v)
        if problem:
            why.append(f"{field}[{key}] ({problem})")
        else:
            out[key] = v
    return out


def _clean_rank(r: RankValues) -> RankValues:
    changes: dict[str, float | None] = {f: None for f in _RANK_COUNTS if _bad_count(getattr(r, f), f)}
    if _bad_ratio(r.kv_cache_usage_ratio):
        changes["kv_cache_usage_ratio"] = None
    if _bad_capacity(r.kv_cache_capacity_tokens):
        changes["kv_cache_capacity_tokens"] = None
    return dataclasses.replace(r, **changes) if changes else r  # type: ignore[arg-type]


def _rank_problems(ranks: tuple[RankValues, ...]) -> dict[str, str]:
    """Rank → why it is left out (see the module docstring); empty when every rank is sound."""
    out: dict[str, str] = {}
    for r in ranks:
        why = []
        problem = _bad_ratio(r.kv_cache_usage_ratio)
        if problem:
            why.append(f"kv_cache_usage_ratio {problem}")
        for name in ("requests_running", "requests_waiting"):
            problem = _bad_count(getattr(r, name), name)
            if problem:
                why.append(f"{name} {problem}")
        if why:
            out[r.rank] = "; ".join(why)
    known = [r for r in ranks if r.kv_cache_usage_ratio is not None and r.rank not in out]
    if known:
        for r in ranks:
            if r.kv_cache_usage_ratio is None and r.rank not in out:
                out[r.rank] = "kv_cache_usage_ratio unknown (silent, NaN or not a fraction) while other ranks report"
    return out


def _without_ranks(snap: EngineSnapshot, ranks: tuple[RankValues, ...], bad: dict[str, str]) -> dict[str, object]:
    """Aggregates recomputed over the sound ranks (``ranks`` already cleaned)."""
    good = [r for r in ranks if r.rank not in bad]
    changes: dict[str, object] = {}
    usages = [r.kv_cache_usage_ratio for r in good]
    if usages and all(u is not None for u in usages):
        us = [u for u in usages if u is not None]
        caps = [r.kv_cache_capacity_tokens for r in good]
        known_caps = [c for c in caps if c is not None]
        if len(known_caps) == len(caps) and math.fsum(known_caps) > 0:
            changes["kv_cache_usage_ratio"] = math.fsum(u * c for u, c in zip(us, known_caps, strict=True)) / math.fsum(
                known_caps
            )
        else:
            changes["kv_cache_usage_ratio"] = math.fsum(us) / len(us)
    for name in ("requests_running", "requests_waiting"):
        tainted = any(name in bad.get(r.rank, "") for r in ranks)
        if getattr(snap, name) is None or tainted:
            values = [getattr(r, name) for r in good]
            if values and all(v is not None for v in values):
                changes[name] = math.fsum(v for v in values if v is not None)
            elif tainted:
                changes[name] = None
    changes["ranks_excluded"] = (*snap.ranks_excluded, *(f"{rank}: {why}" for rank, why in bad.items()))
    return changes


def sanitize(snap: EngineSnapshot, names: Mapping[str, Sequence[str]] | None = None) -> EngineSnapshot:
    """Return ``snap`` with impossible values made unknown and each listed in ``missing`` with why, and
    data-parallel ranks that cannot be read left out of the aggregates (named in ``ranks_excluded``).

    ``names``: field → the engine's exposed names for it (the catalog's name table). When leaving ranks out
    makes a field known again, the adapter's ``missing`` entry for it (``vllm:kv_cache_usage_perc``) is
    dropped, and a total recomputed over the other ranks is not also reported by its tainted sum: ``missing``
    says which rank was left out and why (``"rank 1 left out (requests_running value -5 is negative)"``).
    """
    changes: dict[str, object] = {}
    why: list[str] = []
    ranks = tuple(_clean_rank(r) for r in snap.ranks)
    bad = _rank_problems(snap.ranks) if len(snap.ranks) > 1 else {}
    rank_changes = _without_ranks(snap, ranks, bad) if bad and len(bad) < len(snap.ranks) else {}
    recomputed = {f for f in _RECOMPUTED if f in rank_changes}
    for name in _COUNTS:
        problem = _bad_count(getattr(snap, name), name)
        if problem:
            changes[name] = None
            if name not in recomputed:
                why.append(f"{name} ({problem})")
    problem = _bad_ratio(snap.kv_cache_usage_ratio)
    if problem:
        changes["kv_cache_usage_ratio"] = None
        if "kv_cache_usage_ratio" not in recomputed:
            why.append(f"kv_cache_usage_ratio ({problem})")
    problem = _bad_capacity(snap.kv_cache_capacity_tokens)
    if problem:
        changes["kv_cache_capacity_tokens"] = None
        why.append(f"kv_cache_capacity_tokens ({problem})")
        if changes.get("kv_cache_usage_ratio", snap.kv_cache_usage_ratio) is not None:
            # TGI and TensorRT-LLM divide their used tokens by this pool, and no engine's usage of a pool it
            # misreports is trusted (breaker 14: a TGI budget of 1.1e10 rejected, its 95 % reservation kept and fp8
            # KV proposed on it)
            changes["kv_cache_usage_ratio"] = None
            why.append("kv_cache_usage_ratio (unknown: the pool it is a share of is not a pool size)")
    for name in _HISTOGRAMS:
        problem = histogram_problem(getattr(snap, name))
        if problem:
            changes[name] = None
            why.append(f"{name} histogram ({problem})")
    pools = tuple(_clean_pool(p, why) for p in snap.pools)
    if pools != snap.pools:
        changes["pools"] = pools
    for name in ("requests_waiting_by_reason", "disaggregation_queues"):
        counts = getattr(snap, name)
        cleaned = _clean_counts(name, counts, why)
        if len(cleaned) != len(counts):
            changes[name] = cleaned
    if ranks != snap.ranks:
        changes["ranks"] = ranks
    missing = snap.missing
    if rank_changes:
        changes.update(rank_changes)
        why.extend(f"rank {rank} left out ({reason})" for rank, reason in bad.items())
        known: set[str] = set()
        for f in sorted(recomputed):
            if rank_changes[f] is None:
                why.append(f"{f} (unknown: not every rank left in reports it)")
            else:
                known.update((names or {}).get(f, ()))
        missing = tuple(m for m in missing if m.split(" (", 1)[0] not in known)
    if not changes:
        return snap
    changes["missing"] = (*missing, *why)
    return dataclasses.replace(snap, **changes)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True, slots=True)
class EngineWants:
    """An adapter's ``wants``, equal (and hashed alike) for every adapter of one class and engine id.

    An adapter's answer depends only on its class (the engine's name table), never on the instance, so the
    selective parser (:mod:`advisor.sources.selective_parser`), which keys its scan plan by the ``keep``
    predicate, holds one plan per engine however many deployments — each with its own adapter — parse with
    ``keep=adapter.wants``. (A bound method is a key per adapter instance: beyond the parser's 64 cached plans
    every parse rebuilt its plan and scanned twice, issue 15.)

    Attributes:
        kind: the wrapped adapter's class.
        engine: its engine id (``"vllm"``).
        ask: the wrapped adapter's own ``wants`` (not compared).
    """

    kind: type
    engine: str
    ask: Callable[[str], bool] = dataclasses.field(compare=False, hash=False, repr=False)

    def __call__(self, sample_name: str) -> bool:
        """Whether the adapter reads samples of this name."""
        return self.ask(sample_name)


class SanitizedAdapter:
    """Wraps an adapter so that every snapshot it returns has passed :func:`sanitize`.

    Attributes:
        wants: the wrapped adapter's ``wants`` as an :class:`EngineWants` (equal across adapters of one engine).
    """

    def __init__(self, inner: EngineAdapter) -> None:
        """``inner``: the engine's own adapter."""
        self.inner = inner
        self.engine = inner.engine
        self.wants: Callable[[str], bool] = EngineWants(type(inner), inner.engine, inner.wants)

    def models(self, exposition: Exposition) -> list[str]:
        """As the wrapped adapter."""
        return self.inner.models(exposition)

    def snapshot(self, exposition: Exposition, model: str | None = None) -> EngineSnapshot:
        """The wrapped adapter's snapshot, sanitized (with the engine's names from its catalog entry)."""
        return sanitize(self.inner.snapshot(exposition, model), self._names())

    def _names(self) -> dict[str, tuple[str, ...]]:
        """Field → the engine's exposed names (its catalog entry's name table; ``{}`` for an engine the catalog
        does not know), built on the engine's first snapshot and kept in :data:`_NAMES`: the catalog is fixed at
        import (``observe`` with an engine id makes a new adapter per page)."""
        names = _NAMES.get(self.engine)
        if names is None:
            from advisor.engines.catalog import entry  # the catalog imports every adapter module

            try:
                table = entry(self.engine).name_table
            except ValueError:
                table = {}
            names = _NAMES[self.engine] = {f: tuple(s.name for s in aliases) for f, aliases in table.items()}
        return names


_NAMES: dict[str, dict[str, tuple[str, ...]]] = {}
"""Engine id → :meth:`SanitizedAdapter._names` (one entry per engine the catalog knows, or asked about)."""
