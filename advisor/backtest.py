"""Backtest: replay the rules over history and report what the advisor would have recommended, and when.

The live loop (:class:`advisor.service.Service`) scrapes, records each target's history, evaluates every
deployment and runs the rules' lifecycle every ``scrape_interval``. A backtest does the same steps with
historical data and historical clocks:

* **Fetch** (:func:`fetch_histories`): range queries against a Prometheus-compatible API
  (:meth:`advisor.sources.prometheus.PrometheusSource.history`), chunked so no query passes
  :data:`CHUNK_POINTS` points per series, each chunk turned into per-target
  :class:`~advisor.domain.TimedSnapshot` lists by the deployment's adapter — the same histories a scrape
  builds. The query grid is the evaluation grid (``start + k × step``) extended backwards by one evaluation
  window, so the first evaluation already sees a full window.
* **Replay** (:class:`Replayer`, pure): at each evaluation time ``now`` the points up to ``now`` enter the
  :class:`advisor.tracker.Tracker` — the daemon's own evaluation step (histories recorded, thinned and trimmed
  with its one restart rule, replicas counted, :func:`advisor.evaluate.evaluate_deployment`, then
  :meth:`advisor.rules.lifecycle.Lifecycle.evaluate`) — with ``now`` as its clock, so for-durations,
  hysteresis and cooldowns behave exactly as they would have live.
* **Report** (:class:`BacktestReport`): per deployment, each recommendation with its opening and resolving
  times, dial, suggested value and flag, and each SLO breach: an interval during which the goodput ratio over
  the evaluation window was below the deployment's ``slo.target_ratio``.

Which series a deployment reads:

* ``source: prometheus`` — its ``selector``; every ``instance`` it matches is a replica, as live.
* ``source: scrape`` — the Prometheus that scraped the same engines is assumed to name each target by
  ``instance="host:port"`` (Prometheus's default: the scrape address). The selector is
  ``instance=~"host1:port1|host2:port2"`` from the configured target URLs (a URL without a port matches
  ``host`` and ``host:80``/``host:443``), and each instance found is reported under its configured URL.
  When your Prometheus labels them otherwise (relabelled instances, a pod name), pass a selector per
  deployment instead (``selectors={"chat-8b": 'job="vllm",namespace="prod"'}``; the command line's
  ``--selector chat-8b='job="vllm"'``).

Differences from the live daemon, by design: the replay starts with no open recommendation and no pending
for-duration at ``start`` (a state file is not read); notifications are not sent; a point in a range query
holds the newest sample at or before its time, so a change appears up to one Prometheus scrape interval
later than a direct scrape would have seen it (see :mod:`advisor.sources.prometheus`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from advisor import conventions as c
from advisor.assembly import build_rules, deployment_context, resolve_targets
from advisor.config import Config, Deployment
from advisor.domain import TimedSnapshot, rfc3339
from advisor.engines.base import EngineAdapter
from advisor.engines.dynamo import WORKER_KV_NAMES
from advisor.evaluate import Quality
from advisor.observe import identify
from advisor.rules.base import DeploymentContext, Evaluation, Rule
from advisor.rules.lifecycle import Lifecycle, Transition
from advisor.sources.prometheus import PrometheusSource, prometheus_down, to_timed_snapshots
from advisor.sources.promql import LabelMatcher, re2_escape, render_selector
from advisor.tracker import Tracker

CHUNK_POINTS: Final = 1000
"""Evaluation points per series per range query at most (Prometheus itself refuses more than 11,000)."""

MAX_EVALUATIONS: Final = 1_000_000
"""A backtest evaluates at most this many times (``(end − start) ÷ step``); more is a caller's mistake."""


# --- results ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetHistory:
    """One target's history over (part of) the backtest period.

    Attributes:
        target: the name the report uses (the configured URL for ``source: scrape``, the ``instance`` for
            ``source: prometheus``).
        points: snapshots in time order, as a scrape or :func:`~advisor.sources.prometheus.to_timed_snapshots`
            makes them.
        up: Prometheus's ``up`` series for the target, ``(time, 0 or 1)`` in time order. Empty: the target
            counts as up whenever it has a point (stale when the points stop).
    """

    target: str
    points: Sequence[TimedSnapshot]
    up: Sequence[tuple[float, float]] = ()


@dataclass(frozen=True, slots=True)
class ReplayedRecommendation:
    """A recommendation as the replay opened (and possibly resolved) it.

    ``current``, ``suggested``, ``flag``, ``severity`` and ``confidence`` are as opened; ``resolved_at`` is
    ``None`` when it was still open at the end of the period.
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
    opened_at: float
    opened_reason: str
    option: int = 1
    options: int = 1
    resolved_at: float | None = None
    resolved_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (times as RFC 3339 and unix seconds)."""
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
            "option": self.option,
            "options": self.options,
            "opened_at": rfc3339(self.opened_at),
            "opened_at_seconds": self.opened_at,
            "opened_reason": self.opened_reason,
            "resolved_at": rfc3339(self.resolved_at) if self.resolved_at is not None else None,
            "resolved_at_seconds": self.resolved_at,
            "resolved_reason": self.resolved_reason,
            "open_seconds": (self.resolved_at - self.opened_at) if self.resolved_at is not None else None,
        }


@dataclass(frozen=True, slots=True)
class SLOBreach:
    """An interval during which the goodput ratio over the evaluation window was below the target.

    It starts at the first evaluation below target and ends at the first later evaluation at or above it
    (``end`` is ``None`` when the period ended first). Evaluations whose ratio cannot be known (no request
    finished in the window, data not fresh) neither start nor end a breach.

    Attributes:
        worst_ratio: the lowest goodput ratio seen during the breach.
        evaluations: evaluations that read below target.
        requests: requests finished in the window at the worst evaluation (``None`` when unknown).
    """

    deployment: str
    start: float
    end: float | None
    target_ratio: float
    worst_ratio: float
    worst_at: float
    evaluations: int
    requests: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (times as RFC 3339 and unix seconds)."""
        return {
            "deployment": self.deployment,
            "start": rfc3339(self.start),
            "start_seconds": self.start,
            "end": rfc3339(self.end) if self.end is not None else None,
            "end_seconds": self.end,
            "duration_seconds": (self.end - self.start) if self.end is not None else None,
            "target_ratio": self.target_ratio,
            "worst_ratio": self.worst_ratio,
            "worst_at": rfc3339(self.worst_at),
            "evaluations": self.evaluations,
            "requests": self.requests,
        }


@dataclass(frozen=True, slots=True)
class DeploymentReplay:
    """One deployment's part of the report."""

    name: str
    engine: str
    selector: str | None
    evaluations: int
    states: Mapping[str, int]
    recommendations: tuple[ReplayedRecommendation, ...]
    breaches: tuple[SLOBreach, ...]
    slo_evaluations: int
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    state_reasons: Mapping[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "name": self.name,
            "engine": self.engine,
            "selector": self.selector,
            "evaluations": self.evaluations,
            "states": dict(self.states),
            "state_reasons": dict(self.state_reasons),
            "recommendations": [r.as_dict() for r in self.recommendations],
            "slo": {
                "evaluations_known": self.slo_evaluations,
                "breaches": [b.as_dict() for b in self.breaches],
            },
            "warnings": list(self.warnings),
            "errors": list(self.errors),
        }


@dataclass(frozen=True, slots=True)
class BacktestReport:
    """What the advisor would have recommended over ``[start, end]``, evaluated every ``step`` seconds."""

    start: float
    end: float
    step: float
    evaluation_window: float
    deployments: tuple[DeploymentReplay, ...]

    @property
    def ok(self) -> bool:
        """No query failed (a failed stretch has no data: rules did not run there)."""
        return not any(d.errors for d in self.deployments)

    def deployment(self, name: str) -> DeploymentReplay | None:
        """The deployment called ``name``, or ``None``."""
        return next((d for d in self.deployments if d.name == name), None)

    def recommendations(self) -> list[ReplayedRecommendation]:
        """Every recommendation of every deployment, by opening time."""
        return sorted((r for d in self.deployments for r in d.recommendations), key=lambda r: r.opened_at)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: what ``backtest --json`` prints."""
        return {
            "start": rfc3339(self.start),
            "start_seconds": self.start,
            "end": rfc3339(self.end),
            "end_seconds": self.end,
            "step_seconds": self.step,
            "evaluation_window_seconds": self.evaluation_window,
            "ok": self.ok,
            "deployments": [d.as_dict() for d in self.deployments],
        }


# --- the replay (pure) ---------------------------------------------------------------------------------------


@dataclass
class _Target:
    """What the replay knows of a target beyond its history (which the tracker holds): the points not yet
    due, Prometheus's ``up`` series, and when it last had data."""

    name: str
    pending: deque[TimedSnapshot] = field(default_factory=deque)
    up_pending: deque[tuple[float, float]] = field(default_factory=deque)
    last_up: tuple[float, float] | None = None
    has_up_series: bool = False
    last_seen: float | None = None
    newest: float = -math.inf  # the newest point queued or consumed


@dataclass
class _Breach:
    start: float
    worst_ratio: float
    worst_at: float
    evaluations: int
    requests: float | None


MAX_STATE_REASONS = 20
"""Distinct ``state: reason`` texts a deployment's backtest keeps for its evaluations that were not fresh (the first
ones; later evaluations with one of them are still counted)."""


@dataclass
class _Dep:
    ctx: DeploymentContext
    dynamic_targets: bool  # source: prometheus: replicas are the instances seen
    selector: str | None
    targets: dict[str, _Target] = field(default_factory=dict)
    evaluations: int = 0
    states: dict[str, int] = field(default_factory=dict)
    state_reasons: dict[str, int] = field(default_factory=dict)  # "state: reason" of evaluations not fresh → count
    recs: dict[str, ReplayedRecommendation] = field(default_factory=dict)
    breaches: list[SLOBreach] = field(default_factory=list)
    breach: _Breach | None = None
    slo_evaluations: int = 0
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Replayer:
    """Replays the rules over fed histories, evaluation time by evaluation time. Pure: no I/O, no clock.

    Feed each target's points (:meth:`feed`, any number of times, in time order across calls), then call
    :meth:`evaluate` with increasing times; points newer than an evaluation time wait for a later one.
    :meth:`report` summarizes. Evaluation is the daemon's own :class:`~advisor.tracker.Tracker` (``tracker``):
    the same histories, restart rule, replica counting and one shared
    :class:`~advisor.rules.lifecycle.Lifecycle` (dials taken by one rule are not proposed by another), so the
    same points give the same recommendations as live.
    """

    def __init__(
        self,
        contexts: Sequence[DeploymentContext],
        rules: Sequence[Rule],
        *,
        scrape_interval: float,
        evaluation_window: float,
        quality: Quality,
        cooldown_seconds: float = 0.0,
        dynamic_targets: Iterable[str] = (),
        selectors: Mapping[str, str] | None = None,
        targets: Mapping[str, Sequence[str]] | None = None,
        replica_windows: tuple[float, float] | None = None,
        keep_points: bool = False,
        resolve_hold_seconds: float = 0.0,
    ) -> None:
        """``contexts``: one per deployment, in evaluation order (engine already resolved).
        ``resolve_hold_seconds``: the config's ``rules.resolve_for``, as the daemon holds a clear.
        ``dynamic_targets``: names of deployments whose replicas are the targets that have data in the
        window (``source: prometheus``); the others count every known target, as the daemon does (the
        engines behind each, :func:`advisor.evaluate.engines_behind`). ``targets``: the
        targets each deployment is known to have before any data arrives (a configured target that never
        answers counts as unavailable). ``selectors`` only labels the report. ``keep_points``: keep every point
        fed, by deployment and target (:meth:`points`), for a caller that reads the whole period at once
        (``simulate``'s latency error); the tracker itself keeps an evaluation window."""
        dynamic = set(dynamic_targets)
        self._kept: dict[str, dict[str, list[TimedSnapshot]]] | None = {} if keep_points else None
        self.scrape_interval = scrape_interval
        self.evaluation_window = evaluation_window
        self.quality = quality
        self.tracker = Tracker(
            rules,
            evaluation_window=evaluation_window,
            scrape_interval=scrape_interval,
            quality=quality,
            cooldown_seconds=cooldown_seconds,
            replica_windows=replica_windows,
            resolve_hold_seconds=resolve_hold_seconds,
        )
        self._deps: dict[str, _Dep] = {}
        self._first: float | None = None
        self._last: float | None = None
        for ctx in contexts:
            dep = _Dep(ctx, ctx.name in dynamic, (selectors or {}).get(ctx.name))
            known = list((targets or {}).get(ctx.name, ()))
            for name in known:
                dep.targets[name] = _Target(name)
            self.tracker.add_deployment(ctx, [] if dep.dynamic_targets else known)
            self._deps[ctx.name] = dep

    @property
    def lifecycle(self) -> Lifecycle:
        """The rules' lifecycle (the tracker's)."""
        return self.tracker.lifecycle

    def warn(self, deployment: str, message: str) -> None:
        """Attach a warning to a deployment's report (a failed query, a skipped series …)."""
        self._deps[deployment].warnings.append(message)

    def error(self, deployment: str, message: str) -> None:
        """Attach an error to a deployment's report: data that could not be read (a failed query)."""
        self._deps[deployment].errors.append(message)

    def set_engine(self, deployment: str, engine: str) -> None:
        """Record the engine detected for ``engine: auto``."""
        self.tracker.set_context(deployment, dataclasses.replace(self.tracker.context(deployment), engine=engine))

    def feed(self, deployment: str, history: TargetHistory) -> None:
        """Queue a target's points (and ``up`` samples) for the evaluations to come.

        Points at or before the newest one already queued or consumed for that target are ignored, so
        overlapping chunks are harmless.

        Raises:
            KeyError: an unknown deployment.
        """
        d = self._deps[deployment]
        t = d.targets.get(history.target)
        if t is None:
            t = d.targets[history.target] = _Target(history.target)
        kept = None if self._kept is None else self._kept.setdefault(deployment, {}).setdefault(history.target, [])
        for p in history.points:
            if p.timestamp > t.newest:
                t.pending.append(p)
                t.newest = p.timestamp
                if kept is not None:
                    kept.append(p)
        newest_up = t.up_pending[-1][0] if t.up_pending else t.last_up[0] if t.last_up else -math.inf
        for ts, v in history.up:
            t.has_up_series = True
            if ts > newest_up:
                t.up_pending.append((ts, v))
                newest_up = ts

    def points(self, deployment: str) -> dict[str, list[TimedSnapshot]]:
        """Every point fed for ``deployment``, by target, in time order (``keep_points`` only; else empty)."""
        return dict((self._kept or {}).get(deployment, {}))

    def _advance(self, deployment: str, t: _Target, now: float) -> None:
        """The points due by ``now`` enter the tracker, as scrapes would have; then the target's outcome."""
        while t.pending and t.pending[0].timestamp <= now:
            p = t.pending.popleft()
            self.tracker.observe(deployment, t.name, p)
            t.last_seen = p.timestamp
        while t.up_pending and t.up_pending[0][0] <= now:
            t.last_up = t.up_pending.popleft()
            t.last_seen = max(t.last_seen or -math.inf, t.last_up[0])

    def _status(self, deployment: str, t: _Target, now: float) -> None:
        """The target's outcome as the daemon would hold it at ``now``: up when its last scrape succeeded."""
        gone_after = self.quality.stale_after_intervals * self.quality.interval_seconds
        tr = self.tracker
        if t.has_up_series:
            if t.last_up is None or now - t.last_up[0] > gone_after:
                tr.set_status(deployment, t.name, False, c.REASON_HTTP_STATUS, "no series in Prometheus")
                return
            if t.last_up[1] != 1.0:
                tr.set_status(deployment, t.name, False, *prometheus_down(t.last_up[1]))
                return
        if not tr.history(deployment, t.name):
            tr.set_status(deployment, t.name, False, c.REASON_HTTP_STATUS, "no samples")
            return
        tr.set_status(deployment, t.name, True, None, None)

    def evaluate(self, now: float) -> list[Transition]:
        """Evaluate every deployment at ``now`` (unix seconds, later than the previous call's) through the
        :class:`~advisor.tracker.Tracker` the daemon evaluates with.

        Raises:
            ValueError: ``now`` is not later than the previous evaluation time.
        """
        if self._last is not None and now <= self._last:
            raise ValueError(f"evaluation times must increase: {now} after {self._last}")
        self._first = now if self._first is None else self._first
        self._last = now
        horizon = self.evaluation_window + self.scrape_interval
        for name, d in self._deps.items():
            for t in d.targets.values():
                self._advance(name, t, now)
                self._status(name, t, now)
            if d.dynamic_targets:  # the replicas are the instances with data in the window
                listed = [u for u, t in d.targets.items() if t.last_seen is not None and now - t.last_seen <= horizon]
                self.tracker.set_targets(name, listed, forget=False)
        tick = self.tracker.evaluate(now, round_started=now)
        for name, exc in tick.failures:
            self._deps[name].warnings.append(f"{rfc3339(now)}: evaluation failed: {type(exc).__name__}: {exc}")
        for r in tick.results:
            d = self._deps[r.name]
            d.ctx = self.tracker.context(r.name)
            ev = r.evaluation
            d.evaluations += 1
            d.states[ev.state] = d.states.get(ev.state, 0) + 1
            if ev.state != c.STATE_FRESH:
                # why no rule could judge it, as the daemon's snapshot says it (breaker 26: "unavailable 121" with
                # nothing else when every value of the history was NaN)
                why = f"{ev.state}: {r.snapshot.reported.state_reason}"
                if why in d.state_reasons or len(d.state_reasons) < MAX_STATE_REASONS:
                    d.state_reasons[why] = d.state_reasons.get(why, 0) + 1
            self._slo(d, ev.goodput.ratio if ev.state == c.STATE_FRESH else None, now, ev)
        for tr in tick.transitions:
            self._note(self._deps[tr.recommendation.deployment], tr)
        return list(tick.transitions)

    @staticmethod
    def _note(d: _Dep, tr: Transition) -> None:
        r = tr.recommendation
        if tr.kind == "opened":
            d.recs[r.id] = ReplayedRecommendation(
                id=r.id,
                deployment=r.deployment,
                rule=r.rule,
                dial=r.dial,
                action=r.action,
                current=r.current,
                suggested=r.suggested,
                flag=r.flag,
                severity=r.severity,
                confidence=r.confidence,
                summary=r.summary,
                opened_at=r.opened_at,
                opened_reason=tr.reason,
                option=tr.option,
                options=tr.options,
            )
        elif r.id in d.recs:
            d.recs[r.id] = dataclasses.replace(d.recs[r.id], resolved_at=r.resolved_at, resolved_reason=tr.reason)

    @staticmethod
    def _slo(d: _Dep, ratio: float | None, now: float, ev: Evaluation) -> None:
        if ratio is None:
            return
        d.slo_evaluations += 1
        target = d.ctx.slo.target_ratio
        stats = ev.stats
        requests = stats.ttft.count if stats is not None and stats.ttft is not None else None
        if ratio < target:
            b = d.breach
            if b is None:
                d.breach = _Breach(now, ratio, now, 1, requests)
            else:
                b.evaluations += 1
                if ratio < b.worst_ratio:
                    b.worst_ratio, b.worst_at, b.requests = ratio, now, requests
        elif d.breach is not None:
            d.breaches.append(_close(d, d.breach, now))
            d.breach = None

    def report(self, start: float | None = None, end: float | None = None, step: float | None = None) -> BacktestReport:
        """The report so far (open breaches and recommendations are reported with no end)."""
        out = []
        for d in self._deps.values():
            breaches = list(d.breaches)
            if d.breach is not None:
                breaches.append(_close(d, d.breach, None))
            out.append(
                DeploymentReplay(
                    name=d.ctx.name,
                    engine=self.tracker.context(d.ctx.name).engine,
                    selector=d.selector,
                    evaluations=d.evaluations,
                    states=dict(d.states),
                    state_reasons=dict(d.state_reasons),
                    recommendations=tuple(sorted(d.recs.values(), key=lambda r: (r.opened_at, r.option))),
                    breaches=tuple(breaches),
                    slo_evaluations=d.slo_evaluations,
                    warnings=tuple(d.warnings),
                    errors=tuple(d.errors),
                )
            )
        first = start if start is not None else (self._first or 0.0)
        last = end if end is not None else (self._last or first)
        return BacktestReport(first, last, step or self.scrape_interval, self.evaluation_window, tuple(out))


def _close(d: _Dep, b: _Breach, end: float | None) -> SLOBreach:
    return SLOBreach(
        deployment=d.ctx.name,
        start=b.start,
        end=end,
        target_ratio=d.ctx.slo.target_ratio,
        worst_ratio=b.worst_ratio,
        worst_at=b.worst_at,
        evaluations=b.evaluations,
        requests=b.requests,
    )


GRID: Final = c.BACKTEST_GRID
"""Evaluation times and steps are multiples of 1/8 s (:data:`advisor.conventions.BACKTEST_GRID`). Such numbers are exact
both in binary floating point and in Prometheus's millisecond timestamps, so (1) the difference of two evaluation
times is exactly a whole number of steps — unix times near 2e9 otherwise carry about 2e-7 s of rounding, and a
for-duration held for ``2.0 − 2e-7`` s would open one evaluation late — and (2) the points a range query returns
carry exactly the evaluation times asked for, not a time rounded to the next millisecond past them."""


def evaluation_times(start: float, end: float, step: float) -> list[float]:
    """``start, start + step, …`` up to and including ``end`` (within a millionth of a step); ``start`` and
    ``step`` rounded to the nearest :data:`GRID` point (a step of 15 s or 0.5 s is on it already), ``start`` down
    when the nearest one is past ``end``: at least one evaluation.

    Raises:
        ValueError: a non-finite or non-positive step, ``end < start``, or more than
            :data:`MAX_EVALUATIONS` evaluations.
    """
    if not (math.isfinite(start) and math.isfinite(end) and math.isfinite(step)) or step <= 0:
        raise ValueError(f"start, end and step must be finite and step > 0 (got {start}, {end}, {step})")
    if end < start:
        raise ValueError(f"end ({rfc3339(end)}) is before start ({rfc3339(start)})")
    start, step = _on_grid(start), grid_step(step)
    if start > end:  # rounded past an end closer than half a grid point (--from and --to the same instant)
        start = math.floor(end * GRID) / GRID
    n = math.floor((end - start) / step + 1e-6) + 1
    if n > MAX_EVALUATIONS:
        raise ValueError(f"{n} evaluations from {rfc3339(start)} to {rfc3339(end)} every {step:g}s: use a larger step")
    return [start + k * step for k in range(n)]


def _on_grid(t: float) -> float:
    return round(t * GRID) / GRID


def grid_step(step: float) -> float:
    """``step`` as :func:`evaluation_times` uses it (rounded to :data:`GRID`, at least one grid point)."""
    return max(_on_grid(step), 1 / GRID)


def replay_config(
    cfg: Config,
    contexts: Sequence[DeploymentContext],
    step: float | None = None,
    rules: Sequence[Rule] | None = None,
    targets: Mapping[str, Sequence[str]] | None = None,
    selectors: Mapping[str, str] | None = None,
    dynamic: Iterable[str] | None = None,
    keep_points: bool = False,
) -> Replayer:
    """A :class:`Replayer` wired as the daemon wires its loop from ``cfg``: its rules and thresholds
    (:func:`advisor.assembly.build_rules`), cooldown, evaluation window and data-quality settings. With a
    ``step`` larger than the scrape interval, staleness is judged in steps (a point per step is all there
    is). ``dynamic``: the deployments whose replicas are the instances found (default: ``source:
    prometheus``)."""
    dq = cfg.data_quality
    interval = max(cfg.scrape_interval, step or cfg.scrape_interval)
    return Replayer(
        contexts,
        build_rules(cfg) if rules is None else rules,
        scrape_interval=interval,
        evaluation_window=cfg.evaluation_window,
        quality=Quality(interval, dq.stale_after_intervals, dq.frozen_after, dq.capacity_model_error_bound),
        cooldown_seconds=cfg.rules.cooldown,
        dynamic_targets=[d.name for d in cfg.deployments if d.source == "prometheus"] if dynamic is None else dynamic,
        selectors=selectors,
        targets=targets,
        replica_windows=(cfg.rules.replicas.scale_up_window, cfg.rules.replicas.scale_down_window),
        keep_points=keep_points,
        resolve_hold_seconds=cfg.rules.resolve_for,
    )


def backtest(
    cfg: Config,
    contexts: Sequence[DeploymentContext],
    histories: Mapping[str, Sequence[TargetHistory]],
    start: float,
    end: float,
    step: float | None = None,
    rules: Sequence[Rule] | None = None,
) -> BacktestReport:
    """Replay ``cfg``'s rules over ``histories`` (deployment name → its targets' histories) at
    ``start, start + step, …, end`` (``step`` defaults to the scrape interval). Pure.

    ``contexts`` are the deployments' :class:`~advisor.rules.base.DeploymentContext` (see
    :func:`advisor.service.deployment_context`) with the engine resolved.
    """
    times = evaluation_times(start, end, step or cfg.scrape_interval)
    start, step = times[0], grid_step(step or cfg.scrape_interval)
    rp = replay_config(cfg, contexts, step, rules)
    for name, hs in histories.items():
        for h in hs:
            rp.feed(name, h)
    for t in times:
        rp.evaluate(t)
    return rp.report(start, end, step)


# --- fetching from Prometheus ------------------------------------------------------------------------------


def instance_of(url: str) -> tuple[str, str]:
    """``(instance label, RE2 pattern matching it)`` Prometheus gives a target scraped at ``url``:
    ``host:port``; without a port in the URL, ``host`` with or without the scheme's default port
    (Prometheus 2 added it, Prometheus 3 does not)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if parts.port is not None:
        inst = f"{host}:{parts.port}"
        return inst, re2_escape(inst)
    default = 443 if parts.scheme == "https" else 80
    return host, f"{re2_escape(host)}(:{default})?"


def scrape_selector(urls: Sequence[str]) -> str:
    """The selector picking a ``source: scrape`` deployment's targets by ``instance``."""
    patterns = sorted({instance_of(u)[1] for u in urls})
    return render_selector([LabelMatcher("instance", "=~", "|".join(patterns))])


def _instance_to_url(urls: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for u in urls:
        inst, _ = instance_of(u)
        out.setdefault(inst, u)
        if urlsplit(u).port is None:
            out.setdefault(f"{inst}:{443 if urlsplit(u).scheme == 'https' else 80}", u)
    return out


@dataclass(frozen=True, slots=True)
class _Plan:
    dep: Deployment
    ctx: DeploymentContext
    selector: str
    urls: tuple[str, ...]  # configured targets (scrape); () for source: prometheus
    by_instance: Mapping[str, str]


def run_backtest(
    cfg: Config,
    source: PrometheusSource,
    start: float,
    end: float,
    step: float | None = None,
    selectors: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    deployments: Sequence[str] | None = None,
    chunk_points: int = CHUNK_POINTS,
) -> BacktestReport:
    """Fetch every deployment's history from ``source`` and replay ``cfg``'s rules over ``[start, end]``: the
    report of :func:`replay_history`'s replay (arguments and errors as there)."""
    times = evaluation_times(start, end, step or cfg.scrape_interval)
    rp = replay_history(cfg, source, start, end, step, selectors, base_dir, deployments, chunk_points)
    return rp.report(times[0], end, grid_step(step or cfg.scrape_interval))


def replay_history(
    cfg: Config,
    source: PrometheusSource,
    start: float,
    end: float,
    step: float | None = None,
    selectors: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    deployments: Sequence[str] | None = None,
    chunk_points: int = CHUNK_POINTS,
    keep_points: bool = False,
) -> Replayer:
    """Fetch every deployment's history from ``source`` and replay ``cfg``'s rules over ``[start, end]``; the
    :class:`Replayer` after its last evaluation (its tracker holds what the daemon would hold at ``end``: each
    deployment's online calibration included).

    Args:
        cfg: the advisor's configuration (deployments, rules, window, data quality).
        source: the Prometheus-compatible API holding the engines' series.
        start, end: unix seconds; evaluations at ``start + k × step`` up to ``end``.
        step: seconds between evaluations and between query points (default: ``cfg.scrape_interval``).
        selectors: deployment name → selector, overriding the configured or derived one.
        base_dir: where relative paths in the config (model config.json, file_sd) are resolved.
        deployments: only these deployments (default: all).
        chunk_points: query points per series per range query at most.
        keep_points: keep every point fetched (:meth:`Replayer.points`).

    Failed queries do not raise: they become errors on the deployment (``report.ok`` is false), and its
    targets have no data for that stretch (stale or unavailable there, so no rule fires on it).

    Raises:
        ValueError: a bad time range, step or selector; an unknown deployment name.
        CapacityError: a deployment's capacity pass cannot run.
        ConfigError: a ``file_sd`` file cannot be read.
    """
    times = evaluation_times(start, end, step or cfg.scrape_interval)
    start, step = times[0], grid_step(step or cfg.scrape_interval)
    overrides = dict(selectors or {})
    names = [d.name for d in cfg.deployments]
    unknown = [n for n in [*overrides, *(deployments or ())] if n not in names]
    if unknown:
        raise ValueError(f"no deployment named {', '.join(map(repr, unknown))} in the config (it has {names})")
    plans: list[_Plan] = []
    for dep in cfg.deployments:
        if deployments is not None and dep.name not in deployments:
            continue
        ctx = deployment_context(dep, base_dir)
        urls: tuple[str, ...] = ()
        if dep.name in overrides:
            selector = overrides[dep.name]  # its replicas are the instances it matches, named by instance
        elif dep.source == "prometheus":
            assert dep.selector is not None
            selector, urls = dep.selector, ()
        else:
            urls = tuple(resolve_targets(dep, base_dir))
            selector = scrape_selector(urls)
        plans.append(_Plan(dep, ctx, selector, urls, _instance_to_url(urls)))

    lead = math.ceil((cfg.evaluation_window + cfg.scrape_interval) / step) * step
    fetch_start = start - lead
    rp = replay_config(
        cfg,
        [p.ctx for p in plans],
        step,
        targets={p.dep.name: p.urls for p in plans},
        selectors={p.dep.name: p.selector for p in plans},
        dynamic=[p.dep.name for p in plans if not p.urls],
        keep_points=keep_points,
    )

    adapters: dict[str, EngineAdapter | None] = {}
    wanted: dict[str, frozenset[str]] = {}
    for p in plans:
        listed = source.metric_names(p.selector, fetch_start, end)
        if not listed.ok:
            rp.error(
                p.dep.name,
                f"listing series names at {source.base_url} failed: {listed.error_reason}: {listed.error_message}",
            )
            adapters[p.dep.name] = None
            continue
        seen = identify(listed.names, p.dep.engine)  # the live loop's detection (advisor.observe)
        if seen.adapter is None:
            rp.warn(p.dep.name, f"engine: auto: {{{p.selector}}}: {seen.error_message}")
            adapters[p.dep.name] = None
            continue
        adapter = seen.adapter
        if p.dep.engine == "auto":
            rp.set_engine(p.dep.name, adapter.engine)
        adapters[p.dep.name] = adapter
        wanted[p.dep.name] = frozenset(n for n in listed.names if adapter.wants(n) or n in WORKER_KV_NAMES)
        if not wanted[p.dep.name]:
            rp.warn(p.dep.name, f"no {adapter.engine} series match {{{p.selector}}} in the period")

    grid = max(1, int(chunk_points))
    n_fetch = math.floor((end - fetch_start) / step + 1e-6) + 1
    i = 0
    ti = 0
    while i < n_fetch:
        chunk_start = fetch_start + i * step
        chunk_end = fetch_start + min(n_fetch - 1, i + grid - 1) * step
        for p in plans:
            found = adapters.get(p.dep.name)
            if found is None or not wanted.get(p.dep.name):
                continue
            _fetch_chunk(rp, source, p, found, wanted[p.dep.name], chunk_start, chunk_end, step)
        while ti < len(times) and times[ti] <= chunk_end + step * 1e-6:
            rp.evaluate(times[ti])
            ti += 1
        i += grid
    while ti < len(times):
        rp.evaluate(times[ti])
        ti += 1
    return rp


def _fetch_chunk(
    rp: Replayer,
    source: PrometheusSource,
    p: _Plan,
    adapter: EngineAdapter,
    wanted: frozenset[str],
    chunk_start: float,
    chunk_end: float,
    step: float,
) -> None:
    h = source.history(p.selector, wanted, chunk_start, chunk_end, step)
    name = p.dep.name
    when = f"{rfc3339(chunk_start)}–{rfc3339(chunk_end)}"
    if not h.ok:
        rp.error(name, f"{when}: query failed: {h.error_reason}: {h.error_message}")
        return
    for w in h.warnings:
        rp.warn(name, f"{when}: {w}")
    for g in h.groups:
        target = p.by_instance.get(g.target, g.target) if p.by_instance else g.target
        try:
            points = to_timed_snapshots(g, adapter, p.dep.served_model, p.dep.model)
        except Exception as exc:  # an adapter bug must not stop the other targets
            rp.warn(name, f"{when}: target {g.target}: adapter error: {type(exc).__name__}: {exc}")
            continue
        points = [dataclasses.replace(pt, target=target) for pt in points]
        rp.feed(name, TargetHistory(target, points, g.up))


# --- reading ---------------------------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def format_report(report: BacktestReport) -> str:
    """The report as an operator reads it: per deployment, each recommendation with when it opened and
    resolved, and each SLO breach."""
    lines = [
        f"backtest {rfc3339(report.start)} → {rfc3339(report.end)}, every {report.step:g}s, "
        f"window {report.evaluation_window:g}s, {len(report.deployments)} deployment(s)"
    ]
    for d in report.deployments:
        states = ", ".join(f"{k} {v}" for k, v in sorted(d.states.items()))
        lines.append(f"== {d.name} ({d.engine}) — {d.evaluations} evaluations ({states or 'none'})")
        if d.selector:
            lines.append(f"   series: {{{d.selector}}}")
        for e in d.errors[:20]:
            lines.append(f"   ERROR: {e}")
        for w in d.warnings[:20]:
            lines.append(f"   warning: {w}")
        if len(d.warnings) > 20:
            lines.append(f"   … {len(d.warnings) - 20} more warnings (--json lists them all)")
        for why, n in sorted(d.state_reasons.items(), key=lambda kv: -kv[1])[:5]:
            lines.append(f"   {n} evaluation(s) {why}")
        fresh = d.states.get("fresh", 0)
        if not d.recommendations and not fresh:
            # unknown is not "nothing": no evaluation had data to judge (errors above, or every one stale/down)
            errors = f"; {len(d.errors)} error(s) above" if d.errors else ""
            lines.append(f"   no recommendation could be judged: no evaluation had fresh data{errors}")
        elif not d.recommendations:
            lines.append(f"   would have recommended nothing in {fresh} evaluation(s) with fresh data")
        for r in d.recommendations:
            option = f" (option {r.option} of {r.options})" if r.options > 1 else ""
            if r.resolved_at is not None:
                until = f"resolved {rfc3339(r.resolved_at)} after {_duration(r.resolved_at - r.opened_at)}"
            else:
                until = "still open at the end"
            lines.append(
                f"   {rfc3339(r.opened_at)} OPEN {r.severity.upper()} {r.rule}{option}: {r.dial} {r.current} → "
                f"{r.suggested} | flag: {r.flag} — {until}"
            )
            lines.append(f"      why: {r.opened_reason}")
        target = f"{d.breaches[0].target_ratio:.1%}" if d.breaches else None
        if not d.breaches and not d.slo_evaluations:
            lines.append("   SLO: unknown (no evaluation had a known goodput ratio)")
        elif not d.breaches:
            lines.append(f"   SLO: no breach in {d.slo_evaluations} evaluations with a known goodput ratio")
        else:
            lines.append(f"   SLO: {len(d.breaches)} breach(es) of goodput ≥ {target} over the window")
        for b in d.breaches:
            span = f"→ {rfc3339(b.end)} ({_duration(b.end - b.start)})" if b.end is not None else "→ still at the end"
            lines.append(
                f"   {rfc3339(b.start)} BREACH {span}; worst {b.worst_ratio:.1%} at {rfc3339(b.worst_at)}"
                + (f" over {b.requests:g} requests" if b.requests is not None else "")
            )
    return "\n".join(lines)
