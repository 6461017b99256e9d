"""The pure tracker (advisor/tracker.py): histories with the one restart rule, replica counting, one tick per
evaluation with each deployment's failure kept to itself. No I/O: snapshots and times are built here."""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

import pytest

from advisor import conventions as c
from advisor.domain import EngineSnapshot, RankValues, TimedSnapshot
from advisor.evaluate import Quality
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.tracker import HISTORY_POINTS_PER_WINDOW, Tracker, record, restarted
from tests.factories import context

T0 = 1_000_000.0
URL = "http://engine-a:8000/metrics"


def _snap(tokens: float, start: float = 100.0, running: float = 2.0, replicas: tuple[str, ...] = ()) -> EngineSnapshot:
    return EngineSnapshot(
        engine="vllm",
        kv_cache_usage_ratio=0.3,
        requests_running=running,
        requests_waiting=0.0,
        prompt_tokens_total=tokens,
        generation_tokens_total=tokens,
        preemptions_total=0.0,
        process_start_time_seconds=start,
        replicas=replicas,
    )


def test_the_restart_rule_sees_a_new_start_time_or_a_counter_going_down() -> None:
    a = _snap(1000.0)
    assert not restarted(a, _snap(1200.0))
    assert restarted(a, _snap(1200.0, start=200.0))  # a new process
    assert restarted(a, _snap(10.0))  # the same start time reported, but the counters went back
    assert not restarted(a, dataclasses.replace(_snap(1200.0), process_start_time_seconds=None))


def test_thinning_drops_close_points_but_never_across_a_restart() -> None:
    window = 8.0  # spacing: window / 8 = 1 s
    assert HISTORY_POINTS_PER_WINDOW == 8
    h: deque[TimedSnapshot] = deque()
    for i, tokens in enumerate([100.0, 110.0, 120.0, 130.0]):  # 0.25 s apart, no restart: thinned
        record(h, TimedSnapshot(URL, T0 + 0.25 * i, _snap(tokens)), window)
    assert [p.timestamp - T0 for p in h] == [0.0, 0.75]
    r: deque[TimedSnapshot] = deque()
    for i, tokens in enumerate([100.0, 5.0, 15.0, 25.0]):  # the counters reset after the first point
        record(r, TimedSnapshot(URL, T0 + 0.25 * i, _snap(tokens)), window)
    # the points on either side of the reset are kept, so the rates never span it
    assert [p.snapshot.prompt_tokens_total for p in r][:2] == [100.0, 5.0]


def test_thinning_keeps_the_running_requests_peak_of_the_points_it_drops() -> None:
    """Breaker 23's rerun: two replicas at max_num_seqs 4 with 179 waiting read 7 running at the newest scrape, and
    the window's peak, taken over the ~8 points a window keeps, read 7 too: each replica's gauge toggled 4, 3 between
    steps, and the thinning kept the 3s of one of them. seq_cap then cleared for one scrape ("4 running of a cap of
    4") and the incident switched to replicas for two minutes. The point that replaces a thinned one carries its
    peak, so the window's peak is every scrape's."""
    from advisor.evaluate import TargetView, running_load

    window = 8.0  # thinned below 1 s apart
    h: deque[TimedSnapshot] = deque()
    for i, running in enumerate([3.0, 4.0, 3.0, 3.0, 4.0, 3.0, 3.0, 3.0]):  # 0.25 s apart: most points thinned
        snap = dataclasses.replace(_snap(100.0 + i), requests_running=running)
        record(h, TimedSnapshot(URL, T0 + 0.25 * i, snap), window)
    assert {p.snapshot.requests_running for p in h} == {3.0}  # the kept points' own gauges: no 4 among them
    assert max(p.running_peak or 0.0 for p in h) == 4.0
    view = TargetView(URL, True, None, None, tuple(h))
    assert running_load([view], now=T0 + 2.0, window_seconds=window).peak == 4.0
    assert running_load([view], now=T0 + 2.0, window_seconds=window).mean == pytest.approx(3.0)  # gauges, as read


def _tracker(*rules: object) -> Tracker:
    return Tracker(
        list(rules),  # type: ignore[arg-type]
        evaluation_window=10.0,
        scrape_interval=1.0,
        quality=Quality(1.0, 3, 60.0),
    )


def test_observations_become_views_and_replicas_are_counted_from_the_engines_behind_the_targets() -> None:
    tr = _tracker()
    other = "http://engine-b:8000/metrics"
    tr.set_deployments([(context(), [URL, other])])
    for k in range(4):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _snap(100.0 * k, replicas=("r1", "r2", "r3"))))
    assert tr.fail("chat-8b", other, "timeout", "no answer in 2 s")
    assert not tr.fail("chat-8b", other, "timeout", "no answer in 2 s")  # not news the second time
    tick = tr.evaluate(T0 + 3)
    (res,) = tick.results
    assert [v.url for v in res.targets] == [URL, other]
    assert [v.up for v in res.targets] == [True, False]
    assert res.targets[1].error_reason == "timeout"
    assert tr.context("chat-8b").replicas == 4  # three engines behind one target, one behind the other
    assert res.evaluation.replicas_up == 3


def test_histories_are_trimmed_to_the_window_plus_three_intervals() -> None:
    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    for k in range(40):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _snap(100.0 * k)))
    tr.evaluate(T0 + 39)
    kept = tr.history("chat-8b", URL)
    assert kept and T0 + 39 - kept[0].timestamp <= 10.0 + 3 * 1.0


def test_a_point_from_before_a_step_back_of_the_clock_restarts_the_deployments_histories() -> None:
    """The clock stamping the points steps back 100 s (window 10 s, interval 1 s) after 20 points of two targets
    and one of another deployment: the first point stamped by the new clock reports the step once (size, times,
    points dropped), both targets of its deployment hold only points of the new clock, in time order, and the
    other deployment keeps its own until its own next point. Before, the point was appended after the newer ones
    and nothing was reported."""
    tr = _tracker()
    other = "http://engine-b:8000/metrics"
    tr.set_deployments([(context(), [URL, other]), (dataclasses.replace(context(), name="b"), [URL])])
    for k in range(20):
        for name, url in (("chat-8b", URL), ("chat-8b", other), ("b", URL)):
            assert tr.observe(name, url, TimedSnapshot(url, T0 + k, _snap(100.0 * k))) is None
    held = len(tr.history("chat-8b", URL)) + len(tr.history("chat-8b", other))
    now = T0 + 20 - 100.0
    step = tr.observe("chat-8b", URL, TimedSnapshot(URL, now, _snap(2000.0)))
    assert [p.timestamp for p in tr.history("chat-8b", URL)] == [now]
    assert tr.history("chat-8b", other) == ()
    assert step is not None
    assert (step.deployment, step.now, step.newest, step.seconds, step.dropped) == ("chat-8b", now, T0 + 19, 99.0, held)
    assert tr.observe("chat-8b", other, TimedSnapshot(other, now + 0.01, _snap(2000.0))) is None  # said once
    assert tr.observe("chat-8b", URL, TimedSnapshot(URL, now + 1, _snap(2100.0))) is None
    assert [p.timestamp for p in tr.history("chat-8b", URL)] == [now, now + 1]
    assert tr.history("b", URL)[-1].timestamp == T0 + 19
    (res,) = [r for r in tr.evaluate(now + 1).results if r.name == "chat-8b"]
    stats = res.evaluation.stats
    assert stats is not None and stats.counter_resets == 0
    assert stats.generation_tokens_per_second == 100.0  # 100 tokens in the one second since the step, not across it


def test_a_step_back_within_one_interval_costs_the_points_after_it_and_is_not_reported() -> None:
    """A point stamped 0.5 s before the newest (interval 1 s): the newer point is dropped, so the history stays in
    time order, and nothing is reported. Before, it was appended after the newer one."""
    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    for k in range(5):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + 2 * k, _snap(100.0 * k)))
    assert tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + 7.5, _snap(450.0))) is None
    stamps = [p.timestamp for p in tr.history("chat-8b", URL)]
    assert stamps[-1] == T0 + 7.5 and stamps == sorted(stamps) and T0 + 8 not in stamps


class _Explodes:
    """A rule that raises for one deployment only (a plugin's bug)."""

    id = "explodes"
    supersedes: tuple[str, ...] = ()

    def for_seconds(self) -> float:
        return 0.0

    def fires(self, ev: Evaluation) -> Condition:
        if ev.ctx.name == "bad":
            raise ZeroDivisionError("plugin bug")
        return Condition(False, "fine")

    def clears(self, ev: Evaluation) -> Condition:
        return Condition(True, "fine")

    def propose(self, ev: Evaluation) -> list[Proposal]:
        return []


def test_a_rule_that_raises_for_one_deployment_leaves_it_evaluated_with_that_rule_unknown() -> None:
    """A plugin rule's bug is that rule's: the deployment is evaluated, the rule reads "could not run" (before, the
    exception dropped the deployment's whole evaluation: tests/test_rule_failures.py)."""
    tr = _tracker(_Explodes())
    bad = dataclasses.replace(context(), name="bad")
    tr.set_deployments([(bad, [URL]), (context(), [URL])])
    for name in ("bad", "chat-8b"):
        for k in range(3):
            tr.observe(name, URL, TimedSnapshot(URL, T0 + k, _snap(100.0 * k)))
    tick = tr.evaluate(T0 + 2)
    assert [r.name for r in tick.results] == ["bad", "chat-8b"] and tick.failures == ()
    (status,) = [st for st in tick.results[0].rule_statuses if st.rule == "explodes"]
    assert status.state == "unknown" and "ZeroDivisionError: plugin bug" in status.reason


def test_one_deployments_failure_is_reported_and_the_others_are_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of a deployment's evaluation outside its rules (here the evaluation itself raising for one
    deployment) is reported for it alone, and the others are evaluated."""
    import advisor.tracker as tracker_module

    real = tracker_module.evaluate_deployment

    def failing(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        if ctx.name == "bad":
            raise ZeroDivisionError("evaluation bug")
        return real(ctx, *args, **kwargs)

    monkeypatch.setattr(tracker_module, "evaluate_deployment", failing)
    tr = _tracker()
    bad = dataclasses.replace(context(), name="bad")
    tr.set_deployments([(bad, [URL]), (context(), [URL])])
    for name in ("bad", "chat-8b"):
        for k in range(3):
            tr.observe(name, URL, TimedSnapshot(URL, T0 + k, _snap(100.0 * k)))
    tick = tr.evaluate(T0 + 2)
    assert [r.name for r in tick.results] == ["chat-8b"]
    assert [(name, type(exc).__name__) for name, exc in tick.failures] == [("bad", "ZeroDivisionError")]


def test_a_reconfigured_tracker_keeps_what_stays_and_forgets_what_left() -> None:
    tr = _tracker()
    other = "http://engine-b:8000/metrics"
    tr.set_deployments([(context(), [URL, other])])
    tr.observe("chat-8b", URL, TimedSnapshot(URL, T0, _snap(100.0)))
    tr.observe("chat-8b", other, TimedSnapshot(other, T0, _snap(100.0)))
    tr.set_deployments([(context(), [URL])])
    assert len(tr.history("chat-8b", URL)) == 1
    assert tr.history("chat-8b", other) == ()
    tr.set_targets("chat-8b", [URL, other])
    assert tr.history("chat-8b", other) == ()  # it came back with no history


class _GoodputHolds:
    """The goodput rule's id, holding with a for-duration still to run (pending) or not holding."""

    id = c.RULE_GOODPUT_BELOW_TARGET
    supersedes: tuple[str, ...] = ()

    def __init__(self, holds: bool) -> None:
        self.holds = holds

    def for_seconds(self) -> float:
        return 60.0

    def fires(self, ev: Evaluation) -> Condition:
        return Condition(self.holds, "goodput 0.0 < target 0.9" if self.holds else "goodput 1.0")

    def clears(self, ev: Evaluation) -> Condition:
        return Condition(not self.holds, "")

    def propose(self, ev: Evaluation) -> list[Proposal]:
        return []


def test_the_signals_are_told_when_the_goodput_rule_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The throughput headroom is capped at 0 while the SLO is missed (tests/test_signals.py); the tracker says so
    from the goodput rule's status after its own evaluation: pending counts, not holding does not."""
    import advisor.tracker as tracker_module

    told: list[bool] = []
    real = tracker_module.autoscaler_signals

    def spy(*args: Any, **kwargs: Any) -> Any:
        told.append(kwargs["slo_missed"])
        return real(*args, **kwargs)

    monkeypatch.setattr(tracker_module, "autoscaler_signals", spy)
    for holds in (True, False):
        tr = _tracker(_GoodputHolds(holds))
        tr.set_deployments([(context(), [URL])])
        for k in range(3):
            tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _snap(100.0 * k)))
        tr.evaluate(T0 + 2)
    assert told == [True, False]


LIFETIME = 1_000_000.0
"""Tokens each engine behind the shared target counted before the test's window (its lifetime so far)."""


def _ranked(k: int, names: tuple[str, ...], restarted_at: dict[str, int] | None = None) -> EngineSnapshot:
    """One scrape, at second ``k``, of a target with the engines ``names`` behind it (Ray Serve replicas): each
    counted :data:`LIFETIME` tokens before and 100 a second since, or — for one in ``restarted_at`` — 100 a second
    since it restarted at that second; the snapshot's counters are their sums, as the adapter sums them."""
    restarted_at = restarted_at or {}
    ranks = tuple(
        RankValues(
            rank=n,
            requests_running=2.0,
            prompt_tokens_total=(
                100.0 * (k - restarted_at[n]) if n in restarted_at and k >= restarted_at[n] else LIFETIME + 100.0 * k
            ),
            generation_tokens_total=None,
            preemptions_total=0.0,
        )
        for n in names
    )
    total = math.fsum(r.prompt_tokens_total or 0.0 for r in ranks)
    snap = _snap(total, replicas=names if len(names) > 1 else ())
    return dataclasses.replace(snap, ranks=ranks if len(names) > 1 else (), generation_tokens_total=total)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (("ReplicaId=a", "ReplicaId=b", "ReplicaId=c"), ("ReplicaId=a", "ReplicaId=b")),  # scaled down
        (("ReplicaId=a", "ReplicaId=b"), ("ReplicaId=a",)),  # down to one (no rank names on the page)
        (("ReplicaId=a", "ReplicaId=b"), ("ReplicaId=a", "ReplicaId=b", "ReplicaId=c")),  # one joined, history in
        (("ReplicaId=a", "ReplicaId=b"), ("ReplicaId=a", "ReplicaId=d")),  # one replaced
    ],
)
def test_engines_leaving_or_joining_a_shared_target_restart_its_window_and_are_no_restart(
    before: tuple[str, ...], after: tuple[str, ...]
) -> None:
    """Breaker 19: a Ray Serve replica scaled away behind one target dropped the summed counters by its lifetime;
    the window read that as a restart and added the post-drop sum — every other replica's lifetime — as the
    increase (6,000 prompt tokens/s read as 510,611, two "restarts", a CRITICAL ``kv_budget`` page). Prometheus sums
    each series' increase, so an engine leaving adds nothing and one joining starts from its first sample: the
    window now starts again at the change, and the rate after it is the engines' own, 100 tokens/s each."""
    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    for k in range(6):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _ranked(k, before)))
    for k in range(6, 10):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _ranked(k, after)))
    assert [p.timestamp - T0 for p in tr.history("chat-8b", URL)] == [6.0, 7.0, 8.0, 9.0]
    (res,) = tr.evaluate(T0 + 9).results
    stats = res.evaluation.stats
    assert stats is not None and stats.counter_resets == 0
    assert stats.prompt_tokens_per_second == pytest.approx(100.0 * len(after))


def test_one_rank_restarting_while_the_others_go_on_restarts_the_window_and_all_restarting_is_a_restart() -> None:
    """One of two replicas restarts (its counters from zero) while the other goes on: the sum drops by the restarted
    one's lifetime only, and a window reading the drop as a restart added the other's whole lifetime. It restarts
    the window instead. Both restarting together is the engine restarting: one reset, the rate across it kept."""
    names = ("ReplicaId=a", "ReplicaId=b")
    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    for k in range(8):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _ranked(k, names, {"ReplicaId=b": 5})))
    (res,) = tr.evaluate(T0 + 7).results
    stats = res.evaluation.stats
    assert [p.timestamp - T0 for p in tr.history("chat-8b", URL)] == [5.0, 6.0, 7.0]
    assert stats is not None and stats.counter_resets == 0
    assert stats.prompt_tokens_per_second == pytest.approx(200.0)

    both = _tracker()
    both.set_deployments([(context(), [URL])])
    for k in range(8):
        snap = _ranked(k, names, {"ReplicaId=a": 5, "ReplicaId=b": 5})
        both.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, snap))
    (res,) = both.evaluate(T0 + 7).results
    stats = res.evaluation.stats
    assert len(both.history("chat-8b", URL)) > 3  # kept across the restart
    assert stats is not None and stats.counter_resets == 1


def test_a_range_read_history_starts_at_its_last_change_of_engines() -> None:
    """The Prometheus source hands the window over whole (:meth:`Tracker.replace_history`): the points before the
    last change of the engines behind the target are not part of it."""
    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    three, two = ("ReplicaId=a", "ReplicaId=b", "ReplicaId=c"), ("ReplicaId=a", "ReplicaId=b")
    points = [TimedSnapshot(URL, T0 + k, _ranked(k, three if k < 4 else two)) for k in range(8)]
    tr.replace_history("chat-8b", URL, points)
    assert [p.timestamp - T0 for p in tr.history("chat-8b", URL)] == [4.0, 5.0, 6.0, 7.0]


@pytest.mark.parametrize("start_moves", [True, False])
def test_a_whole_engine_restart_beside_an_idle_rank_is_a_restart_not_a_change(start_moves: bool) -> None:
    """Breaker 21: a two-rank engine with rank 1 idle (its counters 0) crash-looping: rank 0's counters went down
    while rank 1's did not move, which read as "0 restarted while 1 went on" — the window restarted at each crash
    and no restart was ever counted (no "repeated restarts" advice, every rate unknown). An idle rank proves
    nothing; a moved ``process_start_time_seconds`` proves the whole process restarted. Either way: a restart."""

    def snap(k: int, busy_tokens: float, start: float) -> EngineSnapshot:
        ranks = (
            RankValues(rank="0", requests_running=5.0, prompt_tokens_total=busy_tokens, preemptions_total=3.0),
            RankValues(rank="1", requests_running=0.0, prompt_tokens_total=0.0, preemptions_total=0.0),
        )
        base = _snap(busy_tokens, start=start)
        return dataclasses.replace(base, ranks=ranks, generation_tokens_total=busy_tokens / 5)

    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    for k in range(4):
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, snap(k, 5_000_000.0 + 1000.0 * k, 100.0)))
    for k in range(4, 8):
        restarted_at = 200.0 if start_moves else 100.0
        tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, snap(k, 1000.0 * (k - 3), restarted_at)))
    assert tr.history("chat-8b", URL)[0].timestamp == T0  # not cut at the crash
    (res,) = tr.evaluate(T0 + 7).results
    stats = res.evaluation.stats
    assert stats is not None and stats.counter_resets == 1


def test_engines_flapping_behind_a_target_are_logged_once_a_window(caplog: pytest.LogCaptureFixture) -> None:
    """Breaker 21: a page alternating between two and three replicas logged "the engines behind this target changed"
    at INFO on every scrape. Once per evaluation window (10 s here) at INFO, the rest at DEBUG."""
    import logging

    tr = _tracker()
    tr.set_deployments([(context(), [URL])])
    two, three = ("ReplicaId=a", "ReplicaId=b"), ("ReplicaId=a", "ReplicaId=b", "ReplicaId=c")
    with caplog.at_level(logging.DEBUG, logger="advisor.tracker"):
        for k in range(12):
            tr.observe("chat-8b", URL, TimedSnapshot(URL, T0 + k, _ranked(k, two if k % 2 else three)))
    said = [r.levelno for r in caplog.records if "engines behind this target changed" in r.getMessage()]
    assert len(said) == 11
    assert said.count(logging.INFO) == 2  # at T0 + 1 and T0 + 11
