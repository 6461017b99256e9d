"""Turn one deployment's scrape history into what rules read and what operators see. Pure.

Input: the deployment's :class:`~advisor.rules.base.DeploymentContext`, each target's recent
:class:`~advisor.domain.TimedSnapshot` history and last scrape outcome, and ``now``.
Output: an :class:`~advisor.rules.base.Evaluation` for the rules and a JSON-ready snapshot view
(the ``snapshot`` object of ``once --json``).

Data quality (``state``):

* ``unavailable`` — no target's last scrape succeeded;
* ``stale`` — targets answer, but the newest sample is older than ``stale_after_intervals`` scrape
  intervals;
* ``fresh`` — otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from advisor import conventions as c
from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.rules.base import DeploymentContext, Evaluation
from advisor.telemetry import (
    WindowStats,
    combine_targets,
    fraction_below,
    goodput_ratio,
    summarize,
    window_stats,
)

MAX_RANKS_SHOWN = 256
"""Per-rank values listed in a snapshot at most (a target exposing thousands of ranks is hostile or broken)."""


@dataclass(frozen=True, slots=True)
class TargetView:
    """One target's scrape outcome and recent history (oldest first)."""

    url: str
    up: bool
    error_reason: str | None
    error_message: str | None
    history: tuple[TimedSnapshot, ...]


def _sum_known(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None and not math.isnan(v)]
    return math.fsum(known) if known else None


def _weighted_usage(snaps: Sequence[EngineSnapshot]) -> float | None:
    pairs = [(s.kv_cache_usage_ratio, s.kv_cache_capacity_tokens) for s in snaps if s.kv_cache_usage_ratio is not None]
    if not pairs:
        return None
    if all(cap for _, cap in pairs):
        total = math.fsum(cap for _, cap in pairs if cap)
        return math.fsum(u * cap for u, cap in pairs if cap) / total
    return math.fsum(u for u, _ in pairs) / len(pairs)


def _hist_json(h: Histogram | None, source: str | None, note: str | None = None) -> dict[str, Any] | None:
    s = summarize(h)
    if s is None:
        return {"count": 0, "sum": 0.0, "p50": None, "p90": None, "p99": None, "source": source} if h else None
    out: dict[str, Any] = {
        "count": s.count,
        "sum": s.sum,
        "p50": s.p50,
        "p90": s.p90,
        "p99": s.p99,
        "source": source,
    }
    if note:
        out["note"] = note
    return out


def deployment_state(targets: Sequence[TargetView], now: float, interval: float, stale_after_intervals: int) -> str:
    """``fresh``, ``stale`` or ``unavailable`` (see module docstring)."""
    up = [t for t in targets if t.up and t.history]
    if not up:
        return c.STATE_UNAVAILABLE
    newest = max(t.history[-1].timestamp for t in up)
    if now - newest > stale_after_intervals * interval:
        return c.STATE_STALE
    return c.STATE_FRESH


def evaluate_deployment(
    ctx: DeploymentContext,
    targets: Sequence[TargetView],
    now: float,
    window_seconds: float,
    interval_seconds: float,
    stale_after_intervals: int = 3,
    round_started: float | None = None,
) -> tuple[Evaluation, dict[str, Any]]:
    """Build the rules' :class:`Evaluation` and the snapshot view for one deployment.

    Returns ``(evaluation, snapshot_json)``. ``snapshot_json`` sums counts and capacities over the
    replicas that answered, takes the capacity-weighted mean of KV usage, and summarizes the window's
    TTFT/TPOT deltas; unknown values are ``None``. ``round_started`` (unix s) is when the last scrape
    round began; staleness is measured from it (default ``now``).
    """
    # staleness is judged from when the last scrape round began, so a slow target elsewhere that held
    # the round up does not make this deployment's fresh samples look old
    state = deployment_state(targets, round_started or now, interval_seconds, stale_after_intervals)
    up = [t for t in targets if t.up and t.history]
    per_target: list[WindowStats] = [window_stats(t.history, now, window_seconds) for t in up]
    stats = combine_targets(per_target) if per_target else None
    latest = [t.history[-1].snapshot for t in up]
    samples = sum(1 for t in up for h in t.history if now - window_seconds <= h.timestamp <= now)
    expected = max(1, int(window_seconds // interval_seconds) + 1) * max(1, len(targets))

    engine_caps = [s.kv_cache_capacity_tokens for s in latest if s.kv_cache_capacity_tokens]
    if engine_caps:
        kv_capacity = math.fsum(engine_caps) / len(engine_caps)
        kv_source = "engine"
    else:
        kv_capacity = float(ctx.capacity.kv_cache_tokens)
        kv_source = "model"

    ttft_ok = fraction_below(ctx.slo.ttft_seconds, stats.ttft) if stats else None
    tpot_ok = fraction_below(ctx.slo.tpot_seconds, stats.tpot) if stats else None
    good = goodput_ratio(ttft_ok.value if ttft_ok is not None else None, tpot_ok.value if tpot_ok is not None else None)
    gen_rate = stats.generation_tokens_per_second if stats else None
    goodput_tps = gen_rate * good.ratio if gen_rate is not None and good.ratio is not None else None

    ev = Evaluation(
        ctx=ctx,
        state=state,
        stats=stats,
        replicas_up=len(up),
        kv_capacity_tokens=kv_capacity,
        kv_capacity_source=kv_source,
        ttft_ok=ttft_ok,
        tpot_ok=tpot_ok,
        goodput=good,
        goodput_tokens_per_second=goodput_tps,
        samples=samples,
        expected_samples=expected,
        now=now,
    )

    first = latest[0] if latest else None
    tpot_note = None
    if first is not None and first.tpot_is_itl:
        tpot_note = "engine has no per-request TPOT histogram; inter-token latency stands in"
    snapshot: dict[str, Any] = {
        "model": first.model if first else None,
        "replicas": len(targets),
        "replicas_up": len(up),
        "requests_running": _sum_known([s.requests_running for s in latest]),
        "requests_waiting": _sum_known([s.requests_waiting for s in latest]),
        "preemptions_total": _sum_known([s.preemptions_total for s in latest]),
        "prompt_tokens_total": _sum_known([s.prompt_tokens_total for s in latest]),
        "generation_tokens_total": _sum_known([s.generation_tokens_total for s in latest]),
        "kv_cache_usage_ratio": _weighted_usage(latest),
        "kv_cache_capacity_tokens": _sum_known([s.kv_cache_capacity_tokens for s in latest]),
        "ttft_seconds": _hist_json(stats.ttft if stats else None, first.ttft_source if first else None),
        "tpot_seconds": _hist_json(stats.tpot if stats else None, first.tpot_source if first else None, tpot_note),
        "window_seconds": stats.window_seconds if stats else None,
        "generation_tokens_per_second": gen_rate,
        "preemptions_per_second": stats.preemptions_per_second if stats else None,
        "goodput_ratio": good.ratio,
        "goodput_ratio_bounds": [good.lower, good.upper],
        "goodput_tokens_per_second": goodput_tps,
        "ttft_within_target_ratio": ttft_ok.value if ttft_ok else None,
        "tpot_within_target_ratio": tpot_ok.value if tpot_ok else None,
        "ranks": [r.as_dict() for s in latest for r in s.ranks][:MAX_RANKS_SHOWN],
        "missing": sorted({m for s in latest for m in s.missing}),
    }
    n_ranks = sum(len(s.ranks) for s in latest)
    if n_ranks > MAX_RANKS_SHOWN:
        snapshot["ranks_truncated"] = n_ranks - MAX_RANKS_SHOWN
    if ttft_ok is not None and not ttft_ok.exact:
        snapshot["ttft_target_bounds_used"] = list(ttft_ok.bounds_used)
    if tpot_ok is not None and not tpot_ok.exact:
        snapshot["tpot_target_bounds_used"] = list(tpot_ok.bounds_used)
    return ev, snapshot
