"""Issue 15, the O(1) window reads of :class:`advisor.telemetry.WindowAccumulator`: where no link of the window can be
flagged and every value is known, counters are the ``math.fsum`` of the steps kept when each point entered and
histograms of whole counts are newest − oldest; a window read again with the same links is the last result. The
from-scratch :func:`advisor.telemetry.window_stats` stays the reference, compared exactly (``==``, NaN matching NaN):
over steady histories that take those paths (whole and fractional counters, counts near 2**52, signed zeros), with
the disturbances that must send a window back to the link-by-link walk (a restart, a value unknown, a histogram of
fractional counts, a bucket layout changed, ±Inf and NaN sums), thinned and trimmed as the tracker does.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor import telemetry
from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.telemetry import WindowAccumulator, window_stats
from advisor.tracker import _replaced, record
from tests.test_window_incremental import assert_same

INF = math.inf
URL = "http://engine-a:8000/metrics"
T0 = 1_000_000.0
COUNTERS = ("preemptions_total", "prompt_tokens_total", "generation_tokens_total", "requests_finished_total")
HISTS = ("ttft", "tpot", "queue_time", "e2e")
LAYOUT = (0.1, 0.5, 1.0, INF)
OTHER_LAYOUT = (0.2, 1.0, INF)
DISTURBANCES = (
    "restart",
    "counter_unknown",
    "counter_drop",
    "hist_unknown",
    "hist_fractional",
    "hist_layout",
    "hist_drop",
    "sum_inf",
    "sum_nan",
    "kv_unknown",
    "start_jitter",
)


@st.composite
def steady(draw: st.DrawFn, n: int) -> list[EngineSnapshot]:
    """``n`` scrapes of an engine serving steadily (every value known, counts whole, no restart), each disturbed
    with a small probability by one of :data:`DISTURBANCES`."""
    base = draw(st.sampled_from([0.0, 5.0, 2.0**52 - 10_000.0, 2.0**53 - 10_000.0]))
    counters = dict.fromkeys(COUNTERS, base)
    steps = draw(st.sampled_from([(0.0, 1.0, 7.0), (0.1, 2.5, 1000.0), (0.0,)]))
    layouts = dict.fromkeys(HISTS, LAYOUT)
    cum = {h: [0.0] * len(LAYOUT) for h in HISTS}
    sums = dict.fromkeys(HISTS, draw(st.sampled_from([0.0, -0.0, 1e300])))
    start = 1000.0
    out: list[EngineSnapshot] = []
    for _ in range(n):
        event = draw(st.sampled_from(["none"] * 12 + list(DISTURBANCES)))
        if event == "restart":
            start += 500.0
            counters = dict.fromkeys(COUNTERS, 0.0)
            cum = {h: [0.0] * len(layouts[h]) for h in HISTS}
        elif event == "start_jitter":
            start += 0.5
        fields: dict[str, Any] = {}
        for name in COUNTERS:
            counters[name] += draw(st.sampled_from(steps))
            fields[name] = counters[name]
        if event == "counter_unknown":
            fields[draw(st.sampled_from(COUNTERS))] = draw(st.sampled_from([None, math.nan]))
        elif event == "counter_drop":
            name = draw(st.sampled_from(COUNTERS))
            counters[name] = fields[name] = counters[name] / 2
        for h in HISTS:
            if event == "hist_layout" and draw(st.booleans()):
                layouts[h] = OTHER_LAYOUT if layouts[h] == LAYOUT else LAYOUT
                cum[h] = [0.0] * len(layouts[h])
            running = 0.0
            for i in range(len(cum[h])):
                running += draw(st.sampled_from([0.0, 1.0, 3.0]))
                cum[h][i] += running
            counts = list(cum[h])
            if event == "hist_fractional":
                counts = [c + 0.5 for c in counts]
            elif event == "hist_drop":
                cum[h] = counts = [c / 2 for c in counts]
            sums[h] += draw(st.sampled_from([0.0, 0.1, 2.5, 1e-9]))
            total = sums[h]
            if event == "sum_inf":
                total = draw(st.sampled_from([INF, -INF]))
            elif event == "sum_nan":
                total = math.nan
            hist = Histogram(tuple(zip(layouts[h], counts, strict=True)), count=counts[-1], sum=total)
            fields[h] = None if event == "hist_unknown" and draw(st.booleans()) else hist
        kv = draw(st.sampled_from([0.0, -0.0, 0.5, 1.0]))
        out.append(
            EngineSnapshot(
                engine="vllm",
                process_start_time_seconds=start,
                requests_running=3.0,
                requests_waiting=0.0,
                kv_cache_usage_ratio=None if event == "kv_unknown" else kv,
                **fields,
            )
        )
    return out


def _compare(acc: WindowAccumulator, history: Any, now: float, window: float) -> None:
    try:
        ref = window_stats(tuple(history), now, window)
    except (ValueError, OverflowError) as exc:
        with pytest.raises(type(exc)):
            acc.stats(history, now, window)
        return
    assert_same(acc.stats(history, now, window), ref)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_the_o1_window_reads_equal_the_reference(data: st.DataObject) -> None:
    snaps = data.draw(steady(data.draw(st.integers(2, 30))))
    gaps = data.draw(st.sampled_from([(15.0,), (15.0, 40.0), (1.0, 15.0, 200.0)]))
    history: deque[TimedSnapshot] = deque()
    acc = WindowAccumulator()
    t = T0
    for snap in snaps:
        t += data.draw(st.sampled_from(gaps))
        record(history, TimedSnapshot(URL, t, snap), 300.0)
        while history and t - history[0].timestamp > 345.0:  # the tracker's trim
            history.popleft()
        acc.sync(history)
        for window in (15.0, 60.0, 300.0, 1e9):
            _compare(acc, history, t + 0.5, window)
            _compare(acc, tuple(history), t + 0.5, window)  # read again: the same window, from the last result


def _steady_history(n: int) -> list[TimedSnapshot]:
    out = []
    for k in range(n):
        h = Histogram(tuple(zip(LAYOUT, (k, 2.0 * k, 3.0 * k, 3.0 * k), strict=True)), count=3.0 * k, sum=0.1 * k)
        snap = EngineSnapshot(
            engine="vllm",
            process_start_time_seconds=100.0,
            kv_cache_usage_ratio=0.5,
            preemptions_total=float(k),
            prompt_tokens_total=10.5 * k,
            generation_tokens_total=0.1 * k,
            requests_finished_total=float(k),
            ttft=h,
            tpot=h,
            queue_time=h,
        )
        out.append(TimedSnapshot(URL, T0 + 15.0 * k, snap))
    return out


def _walked(*args: Any) -> Any:
    raise AssertionError("the window was walked link by link")


def _synced_without_walks(history: list[TimedSnapshot], monkeypatch: pytest.MonkeyPatch) -> WindowAccumulator:
    """An accumulator synced to ``history`` whose link-by-link walks fail the test if they run."""
    acc = WindowAccumulator()
    acc.sync(history)
    monkeypatch.setattr(WindowAccumulator, "_counters_walked", staticmethod(_walked))
    monkeypatch.setattr(WindowAccumulator, "_window_histogram", staticmethod(_walked))
    return acc


def test_a_steady_window_is_read_without_walking_its_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every counter known and no restart: the steps kept are summed, the link-by-link walks never run; the
    histograms of whole counts are newest − oldest; and the result is the reference's."""
    history = _steady_history(12)

    acc = _synced_without_walks(history, monkeypatch)
    got = acc.stats(history, T0 + 200.0, 120.0)
    assert_same(got, window_stats(history, T0 + 200.0, 120.0))
    assert got.ttft is not None and got.ttft.count == 3.0 * (11 - 6)
    assert got.prompt_tokens_per_second is not None and got.e2e is None


def test_a_two_point_window_is_its_one_delta_read_without_a_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two points (``once``'s two scrapes, the daemon's first interval, back-to-back cycles): the histograms are
    newest − oldest as in a longer steady window, not the delta rebuilt by the walk, and the sum is the delta's own
    ``newer.sum − older.sum``: a ``-0.0`` stays ``-0.0`` as the reference keeps it (``math.fsum`` would give 0.0)."""
    history = _steady_history(2)
    h = Histogram(tuple(zip(LAYOUT, (1.0, 2.0, 3.0, 3.0), strict=True)), count=3.0, sum=-0.0)
    snap = dataclasses.replace(history[1].snapshot, ttft=h, tpot=h, queue_time=h)
    history[1] = dataclasses.replace(history[1], snapshot=snap)

    acc = _synced_without_walks(history, monkeypatch)
    got = acc.stats(history, T0 + 20.0, 120.0)
    ref = window_stats(history, T0 + 20.0, 120.0)
    assert_same(got, ref)
    for name in ("ttft", "tpot", "queue_time"):
        g, r = getattr(got, name), getattr(ref, name)
        assert g.count == 3.0 and math.copysign(1.0, g.sum) == math.copysign(1.0, r.sum) == -1.0, name


def test_the_e2e_dropped_from_the_previous_newest_point_recomputes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`record` drops ``e2e`` from the previous newest point as the next one enters: the accumulator gives that
    point's link the new point in place (:meth:`WindowAccumulator._relink`) and computes one link per scrape, not
    two; the windows are the reference's. (Before: the replaced point's link was recomputed whole.)"""
    points = _steady_history(12)
    points = [dataclasses.replace(p, snapshot=dataclasses.replace(p.snapshot, e2e=p.snapshot.ttft)) for p in points]
    appended = []
    append = WindowAccumulator._append

    def counted(self: WindowAccumulator, point: TimedSnapshot) -> None:
        appended.append(point.timestamp)
        append(self, point)

    monkeypatch.setattr(WindowAccumulator, "_append", counted)
    history: deque[TimedSnapshot] = deque()
    acc = WindowAccumulator()
    for p in points:
        record(history, p, 60.0)  # 15 s apart over a 60 s window: nothing thinned
        acc.sync(history)
        assert_same(acc.stats(history, p.timestamp, 60.0), window_stats(history, p.timestamp, 60.0))
    assert len(history) == 12 and [p.snapshot.e2e is None for p in history] == [False] + [True] * 10 + [False]
    assert appended == [p.timestamp for p in points]


def test_a_window_read_again_with_the_same_links_is_the_last_result() -> None:
    """The same oldest and newest link and window: the last result itself; any other window or link: recomputed."""
    history = _steady_history(12)
    acc = WindowAccumulator()
    first = acc.stats(history, T0 + 200.0, 120.0)
    assert acc.stats(history, T0 + 201.0, 120.0) is first  # the same links: 6 … 11
    again = acc.stats(history, T0 + 200.0, 60.0)  # another window: computed
    assert again is not first and again == window_stats(history, T0 + 200.0, 60.0)
    history = [*history[:-1], dataclasses.replace(history[-1])]  # the newest point replaced by an equal one
    replaced = acc.stats(history, T0 + 200.0, 120.0)
    assert replaced is not first and replaced == first


def test_a_restart_inside_the_window_sends_it_back_to_the_walk() -> None:
    """Restart evidence on a link inside the window: it is flagged, counted, and the window walked as the reference."""
    history = _steady_history(12)
    snap = history[8].snapshot
    history[8] = dataclasses.replace(history[8], snapshot=dataclasses.replace(snap, process_start_time_seconds=900.0))
    acc = WindowAccumulator()
    got = acc.stats(history, T0 + 200.0, 120.0)
    assert got.counter_resets == 2  # the start time moved at t8, and back at t9
    assert_same(got, window_stats(history, T0 + 200.0, 120.0))


@given(
    st.sampled_from(["ttft", "e2e", "missing", "engine_config", "model"]),
    st.sampled_from([None, "x"]),
)
def test_record_replaces_fields_as_dataclasses_replace_does(name: str, value: Any) -> None:
    """``record``'s copies (:func:`advisor.tracker._replaced`) are what ``dataclasses.replace`` gives."""
    snap = _steady_history(3)[2].snapshot
    change: dict[str, Any] = {
        "ttft": None,
        "e2e": snap.ttft,
        "missing": ("a",),
        "engine_config": {"block_size": "16"},
        "model": value,
    }
    assert _replaced(snap, **{name: change[name]}) == dataclasses.replace(snap, **{name: change[name]})
    point = TimedSnapshot(URL, T0, snap, duplicate_series=3)
    assert _replaced(point, snapshot=None) == dataclasses.replace(point, snapshot=None)  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        _replaced(snap, no_such_field=1)


def test_fast_paths_are_reached_by_the_property(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above would prove nothing if no window took the O(1) paths: count them over fixed examples."""
    calls = {"stepped": 0, "telescoped": 0}
    stepped, telescoped = WindowAccumulator._counters_stepped, WindowAccumulator._telescoped

    def count_stepped(*args: Any) -> Any:
        calls["stepped"] += 1
        return stepped(*args)

    def count_telescoped(*args: Any) -> Any:
        calls["telescoped"] += 1
        return telescoped(*args)

    monkeypatch.setattr(WindowAccumulator, "_counters_stepped", staticmethod(count_stepped))
    monkeypatch.setattr(WindowAccumulator, "_telescoped", staticmethod(count_telescoped))
    history = _steady_history(20)
    acc = WindowAccumulator()
    for k in range(3, 20):
        _compare(acc, history[:k], T0 + 15.0 * k, 120.0)
    assert calls["stepped"] >= 10 and calls["telescoped"] >= 10
    assert telemetry._count(acc._facts[-1] - acc._facts[0], telemetry._F_HIST_KNOWN) == 19


@st.composite
def _replica_histories(draw: st.DrawFn) -> list[list[TimedSnapshot]]:
    """2-5 replicas scraped 15 s apart, their histograms' counts whole from 0, from 2**51 or just under 2**52 (three
    such replicas add up past 2**53), now and then one on another layout or with a fractional count."""
    out = []
    for r in range(draw(st.integers(2, 5))):
        url = f"http://engine-{r}:8000/metrics"
        base = draw(st.sampled_from([0.0, 2.0**51, 2.0**52 - 2.0**20]))
        layout = draw(st.sampled_from([LAYOUT] * 4 + [OTHER_LAYOUT]))
        cum = [base] * len(layout)
        total = draw(st.sampled_from([0.0, -0.0, 1e300]))
        points = []
        for k in range(draw(st.integers(2, 8))):
            running = 0.0
            for i in range(len(cum)):
                running += draw(st.sampled_from([0.0, 1.0, 3.0]))
                cum[i] += running
            counts = [c + 0.5 for c in cum] if draw(st.sampled_from([False] * 15 + [True])) else list(cum)
            total += draw(st.sampled_from([0.0, 0.1, 2.5]))
            h = Histogram(tuple(zip(layout, counts, strict=True)), count=counts[-1], sum=total)
            snap = EngineSnapshot(engine="vllm", process_start_time_seconds=100.0, ttft=h, tpot=h, queue_time=h)
            points.append(TimedSnapshot(url, T0 + 15.0 * k, snap))
        out.append(points)
    return out


@settings(max_examples=200, deadline=None)
@given(_replica_histories())
def test_replicas_windows_merge_from_their_ends_as_the_reference_merges_them(replicas: list[Any]) -> None:
    """A deployment's TTFT/TPOT/queue time over its replicas' windows (:func:`telemetry.combine_targets` of each
    accumulator's statistics, whose steady windows are newest − oldest not yet subtracted) equals the merge of the
    reference's windows exactly: when the merge runs from the windows' ends (counts adding up under 2**53), and
    when it falls back (past 2**53, another layout, a window walked link by link)."""
    now = T0 + 15.0 * 8
    got = telemetry.combine_targets([WindowAccumulator().stats(points, now, 300.0) for points in replicas])
    assert_same(got, telemetry.combine_targets([window_stats(points, now, 300.0) for points in replicas]))


def test_the_merge_from_the_ends_is_reached_by_the_property() -> None:
    """Three steady replicas with small counts: the three histograms are merged from the windows' ends."""
    calls = []
    from_ends = telemetry._merged_differences
    history = _steady_history(6)
    replicas = [[dataclasses.replace(p, target=f"http://engine-{r}:8000/metrics") for p in history] for r in range(3)]
    mp = pytest.MonkeyPatch()
    mp.setattr(telemetry, "_merged_differences", lambda known: calls.append(len(known)) or from_ends(known))
    try:
        now = T0 + 15.0 * 5
        got = telemetry.combine_targets([WindowAccumulator().stats(points, now, 300.0) for points in replicas])
    finally:
        mp.undo()
    assert calls == [3, 3, 3]
    assert_same(got, telemetry.combine_targets([window_stats(points, now, 300.0) for points in replicas]))
