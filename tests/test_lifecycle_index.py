"""The lifecycle's incidents by deployment (issue 15, fleet scale): a deployment's open incidents are read from an
index kept beside ``(deployment, problem) → incident`` instead of scanning every deployment's. The reference is the
scan; over any sequence of opening, refreshing, resolving, restoring and removing they agree."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.domain import Recommendation
from advisor.rules.lifecycle import Lifecycle
from tests.factories import context, evaluation
from tests.test_lifecycle import ScriptedRule

DEPLOYMENTS = ("a", "b", "c")


def _reference(lc: Lifecycle, deployment: str | None) -> list[Recommendation]:
    """``open_recommendations`` as it was before the index: a scan of every incident."""
    out = [inc.rec for (dep, _), inc in lc._incidents.items() if deployment is None or dep == deployment]
    return sorted(out, key=lambda r: (r.deployment, r.rank, r.opened_at, r.problem))


def _ranks(lc: Lifecycle, deployment: str) -> dict[str, int]:
    """Each open incident's rank as the scan ranked them: most severe first, then the earliest opened."""
    order = {"critical": 0, "warning": 1, "info": 2}
    items = [(k, inc) for k, inc in lc._incidents.items() if k[0] == deployment]
    items.sort(key=lambda ki: (order.get(ki[1].rec.severity, 9), ki[1].rec.opened_at, ki[0][1]))
    return {k[1]: rank for rank, (k, _) in enumerate(items)}


_step = st.tuples(
    st.sampled_from(DEPLOYMENTS),
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=3, max_size=3),  # (fire, clear) per rule
    st.sampled_from(["evaluate", "evaluate", "evaluate", "orphans", "restore"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_step, min_size=1, max_size=25))
def test_the_index_answers_as_the_scan_does(steps: list[tuple[str, list[tuple[bool, bool]], str]]) -> None:
    rules = [
        ScriptedRule(id="r1", for_s=0.0, problem="p1", severity="warning"),
        ScriptedRule(id="r2", for_s=0.0, problem="p1", dials=["max_num_seqs"], severity="critical"),
        ScriptedRule(id="r3", for_s=0.0, problem="p2", dials=["replicas"], severity="info"),
    ]
    lc = Lifecycle(rules)
    ctxs = {d: dataclasses.replace(context(), name=d) for d in DEPLOYMENTS}
    now = 1000.0
    saved: list[Recommendation] = []
    for dep, answers, what in steps:
        now += 15.0
        if what == "orphans":  # a reload removed the deployment
            lc.resolve_orphans(set(DEPLOYMENTS) - {dep}, now)
        elif what == "restore":  # a restart: a fresh lifecycle restores what was open
            saved = lc.open_recommendations()
            lc = Lifecycle(rules)
            lc.restore(saved)
        else:
            for rule, (fire, clear) in zip(rules, answers, strict=True):
                rule.fire, rule.clear = fire, clear
            lc.evaluate(evaluation(now=now, ctx=ctxs[dep]))
        for d in (*DEPLOYMENTS, "unknown"):
            assert lc.open_recommendations(d) == _reference(lc, d)
            got: dict[str, Any] = {r.problem: r.rank for r in lc.open_recommendations(d)}
            if what == "evaluate" and d == dep:  # ranks are set when the deployment is evaluated
                assert got == _ranks(lc, d)
        assert lc.open_recommendations() == _reference(lc, None)
