"""For-durations count the time a condition was *seen* to hold (h15 review): an evaluation after a gap longer than
the bound the caller gives (``max_gap_seconds``: the daemon's stalled-loop bound, 3 scrape intervals + 5 s), or
after the clock stepped back, cannot vouch for the time since the previous one, so the pending conditions of its
deployment restart their clock there. Open incidents, cooldowns and the replica stabilizer's windows are checked
across the same steps: no negative durations, nothing held off for the size of a step.

The for-duration tests use :class:`tests.test_lifecycle.ScriptedRule` (the test sets fire/clear), for 60 s; the
evaluations come 15 s apart (the default scrape interval) with a bound of 50 s (3 × 15 s + 5 s).
"""

from __future__ import annotations

import pytest

from advisor.rules.lifecycle import Lifecycle, PendingRestart
from advisor.rules.replicas import ReplicaStabilizer
from tests.factories import evaluation
from tests.test_lifecycle import ScriptedRule

BOUND = 50.0
STEP = 3600.0
DEP = "chat-8b"  # tests.factories.context's deployment


def _status(lc: Lifecycle) -> tuple[str, str]:
    s = lc.statuses[(DEP, "scripted")]
    return s.state, s.reason


def _first_opening(lc: Lifecycle, times: list[float]) -> float | None:
    """Evaluate at ``times`` (the rule holding at each); when the first incident opened (``None``: none did)."""
    for t in times:
        if any(tr.kind == "opened" for tr in lc.evaluate(evaluation(now=t))):
            return t
    return None


def test_a_gap_longer_than_the_bound_restarts_a_pending_for_duration() -> None:
    """Held 15 s, then no evaluation for an hour: the condition is pending for 0 s at the evaluation after the gap
    and opens 60 s of evaluations later (before: at once, on that one evaluation); the restart is reported with
    the gap and how long each condition had been pending."""
    lc = Lifecycle([ScriptedRule(fire=True)], max_gap_seconds=BOUND)
    assert _first_opening(lc, [0.0, 15.0]) is None
    after = 15.0 + STEP
    assert lc.evaluate(evaluation(now=after)) == []
    assert _status(lc) == ("pending", "scripted holds (for 0s of 60s)")
    assert lc.last_restart == PendingRestart(DEP, 15.0, after, (("scripted", 15.0),))
    assert lc.last_restart.gap_seconds == STEP
    assert _first_opening(lc, [after + k * 15.0 for k in range(1, 9)]) == after + 60.0
    assert lc.last_restart is None  # reported at the evaluation after the gap only


@pytest.mark.parametrize(
    ("spacing", "opens_at"),
    [(15.0, 60.0), (BOUND, 100.0), (BOUND + 1, None)],
    ids=["one-interval-apart", "exactly-the-bound-apart", "a-second-beyond-the-bound-apart"],
)
def test_evaluations_up_to_the_bound_apart_vouch_for_the_time_between(spacing: float, opens_at: float | None) -> None:
    """Evaluations ``spacing`` apart while the condition holds: up to the bound each one vouches for the time
    since the one before (at 50 s apart it has held 100 s ≥ 60 s at the third); beyond it every one restarts the
    clock, so nothing opens however long it goes on."""
    lc = Lifecycle([ScriptedRule(fire=True)], max_gap_seconds=BOUND)
    assert _first_opening(lc, [k * spacing for k in range(8)]) == opens_at


def test_without_a_bound_a_forward_gap_is_vouched_for() -> None:
    """A Lifecycle built without ``max_gap_seconds`` (the unit tests' ``opens_after``, the backtest, which
    evaluates at its step) counts every forward gap: 15 s seen, then an hour later, it opens at once."""
    lc = Lifecycle([ScriptedRule(fire=True)])
    assert _first_opening(lc, [0.0, 15.0, 15.0 + STEP]) == 15.0 + STEP
    assert lc.last_restart is None


@pytest.mark.parametrize("bound", [None, BOUND], ids=["no-bound", "bound"])
def test_a_step_back_restarts_a_pending_for_duration_never_a_negative_one(bound: float | None) -> None:
    """Held 15 s, then the clock steps back an hour. Before: "pending (for -3585s of 60s)" and it opened an hour
    late. Now (with or without a bound: no time passes backwards) the clock restarts at the first evaluation
    after the step, and it opens 60 s later."""
    lc = Lifecycle([ScriptedRule(fire=True)], max_gap_seconds=bound)
    assert _first_opening(lc, [0.0, 15.0]) is None
    after = 30.0 - STEP
    assert lc.evaluate(evaluation(now=after)) == []
    assert _status(lc) == ("pending", "scripted holds (for 0s of 60s)")
    assert lc.last_restart is not None and lc.last_restart.gap_seconds == -STEP + 15.0
    assert _first_opening(lc, [after + k * 15.0 for k in range(1, 9)]) == after + 60.0


def test_an_open_incident_is_kept_across_a_gap_and_a_step_back() -> None:
    """An active rule has done its for-duration: a gap or a step neither resolves nor re-opens its incident, and
    nothing pending is reported restarted."""
    rule = ScriptedRule(fire=True)
    lc = Lifecycle([rule], max_gap_seconds=BOUND)
    assert _first_opening(lc, [k * 15.0 for k in range(5)]) == 60.0
    (rec,) = lc.open_recommendations()
    for now in (60.0 + STEP, 60.0):
        assert lc.evaluate(evaluation(now=now)) == []
        assert lc.last_restart is None
        assert [r.id for r in lc.open_recommendations()] == [rec.id]
        assert _status(lc)[0] == "firing"


@pytest.mark.parametrize("step", [STEP, -STEP], ids=["gap", "step-back"])
def test_a_challengers_run_restarts_after_a_gap_too(step: float) -> None:
    """A better turn must rank better at two evaluations over 120 s before it replaces the suggested one; that
    too is a time seen. Utilization ranks better at 15 s, then an hour passes (or the clock steps back an hour).
    Before: forward, the suggestion switched at the evaluation after the gap (two runs, 3,600 s); back, not for
    an hour. Now it switches 120 s after the evaluation after the step, where its run restarted."""
    rule = ScriptedRule(fire=True, for_s=0, dials=["kv_cache_dtype"])
    lc = Lifecycle([rule], max_gap_seconds=BOUND)
    assert _first_opening(lc, [0.0]) == 0.0
    rule.dials = ["kv_cache_dtype", "gpu_memory_utilization"]
    after = 15.0 + step
    switched = None
    for now in [15.0, *(after + k * 15.0 for k in range(12))]:
        lc.evaluate(evaluation(now=now))
        if lc.open_recommendations()[0].dial == "gpu_memory_utilization":
            switched = now
            break
    assert switched == after + 120.0


def test_a_step_back_keeps_the_cooldown_left_not_the_step() -> None:
    """Resolved at 100 with a 300 s cooldown; evaluated at 200 (200 s left); the clock steps back an hour. Before:
    "3800s of cooldown left" (the resolve sat in the clock's future). Now the step counts as no time: 200 s are
    left at the evaluation after it, and the problem may open again 200 s later."""
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule], cooldown_seconds=300.0)
    assert _first_opening(lc, [0.0]) == 0.0
    rule.fire, rule.clear = False, True
    assert [t.kind for t in lc.evaluate(evaluation(now=100.0))] == ["resolved"]
    rule.clear = False
    lc.evaluate(evaluation(now=200.0))
    rule.fire = True
    after = 200.0 - STEP
    assert lc.evaluate(evaluation(now=after)) == []
    assert _status(lc) == ("cooldown", "scripted holds (resolved recently; 200s of cooldown left)")
    assert _first_opening(lc, [after + 199.0, after + 200.0]) == after + 200.0


def test_a_resolve_from_before_an_unseen_step_back_holds_off_at_most_the_cooldown() -> None:
    """The incident resolved at 1000 (its condition cleared), a reload removed the deployment, the clock stepped back
    an hour, and the deployment is back: its cooldown is the full 300 s from the first evaluation that finds the
    resolve in the clock's future, not 3,900 s. (A resolve by the reload itself, :meth:`Lifecycle.resolve_orphans`,
    starts no cooldown: the test below.)"""
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule], cooldown_seconds=300.0)
    assert _first_opening(lc, [0.0]) == 0.0
    rule.fire, rule.clear = False, True
    assert [t.kind for t in lc.evaluate(evaluation(now=1000.0))] == ["resolved"]
    rule.fire, rule.clear = True, False
    assert lc.resolve_orphans(set(), 1001.0) == []  # nothing open: the reload resolves nothing
    back = 1000.0 - STEP
    assert lc.evaluate(evaluation(now=back)) == []
    assert _status(lc) == ("cooldown", "scripted holds (resolved recently; 300s of cooldown left)")
    assert _first_opening(lc, [back + 299.0, back + 300.0]) == back + 300.0


def test_a_resolve_by_a_reload_starts_no_cooldown() -> None:
    """A reload removed the deployment while its incident was open (resolved "no longer configured"), and the next
    reload brings it back: the condition still holds, so it opens again at once — a reload is no sign of a
    flapping condition (breaker 19: 5 minutes of "cooldown" at 96 % KV)."""
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule], cooldown_seconds=300.0)
    assert _first_opening(lc, [0.0]) == 0.0
    assert [t.kind for t in lc.resolve_orphans(set(), 1000.0)] == ["resolved"]
    assert _first_opening(lc, [1001.0]) == 1001.0


def test_after_a_step_back_the_scale_down_window_holds_for_its_length_not_the_step() -> None:
    """6 replicas advised for 5 minutes (raw 6 every 15 s, 6 running), then the clock steps back an hour and the
    raw count is 2. The scale-down window (300 s) keeps 6 until the counts seen before the step are older than
    300 s: the step counts as no time, so they were last seen at the first evaluation after it, and 2 is advised
    at the first evaluation more than 300 s later (315 s on a 15 s grid). Before: the counts from before the step
    sat in the clock's future, in every window, for the hour (2 only 3,900 s after the step), and the series
    grew without trimming meanwhile."""
    stab = ReplicaStabilizer(60.0, 300.0)
    for k in range(21):
        stab.observe(DEP, k * 15.0, 6)
    after = 315.0 - STEP
    first_two = None
    for k in range(400):
        now = after + k * 15.0
        stab.observe(DEP, now, 2)
        if stab.value(DEP, now, 6) == 2:
            first_two = now - after
            break
    assert first_two == 315.0
