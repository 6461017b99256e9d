"""model_drift: |capacity pass ÷ engine pool − 1| > ``bound``; proposes correcting the advisor's config to what
the engine reports."""

from __future__ import annotations

import pytest

from advisor.rules.drift import ModelDriftRule
from tests.rules.helpers import ev, opens_after

RULE = ModelDriftRule(bound=0.15)


@pytest.mark.parametrize(
    ("rule", "error", "fires"),
    [
        (RULE, 0.15, False),  # at the bound: within it
        (RULE, 0.1501, True),
        (RULE, -0.15, False),
        (RULE, -0.1501, True),  # the model under-predicts
        (RULE, 0.0, False),
        (ModelDriftRule(bound=0.05), 0.0501, True),
        (ModelDriftRule(bound=0.05), 0.05, False),
    ],
    ids=[
        "an error at the bound does not fire",
        "an error just over the bound fires",
        "a negative error at the bound does not fire",
        "a negative error just over the bound fires",
        "no error does not fire",
        "a tighter bound just over it fires",
        "a tighter bound at it does not fire",
    ],
)
def test_fire_table(rule: ModelDriftRule, error: float, fires: bool) -> None:
    e = ev(capacity_model_error_ratio=error)
    assert rule.fires(e).holds is fires
    assert rule.clears(e).holds is (not fires)


def test_cannot_tell_when_the_engine_does_not_report_its_pool() -> None:
    e = ev(capacity_model_error_ratio=None)
    assert RULE.fires(e).holds is None
    assert RULE.clears(e).holds is None


def test_proposes_the_engine_s_own_budget() -> None:
    (p,) = RULE.propose(ev(capacity_model_error_ratio=0.2, engine_config={"gpu_memory_utilization": "0.8"}))
    assert (p.dial, p.action, p.current, p.suggested) == ("gpu_memory_utilization", "set", 0.9, 0.8)
    assert p.flag.startswith("advisor config: gpu_memory_utilization: 0.8")
    assert p.predicted_effect == {"gpu_memory_utilization": {"before": 0.9, "after": 0.8}}
    assert "+20%" in p.description


@pytest.mark.parametrize(
    "config",
    [{}, {"gpu_memory_utilization": "None"}, {"gpu_memory_utilization": "0.903"}, {"gpu_memory_utilization": "x"}],
    ids=[
        "nothing reported",
        "reported as None",
        "within 0.005 of the config",
        "unparsable",
    ],
)
def test_proposes_nothing_without_a_differing_engine_setting(config: dict[str, str]) -> None:
    assert RULE.propose(ev(capacity_model_error_ratio=0.3, engine_config=config)) == []


def test_never_proposes_an_engine_change() -> None:
    # drift corrects the advisor's description of the engine, never the engine itself
    props = RULE.propose(ev(capacity_model_error_ratio=0.5, engine_config={"gpu_memory_utilization": "0.95"}))
    assert all(p.flag.startswith("advisor config:") for p in props)


@pytest.mark.parametrize(("held", "opens"), [(299.5, False), (300.0, True)], ids=["just short of 300 s", "at 300 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = ModelDriftRule(for_seconds=300)
    make = lambda now: ev(now=now, capacity_model_error_ratio=0.3, engine_config={"gpu_memory_utilization": "0.8"})  # noqa: E731
    assert opens_after(rule, make, held) is opens
