"""Incidents: for-durations, hysteresis, stale data, one open recommendation per deployment and problem (issue 13)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from advisor.notify.outbox import Outbox
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.goodput import GoodputRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.lifecycle import Lifecycle, rank_key, recommendation_id, why_rank
from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.replicas import ReplicaStabilizer
from advisor.state import load_state, save_state
from tests.factories import evaluation
from tests.rules.helpers import ev as rule_ev
from tests.rules.helpers import good, requests


@dataclass
class ScriptedRule:
    """A rule whose fire/clear answers the test sets directly, to test the lifecycle alone."""

    id: str = "scripted"
    supersedes: tuple[str, ...] = ()
    for_s: float = 60.0
    fire: bool | None = False
    clear: bool | None = False
    dials: list[str] = field(default_factory=lambda: ["kv_cache_dtype"])
    severity: str = "warning"
    suggested: int = 2
    problem: str | None = None
    confidence: float = 0.9
    withheld: dict[str, str] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    action: str = "set"
    current: int = 1

    def for_seconds(self) -> float:
        return self.for_s

    def fires(self, ev: Evaluation) -> Condition:
        return Condition(self.fire, f"{self.id} holds" if self.fire else f"{self.id} does not hold")

    def clears(self, ev: Evaluation) -> Condition:
        return Condition(self.clear, f"{self.id} cleared")

    def propose(self, ev: Evaluation) -> list[Proposal]:
        return [
            Proposal(
                self.id,
                d,
                self.action,
                self.current,
                self.suggested,
                f"--{d}",
                self.severity,
                self.confidence,
                f"{self.id} suggests {d} 1 → {self.suggested}",
                "d",
                {},
                {},
                score=self.scores.get(d, 10 - i),
                withheld=self.withheld.get(d),
            )
            for i, d in enumerate(self.dials)
        ]


@pytest.mark.parametrize(
    ("held_seconds", "opens"),
    [(0, False), (59, False), (60, True), (61, True)],
    ids=["just-started", "one-second-short", "exactly-the-for-duration", "past-it"],
)
def test_a_condition_opens_only_after_holding_for_its_for_duration(held_seconds: float, opens: bool) -> None:
    rule = ScriptedRule(fire=True)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=1000.0))
    out = lc.evaluate(evaluation(now=1000.0 + held_seconds))
    assert bool(out) == opens
    assert (len(lc.open_recommendations()) == 1) == opens


def test_a_gap_in_the_condition_restarts_the_for_duration() -> None:
    rule = ScriptedRule(fire=True)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    rule.fire = False
    lc.evaluate(evaluation(now=30))
    rule.fire = True
    lc.evaluate(evaluation(now=40))
    assert lc.evaluate(evaluation(now=90)) == []  # only 50 s since it held again
    assert len(lc.evaluate(evaluation(now=100))) == 1


def test_ignore_for_opens_at_once() -> None:
    lc = Lifecycle([ScriptedRule(fire=True)])
    assert len(lc.evaluate(evaluation(now=0), ignore_for=True)) == 1


def test_an_incident_resolves_only_on_the_clear_side_keeping_id_and_start() -> None:
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=10))
    rule.fire = False  # inside the hysteresis band: no longer firing but not clear
    assert lc.evaluate(evaluation(now=20)) == []
    assert lc.open_recommendations()[0].id == opened.recommendation.id
    assert lc.statuses[("chat-8b", "scripted")].state == "firing"
    rule.clear = True
    (resolved,) = lc.evaluate(evaluation(now=30))
    assert resolved.kind == "resolved"
    assert resolved.recommendation.id == opened.recommendation.id
    assert resolved.recommendation.opened_at == 10
    assert resolved.recommendation.resolved_at == 30
    assert lc.open_recommendations() == []


def test_one_evaluations_clear_does_not_resolve_under_a_resolve_hold() -> None:
    # breaker 27 (kvdip): KV at 95 % with a one-scrape dip to 75 % every 40 s resolved kv_saturation on the dip,
    # and the 300 s cooldown then kept the still-saturated pool from reopening; a clear must hold resolve_for
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule], resolve_hold_seconds=30.0)
    (opened,) = lc.evaluate(evaluation(now=0))
    rule.fire, rule.clear = False, True  # the dip
    assert lc.evaluate(evaluation(now=2)) == []
    status = lc.statuses[("chat-8b", "scripted")]
    assert status.state == "firing" and "clearing: clear for 0s of 30s" in status.reason, status
    assert "not yet clear" not in status.reason, status  # clearing and not yet clear at once read as a contradiction
    rule.fire, rule.clear = True, False  # saturated again: the hold starts over
    assert lc.evaluate(evaluation(now=4)) == []
    rule.fire, rule.clear = False, True
    assert lc.evaluate(evaluation(now=6)) == []
    assert lc.evaluate(evaluation(now=35)) == []  # 29 s of clear
    (resolved,) = lc.evaluate(evaluation(now=36))  # 30 s of clear, counted from 6 (not 2)
    assert resolved.kind == "resolved" and resolved.recommendation.id == opened.recommendation.id
    assert resolved.recommendation.resolved_at == 36


def test_a_gap_restarts_the_resolve_hold_and_ignore_for_resolves_at_once() -> None:
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule], resolve_hold_seconds=30.0, max_gap_seconds=10.0)
    lc.evaluate(evaluation(now=0))
    rule.fire, rule.clear = False, True
    assert lc.evaluate(evaluation(now=5)) == []
    assert lc.evaluate(evaluation(now=40)) == []  # 35 s after, but the gap cannot vouch for the clear between
    for now in (50, 60):
        assert lc.evaluate(evaluation(now=now)) == []
    assert len(lc.evaluate(evaluation(now=70))) == 1  # 30 s of clear from 40, each evaluation 10 s after the last
    once = Lifecycle([ScriptedRule(fire=True, for_s=0)], resolve_hold_seconds=30.0)
    once.evaluate(evaluation(now=0))
    once.rules[0].fire, once.rules[0].clear = False, True  # type: ignore[attr-defined]
    assert len(once.evaluate(evaluation(now=1), ignore_for=True)) == 1


@pytest.mark.parametrize("state", ["stale", "unavailable"])
def test_stale_or_unavailable_data_neither_opens_nor_resolves(state: str) -> None:
    rule = ScriptedRule(fire=True, clear=True, for_s=0)
    lc = Lifecycle([rule])
    assert lc.evaluate(evaluation(now=0, state=state)) == []
    rule.clear = False
    lc.evaluate(evaluation(now=1))
    rule.clear = True
    assert lc.evaluate(evaluation(now=2, state=state)) == []
    assert len(lc.open_recommendations()) == 1
    status = lc.statuses[("chat-8b", "scripted")]
    assert status.state == "unknown" and state in status.reason


def test_a_rule_evaluated_on_stale_data_acts_on_it() -> None:
    rule = ScriptedRule(id="stalled", fire=True, for_s=0)
    rule.evaluated_in = ("fresh", "stale")  # type: ignore[attr-defined]
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=0, state="stale"))
    assert opened.kind == "opened"


def test_unknown_condition_does_not_open() -> None:
    lc = Lifecycle([ScriptedRule(fire=None, for_s=0)])
    assert lc.evaluate(evaluation(now=0)) == []
    assert lc.statuses[("chat-8b", "scripted")].state == "unknown"


def test_ids_are_stable_and_distinct() -> None:
    assert recommendation_id("d", "r", "x", 1.0) == recommendation_id("d", "r", "x", 1.0)
    assert recommendation_id("d", "r", "x", 1.0) != recommendation_id("d", "r", "y", 1.0)
    assert len(recommendation_id("d", "r", "x", 1.0)) == 16


def test_an_open_incident_keeps_its_severity_but_refreshes_its_numbers() -> None:
    rule = ScriptedRule(fire=True, for_s=0, severity="critical")
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    rule.severity, rule.suggested = "warning", 3
    lc.evaluate(evaluation(now=10))  # one evaluation's move is held (the next must agree)
    lc.evaluate(evaluation(now=20))
    (rec,) = lc.open_recommendations()
    assert (rec.severity, rec.suggested, rec.opened_at, rec.updated_at) == ("critical", 3, 0, 20)


def test_a_changed_suggestion_is_reported_as_an_update_never_as_a_transition() -> None:
    """An open incident whose suggested value moves (3, later 2) is shown as updated, so the line that resolves
    it does not contradict the line that opened it; nothing is sent for an update."""
    rule = ScriptedRule(fire=True, for_s=0, suggested=3)
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=0))
    assert lc.last_updates == []
    rule.suggested = 2
    assert lc.evaluate(evaluation(now=10)) == []  # one evaluation's move is held until the next agrees
    assert lc.last_updates == []
    assert lc.evaluate(evaluation(now=15)) == []  # no opened/resolved transition: notifiers see nothing
    (update,) = lc.last_updates
    assert (update.kind, update.recommendation.id, update.recommendation.suggested) == (
        "updated",
        opened.recommendation.id,
        2,
    )
    assert update.reason == "was 1 → 3"
    lc.evaluate(evaluation(now=20))  # unchanged: no update
    assert lc.last_updates == []


def test_a_wobbling_suggestion_is_neither_re_announced_nor_drifts_from_what_was_announced() -> None:
    """max_num_seqs 256 → 28 that the next evaluations put at 29, 28, 29: under 10 % apart, so the open
    incident keeps announcing 28 and no UPDATED line is printed; a move to 20 (29 % off) is one."""
    rule = ScriptedRule(fire=True, for_s=0, suggested=28)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    for i, wobble in enumerate((29, 28, 29), start=1):
        rule.suggested = wobble
        lc.evaluate(evaluation(now=10 * i))
        assert lc.last_updates == []
        (rec,) = lc.open_recommendations()
        assert rec.suggested == 28
        assert "→ 28" in rec.summary and "→ 29" not in rec.summary
    rule.suggested = 20
    lc.evaluate(evaluation(now=50))
    assert lc.last_updates == []  # the first evaluation to move it: held until the next agrees
    lc.evaluate(evaluation(now=60))
    (update,) = lc.last_updates
    assert update.recommendation.suggested == 20 and update.reason == "was 1 → 28"


def test_one_evaluations_jump_of_a_suggested_value_is_held_until_the_next_agrees() -> None:
    """Breaker 23 (rerun 2026-12-07): seq_cap read "max_num_seqs 4 → 214" for one scrape at a queue's turnaround,
    between 13 before and 6 after; the incident announced each. A value moves only when two evaluations in a row move
    it materially the same way: 13, 214 (held), 6 (the other way: held), 5 → 5."""
    rule = ScriptedRule(fire=True, for_s=0, dials=["max_num_seqs"], current=4, suggested=13)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    for now, value, shown in ((1, 214, 13), (2, 6, 13), (3, 5, 5)):
        rule.suggested = value
        lc.evaluate(evaluation(now=now))
        (rec,) = lc.open_recommendations()
        assert rec.suggested == shown, (now, value)
        if shown != value:
            assert f"This evaluation alone suggests {value}; the advice stays at 13 unless the next" in rec.description
    assert [u.reason for u in lc.last_updates] == ["was 4 → 13"]


def test_a_turn_made_moves_the_suggestion_at_once() -> None:
    """When the current value moves (the operator applied a turn), the incident follows at once."""
    rule = ScriptedRule(fire=True, for_s=0, dials=["max_num_seqs"], current=4, suggested=13)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    rule.current, rule.suggested = 13, 20
    lc.evaluate(evaluation(now=1))
    (rec,) = lc.open_recommendations()
    assert (rec.current, rec.suggested) == (13, 20)


# -- one incident per (deployment, problem) --------------------------------------------------------------------


def _pair(**kw: object) -> tuple[ScriptedRule, ScriptedRule]:
    a = ScriptedRule(id="a", fire=True, for_s=0, problem="saturation", dials=["replicas"], **kw)  # type: ignore[arg-type]
    b = ScriptedRule(id="b", fire=True, for_s=0, problem="saturation", dials=["kv_cache_dtype", "max_model_len"])
    return a, b


def test_rules_of_one_problem_open_one_incident_with_ranked_alternatives() -> None:
    a, b = _pair()
    lc = Lifecycle([a, b])
    out = lc.evaluate(evaluation(now=0))
    assert [t.kind for t in out] == ["opened"]  # one notification, whatever the number of turns
    (rec,) = lc.open_recommendations()
    assert rec.problem == "saturation"
    # no-GPU turns first (kv dtype before a context cap), the GPU-adding replicas last
    assert (rec.rule, rec.dial) == ("b", "kv_cache_dtype")
    assert [(x["rule"], x["dial"]) for x in rec.alternatives] == [("b", "max_model_len"), ("a", "replicas")]
    assert rec.alternatives[-1]["why_rank"].startswith("adds 1 GPU; closes the gap")
    assert "Suggested of 3 turns: adds no GPU; closes the gap; second-lowest risk (KV dtype)" in rec.description


def test_a_rule_following_another_continues_the_incident() -> None:
    """queue_growth clears while goodput_below_target holds: the same incident, no resolve and no reopen."""
    a, b = _pair()
    b.fire = False
    lc = Lifecycle([a, b])
    (opened,) = lc.evaluate(evaluation(now=0))
    b.fire = True
    assert lc.evaluate(evaluation(now=10)) == []
    a.fire, a.clear = False, True
    assert lc.evaluate(evaluation(now=20)) == []
    assert lc.open_recommendations()[0].rule == "a"  # one evaluation without its turn holds it
    assert lc.evaluate(evaluation(now=25)) == []
    (rec,) = lc.open_recommendations()
    assert rec.id == opened.recommendation.id and rec.opened_at == 0
    assert rec.rule == "b"  # the turn of the rule that still holds
    assert lc.statuses[("chat-8b", "a")].state == "inactive"
    assert lc.statuses[("chat-8b", "b")].state == "firing"
    b.fire, b.clear = False, True
    (resolved,) = lc.evaluate(evaluation(now=30))
    assert resolved.kind == "resolved" and resolved.recommendation.id == opened.recommendation.id


def test_a_pending_rule_of_the_problem_keeps_the_incident_open() -> None:
    a, b = _pair()
    b.fire, b.for_s = False, 60
    lc = Lifecycle([a, b])
    lc.evaluate(evaluation(now=0))
    b.fire = True
    a.fire, a.clear = False, True
    assert lc.evaluate(evaluation(now=10)) == []  # a cleared, b pending: still open
    assert len(lc.open_recommendations()) == 1
    assert lc.statuses[("chat-8b", "b")].state == "pending"
    b.fire = False
    (resolved,) = lc.evaluate(evaluation(now=20))  # b never opened and stopped holding: resolved
    assert resolved.kind == "resolved"


def test_rules_of_different_problems_open_separate_incidents() -> None:
    a = ScriptedRule(id="a", fire=True, for_s=0, problem="saturation")
    b = ScriptedRule(id="b", fire=True, for_s=0, dials=["speculative_decoding"])
    lc = Lifecycle([a, b])
    assert [t.recommendation.problem for t in lc.evaluate(evaluation(now=0))] == ["saturation", "b"]


def test_a_rule_whose_condition_holds_is_never_inactive() -> None:
    """Issue 13 problem 6: a rule whose dial another rule also proposes was shown ``inactive``; it is merged."""
    a = ScriptedRule(id="a", fire=True, for_s=0, problem="saturation", dials=["replicas"])
    b = ScriptedRule(id="b", fire=True, for_s=0, problem="saturation", dials=["replicas"])
    lc = Lifecycle([a, b])
    lc.evaluate(evaluation(now=0))
    for now in (0, 10):
        lc.evaluate(evaluation(now=now))
        assert lc.statuses[("chat-8b", "a")].state == "firing"
        assert lc.statuses[("chat-8b", "b")].state == "firing"
    assert len(lc.open_recommendations()) == 1


def test_withheld_turns_are_never_suggested_and_say_why() -> None:
    rule = ScriptedRule(
        fire=True,
        for_s=0,
        dials=["max_model_len", "kv_cache_dtype"],
        withheld={"max_model_len": "observed prompts average 1,900 tokens: a context cap frees nothing"},
    )
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    (rec,) = lc.open_recommendations()
    assert rec.dial == "kv_cache_dtype" and rec.alternatives == ()
    assert rec.withheld == (
        {
            "rule": "scripted",
            "dial": "max_model_len",
            "reason": "observed prompts average 1,900 tokens: a context cap frees nothing",
        },
    )


def test_a_rule_with_every_turn_withheld_opens_nothing_and_is_shown_withheld() -> None:
    rule = ScriptedRule(fire=True, for_s=0, dials=["max_model_len"], withheld={"max_model_len": "short prompts"})
    lc = Lifecycle([rule])
    assert lc.evaluate(evaluation(now=0)) == []
    status = lc.statuses[("chat-8b", "scripted")]
    assert status.state == "withheld" and "short prompts" in status.reason


def test_a_superseded_rule_s_turns_are_withheld_with_the_superseding_reason() -> None:
    top = ScriptedRule(id="pool_context", fire=True, for_s=0, problem="saturation", dials=["max_model_len"])
    top.supersedes = ("kv",)
    kv = ScriptedRule(id="kv", fire=True, for_s=0, problem="saturation", dials=["kv_cache_dtype"])
    lc = Lifecycle([top, kv])
    (opened,) = lc.evaluate(evaluation(now=0))
    rec = opened.recommendation
    assert rec.dial == "max_model_len" and rec.alternatives == ()
    assert rec.withheld == (
        {"rule": "kv", "dial": "kv_cache_dtype", "reason": "superseded by pool_context: pool_context holds"},
    )
    status = lc.statuses[("chat-8b", "kv")]
    assert status.state == "superseded" and "superseded by pool_context" in status.reason


@pytest.mark.parametrize(("confidence", "severity"), [(0.49, "warning"), (0.5, "critical"), (0.9, "critical")])
def test_an_incident_is_never_critical_at_low_confidence(confidence: float, severity: str) -> None:
    lc = Lifecycle([ScriptedRule(fire=True, for_s=0, severity="critical", confidence=confidence)])
    (opened,) = lc.evaluate(evaluation(now=0))
    assert opened.recommendation.severity == severity


def test_an_incident_capped_at_warning_for_low_confidence_reopens_once_as_critical_when_it_comes() -> None:
    """Walkthrough, 2026-12-07: the demo's saturated engine, watched from a fresh start, opened "WARNING …
    confidence 0.23" (the window not yet full) and read 0.75 half a minute later, but severity is fixed at opening:
    the incident stayed warning for its life and never reached a route on severity="critical". It now resolves
    (reason "escalated") and reopens as critical with the same turn, once; it never goes back."""
    from advisor.rules.lifecycle import RESOLVED_ESCALATED

    rule = ScriptedRule(fire=True, for_s=0, severity="critical", confidence=0.23, dials=["kv_cache_dtype", "replicas"])
    rule.suggested = 4
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=0))
    first = opened.recommendation
    assert (first.severity, first.dial) == ("warning", "kv_cache_dtype")
    rule.confidence = 0.49
    assert lc.evaluate(evaluation(now=10)) == []  # still below the bound: the same warning incident
    rule.confidence = 0.75
    resolved, reopened = lc.evaluate(evaluation(now=20))
    assert (resolved.kind, resolved.recommendation.id) == ("resolved", first.id)
    assert resolved.recommendation.resolved_reason == RESOLVED_ESCALATED
    assert resolved.recommendation.severity == "warning"  # the label it fired with: Alertmanager matches on it
    rec = reopened.recommendation
    assert (reopened.kind, rec.severity, rec.dial, rec.suggested, rec.opened_at) == (
        "opened",
        "critical",
        "kv_cache_dtype",
        4,
        20,
    )
    assert rec.id != first.id and [r.id for r in lc.open_recommendations()] == [rec.id]
    rule.confidence = 0.2  # never back to warning, and no second escalation
    assert all(t.kind != "opened" for t in lc.evaluate(evaluation(now=30)))
    assert lc.open_recommendations()[0].severity == "critical"


def test_an_incident_whose_rule_is_clearing_does_not_escalate() -> None:
    """Breaker 29: a capped warning incident re-paged as a new critical one 19 s after the burst ended (KV at
    14.5 %), as the window's confidence rose while its rule's clear side was holding. No escalation while clearing."""
    rule = ScriptedRule(fire=True, for_s=0, severity="critical", confidence=0.23)
    lc = Lifecycle([rule], resolve_hold_seconds=30.0)
    (opened,) = lc.evaluate(evaluation(now=0))
    assert opened.recommendation.severity == "warning"
    rule.fire, rule.clear, rule.confidence = False, True, 0.75  # the burst is over; the confidence rises
    assert lc.evaluate(evaluation(now=10)) == []
    assert [r.id for r in lc.open_recommendations()] == [opened.recommendation.id]
    (resolved,) = lc.evaluate(evaluation(now=40))
    assert resolved.kind == "resolved" and resolved.recommendation.id == opened.recommendation.id


def test_a_rule_that_resolves_at_once_skips_the_hold_and_unavailable_data_restarts_it() -> None:
    """Breaker 29: (1) "scale replicas 2 → 1" (over_provisioned, resolve_at_once) stayed open for the 30 s hold into an
    overload; (2) a 40 s outage between two clear scrapes counted as clear time, and the saturated incident resolved on
    the first scrape back."""
    down = ScriptedRule(id="fewer", fire=True, for_s=0, problem="over", dials=["replicas"])
    down.resolve_at_once = True  # type: ignore[attr-defined]
    up = ScriptedRule(id="more", fire=True, for_s=0, problem="saturation")
    lc = Lifecycle([down, up], resolve_hold_seconds=30.0)
    assert len(lc.evaluate(evaluation(now=0))) == 2
    down.fire, down.clear = False, True
    up.fire, up.clear = False, True
    (gone,) = lc.evaluate(evaluation(now=2))  # the scale-down goes at once; the saturation holds 30 s
    assert gone.kind == "resolved" and gone.recommendation.rule == "fewer"
    assert lc.evaluate(evaluation(now=20, state="unavailable")) == []  # an outage: no clear time is vouched for
    assert lc.evaluate(evaluation(now=42)) == []  # clear again from 42, not from 2
    assert lc.evaluate(evaluation(now=71)) == []
    (resolved,) = lc.evaluate(evaluation(now=72))
    assert resolved.recommendation.rule == "more"


@pytest.mark.parametrize("why", ["warning turn", "restored from the state file"])
def test_a_warning_incident_not_capped_for_confidence_keeps_its_severity(why: str) -> None:
    """Only the confidence cap is lifted: an incident whose turns were warning at opening (a critical turn joining
    later), or one restored from a state file (its cap not recorded), keeps the severity it opened with."""
    rule = ScriptedRule(fire=True, for_s=0, severity="warning", confidence=0.9)
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=0))
    if why == "restored from the state file":
        lc = Lifecycle([rule])
        lc.restore([opened.recommendation])
    rule.severity = "critical"
    assert all(t.kind != "opened" for t in lc.evaluate(evaluation(now=10)))
    assert [(r.id, r.severity) for r in lc.open_recommendations()] == [(opened.recommendation.id, "warning")]


def test_the_suggested_turn_changes_only_after_two_evaluations_ranking_strictly_better() -> None:
    rule = ScriptedRule(fire=True, for_s=0, dials=["gpu_memory_utilization", "kv_cache_dtype"])
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    assert lc.open_recommendations()[0].dial == "gpu_memory_utilization"  # lowest risk of the no-GPU turns
    # utilization disappears: one evaluation without it holds it (its rule may be back at the next scrape, breaker
    # 23), the second moves the suggestion
    rule.dials = ["kv_cache_dtype", "max_model_len"]
    lc.evaluate(evaluation(now=5))
    (rec,) = lc.open_recommendations()
    assert rec.dial == "gpu_memory_utilization" and lc.last_updates == []
    assert "This evaluation proposes no gpu_memory_utilization turn" in rec.description
    lc.evaluate(evaluation(now=10))
    (rec,) = lc.open_recommendations()
    assert rec.dial == "kv_cache_dtype"
    (update,) = lc.last_updates
    assert update.reason == "was gpu_memory_utilization 1 → 2"
    # utilization is back and ranks strictly better: one evaluation is noise
    rule.dials = ["kv_cache_dtype", "gpu_memory_utilization", "max_model_len"]
    lc.evaluate(evaluation(now=20))
    assert lc.open_recommendations()[0].dial == "kv_cache_dtype" and lc.last_updates == []
    rule.dials = ["kv_cache_dtype", "max_model_len"]  # the challenger vanishes: its count restarts
    lc.evaluate(evaluation(now=30))
    rule.dials = ["kv_cache_dtype", "gpu_memory_utilization", "max_model_len"]
    lc.evaluate(evaluation(now=40))
    (rec,) = lc.open_recommendations()
    assert rec.dial == "kv_cache_dtype"
    assert "At this evaluation gpu_memory_utilization ranks better" in rec.description
    # a second evaluation 10 s later is not enough: the challenger must rank better for 120 s
    lc.evaluate(evaluation(now=50))
    assert lc.open_recommendations()[0].dial == "kv_cache_dtype" and lc.last_updates == []
    lc.evaluate(evaluation(now=159))
    assert lc.open_recommendations()[0].dial == "kv_cache_dtype"
    lc.evaluate(evaluation(now=160))  # 120 s after it first ranked better (t = 40)
    assert lc.open_recommendations()[0].dial == "gpu_memory_utilization"
    assert [u.kind for u in lc.last_updates] == ["updated"]


def test_a_challenger_that_ranks_better_on_and_off_never_takes_the_suggestion() -> None:
    """Issue 13 (words follow the numbers; "utilization first in one run, TP 1 → 2 in the next"): whether a turn
    closes the gap is judged against the momentary backlog, so a jittering queue makes two turns trade places.
    Ranking better at every other pair of evaluations (15 s apart) for ten minutes never lasts 120 s: the
    suggestion stays put."""
    rule = ScriptedRule(fire=True, for_s=0, dials=["kv_cache_dtype"])
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    assert lc.open_recommendations()[0].dial == "kv_cache_dtype"
    flips = 0
    for i in range(1, 41):
        # utilization ranks better at two evaluations in a row, then is gone for one (as a sufficiency flip does)
        rule.dials = ["kv_cache_dtype", "gpu_memory_utilization"] if i % 3 else ["kv_cache_dtype", "max_model_len"]
        lc.evaluate(evaluation(now=15.0 * i))
        flips += sum(1 for u in lc.last_updates if u.kind == "updated")
    assert lc.open_recommendations()[0].dial == "kv_cache_dtype"
    assert flips == 0


def _p(dial: str, *, gain: float = 2.0, sufficient: bool = True, gpus: float = 0.0, rule: str = "r") -> Proposal:
    return Proposal(
        rule, dial, "set", 1, 2, f"--{dial}", "warning", 0.9, "s", "d", {}, {}, score=gain, sufficient=sufficient,
        gpus_added=gpus,
    )  # fmt: skip


def test_the_ranking_is_the_stated_one_and_explains_itself() -> None:
    props = [
        _p("replicas", gain=3.0, gpus=2),  # +100 % per added GPU
        _p("tensor_parallel_size", gain=2.7, gpus=1),  # +170 % per added GPU
        _p("weight_quantization", gain=1.8),
        _p("max_model_len", gain=4.0),
        _p("kv_cache_dtype", gain=2.0),
        _p("gpu_memory_utilization", gain=1.07, sufficient=False),
        _p("gpu_memory_utilization", gain=1.2, rule="other"),
        _p("max_num_seqs", gain=1.5),
    ]
    ranked = sorted(props, key=rank_key)
    assert [(p.dial, p.rule) for p in ranked] == [
        ("gpu_memory_utilization", "other"),
        ("kv_cache_dtype", "r"),
        ("max_model_len", "r"),
        ("weight_quantization", "r"),
        ("max_num_seqs", "r"),
        ("gpu_memory_utilization", "r"),  # does not close the gap
        ("tensor_parallel_size", "r"),
        ("replicas", "r"),
    ]
    assert why_rank(ranked[0]) == "adds no GPU; closes the gap; lowest risk (utilization); predicted gain ×1.20"
    assert why_rank(ranked[-1]) == "adds 2 GPUs; closes the gap; +100% per added GPU"
    assert why_rank(ranked[5]).startswith("adds no GPU; does not close the gap alone")


# -- replicas through the stabilizer ------------------------------------------------------------------------------


def test_replica_advice_is_stabilized_and_never_changes_direction_within_an_incident() -> None:
    """Raw 13, 15, 13 then 3 within 60 s → the lowest of the scale-up window; a later raw 1 (no scale-up) keeps
    the last advice instead of turning the incident into a scale-down."""
    rule = ScriptedRule(fire=True, for_s=0, dials=["replicas"], suggested=13, action="increase")
    lc = Lifecycle([rule], replica_stabilizer=ReplicaStabilizer(60, 300))
    seen = []
    for now, raw in ((0, 13), (10, 15), (20, 13), (30, 3), (40, 2), (100, 1), (110, 1), (200, 1)):
        rule.suggested = raw
        lc.evaluate(evaluation(now=now))
        (rec,) = lc.open_recommendations()
        seen.append(rec.suggested)
    assert seen == [13, 13, 13, 3, 2, 2, 2, 2]


def test_replica_advice_that_opened_as_an_increase_never_turns_into_a_decrease() -> None:
    """Current 2 replicas, advised 5; the load falls until the stabilized count is 1 (below the current 2): the
    incident keeps advising 5 — it resolves when its cause is gone, it does not become a scale-down."""
    rule = ScriptedRule(fire=True, for_s=0, dials=["replicas"], suggested=5, action="increase", current=2)
    lc = Lifecycle([rule], replica_stabilizer=ReplicaStabilizer(60, 300))
    lc.evaluate(evaluation(now=0))
    rule.suggested, rule.action = 1, "decrease"
    for now in (100, 200, 400, 700):
        lc.evaluate(evaluation(now=now))
        (rec,) = lc.open_recommendations()
        assert (rec.action, rec.suggested) == ("increase", 5), now
    assert lc.replica_stabilizer.value("chat-8b", 700, 2) == 1  # what it would have said


def test_an_alternative_replica_count_keeps_its_direction_too() -> None:
    a = ScriptedRule(id="a", fire=True, for_s=0, problem="saturation", dials=["replicas"], suggested=4)
    a.action, a.current = "increase", 2
    b = ScriptedRule(id="b", fire=True, for_s=0, problem="saturation", dials=["kv_cache_dtype"])
    lc = Lifecycle([a, b], replica_stabilizer=ReplicaStabilizer(0, 0))
    lc.evaluate(evaluation(now=0))
    (rec,) = lc.open_recommendations()
    assert rec.dial == "kv_cache_dtype" and rec.alternatives[0]["suggested"] == 4
    a.suggested, a.action = 1, "decrease"
    lc.evaluate(evaluation(now=10))
    (rec,) = lc.open_recommendations()
    assert [(x["action"], x["suggested"]) for x in rec.alternatives] == [("increase", 4)]


class _CountingStabilizer(ReplicaStabilizer):
    def __init__(self) -> None:
        super().__init__(60, 300)
        self.calls: list[tuple[str, float, int]] = []

    def observe(self, key: str, now: float, raw: int) -> None:
        self.calls.append((key, now, raw))
        super().observe(key, now, raw)


def test_one_replica_observation_per_deployment_and_evaluation_whichever_problems_ask() -> None:
    a = ScriptedRule(id="a", fire=True, for_s=0, problem="saturation", dials=["replicas"], suggested=5)
    b = ScriptedRule(id="b", fire=True, for_s=0, dials=["replicas"], suggested=9)
    stab = _CountingStabilizer()
    lc = Lifecycle([a, b], replica_stabilizer=stab)
    lc.evaluate(evaluation(now=0))
    lc.evaluate(evaluation(now=10))
    assert stab.calls == [("chat-8b", 0, 5), ("chat-8b", 10, 5)]  # the first rule's count, once each time
    assert {r.suggested for r in lc.open_recommendations()} == {5}  # one replica number for the deployment


# -- the demo's saturation, with the real rules ---------------------------------------------------------------


def _saturated(now: float, rng: random.Random) -> Evaluation:
    j = rng.uniform(-1, 1)
    return rule_ev(
        now=now,
        kv_cache_usage_ratio=0.97 + 0.02 * j,
        requests_running=50,
        requests_waiting=80 + 10 * j,
        requests_waiting_first=20 + 5 * j,
        requests_running_first=50,
        requests_finished_per_second=10.0 + 0.5 * j,
        preemptions_increase=6,
        preemptions_per_second=0.1,
        prompt_tokens_per_second=5000.0,
        generation_tokens_per_second=2000.0,
        span_seconds=60.0,
        goodput=good(0.3 + 0.05 * j, 0.9),
        **requests(400),
    )


def _drained(now: float) -> Evaluation:
    return rule_ev(
        now=now,
        kv_cache_usage_ratio=0.4,
        requests_running=20,
        requests_waiting=0,
        requests_waiting_first=0,
        requests_running_first=20,
        requests_finished_per_second=10.0,
        preemptions_increase=0,
        preemptions_per_second=0.0,
        prompt_tokens_per_second=5000.0,
        generation_tokens_per_second=2000.0,
        span_seconds=60.0,
        goodput=good(0.99, 0.99),
        **requests(400),
    )


def test_demo_like_saturation_opens_one_incident_with_a_stable_ranking_and_resolves_once() -> None:
    """queue_growth, kv_saturation and goodput_below_target all fire on one saturated deployment: one opened,
    the same id and the same order of alternatives over 20 evaluations of jittered telemetry, one resolved."""
    rules = [QueueGrowthRule(for_seconds=0), KVSaturationRule(for_seconds=0), GoodputRule(for_seconds=0)]
    lc = Lifecycle(rules)
    rng = random.Random(13)
    transitions = []
    orders = set()
    suggested = set()
    for i in range(20):
        transitions += lc.evaluate(_saturated(1000.0 + 10 * i, rng))
        (rec,) = lc.open_recommendations()
        orders.add(tuple(a["dial"] for a in rec.alternatives))
        suggested.add((rec.id, rec.dial, rec.severity, rec.opened_at))
        for rule in rules:
            assert lc.statuses[("chat-8b", rule.id)].state == "firing"
    assert [t.kind for t in transitions] == ["opened"]
    assert len(suggested) == 1 and len(orders) == 1
    (order,) = orders
    assert order.count("replicas") <= 1  # one replica number per deployment
    assert not any(a["dial"] == "max_num_seqs" and a["action"] == "increase" for a in rec.alternatives)
    assert rec.dial != "replicas"  # a turn that adds no GPU comes first
    assert "replicas" in order
    done = lc.evaluate(_drained(1300.0))
    assert [(t.kind, t.recommendation.id) for t in done] == [("resolved", rec.id)]
    assert lc.open_recommendations() == []


# -- an upgrade from the previous release ---------------------------------------------------------------------

PREVIOUS = Path(__file__).parent / "fixtures" / "previous_release"
"""A state file and an outbox written by the release before issue 13 (commit 163121f): the saturated deployment
with four open recommendations of one problem — queue_growth replicas 1 → 2 and three kv_saturation options."""


def test_an_upgrade_restores_one_incident_per_problem_from_the_previous_release_files() -> None:
    old = load_state(PREVIOUS / "state.json")
    assert len(old) == 4 and {r.problem for r in old} == {""}  # the previous shape, read as it is
    rules = [QueueGrowthRule(for_seconds=0), KVSaturationRule(for_seconds=0), GoodputRule(for_seconds=0)]
    lc = Lifecycle(rules)
    lc.restore(old)
    (rec,) = lc.open_recommendations()
    assert rec.problem == "saturation"
    assert (rec.id, rec.rule, rec.dial) == ("920f37d0390fd230", "queue_growth", "replicas")  # earliest, best-ranked
    assert sorted(a["dial"] for a in rec.alternatives) == [
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "tensor_parallel_size",
    ]
    # the first evaluation neither re-opens nor duplicates: the folded records (notified one by one by the
    # previous release) resolve once each, the incident keeps its id and opening time
    out = lc.evaluate(_saturated(1_790_000_100.0, random.Random(1)))
    assert sorted((t.kind, t.recommendation.id) for t in out) == [
        ("resolved", "5547a5dee2121219"),
        ("resolved", "9541d6b1b3a755a6"),
        ("resolved", "b2b5877f737368a6"),
    ]
    (rec,) = lc.open_recommendations()
    assert (rec.id, rec.opened_at, rec.severity) == ("920f37d0390fd230", 1_790_000_000.0, "critical")
    assert lc.evaluate(_saturated(1_790_000_110.0, random.Random(2))) == []
    (done,) = lc.evaluate(_drained(1_790_000_400.0))
    assert (done.kind, done.recommendation.id) == ("resolved", "920f37d0390fd230")


def test_the_previous_release_outbox_is_read_and_the_new_state_file_round_trips(tmp_path: Path) -> None:
    box = Outbox("ops", PREVIOUS / "ops.outbox.json")
    assert [e.note.kind for e in box.pending] == ["opened", "opened"]
    assert len(box.active) == 4
    assert all(a.recommendation.problem == "" and a.recommendation.alternatives == () for a in box.active.values())
    lc = Lifecycle([QueueGrowthRule(for_seconds=0), KVSaturationRule(for_seconds=0)])
    lc.restore(load_state(PREVIOUS / "state.json"))
    save_state(tmp_path / "state.json", lc.open_recommendations(), 1_790_000_020.0)
    (again,) = load_state(tmp_path / "state.json")
    assert again.problem == "saturation" and len(again.alternatives) == 3
    lc2 = Lifecycle([QueueGrowthRule(for_seconds=0), KVSaturationRule(for_seconds=0)])
    lc2.restore([again])
    assert [r.id for r in lc2.open_recommendations()] == ["920f37d0390fd230"]


def test_queue_growth_clearing_while_goodput_holds_keeps_the_incident_with_the_real_rules() -> None:
    """Issue 13, problem 1: queue_growth resolved ("the queue stopped growing") and goodput_below_target opened a
    new recommendation for the same overload. Now a queue flat at 105 keeps queue_growth firing (its cause, the
    backlog, is still there), and once the backlog has drained queue_growth clears while goodput, still low, holds
    the incident: no transition, the same id, goodput's turn suggested."""
    rules = [QueueGrowthRule(for_seconds=0), GoodputRule(for_seconds=0)]
    lc = Lifecycle(rules)

    def window(now: float, first: float, last: float) -> Evaluation:
        return rule_ev(
            now=now,
            kv_cache_usage_ratio=0.5,
            requests_running=50,
            requests_running_first=50,
            requests_waiting=last,
            requests_waiting_first=first,
            requests_finished_per_second=20.0,
            span_seconds=60.0,
            goodput=good(0.2, 0.95),
            **requests(1200),
        )

    (opened,) = lc.evaluate(window(1000.0, 20, 105))
    assert lc.statuses[("chat-8b", "queue_growth")].state == "firing"
    assert lc.statuses[("chat-8b", "goodput_below_target")].state == "firing"
    assert lc.evaluate(window(1060.0, 105, 105)) == []  # the queue stopped growing; 105 still wait
    assert lc.statuses[("chat-8b", "queue_growth")].state == "firing"
    assert lc.evaluate(window(1120.0, 105, 0)) == []  # the backlog drained; goodput is still low
    assert lc.statuses[("chat-8b", "queue_growth")].state == "inactive"
    # its condition holds; its turn, replicas, is withheld as the queue drained (breaker 27: the window's TTFT misses
    # are the queue's, not long prefills, so no prefill turn stands in): the incident holds its last turn
    assert lc.statuses[("chat-8b", "goodput_below_target")].state == "withheld"
    (rec,) = lc.open_recommendations()
    # the same incident: id and opening time kept; the replica advice stands (the drained window alone sizes
    # nothing new, so the last turn is held rather than a second incident opened)
    assert (rec.id, rec.opened_at, rec.dial) == (opened.recommendation.id, 1000.0, "replicas")


def test_an_incident_opens_on_the_best_turn_of_every_rule_whose_condition_holds() -> None:
    """New-user walkthrough (issue 13, problem 1): the incident opened CRITICAL on queue_growth's "replicas 1 → 2"
    (the first rule to finish its for-duration) and two seconds later, when kv_saturation's for-duration ended,
    switched to "gpu_memory_utilization 0.5 → 0.9" — a page naming a turn dropped seconds later. A rule of the
    problem whose condition holds contributes its turns as soon as the incident opens; it stays pending itself."""
    fast = ScriptedRule(id="fast", fire=True, for_s=0, dials=["replicas"], problem="saturation")
    slow = ScriptedRule(id="slow", fire=True, for_s=120, dials=["gpu_memory_utilization"], problem="saturation")
    lc = Lifecycle([fast, slow])
    (opened,) = lc.evaluate(evaluation(now=0))
    rec = opened.recommendation
    # utilization adds no GPU and has the lowest stated risk: it ranks first; replicas is the alternative
    assert (rec.dial, [a["dial"] for a in rec.alternatives]) == ("gpu_memory_utilization", ["replicas"])
    lc.evaluate(evaluation(now=130))  # the slow rule's for-duration ends: nothing switches
    assert lc.open_recommendations()[0].dial == "gpu_memory_utilization" and lc.last_updates == []


def test_a_pending_rule_alone_opens_nothing() -> None:
    slow = ScriptedRule(id="slow", fire=True, for_s=120, dials=["gpu_memory_utilization"], problem="saturation")
    lc = Lifecycle([slow])
    assert lc.evaluate(evaluation(now=0)) == [] and lc.open_recommendations() == []


def test_the_resolved_line_says_why_it_resolved_and_lists_no_alternatives() -> None:
    """Walkthrough: the console line of an incident that resolved because its condition cleared read "kv_saturation
    kv_cache_dtype auto → fp8 withdrawn (+4 alternatives, 1 withheld) — …": nothing was withdrawn, and the counts
    described turns no longer proposed. The line ``run`` and ``demo`` print (``format_transition``) for the real
    rules' resolution says "resolved: <the rules' clear readings>" and counts nothing."""
    from advisor.service import format_transition

    rules = [QueueGrowthRule(for_seconds=0), KVSaturationRule(for_seconds=0), GoodputRule(for_seconds=0)]
    lc = Lifecycle(rules)
    rng = random.Random(13)
    (opened,) = lc.evaluate(_saturated(1000.0, rng))
    assert opened.recommendation.alternatives  # what the old line counted
    (resolved,) = lc.evaluate(_drained(1300.0))
    assert resolved.kind == "resolved" and resolved.reason
    line = format_transition(resolved)
    assert f"resolved: {resolved.reason}" in line, line
    assert f"{opened.recommendation.deployment} {opened.recommendation.problem}" in line, line
    assert opened.recommendation.id in line, line
    for stale in ("withdrawn", "alternative", "withheld"):
        assert stale not in line, line
