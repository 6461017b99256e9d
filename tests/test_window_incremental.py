"""Issue 15, incremental evaluation: each target's counter steps and histogram deltas are computed once, when its
point is recorded (:class:`advisor.telemetry.WindowAccumulator`, held by the tracker), and a cycle reads the
window off them. The from-scratch :func:`advisor.telemetry.window_stats` stays the reference: over random
histories (restarts, counter resets, thinning, unknown values, histograms appearing and disappearing, bucket
layouts changing, trims, whole histories replaced, points out of order, a second target) the incremental
statistics equal it exactly (``==``, NaN matching NaN), and what the reference does not know stays ``None``, never
0. The tracker gives the same ticks and recommendations either way over a simulated engine's history.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.config import RulesConfig
from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.engines import get_adapter
from advisor.evaluate import Quality, TargetView
from advisor.observe import observe
from advisor.rules.registry import builtin_rules
from advisor.sim.exposition import VLLMCollector, render
from advisor.sim.fleet import Fleet
from advisor.sim.metrics import VLLMMetrics
from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile
from advisor.telemetry import WindowAccumulator, WindowStats, window_stats
from advisor.tracker import Tick, Tracker, _Target, record
from tests.factories import context
from tests.sim.conftest import MODEL, llama_engine

INF = math.inf
URL = "http://engine-a:8000/metrics"
T0 = 1_000_000.0
LAYOUTS = ((0.1, 0.5, 1.0, INF), (0.2, 1.0, INF), (0.05, 0.1, 0.25, 0.5, 2.5, INF))
COUNTERS = ("preemptions_total", "prompt_tokens_total", "generation_tokens_total", "requests_finished_total")
HISTS = ("ttft", "tpot", "queue_time", "e2e")


# --- comparing two window statistics ---------------------------------------------------------------------------


def _close(a: float, b: float) -> bool:
    """``a == b``, NaN matching NaN: the incremental statistics are the reference's exactly, not within a tolerance."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b


def assert_same(got: WindowStats, ref: WindowStats) -> None:
    """Every field of ``got`` equals ``ref``'s exactly (NaN matching NaN); ``None`` exactly where ``ref`` has one."""
    for f in dataclasses.fields(WindowStats):
        g, r = getattr(got, f.name), getattr(ref, f.name)
        if r is None:
            assert g is None, f"{f.name}: reference unknown (None), incremental {g!r}"
            continue
        assert g is not None, f"{f.name}: reference {r!r}, incremental unknown"
        if isinstance(r, Histogram):
            assert isinstance(g, Histogram), f.name
            assert g.bounds() == r.bounds(), f.name
            assert all(_close(x, y) for x, y in zip(g.counts(), r.counts(), strict=True)), (f.name, g, r)
            assert _close(g.count, r.count) and _close(g.sum, r.sum), (f.name, g, r)
        elif isinstance(r, float):
            assert _close(g, r), f"{f.name}: incremental {g!r}, reference {r!r}"
        else:
            assert g == r, f"{f.name}: incremental {g!r}, reference {r!r}"


def check(acc: WindowAccumulator, history: Any, now: float, window: float) -> None:
    """The accumulator's statistics of ``history`` against the reference's (both raising alike)."""
    try:
        ref = window_stats(tuple(history), now, window)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            acc.stats(history, now, window)
        return
    assert_same(acc.stats(history, now, window), ref)


# --- random histories ---------------------------------------------------------------------------------------


@st.composite
def engines(draw: st.DrawFn, n: int) -> list[EngineSnapshot]:
    """``n`` scrapes of one engine: counters rising with drops and unknown values, restarts (a new start time,
    or counters back near zero), histograms of a few layouts growing, vanishing, changing layout, going back."""
    start: float | None = 1000.0
    counters = {name: draw(st.sampled_from([0.0, 5.0, 1e6])) for name in COUNTERS}
    layout = {name: draw(st.sampled_from(LAYOUTS)) for name in HISTS}
    cum = {name: [0.0] * len(layout[name]) for name in HISTS}
    sums = dict.fromkeys(HISTS, 0.0)
    out: list[EngineSnapshot] = []
    value = st.one_of(st.none(), st.just(math.nan), st.floats(0.0, 64.0, allow_nan=False))
    steps = [0.0, 0.0, 1.0, 3.0] + ([0.5] if draw(st.booleans()) else [])  # whole counts, or fractional ones
    for _ in range(n):
        event = draw(st.sampled_from(["none"] * 6 + ["restart", "counter_drop", "start_unknown", "start_jitter"]))
        if event == "restart":
            start = (start or 1000.0) + draw(st.sampled_from([2.0, 500.0]))
            counters = dict.fromkeys(COUNTERS, 0.0)
            cum = {name: [0.0] * len(layout[name]) for name in HISTS}
            sums = dict.fromkeys(HISTS, 0.0)
        elif event == "start_jitter" and start is not None:
            start += 0.5  # within the tolerance: no restart
        fields: dict[str, Any] = {}
        for name in COUNTERS:
            step = draw(st.sampled_from([0.0, 1.0, 2.5, 0.1, 1000.0, 3.3e4]))
            counters[name] += step
            if event == "counter_drop" and draw(st.booleans()):
                counters[name] = draw(st.sampled_from([0.0, counters[name] / 2]))
            fields[name] = draw(st.sampled_from([counters[name]] * 8 + [None, math.nan, INF]))
        for name in HISTS:
            if draw(st.integers(0, 19)) == 0:  # the engine changed its buckets
                layout[name] = draw(st.sampled_from(LAYOUTS))
                cum[name] = [0.0] * len(layout[name])
            grow = draw(st.lists(st.sampled_from(steps), min_size=len(cum[name]), max_size=len(cum[name])))
            running = 0.0
            for i, g in enumerate(grow):
                running += g
                cum[name][i] += running
            if draw(st.integers(0, 24)) == 0:  # the histogram went back without any other sign
                cum[name] = [c / 2 for c in cum[name]]
            sums[name] += draw(st.floats(0.0, 50.0, allow_nan=False))
            hist = Histogram(tuple(zip(layout[name], cum[name], strict=True)), count=cum[name][-1], sum=sums[name])
            fields[name] = hist if draw(st.integers(0, 6)) else None  # appearing and disappearing
        out.append(
            EngineSnapshot(
                engine="vllm",
                process_start_time_seconds=None if event == "start_unknown" else start,
                requests_running=draw(value),
                requests_waiting=draw(value),
                kv_cache_usage_ratio=draw(st.one_of(st.none(), st.just(math.nan), st.floats(0.0, 1.0))),
                **fields,
            )
        )
    return out


_GAPS = st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.0, 15.0, 15.0, 15.0, 40.0, 200.0])


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """A tracker's life: observations (time going forward, sometimes back), evaluations at various windows,
    trims, whole histories replaced (the backtest), and rarely a point naming another target."""
    snaps = draw(engines(draw(st.integers(1, 25))))
    ops: list[tuple[Any, ...]] = []
    t = T0
    for snap in snaps:
        t += draw(_GAPS)
        if draw(st.integers(0, 29)) == 0:
            t -= 20.0  # the clock went back
        target = URL if draw(st.integers(0, 79)) else "http://other:8000/metrics"
        ops.append(("observe", TimedSnapshot(target, t, snap)))
        kind = draw(st.sampled_from(["evaluate"] * 4 + ["none", "trim", "replace", "evaluate_past"]))
        window = draw(st.sampled_from([1.0, 15.0, 45.0, 60.0, 300.0]))
        if kind == "evaluate":
            ops.append(("evaluate", t + draw(st.sampled_from([0.0, 0.0, 5.0, 100.0])), window))
        elif kind == "evaluate_past":
            ops.append(("evaluate", t - draw(st.sampled_from([1.0, 15.0, 61.0])), window))
        elif kind == "trim":
            ops.append(("trim", t, window))
        elif kind == "replace":
            ops.append(("replace", draw(st.lists(st.booleans(), min_size=1, max_size=60))))
    return ops


def _run(ops: list[tuple[Any, ...]], evaluation_window: float) -> Iterator[tuple[TargetView, float, float]]:
    """Drive a tracker through ``ops``; yield the view of the target at each evaluation."""
    tr = Tracker([], evaluation_window=evaluation_window, scrape_interval=15.0, quality=Quality(15.0))
    tr.set_deployments([(context(), [URL])])
    for op in ops:
        if op[0] == "observe":
            tr.observe("chat-8b", URL, op[1])
        elif op[0] == "trim":
            tr.trim(op[1], op[2])
        elif op[0] == "replace":
            kept = [p for p, keep in zip(tr.history("chat-8b", URL), op[1], strict=False) if keep]
            tr.replace_history("chat-8b", URL, kept)
        else:
            yield tr.view("chat-8b", URL), op[1], op[2]


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(operations(), st.sampled_from([60.0, 300.0]))
def test_incremental_window_statistics_equal_the_reference(
    ops: list[tuple[Any, ...]], evaluation_window: float
) -> None:
    for view, now, window in _run(ops, evaluation_window):
        assert view.window is not None  # the tracker's view reads the incremental path
        check(view.window, view.history, now, window)
        # and every other window over the same history, from the same precomputed steps
        for other in (0.5, 15.0, 120.0, 1e9):
            check(view.window, view.history, now, other)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_an_accumulator_follows_any_change_to_the_history_it_is_given(data: st.DataObject) -> None:
    """Points appended (through ``record``, which thins and replaces the previous point), removed from either
    end or the middle, or inserted: the accumulator recomputes what changed and still equals the reference."""
    snaps = data.draw(engines(data.draw(st.integers(2, 20))))
    history: deque[TimedSnapshot] = deque()
    acc = WindowAccumulator()
    t = T0
    for snap in snaps:
        t += data.draw(_GAPS)
        record(history, TimedSnapshot(URL, t, snap), 60.0)
        acc.sync(history)
        change = data.draw(st.sampled_from(["none", "none", "popleft", "pop", "middle", "insert"]))
        if change == "popleft" and history:
            history.popleft()
        elif change == "pop" and history:
            history.pop()
        elif change == "middle" and len(history) > 2:
            del history[data.draw(st.integers(1, len(history) - 2))]
        elif change == "insert" and history:
            i = data.draw(st.integers(0, len(history) - 1))
            history.insert(i, dataclasses.replace(history[i]))  # an equal point, a new object
        check(acc, history, t, data.draw(st.sampled_from([15.0, 60.0, 300.0])))


# --- hand-made cases the property covers, kept as examples --------------------------------------------------


def _snap(tokens: float | None, start: float | None = 100.0) -> EngineSnapshot:
    return EngineSnapshot(engine="vllm", generation_tokens_total=tokens, process_start_time_seconds=start)


def test_a_restart_seen_only_against_a_point_before_the_window_is_not_a_restart_in_it() -> None:
    """The start time moved between t=0 (outside the window) and t=30; the point at t=15 does not know it, so
    inside the window [10, 40] nothing says the engine restarted: the counter steps on (as the reference has it)."""
    history = [
        TimedSnapshot(URL, T0, _snap(10.0, start=100.0)),
        TimedSnapshot(URL, T0 + 15, _snap(20.0, start=None)),
        TimedSnapshot(URL, T0 + 30, _snap(50.0, start=900.0)),
    ]
    acc = WindowAccumulator()
    stats = acc.stats(history, T0 + 40, 30.0)
    assert stats.counter_resets == 0 and stats.generation_tokens_per_second == pytest.approx(30.0 / 15)
    whole = acc.stats(history, T0 + 40, 60.0)  # the whole history: the restart is seen, 20 → 50 counts 50
    assert whole.counter_resets == 1 and whole.generation_tokens_per_second == pytest.approx((10.0 + 50.0) / 30)
    assert_same(stats, window_stats(history, T0 + 40, 30.0))
    assert_same(whole, window_stats(history, T0 + 40, 60.0))


def test_unknown_stays_unknown() -> None:
    """One known counter value in the window, no histograms: rates and deltas are unknown, not 0."""
    history = [TimedSnapshot(URL, T0, _snap(None)), TimedSnapshot(URL, T0 + 15, _snap(7.0))]
    stats = WindowAccumulator().stats(history, T0 + 15, 60.0)
    assert stats.generation_tokens_per_second is None and stats.prompt_tokens_per_second is None
    assert stats.preemptions_increase is None and stats.ttft is None and stats.kv_cache_usage_ratio_min is None
    assert stats.samples == 2


def test_the_tracker_computes_each_delta_once() -> None:
    """A point's histogram deltas are computed when it is recorded, not again at each evaluation."""
    calls = 0
    from advisor import telemetry

    real = telemetry.histogram_delta

    def counting(older: Histogram | None, newer: Histogram | None) -> Histogram | None:
        nonlocal calls
        calls += 1
        return real(older, newer)

    tr = Tracker([], evaluation_window=300.0, scrape_interval=15.0, quality=Quality(15.0))
    tr.set_deployments([(context(), [URL])])
    h = Histogram(((0.1, 1.0), (INF, 2.0)), count=2.0, sum=0.3)
    mp = pytest.MonkeyPatch()
    mp.setattr(telemetry, "histogram_delta", counting)
    try:
        for k in range(30):
            bumped = Histogram(((0.1, 1.0 + k), (INF, 2.0 + 2 * k)), count=2.0 + 2 * k, sum=0.3 + k)
            tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + 15 * k, EngineSnapshot(engine="vllm", ttft=bumped)))
        recorded = calls
        for k in range(10):
            tr.evaluate(T0 + 15 * 29 + k)
    finally:
        mp.undo()
    assert recorded <= 2 * 30  # the new point's delta, and at most once more for a neighbour recomputed
    assert calls == recorded  # ten evaluations computed no delta
    assert h.count == 2.0


# --- the tracker, either way ------------------------------------------------------------------------------------


def _pages(n: int, rate: float, seed: int) -> list[str]:
    cfg = llama_engine()
    fleet = Fleet(
        cfg,
        TrafficProfile(Poisson(rate), LognormalLengths(1500, 0.5, 600, 1.0)),
        seed=seed,
        observers=lambda i: [VLLMMetrics(cfg.max_model_len)],
    )
    replica = fleet.replicas[0]
    (metrics,) = replica.observers
    assert isinstance(metrics, VLLMMetrics)
    pages = []
    for k in range(n):
        fleet.advance(15.0 * (k + 1))
        pages.append(render(VLLMCollector(replica, metrics, created=1.7e9)).decode())
    return pages


def _ticks(snapshots: list[list[EngineSnapshot]], urls: list[str]) -> list[Tick]:
    tr = Tracker(
        builtin_rules(RulesConfig()),
        evaluation_window=120.0,
        scrape_interval=15.0,
        quality=Quality(15.0),
        ignore_for=True,
    )
    tr.set_deployments([(context(), urls)])
    ticks = []
    for k in range(len(snapshots[0])):
        now = T0 + 15.0 * k
        for url, snaps in zip(urls, snapshots, strict=True):
            tr.observe("chat-8b", url, TimedSnapshot(url, now + 0.01, snaps[k]))
        ticks.append(tr.evaluate(now + 0.5))
    return ticks


def test_the_tracker_gives_the_same_ticks_and_recommendations_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas of a simulated Llama-3.1-8B engine overloaded (queues, KV saturation, preemptions), one
    restarting mid-way (its counters start again from zero): every tick — evaluations, snapshots, transitions,
    recommendations — is the same with the incremental window statistics as with the from-scratch reference."""
    adapter = get_adapter("vllm")

    def snaps(pages: list[str]) -> list[EngineSnapshot]:
        out = []
        for page in pages:
            seen = observe(page, adapter, None, configured_model=MODEL, strict=True)
            assert seen.snapshot is not None, seen.error_message
            out.append(seen.snapshot)
        return out

    a = snaps(_pages(14, 40.0, seed=3))
    b = snaps(_pages(7, 40.0, seed=5) + _pages(7, 40.0, seed=9))  # restarted after 7 scrapes
    assert b[7].generation_tokens_total is not None and b[6].generation_tokens_total is not None
    assert b[7].generation_tokens_total < b[6].generation_tokens_total
    urls = [URL, "http://engine-b:8000/metrics"]
    incremental = _ticks([a, b], urls)
    assert all(v.window is not None for v in incremental[-1].results[0].targets)
    assert any(
        r.evaluation.stats is not None and r.evaluation.stats.counter_resets for t in incremental for r in t.results
    )
    opened = [tr for t in incremental for tr in t.transitions]
    assert opened, "the overload opened nothing: the comparison would cover no recommendation"

    def reference_view(self: _Target) -> TargetView:
        return TargetView(self.url, self.up, self.error_reason, self.error_message, tuple(self.history))

    monkeypatch.setattr(_Target, "view", reference_view)
    reference = _ticks([a, b], urls)
    assert all(v.window is None for v in reference[-1].results[0].targets)
    assert len(incremental) == len(reference)
    for got, ref in zip(incremental, reference, strict=True):
        assert [r.evaluation for r in got.results] == [r.evaluation for r in ref.results]
        assert [r.as_dict() for r in got.results] == [r.as_dict() for r in ref.results]
        assert got.transitions == ref.transitions and got.updates == ref.updates
        assert got.failures == ref.failures and got.model_errors == ref.model_errors


# --- what is derived once per bucket layout ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from((*LAYOUTS, (INF,), (0.5, 0.1, INF), (0.1, 0.1, INF), (0.1, 0.5), (-1.0, 0.0, INF))),
    st.lists(st.one_of(st.floats(0.0, 1e6), st.just(math.nan)), min_size=6, max_size=6),
    st.sampled_from([0.0, 0.05, 0.1, 0.3, 1.0, 7.0, INF]),
    st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
)
def test_quantiles_read_through_the_layout_cache_equal_the_general_path(
    bounds: tuple[float, ...], raw: list[float], threshold: float, q: float
) -> None:
    """A layout already sorted, distinct and ending in +Inf skips sorting and coalescing (decided once per layout);
    quantiles and fractions are the same as through the general path, and an unordered layout takes the latter."""
    from advisor import telemetry

    counts = raw[: len(bounds)]
    h = Histogram(tuple(zip(bounds, counts, strict=True)), count=counts[-1], sum=1.0)
    fast = (telemetry.histogram_quantile_estimate(q, h), telemetry.fraction_below(threshold, h))
    mp = pytest.MonkeyPatch()
    mp.setattr(telemetry, "_ordered_layout", lambda bounds: False)
    try:
        general = (telemetry.histogram_quantile_estimate(q, h), telemetry.fraction_below(threshold, h))
    finally:
        mp.undo()
    assert repr(fast) == repr(general)  # NaN-free by construction of both paths; repr compares every field
    ordered = len(bounds) >= 2 and bounds[-1] == INF and list(bounds) == sorted(set(bounds))
    assert telemetry._ordered_layout(h.bounds()) is ordered


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(LAYOUTS),
    st.lists(
        st.one_of(
            st.integers(0, 50).map(float),
            st.sampled_from([1e12 - 2.0, 1e12 - 1.0, 1e12, 1e12 + 1.0, 2.0**52, 2.5, -1.0, INF, math.nan]),
        ),
        min_size=6,
        max_size=6,
    ),
    st.booleans(),
    st.sampled_from([0.0, 0.05, 0.1, 0.3, 1.0, 7.0, INF]),
)
def test_whole_counts_are_read_as_they_are_and_equal_the_prepared_buckets(
    bounds: tuple[float, ...], raw: list[float], rising: bool, threshold: float
) -> None:
    """Counts of an ordered layout that are whole, under 1e12 and never go down (what engines expose and windows
    subtract) are used as they are: no precision correction or envelope could change them. Quantiles, fractions and
    summaries equal the general path's (an unordered layout: sorted, coalesced, corrected, forced monotonic), for
    counts near the 1e12 edge, fractional, negative, infinite or NaN too, rising or not."""
    from advisor import telemetry

    counts = raw[: len(bounds)]
    if rising:
        counts = list(itertools.accumulate(counts, max))
    h = Histogram(tuple(zip(bounds, counts, strict=True)), count=counts[-1], sum=1.0)

    def read() -> str:
        quantiles = [telemetry.histogram_quantile_estimate(q, h) for q in (0.0, 0.5, 0.9, 0.99, 1.0)]
        return repr((quantiles, telemetry.fraction_below(threshold, h), telemetry.summarize(h)))

    fast = read()
    plain = all(c == int(c) and 0 <= c < 1e12 for c in counts if math.isfinite(c)) and all(map(math.isfinite, counts))
    taken = telemetry._prepared(h)
    assert (taken is not None and taken[1] is h.counts()) is (plain and counts == sorted(counts))
    mp = pytest.MonkeyPatch()
    mp.setattr(telemetry, "_ordered_layout", lambda bounds: False)
    try:
        general = read()
    finally:
        mp.undo()
    assert fast == general
