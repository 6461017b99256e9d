"""The replicas' loads set by the router, not the fleet's size: while one replica runs at least 8 requests and
another at most a tenth of that, every turn sized on the fleet's average is withheld (sgl-project/sglang#15473:
the gRPC cache-aware router sent everything to worker A; field state round 28)."""

from __future__ import annotations

import dataclasses

import pytest

from advisor import conventions as c
from advisor.rules.base import Proposal
from advisor.rules.common import load_balance, uneven_load
from tests.rules.helpers import ev


def _proposal(dial: str) -> Proposal:
    return Proposal(
        rule="goodput_below_target",
        dial=dial,
        action="increase",
        current=1,
        suggested=2,
        flag=None,
        severity="warning",
        confidence=0.8,
        summary="",
        description="",
        predicted_effect={"tpot_seconds": {"before": 0.03, "after": 0.01}},
        evidence={},
        score=1.0,
    )


@pytest.mark.parametrize(
    ("loads", "uneven"),
    [
        ((256.0, 0.0), True),  # the report: A runs everything, B only health checks
        ((100.0, 9.0), True),  # 9 % of the busiest
        ((100.0, 11.0), False),  # 11 %: a skew, not an idle replica
        ((7.0, 0.0), False),  # too few requests to say where the router sends them
        ((8.0, 0.0), True),
        ((60.0, 55.0, 58.0), False),  # an even spread
        ((60.0,), False),  # one replica
        ((), False),  # unknown
    ],
)
def test_uneven_load_needs_a_busy_replica_beside_an_idle_one(loads: tuple[float, ...], uneven: bool) -> None:
    e = dataclasses.replace(ev(replicas_up=max(1, len(loads))), requests_running_by_target=loads)
    assert (uneven_load(e) is not None) is uneven


def test_load_balance_withholds_fleet_turns_and_keeps_engine_figures_only_turns() -> None:
    e = dataclasses.replace(ev(replicas_up=2), requests_running_by_target=(256.0, 0.0))
    out = load_balance(e, [_proposal(c.DIAL_REPLICAS), _proposal(c.DIAL_ENGINE_PROCESS)])
    assert out[0].withheld is not None and "uneven" in out[0].withheld and out[0].predicted_effect == {}
    assert out[1].withheld is None  # a restart's reading is the engine's own, not the fleet's average
    assert load_balance(e, out) == out  # idempotent
    even = dataclasses.replace(e, requests_running_by_target=(128.0, 128.0))
    assert load_balance(even, [_proposal(c.DIAL_REPLICAS)])[0].withheld is None
