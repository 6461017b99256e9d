"""Acceptance 5's check, reusable: run the live advisor over a period, backtest the same period against the
Prometheus that watched it, and compare when each recommendation opened.

``run_live`` drives :class:`advisor.service.Service` on a fixed grid (``start + k × interval``), as the
daemon's scheduler does, collecting every transition. ``compare_openings`` pairs each recommendation the
live advisor opened with the backtest's recommendation of the same deployment, rule and dial and reports
the difference in opening time (the acceptance: at most one evaluation interval); ``match_openings`` does
the same for openings read elsewhere (``openings_from_api`` turns the daemon's ``/api/v1/recommendations``
objects into them, for a live advisor run as a process).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.backtest import BacktestReport, evaluation_times
from advisor.config import Config
from advisor.exporter import make_registry
from advisor.rules.lifecycle import Transition
from advisor.service import Service


class HeldClock:
    """A monotonic clock standing at 0 until :meth:`release` (a stand-in engine's scenario starts then)."""

    def __init__(self) -> None:
        self._released: float | None = None

    def release(self, at: float | None = None) -> None:
        """Start the clock at monotonic time ``at`` (default now)."""
        self._released = time.monotonic() if at is None else at

    def __call__(self) -> float:
        if self._released is None:
            return 0.0
        return max(0.0, time.monotonic() - self._released)


@dataclass
class LiveRun:
    """What the live advisor did: its first and last evaluation times and every transition."""

    start: float
    end: float
    transitions: list[Transition] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    """Per cycle, seconds from its due time on the grid to its evaluation's timestamp (the scrape and the work
    before it; more on a loaded machine)."""

    def jitter(self) -> float:
        """How far the live evaluations strayed from a fixed grid, seconds: the spread of :attr:`lateness`. The
        backtest steps on the grid from the first live evaluation, so one of its steps can differ from the same
        live cycle by this much, beside any whole interval."""
        return max(self.lateness) - min(self.lateness) if self.lateness else 0.0

    def slack(self, step: float) -> float:
        """How far one backtest step may sit from the same live cycle besides whole steps, seconds: the
        :meth:`jitter`, plus the shift of the backtest's grid, whose start is the first live evaluation rounded to
        :data:`advisor.backtest.GRID` (631.307 → 631.25: every step 0.057 s early; CI, 2026-12-03)."""
        first = evaluation_times(self.start, self.start + step, step)[0]
        return self.jitter() + abs(self.start - first)

    def opened(self, rule: str | None = None, deployment: str | None = None) -> list[Transition]:
        """The ``opened`` transitions, optionally of one rule and deployment."""
        return [
            t
            for t in self.transitions
            if t.kind == "opened"
            and (rule is None or t.recommendation.rule == rule)
            and (deployment is None or t.recommendation.deployment == deployment)
        ]


def run_live(
    cfg: Config,
    cycles: int,
    interval: float | None = None,
    on_cycle: Callable[[int, float], None] | None = None,
) -> LiveRun:
    """Run ``cycles`` cycles of a :class:`Service` built from ``cfg``, one every ``interval`` seconds (default
    the scrape interval) on a fixed grid from now; return the run. ``on_cycle(k, t)`` runs before cycle k."""
    interval = interval or cfg.scrape_interval
    _, collector, metrics = make_registry()
    run = LiveRun(0.0, 0.0)
    svc = Service(cfg.model_copy(update={"receivers": []}), collector, metrics, on_transition=run.transitions.append)
    try:
        start = time.time()
        for k in range(cycles):
            due = start + k * interval
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            if on_cycle is not None:
                on_cycle(k, due)
            result = svc.run_once()
            run.lateness.append(result.timestamp - due)
            if k == 0:
                run.start = result.timestamp
            run.end = result.timestamp
    finally:
        svc.close()
    return run


@dataclass(frozen=True)
class Opening:
    """One live opening and the backtest's opening of the same deployment, rule and dial (``None``: none)."""

    deployment: str
    rule: str
    dial: str
    live_at: float
    backtest_at: float | None

    @property
    def offset(self) -> float | None:
        """Backtest minus live opening time, seconds."""
        return None if self.backtest_at is None else self.backtest_at - self.live_at


def compare_openings(report: BacktestReport, live: LiveRun, rule: str | None = None) -> list[Opening]:
    """Pair each live opening (of ``rule``, or of every rule) with the backtest's nearest opening of the same
    deployment, rule and dial."""
    return match_openings(report, [o for t in live.opened(rule) for o in opened_of(t)])


def opened_of(t: Transition) -> list[tuple[str, str, str, float]]:
    """``(deployment, rule, dial, opened_at)`` of an ``opened`` transition."""
    r = t.recommendation
    return [(r.deployment, r.rule, r.dial, r.opened_at)]


def openings_from_api(recommendations: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str, float]]:
    """``(deployment, rule, dial, opened_at)`` from the daemon's ``/api/v1/recommendations`` objects (or
    ``once --json``'s), which carry ``opened_at_seconds``."""
    return [(r["deployment"], r["rule"], r["dial"], float(r["opened_at_seconds"])) for r in recommendations]


def match_openings(report: BacktestReport, live: Iterable[tuple[str, str, str, float]]) -> list[Opening]:
    """Pair each live ``(deployment, rule, dial, opened_at)`` with the backtest's nearest opening of the same
    deployment, rule and dial (``backtest_at`` ``None`` when it has none)."""
    out = []
    for deployment, rule, dial, opened_at in live:
        dep = report.deployment(deployment)
        candidates = [b.opened_at for b in (dep.recommendations if dep else ()) if b.rule == rule and b.dial == dial]
        best = min(candidates, key=lambda at: abs(at - opened_at)) if candidates else None
        out.append(Opening(deployment, rule, dial, opened_at, best))
    return out
