"""For-durations count the time a condition was *seen* to hold (h15 review): an evaluation after a gap longer than
the bound the caller gives (``max_gap_seconds``: the daemon's stalled-loop bound, 3 scrape intervals + 5 s), or
after the clock stepped back, cannot vouch for the time since the previous one, so the pending conditions of its
deployment restart their clock there; open incidents are kept.

The for-duration tests use :class:`tests.test_lifecycle.ScriptedRule` (the test sets fire/clear), for 60 s; the
evaluations come 15 s apart (the default scrape interval) with a bound of 50 s (3 × 15 s + 5 s).
"""

from __future__ import annotations

import pytest

from advisor.rules.lifecycle import Lifecycle, PendingRestart
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
