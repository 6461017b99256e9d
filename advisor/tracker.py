"""The evaluation half of the advisor, pure: each target's history and last scrape outcome, the deployments'
contexts and the rules' :class:`~advisor.rules.lifecycle.Lifecycle`, turned into one :class:`Tick` per
evaluation.

Both the live daemon (:class:`advisor.service.Service`, which scrapes and feeds what it saw) and the backtest
(:class:`advisor.backtest.Replayer`, which feeds history from Prometheus) drive the same :class:`Tracker`, so
the same history gives the same recommendations, opened and resolved at the same times:

* :meth:`Tracker.observe` — a target answered: its snapshot enters the history (:func:`record`: parts
  equal to the previous snapshot's shared, thinned to :data:`HISTORY_POINTS_PER_WINDOW` per window except
  across a restart — :func:`restarted` is the one restart rule); a snapshot older than the target's newest
  means the clock stepped back (:class:`ClockStep`: the histories stay in time order);
* :meth:`Tracker.fail` / :meth:`Tracker.set_status` — a target did not answer (the reason is kept);
* :meth:`Tracker.evaluate` — at ``now``: histories trimmed to the window, replicas counted, every deployment
  evaluated (:func:`advisor.evaluate.evaluate_deployment`), its latency model calibrated once per window
  (:class:`advisor.online_calibration.OnlineCalibration`), and its rules run through the lifecycle with ``now``
  as their clock; returns the :class:`Tick` (results, transitions, updates, failures).

No I/O, no clock, no config: times are arguments, settings are constructor arguments.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import operator
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final, TypeVar

from advisor import conventions as c
from advisor.capacity.model_label import ModelLabelMismatch
from advisor.domain import EngineSnapshot, Histogram, Recommendation, TimedSnapshot
from advisor.evaluate import Quality, TargetView, engines_behind, evaluate_deployment, target_state
from advisor.online_calibration import OnlineCalibration
from advisor.redact import redact_url
from advisor.results import DeploymentResult
from advisor.rules.base import DeploymentContext, Rule
from advisor.rules.lifecycle import HOLDING_STATES, Lifecycle, PendingRestart, RuleStatus, Transition
from advisor.rules.replicas import MIN_ARRIVAL_SPAN_SECONDS, ReplicaStabilizer
from advisor.signals import ReplicaHold, ReplicaLead, SloCapacity, autoscaler_signals
from advisor.telemetry import WindowAccumulator, population_change, since_population_change

HISTORY_POINTS_PER_WINDOW: Final = 8
"""Snapshots kept per target per evaluation window at most (plus the newest and restart boundaries)."""

TRIM_INTERVALS: Final = 3
"""A target's history keeps ``evaluation window + TRIM_INTERVALS × scrape interval`` seconds."""


def restarted(a: EngineSnapshot, b: EngineSnapshot) -> bool:
    """Whether the engine restarted between snapshots ``a`` and ``b`` (in time order): its
    ``process_start_time_seconds`` changed, or a counter that only grows (generation tokens, prompt tokens,
    preemptions) went down. The one restart rule of the daemon and the backtest."""
    if a.process_start_time_seconds != b.process_start_time_seconds and b.process_start_time_seconds is not None:
        return True
    for x, y in (
        (a.generation_tokens_total, b.generation_tokens_total),
        (a.prompt_tokens_total, b.prompt_tokens_total),
        (a.preemptions_total, b.preemptions_total),
    ):
        if x is not None and y is not None and y < x:
            return True
    return False


def _share_histogram(h: Histogram, prev: Histogram) -> Histogram:
    """``prev`` when ``h`` equals it (an idle engine's histograms repeat scrape after scrape), else ``h``.
    Bounds are shared already (:class:`~advisor.domain.Histogram` interns them) and counts are packed, so a
    histogram that moved keeps its own ~300 bytes."""
    if h.count == prev.count and h.sum == prev.sum and h.bounds() is prev.bounds() and h.counts() == prev.counts():
        return prev
    return h


log = logging.getLogger(__name__)

_Frozen = TypeVar("_Frozen", EngineSnapshot, TimedSnapshot)
_DIRECT_FROM_FIELDS: Final = 8
"""Fields above which :func:`_replaced` sets the slots itself: measured on a vLLM page's snapshot (27 fields) 5.5 →
3.9 µs a copy; a :class:`TimedSnapshot` (4 fields) costs less through ``__init__`` (1.4 µs, 1.9 µs set directly)."""
_Layout = tuple[Callable[[Any], tuple[Any, ...]], dict[str, int], tuple[Callable[..., None], ...] | None]
_LAYOUTS: dict[type, _Layout] = {}
"""Per dataclass :func:`_replaced` copies: a getter of every field's value in order, each field's position, and each
field's slot setter (``None`` when the copy must go through ``__init__``)."""


def _replaced(obj: _Frozen, **changes: Any) -> _Frozen:
    """``dataclasses.replace(obj, **changes)``, sharing every other field's value, at a fraction of its cost (one
    C-level read of all fields, then a positional construction, rather than a keyword per field). A dataclass of
    many fields (:data:`_DIRECT_FROM_FIELDS`) with a slot per field and no ``__post_init__``, whose ``__init__`` does
    nothing but set them, has its slots set in one C-level pass over a new instance instead. Raises ``KeyError`` for
    a name that is not a field."""
    cls = type(obj)
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = dataclasses.fields(cls)
        if any(not f.init or f.kw_only for f in fields) or len(fields) < 2:
            raise TypeError(f"{cls.__name__}: every field must be positional in __init__")
        names = [f.name for f in fields]
        slots = getattr(cls, "__slots__", ())
        direct = (
            len(names) > _DIRECT_FROM_FIELDS
            and not hasattr(cls, "__post_init__")
            and all(name in slots for name in names)
        )
        setters = tuple(getattr(cls, name).__set__ for name in names) if direct else None
        layout = _LAYOUTS[cls] = (operator.attrgetter(*names), {name: i for i, name in enumerate(names)}, setters)
    values = list(layout[0](obj))
    for name, value in changes.items():
        values[layout[1][name]] = value
    setters = layout[2]
    if setters is None:
        return cls(*values)
    new = cls.__new__(cls)
    deque(map(operator.call, setters, repeat(new), values), maxlen=0)
    return new


_SHARED_HISTOGRAMS: Final = ("ttft", "tpot", "e2e", "queue_time")
_GET_SHARED: Final = operator.attrgetter(*_SHARED_HISTOGRAMS)


def record(history: deque[TimedSnapshot], point: TimedSnapshot, window: float) -> None:
    """Append ``point`` to a target's history, keeping memory bounded for fleets of thousands of targets:

    * parts equal to the previous snapshot's (engine configuration, the missing list) are shared, not
      copied;
    * points closer than ``window / HISTORY_POINTS_PER_WINDOW`` to their neighbours are thinned (the
      middle one of three is dropped) unless a restart happened across them (:func:`restarted`) — rates,
      histogram deltas and counter resets over the window stay exact, and the running requests' peak is carried
      into the point that replaces them (:attr:`~advisor.domain.TimedSnapshot.requests_running_peak`); only the
      resolution of the other min/max gauges coarsens;
    * the previous newest point, when it stays, keeps no end-to-end latency histogram (one dropped is not
      copied first).
    """
    if history:
        prev_point = history[-1]
        prev = prev_point.snapshot
        snap = point.snapshot
        shared: dict[str, Any] = {}
        if snap.engine_config == prev.engine_config and snap.engine_config is not prev.engine_config:
            shared["engine_config"] = prev.engine_config
        if snap.missing == prev.missing and snap.missing is not prev.missing:
            shared["missing"] = prev.missing
        for name, h, ph in zip(_SHARED_HISTOGRAMS, _GET_SHARED(snap), _GET_SHARED(prev), strict=True):
            # a moving histogram's count differs: settled here, without the call
            if (
                h is not None
                and ph is not None
                and h is not ph
                and h.count == ph.count
                and _share_histogram(h, ph) is ph
            ):
                shared[name] = ph
        if shared:
            point = _replaced(point, snapshot=_replaced(snap, **shared))
        if len(history) > 1:
            a = history[-2]
            if (
                point.timestamp - a.timestamp < window / HISTORY_POINTS_PER_WINDOW
                and not restarted(a.snapshot, prev)
                and not restarted(prev, point.snapshot)
            ):
                # thinned: the previous newest, the middle one of three, gives way, its running peak kept (a gauge
                # one slot below the cap between two steps read as the window's peak: breaker 23's rerun)
                peak = prev_point.running_peak
                own = point.snapshot.requests_running
                if peak is not None and math.isfinite(peak) and (own is None or not own >= peak):
                    point = _replaced(point, requests_running_peak=peak)
                history[-1] = point
                return
            if prev.e2e is not None:
                # nothing reads end-to-end latency from older points: keep it on the newest only
                history[-1] = _replaced(history[-1], snapshot=_replaced(prev, e2e=None))
    history.append(point)


@dataclass(frozen=True, slots=True)
class ClockStep:
    """The clock that stamps a deployment's snapshots stepped back (a host clock that ran ahead set right by NTP,
    a VM restored): a snapshot came in stamped ``now``, more than one scrape interval before the newest one held
    (``newest``). The daemon's scrapes are stamped with its own clock, so every point held was stamped by the clock
    before the step: :meth:`Tracker.observe` dropped them (``dropped``, over every target of ``deployment``), and
    the window restarts with the new snapshot. Kept, they would sit "in the future" of the clock, out of time
    order: each new point thinned away against them (:func:`record`; an hour's step left one sample in the window,
    and no rate, for the hour), rates taken across the two clocks (a minute's step read 121 tokens/s for 100), a
    frozen engine never found frozen. (The Prometheus source's points carry the store's scrape times, not this
    clock: it drops only those after ``now``, in ``advisor.service.Service._clock_stepped_back``.)

    Attributes:
        deployment: the deployment whose histories restarted.
        now: the clock after the step (the new snapshot's time, unix s).
        newest: the newest point held before the step (unix s).
        dropped: points dropped, over every target of the deployment.
    """

    deployment: str
    now: float
    newest: float
    dropped: int

    @property
    def seconds(self) -> float:
        """How far the clock stepped back, as measured: ``newest − now`` (at least one scrape interval; a step
        lands between two scrapes, so this is the step less up to one interval)."""
        return self.newest - self.now


@dataclass
class _Target:
    url: str
    history: deque[TimedSnapshot] = field(default_factory=deque)
    up: bool = False
    error_reason: str | None = None
    error_message: str | None = None
    window: WindowAccumulator = field(default_factory=WindowAccumulator)
    """The history's counter steps and histogram deltas, computed once per point (kept in step by identity)."""
    changed_logged_at: float = -math.inf
    """When the last change of the engines behind the target was logged at INFO (unix s; :meth:`Tracker.observe`)."""
    received: deque[float] = field(default_factory=deque)
    """When each observation arrived (unix s), thinned or not: the history keeps at most
    :data:`HISTORY_POINTS_PER_WINDOW` points a window, the window's coverage counts the scrapes that came."""

    def view(self) -> TargetView:
        return TargetView(
            self.url,
            self.up,
            self.error_reason,
            self.error_message,
            tuple(self.history),
            self.window,
            received=tuple(self.received),
        )


@dataclass
class _Deployment:
    ctx: DeploymentContext
    listed: list[str]  # the targets evaluated, in order
    targets: dict[str, _Target] = field(default_factory=dict)  # every target held (listed or kept)
    count_replicas: bool = True


@dataclass(frozen=True, slots=True)
class Tick:
    """One evaluation of every deployment at ``now`` (unix seconds).

    Attributes:
        now: the evaluation time.
        results: one :class:`~advisor.results.DeploymentResult` per deployment evaluated, in order.
        transitions: what opened and resolved (to notify), in deployment order.
        updates: ``updated`` transitions (shown, never notified).
        failures: ``(deployment, exception)`` of each deployment whose evaluation raised (skipped this tick).
        model_errors: ``(deployment, capacity_model_error_ratio, mismatch)`` of each deployment whose capacity pass
            now misses the engine's reported KV pool beyond the bound, reported once until it recovers; ``mismatch``
            the engine's model label that names another model than the config's (the likely cause), else None.
        restarts: the deployments whose pending for-durations restarted at this evaluation, which came after a
            gap longer than ``max_gap_seconds`` or a step back of the clock
            (:class:`~advisor.rules.lifecycle.PendingRestart`).
    """

    now: float
    results: tuple[DeploymentResult, ...]
    transitions: tuple[Transition, ...]
    updates: tuple[Transition, ...] = ()
    failures: tuple[tuple[str, BaseException], ...] = ()
    model_errors: tuple[tuple[str, float, ModelLabelMismatch | None], ...] = ()
    restarts: tuple[PendingRestart, ...] = ()

    def result(self, deployment: str) -> DeploymentResult | None:
        """The result of ``deployment``, or ``None`` (not evaluated, or failed)."""
        return next((r for r in self.results if r.name == deployment), None)


StepTimer = Callable[[str], AbstractContextManager[Any]]
"""``step("rules")`` → a context manager timing that step (the daemon's cycle-step histogram)."""


class Tracker:
    """The deployments' contexts, each target's history and outcome, and the lifecycle. Pure.

    Args:
        rules: the rules, run in order each evaluation.
        evaluation_window: seconds of history each evaluation reads.
        scrape_interval: seconds between observations (histories keep ``window + 3`` intervals).
        quality: data-quality thresholds (:class:`advisor.evaluate.Quality`).
        cooldown_seconds: after a rule's recommendations resolve, it opens nothing for this long.
        ignore_for: open as soon as a rule holds (``once``), not after its for-duration.
        model_error_bound: ``|capacity_model_error_ratio|`` beyond which :attr:`Tick.model_errors` reports a
            deployment (``None``: never).
        replica_windows: ``(scale-up, scale-down)`` stabilization windows in seconds for the replica advice
            (config ``rules.replicas``; :class:`advisor.rules.replicas.ReplicaStabilizer`); ``None``: the defaults.
        max_gap_seconds: an evaluation more than this after a deployment's previous one cannot vouch for the time
            between: its pending for-durations restart (:class:`~advisor.rules.lifecycle.Lifecycle`; the daemon
            gives its stalled-loop bound). ``None``: evaluations vouch for any forward gap (the backtest, whose
            evaluations are its grid).
        resolve_hold_seconds: an active rule leaves once its clear side has held this long (config
            ``rules.resolve_for``; :class:`~advisor.rules.lifecycle.Lifecycle`).
        replica_min_history: ``rules.replicas.min_history`` in seconds: the autoscaler signals' throughput headroom
            (:mod:`advisor.signals`) is withheld over a shorter history, as the replica advice is.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        evaluation_window: float,
        scrape_interval: float,
        quality: Quality,
        cooldown_seconds: float = 0.0,
        ignore_for: bool = False,
        model_error_bound: float | None = None,
        replica_windows: tuple[float, float] | None = None,
        max_gap_seconds: float | None = None,
        replica_min_history: float = MIN_ARRIVAL_SPAN_SECONDS,
        resolve_hold_seconds: float = 0.0,
    ) -> None:
        stabilizer = ReplicaStabilizer(*replica_windows) if replica_windows is not None else None
        self.lifecycle = Lifecycle(
            rules,
            cooldown_seconds=cooldown_seconds,
            replica_stabilizer=stabilizer,
            max_gap_seconds=max_gap_seconds,
            resolve_hold_seconds=resolve_hold_seconds,
        )
        self.evaluation_window = evaluation_window
        self.scrape_interval = scrape_interval
        self.quality = quality
        self.ignore_for = ignore_for
        self.model_error_bound = model_error_bound
        self.replica_min_history = replica_min_history
        self.replica_hold = ReplicaHold()
        """The incident count ``advisor_desired_replicas`` holds while its incident is open (issue 18)."""
        self.slo_capacity = SloCapacity(evaluation_window)
        """Each deployment's capacity at the SLO per replica, re-derived once per evaluation window (issue 18)."""
        lead_windows = replica_windows if replica_windows is not None else ()
        self.replica_lead = ReplicaLead(ReplicaStabilizer(*lead_windows), evaluation_window)
        """The lead of ``advisor_desired_replicas``: the arrival rate's trend over one evaluation window, stabilized
        with the replica advice's windows (issue 18)."""
        self._deps: dict[str, _Deployment] = {}
        self._model_error_warned: set[str] = set()
        self.calibration = OnlineCalibration()
        """Each deployment's latency model, calibrated once per evaluation window on its TPOT/TTFT (issue 17)."""

    # -- settings and deployments --------------------------------------------------------------------------
    def configure(
        self,
        rules: Sequence[Rule],
        *,
        evaluation_window: float,
        scrape_interval: float,
        quality: Quality,
        cooldown_seconds: float,
        model_error_bound: float | None,
        replica_windows: tuple[float, float] | None = None,
        max_gap_seconds: float | None = None,
        replica_min_history: float = MIN_ARRIVAL_SPAN_SECONDS,
        resolve_hold_seconds: float = 0.0,
    ) -> None:
        """New settings (a reload): histories, open recommendations, pending for-durations and the replica
        counts observed so far are kept (new stabilization windows apply to them; a new ``max_gap_seconds``
        from the next evaluation)."""
        self.lifecycle.rules = list(rules)
        self.lifecycle.cooldown_seconds = cooldown_seconds
        self.lifecycle.resolve_hold_seconds = resolve_hold_seconds
        self.lifecycle.max_gap_seconds = max_gap_seconds
        if replica_windows is not None:
            for stab in (self.lifecycle.replica_stabilizer, self.replica_lead.stabilizer):
                stab.up_window, stab.down_window = replica_windows
        self.evaluation_window = evaluation_window
        self.scrape_interval = scrape_interval
        self.quality = quality
        self.model_error_bound = model_error_bound
        self.replica_min_history = replica_min_history
        self.slo_capacity.refresh_seconds = evaluation_window
        self.replica_lead.horizon_seconds = evaluation_window

    def set_deployments(self, deployments: Sequence[tuple[DeploymentContext, Sequence[str]]]) -> None:
        """The deployments to evaluate, in order, each with its targets. A (deployment, target) that stays
        keeps its history and outcome; the others are forgotten."""
        deps: dict[str, _Deployment] = {}
        for ctx, urls in deployments:
            old = self._deps.get(ctx.name)
            d = _Deployment(ctx, [], count_replicas=old.count_replicas if old is not None else True)
            for u in urls:
                if u not in d.targets:
                    d.listed.append(u)
                    d.targets[u] = (old.targets.get(u) if old is not None else None) or _Target(u)
            deps[ctx.name] = d
        self._deps = deps
        self._model_error_warned &= set(deps)
        self.calibration.forget(deps)
        self.replica_hold.retain(deps)
        self.replica_lead.retain(deps)
        self.slo_capacity.retain(())  # a reload may change a deployment's SLO, GPU or model: derive again

    def add_deployment(self, ctx: DeploymentContext, urls: Sequence[str] = (), *, count_replicas: bool = True) -> None:
        """Add (or replace) one deployment with its known targets."""
        d = _Deployment(ctx, [], count_replicas=count_replicas)
        for u in urls:
            if u not in d.targets:
                d.listed.append(u)
                d.targets[u] = _Target(u)
        self._deps[ctx.name] = d
        self.slo_capacity.retain([n for n in self._deps if n != ctx.name])

    @property
    def deployment_names(self) -> list[str]:
        """The deployments, in evaluation order."""
        return list(self._deps)

    def context(self, deployment: str) -> DeploymentContext:
        """The deployment's current context. Raises ``KeyError`` for an unknown deployment."""
        return self._deps[deployment].ctx

    def set_context(self, deployment: str, ctx: DeploymentContext) -> None:
        """Replace the deployment's context (an engine detected, replicas counted by the caller)."""
        self._deps[deployment].ctx = ctx

    def count_replicas(self, deployment: str, on: bool) -> None:
        """``on`` (the default): each evaluation sets the context's replicas to the engines behind the listed
        targets (:func:`advisor.evaluate.engines_behind` of each newest snapshot, 1 for a target with none).
        Off: the caller sets them (:meth:`set_context`)."""
        self._deps[deployment].count_replicas = on

    def targets(self, deployment: str) -> list[str]:
        """The deployment's listed targets, in order."""
        return list(self._deps[deployment].listed)

    def set_targets(self, deployment: str, urls: Sequence[str], *, forget: bool = True) -> None:
        """List ``urls`` as the deployment's targets (in order). ``forget``: drop the history of the targets
        no longer listed; else keep it for when they return."""
        d = self._deps[deployment]
        listed: list[str] = []
        for u in urls:
            if u not in listed:
                listed.append(u)
                d.targets.setdefault(u, _Target(u))
        d.listed = listed
        if forget:
            d.targets = {u: d.targets[u] for u in listed}

    def _target(self, deployment: str, url: str) -> _Target:
        d = self._deps[deployment]
        t = d.targets.get(url)
        if t is None:
            t = d.targets[url] = _Target(url)
            d.listed.append(url)
        return t

    # -- observations -----------------------------------------------------------------------------------------
    def observe(self, deployment: str, url: str, point: TimedSnapshot) -> ClockStep | None:
        """Target ``url`` of ``deployment`` answered with ``point``: it enters the history (:func:`record`),
        the target is up. An unknown target is added to the listed ones. Raises ``KeyError`` for an unknown
        deployment.

        Each target's points arrive in time order (one scrape at a time, stamped when it ends; the Prometheus
        source and the backtest append only points newer than the newest held), so ``point`` older than the
        target's newest means the clock that stamps them stepped back. Within one scrape interval, the target's
        points stamped after ``point`` are dropped (at most that interval's point) and nothing is reported.
        Further, every target of the deployment drops its history (all stamped by the clock before the step; see
        :class:`ClockStep`) and the step is returned, once: the window restarts with ``point``. ``None`` else."""
        t = self._target(deployment, url)
        step = self._stepped_back(deployment, t, point.timestamp) if t.history else None
        change = population_change(t.history[-1].snapshot, point.snapshot) if t.history else None
        if change is not None:  # the sums behind the target changed population: its window starts again here
            # at INFO once a window per target; a page flapping every scrape repeats at DEBUG (breaker 21)
            quiet = point.timestamp - t.changed_logged_at < self.evaluation_window
            t.changed_logged_at = t.changed_logged_at if quiet else point.timestamp
            log.log(logging.DEBUG if quiet else logging.INFO,
                    "%s: %s: the engines behind this target changed (%s); its window starts again", deployment,
                    redact_url(url), change)  # fmt: skip
            t.history.clear()
            t.window.sync(t.history)
            t.received.clear()
        record(t.history, point, self.evaluation_window)
        t.window.sync(t.history)  # the new point's deltas, once (and the thinned or replaced neighbours')
        if step is not None:  # the histories restarted: so does the count of what arrived
            for other in self._deps[deployment].targets.values():
                other.received.clear()
        while t.received and t.received[-1] > point.timestamp:  # points after it were dropped (_stepped_back)
            t.received.pop()
        t.received.append(point.timestamp)
        t.up, t.error_reason, t.error_message = True, None, None
        return step

    def _stepped_back(self, deployment: str, t: _Target, now: float) -> ClockStep | None:
        """Keep ``t``'s history in time order before a point stamped ``now`` enters (:meth:`observe`)."""
        newest = t.history[-1].timestamp
        if newest <= now:
            return None
        if newest - now <= self.scrape_interval:
            while t.history and t.history[-1].timestamp > now:
                t.history.pop()
            return None
        dropped = 0
        for other in self._deps[deployment].targets.values():
            if other.history:
                newest = max(newest, other.history[-1].timestamp)
                dropped += len(other.history)
                other.history.clear()
                other.window.sync(other.history)
        return ClockStep(deployment, now, newest, dropped)

    def fail(self, deployment: str, url: str, reason: str | None, message: str | None) -> bool:
        """Target ``url`` did not answer (``reason``: a ``c.REASON_*``). Returns whether that is news: it was
        up, or down for another reason."""
        t = self._target(deployment, url)
        changed = t.up or t.error_reason != reason
        t.up, t.error_reason, t.error_message = False, reason, message
        return changed

    def set_status(self, deployment: str, url: str, up: bool, reason: str | None, message: str | None) -> None:
        """Set the target's last outcome without touching its history."""
        t = self._target(deployment, url)
        t.up, t.error_reason, t.error_message = up, reason, message

    def replace_history(self, deployment: str, url: str, points: Iterable[TimedSnapshot]) -> None:
        """Replace the target's history whole (a Prometheus range query gives the window at once), from its last
        change of the engines behind the target on (:func:`~advisor.telemetry.since_population_change`)."""
        t = self._target(deployment, url)
        t.history = deque(since_population_change(points))
        t.window.sync(t.history)
        t.received = deque(p.timestamp for p in t.history)

    def history(self, deployment: str, url: str) -> tuple[TimedSnapshot, ...]:
        """The target's history, oldest first (empty for an unknown target)."""
        t = self._deps[deployment].targets.get(url)
        return tuple(t.history) if t is not None else ()

    def view(self, deployment: str, url: str) -> TargetView:
        """The target as the next evaluation reads it."""
        return self._target(deployment, url).view()

    def views(self, deployment: str) -> list[TargetView]:
        """The listed targets, as the next evaluation reads them."""
        d = self._deps[deployment]
        return [d.targets[u].view() for u in d.listed]

    # -- evaluation -----------------------------------------------------------------------------------------
    def trim(self, now: float, window: float | None = None) -> None:
        """Drop history older than ``window`` (default the evaluation window) plus 3 scrape intervals."""
        keep = (window or self.evaluation_window) + TRIM_INTERVALS * self.scrape_interval
        for d in self._deps.values():
            for t in d.targets.values():
                if t.history and now - t.history[0].timestamp > keep:
                    while t.history and now - t.history[0].timestamp > keep:
                        t.history.popleft()
                    t.window.sync(t.history)
                while t.received and now - t.received[0] > keep:
                    t.received.popleft()

    def _replicas(self, d: _Deployment) -> None:
        if not d.count_replicas:
            return
        n = sum([engines_behind(t.history[-1].snapshot) if t.history else 1 for t in map(d.targets.get, d.listed) if t])
        if max(1, n) != d.ctx.replicas:
            d.ctx = dataclasses.replace(d.ctx, replicas=max(1, n))

    def evaluate(
        self,
        now: float,
        window: float | None = None,
        round_started: float | None = None,
        step: StepTimer | None = None,
        scrapes_per_target: int | None = None,
    ) -> Tick:
        """Evaluate every deployment at ``now`` over ``window`` seconds (default the evaluation window).

        ``round_started``: when the observations of this round began (a target whose newest sample predates
        it by more than the stale bound is stale; default ``now``). ``step``: times the rules' step.
        ``scrapes_per_target``: the scrapes of each target the window should hold, for coverage (``once``: the
        2 it takes; default: ⌊window ÷ interval⌋ + 1, :func:`~advisor.evaluate.evaluate_deployment`).
        A deployment whose evaluation raises is skipped this tick and listed in :attr:`Tick.failures`.
        """
        window = window or self.evaluation_window
        timer: StepTimer = step or (lambda _name: nullcontext())
        self.trim(now, window)
        transitions: list[Transition] = []
        updates: list[Transition] = []
        failures: list[tuple[str, BaseException]] = []
        model_errors: list[tuple[str, float, ModelLabelMismatch | None]] = []
        restarts: list[PendingRestart] = []
        # incidents of deployments a reload removed, or of problems no configured rule has, resolve now
        transitions += self.lifecycle.resolve_orphans(set(self._deps), now)
        # each deployment's result, its rule statuses left to fill in after the loop: the statuses of every
        # deployment are one dict, and filtering it per deployment would cost O(deployments²) a cycle
        done: list[tuple[str, dict[str, Any]]] = []
        for name, d in self._deps.items():
            try:
                self._replicas(d)
                views = [d.targets[u].view() for u in d.listed]
                ev, snapshot = evaluate_deployment(
                    d.ctx,
                    views,
                    now,
                    window,
                    self.quality,
                    round_started=round_started,
                    scrapes_per_target=scrapes_per_target,
                )
                ev = self.calibration.apply(name, ev, window, self.scrape_interval)
                error = self._model_error(name, snapshot.get("capacity_model_error_ratio"))
                if error is not None:
                    model_errors.append((name, error, ev.model_mismatch))
                with timer("rules"):
                    transitions += self.lifecycle.evaluate(ev, ignore_for=self.ignore_for)
                updates += self.lifecycle.last_updates
                if self.lifecycle.last_restart is not None:
                    restarts.append(self.lifecycle.last_restart)
                recommendations = tuple(self.lifecycle.open_recommendations(name))
                signals = autoscaler_signals(
                    ev,
                    recommendations,
                    views,
                    window,
                    snapshot.reported.kv_cache_usage_ratio,
                    self.slo_capacity,
                    min_history_seconds=self.replica_min_history,
                    hold=self.replica_hold,
                    lead=self.replica_lead,
                    slo_missed=self._slo_missed(name),
                )
                done.append(
                    (
                        name,
                        {
                            "name": name,
                            "engine": d.ctx.engine,
                            "state": ev.state,
                            "evaluation": ev,
                            "snapshot": snapshot,
                            "capacity": d.ctx.capacity,
                            "targets": tuple(views),
                            "recommendations": recommendations,
                            "signals": signals,
                            "target_states": tuple(
                                [target_state(v, round_started or now, self.quality) for v in views]
                            ),
                        },
                    )
                )
            except Exception as exc:  # one deployment's failure never stops the others
                failures.append((name, exc))
        # a deployment's statuses are written only while it is evaluated, so grouping them once now gives each the
        # statuses it had right after its own evaluation, in the same (insertion) order
        statuses: dict[str, list[RuleStatus]] = {}
        for (dep, _), status in self.lifecycle.statuses.items():
            statuses.setdefault(dep, []).append(status)
        results = [DeploymentResult(**fields, rule_statuses=tuple(statuses.get(name, ()))) for name, fields in done]
        return Tick(
            now,
            tuple(results),
            tuple(transitions),
            tuple(updates),
            tuple(failures),
            tuple(model_errors),
            tuple(restarts),
        )

    def _slo_missed(self, name: str) -> bool:
        """Whether the deployment's ``goodput_below_target`` rule holds after this cycle's evaluation (its window's
        requests miss the SLO with enough of them to judge, or its incident has not cleared)."""
        status = self.lifecycle.statuses.get((name, c.RULE_GOODPUT_BELOW_TARGET))
        return status is not None and status.state in HOLDING_STATES

    def _model_error(self, name: str, error: Any) -> float | None:
        """``error`` when it newly passes the bound (reported once, again after it recovers), else ``None``."""
        bound = self.model_error_bound
        if bound is not None and isinstance(error, int | float) and abs(error) > bound:
            if name in self._model_error_warned:
                return None
            self._model_error_warned.add(name)
            return float(error)
        self._model_error_warned.discard(name)
        return None

    def restore(self, recommendations: Sequence[Recommendation]) -> int:
        """Re-open recommendations of known deployments (from a state file); returns how many."""
        known = [r for r in recommendations if r.deployment in self._deps]
        self.lifecycle.restore(known)
        return len(known)
