"""A reload never strands an incident (issue 13, "reload races"): an open incident whose deployment a reload
removed, or whose problem no configured rule has any longer (its rules disabled), resolves at the next
evaluation — one ``resolved`` transition with the reason — instead of staying open forever (re-sent to
Alertmanager, kept in the state file, shown on the status page) while nothing evaluates it."""

from __future__ import annotations

import dataclasses

from advisor.evaluate import Quality
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.stalled import StalledRule
from advisor.tracker import Tracker
from tests.factories import context
from tests.notify.conftest import BASE

T0 = 1_790_000_600.0
URL = "http://engine-a:8000/metrics"
OPEN = dataclasses.replace(BASE, deployment="chat-8b", problem="saturation")


def _tracker() -> Tracker:
    tr = Tracker(
        [KVSaturationRule(), StalledRule()], evaluation_window=10.0, scrape_interval=1.0, quality=Quality(1.0, 3, 60.0)
    )
    tr.set_deployments([(context(), [URL])])
    assert tr.restore([OPEN]) == 1
    return tr


def _configure(tr: Tracker, rules: list[object]) -> None:
    tr.configure(
        rules,  # type: ignore[arg-type]
        evaluation_window=10.0,
        scrape_interval=1.0,
        quality=Quality(1.0, 3, 60.0),
        cooldown_seconds=0.0,
        model_error_bound=None,
    )


def test_an_incident_of_a_deployment_a_reload_removed_resolves_once() -> None:
    tr = _tracker()
    other = dataclasses.replace(context(), name="code-70b")
    tr.set_deployments([(other, [URL])])  # the reload's config lists code-70b only
    tick = tr.evaluate(T0)
    resolved = [t for t in tick.transitions if t.kind == "resolved"]
    assert [(t.recommendation.id, t.recommendation.resolved_at) for t in resolved] == [(OPEN.id, T0)]
    assert "chat-8b is no longer configured" in resolved[0].reason
    assert tr.lifecycle.open_recommendations() == []
    assert [t for t in tr.evaluate(T0 + 1).transitions if t.kind == "resolved"] == []  # once


def test_an_incident_whose_rules_a_reload_disabled_resolves() -> None:
    tr = _tracker()
    _configure(tr, [StalledRule()])  # the saturation rules disabled
    tick = tr.evaluate(T0)
    resolved = [t for t in tick.transitions if t.kind == "resolved"]
    assert [t.recommendation.id for t in resolved] == [OPEN.id]
    assert "no configured rule has the problem saturation" in resolved[0].reason
    assert tr.lifecycle.open_recommendations() == []


def test_an_incident_whose_deployment_and_rules_stay_is_kept() -> None:
    tr = _tracker()
    _configure(tr, [KVSaturationRule(), StalledRule()])  # a reload that changes nothing of it
    tick = tr.evaluate(T0)  # no data yet: nothing evaluates the problem, nothing resolves it
    assert [t for t in tick.transitions if t.kind == "resolved"] == []
    assert [r.id for r in tr.lifecycle.open_recommendations()] == [OPEN.id]


def test_an_incident_resolved_by_a_reload_starts_no_cooldown_when_the_deployment_comes_back() -> None:
    """Breaker 19: a deployment removed by one SIGHUP (its incident resolved "no longer configured") and restored by
    the next sat in "cooldown (resolved recently; 284s left)" at 96 % KV with a growing queue, no incident, and its
    advisor_desired_replicas fell from 2 to 1. The cooldown guards against a condition flapping; a reload is no
    sign of that, so the problem may open again at once. A resolve of the condition itself still starts one."""
    tr = _tracker()
    tr.configure(
        [KVSaturationRule(), StalledRule()],
        evaluation_window=10.0,
        scrape_interval=1.0,
        quality=Quality(1.0, 3, 60.0),
        cooldown_seconds=300.0,
        model_error_bound=None,
    )
    tr.set_deployments([(dataclasses.replace(context(), name="code-70b"), [URL])])
    assert [t.kind for t in tr.evaluate(T0).transitions] == ["resolved"]
    tr.set_deployments([(context(), [URL])])  # the next reload brings chat-8b back
    tr.evaluate(T0 + 1)
    assert tr.lifecycle._cooldown_left("chat-8b", "saturation", T0 + 1) == 0.0
