"""One rule's failure never stops the deployment's other rules (field-state round 67, vllm#22331).

``goodput_below_target`` raised a ``CapacityError`` while building a turn (``awq`` weights for gpt-oss's mxfp4
checkpoint): the exception left :meth:`Lifecycle.evaluate`, the tracker dropped the deployment's whole evaluation,
and ``once --json`` printed no deployment. A rule that raises now reads as "could not run", logged once, and the
deployment's other rules are evaluated as before.
"""

from __future__ import annotations

import logging

import pytest

from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.lifecycle import Lifecycle
from tests.factories import evaluation
from tests.test_lifecycle import ScriptedRule


class Raising(ScriptedRule):
    """Fires, then raises where the test says (``fires`` or ``propose``)."""

    def __init__(self, where: str) -> None:
        super().__init__(id="broken", fire=True, for_s=0, problem="other")
        self.where = where

    def fires(self, ev: Evaluation) -> Condition:
        if self.where == "fires":
            raise ValueError("boom in fires")
        return super().fires(ev)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        if self.where == "propose":
            raise ValueError("boom in propose")
        return super().propose(ev)


@pytest.mark.parametrize("where", ["fires", "propose"])
def test_a_rule_that_raises_leaves_the_others_evaluated_and_says_why(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    good = ScriptedRule(fire=True, for_s=0)
    lc = Lifecycle([Raising(where), good])
    with caplog.at_level(logging.ERROR, logger="advisor.rules.lifecycle"):
        opened = [t for t in lc.evaluate(evaluation(now=0.0)) if t.kind == "opened"]
        lc.evaluate(evaluation(now=15.0))
    assert [t.recommendation.rule for t in opened] == ["scripted"]  # the healthy rule's incident opened
    status = lc.statuses[("chat-8b", "broken")]
    if where == "fires":
        assert status.state == "unknown" and "the rule failed (ValueError: boom in fires)" in status.reason
    assert [r.getMessage() for r in caplog.records].count(
        f"deployment=chat-8b: rule broken failed in {where}: ValueError: boom in {where}"
    ) == 1  # logged once, not every evaluation
