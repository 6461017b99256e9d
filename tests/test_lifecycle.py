"""Opening and resolving: for-durations, hysteresis, stale data, one open recommendation per dial."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.lifecycle import Lifecycle, recommendation_id
from tests.factories import evaluation


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

    def for_seconds(self) -> float:
        return self.for_s

    def fires(self, ev: Evaluation) -> Condition:
        return Condition(self.fire, "scripted")

    def clears(self, ev: Evaluation) -> Condition:
        return Condition(self.clear, "scripted")

    def propose(self, ev: Evaluation) -> list[Proposal]:
        return [
            Proposal(self.id, d, "set", 1, self.suggested, f"--{d}", self.severity, 0.5, "s", "d", {}, {}, score=10 - i)
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


def test_open_recommendations_resolve_only_on_the_clear_side_keeping_id_and_start() -> None:
    rule = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=10))
    rule.fire = False  # inside the hysteresis band: no longer firing but not clear
    assert lc.evaluate(evaluation(now=20)) == []
    assert lc.open_recommendations()[0].id == opened.recommendation.id
    rule.clear = True
    (resolved,) = lc.evaluate(evaluation(now=30))
    assert resolved.kind == "resolved"
    assert resolved.recommendation.id == opened.recommendation.id
    assert resolved.recommendation.opened_at == 10
    assert resolved.recommendation.resolved_at == 30
    assert lc.open_recommendations() == []


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


def test_at_most_one_open_recommendation_per_dial_across_rules() -> None:
    a = ScriptedRule(id="a", fire=True, for_s=0, dials=["replicas", "kv_cache_dtype"])
    b = ScriptedRule(id="b", fire=True, for_s=0, dials=["replicas", "max_model_len"])
    lc = Lifecycle([a, b])
    lc.evaluate(evaluation(now=0))
    dials = sorted(r.dial for r in lc.open_recommendations())
    assert dials == ["kv_cache_dtype", "max_model_len", "replicas"]


def test_unknown_condition_does_not_open() -> None:
    lc = Lifecycle([ScriptedRule(fire=None, for_s=0)])
    assert lc.evaluate(evaluation(now=0)) == []
    assert lc.statuses[("chat-8b", "scripted")].state == "unknown"


def test_ids_are_stable_and_distinct() -> None:
    assert recommendation_id("d", "r", "x", 1.0) == recommendation_id("d", "r", "x", 1.0)
    assert recommendation_id("d", "r", "x", 1.0) != recommendation_id("d", "r", "y", 1.0)
    assert len(recommendation_id("d", "r", "x", 1.0)) == 16


def test_an_open_recommendation_keeps_its_severity_but_refreshes_its_numbers() -> None:
    rule = ScriptedRule(fire=True, for_s=0, severity="critical")
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    rule.severity, rule.suggested = "warning", 3
    lc.evaluate(evaluation(now=10))
    (rec,) = lc.open_recommendations()
    assert (rec.severity, rec.suggested, rec.opened_at) == ("critical", 3, 0)


def test_a_changed_suggestion_is_reported_as_an_update_never_as_a_transition() -> None:
    """An open recommendation whose suggested value moves (replicas 1 → 3, later 1 → 2) is shown as updated, so
    the line that resolves it does not contradict the line that opened it; nothing is sent for an update."""
    rule = ScriptedRule(fire=True, for_s=0, suggested=3)
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=0))
    assert lc.last_updates == []
    rule.suggested = 2
    assert lc.evaluate(evaluation(now=10)) == []  # no opened/resolved transition: notifiers see nothing
    (update,) = lc.last_updates
    assert (update.kind, update.recommendation.id, update.recommendation.suggested) == (
        "updated",
        opened.recommendation.id,
        2,
    )
    assert update.reason == "was 1 → 3"
    lc.evaluate(evaluation(now=20))  # unchanged: no update
    assert lc.last_updates == []


def test_console_lines_say_what_changed_and_label_the_two_ceilings() -> None:
    from advisor.service import format_transition

    effect = {
        "max_concurrency": {"before": 23.26, "after": 54.92},
        "concurrency_ceiling": {"before": 31.75, "after": 74.96},
    }

    @dataclass
    class EffectRule(ScriptedRule):
        def propose(self, ev: Evaluation) -> list[Proposal]:
            return [
                Proposal(
                    self.id,
                    "replicas",
                    "increase",
                    1,
                    self.suggested,
                    "--replicas",
                    "critical",
                    0.9,
                    "s",
                    "d",
                    effect,
                    {},
                    score=1.0,
                )
            ]

    rule = EffectRule(fire=True, for_s=0, suggested=3)
    lc = Lifecycle([rule])
    (opened,) = lc.evaluate(evaluation(now=0))
    line = format_transition(opened)
    assert "OPENED CRITICAL" in line and "replicas 1 → 3" in line
    assert "sequences at max-model-len 23.26 → 54.92" in line
    assert "sequences at the observed length 31.75 → 74.96" in line
    rule.suggested = 2
    lc.evaluate(evaluation(now=10))
    (update,) = lc.last_updates
    assert "UPDATED" in format_transition(update) and "now 1 → 2 (was 1 → 3" in format_transition(update)
    rule.fire, rule.clear = False, True
    (resolved,) = lc.evaluate(evaluation(now=20))
    line = format_transition(resolved)
    assert "RESOLVED" in line and "replicas 1 → 2 withdrawn" in line and "no longer needed" not in line


def test_a_wobbling_suggestion_is_neither_re_announced_nor_drifts_from_what_was_announced() -> None:
    """max_num_seqs 256 → 28 that the next evaluations put at 29, 28, 29: under 10 % apart, so the open
    recommendation keeps announcing 28 and no UPDATED line is printed; a move to 20 (29 % off) is one."""
    rule = ScriptedRule(fire=True, for_s=0, suggested=28)
    lc = Lifecycle([rule])
    lc.evaluate(evaluation(now=0))
    for i, wobble in enumerate((29, 28, 29), start=1):
        rule.suggested = wobble
        lc.evaluate(evaluation(now=10 * i))
        assert lc.last_updates == []
        (rec,) = lc.open_recommendations()
        assert rec.suggested == 28
    rule.suggested = 20
    lc.evaluate(evaluation(now=50))
    (update,) = lc.last_updates
    assert update.recommendation.suggested == 20 and update.reason == "was 1 → 28"
