"""An unknown preemption count is not "no preemptions": right after a restart (one scrape in the window) or a
``once`` whose first scrape failed, ``preemptions_increase`` is ``None``. A clear side that needs it cannot tell,
so an open incident stays open; an engine that exposes no preemption counter at all is read on its queue alone."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.rules.admission import AdmissionThrashRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.lifecycle import Lifecycle
from tests.rules.helpers import T0, ctx, ev

RULE = KVSaturationRule(usage_threshold=0.9, resolve_below=0.8, for_seconds=2.0)


def _kv(now: float = T0, engine: str = "vllm", **kw: Any) -> Any:
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.99,
        "requests_running": 50,
        "requests_waiting": 0,
        "preemptions_increase": None,
    }
    stats.update(kw)
    return ev(now=now, dep=ctx(engine=engine), **stats)


@pytest.mark.parametrize(
    ("stats", "clears"),
    [
        ({}, None),
        ({"requests_waiting": None}, None),
        ({"preemptions_increase": 0}, True),
        ({"kv_cache_usage_ratio": 0.79}, True),
        ({"requests_waiting": 4}, False),
    ],
    ids=[
        "a full pool, nothing waiting, preemptions unknown: cannot tell",
        "queue and preemptions both unknown: cannot tell",
        "preemptions known to be zero: clear",
        "usage under resolve_below clears whatever the preemptions",
        "a queue keeps it open whatever the preemptions",
    ],
)
def test_kv_saturation_clear_side_with_unknown_preemptions(stats: dict[str, Any], clears: bool | None) -> None:
    assert RULE.clears(_kv(**stats)).holds is clears


@pytest.mark.parametrize(
    ("stats", "fires"),
    [
        ({}, None),
        ({"kv_cache_usage_ratio": 0.5}, False),
        ({"requests_waiting": 3}, True),
    ],
    ids=[
        "a full pool, nothing waiting, preemptions unknown: cannot tell",
        "usage under the threshold does not fire whatever the preemptions",
        "a queue fires whatever the preemptions",
    ],
)
def test_kv_saturation_fire_side_with_unknown_preemptions(stats: dict[str, Any], fires: bool | None) -> None:
    assert RULE.fires(_kv(**stats)).holds is fires


def test_an_engine_without_a_preemption_counter_is_read_on_its_queue() -> None:
    # TGI exposes no preemption counter: its preemptions are never known, so the queue alone decides
    assert RULE.clears(_kv(engine="tgi")).holds is True
    assert RULE.fires(_kv(engine="tgi")).holds is False


def test_an_open_incident_stays_open_while_preemptions_are_unknown_and_resolves_once_known_and_clear() -> None:
    lc = Lifecycle([RULE])
    assert lc.evaluate(_kv(T0, preemptions_increase=5)) == []
    opened = lc.evaluate(_kv(T0 + 3, preemptions_increase=5))
    assert [t.kind for t in opened] == ["opened"]
    # the daemon restarted: one scrape in the window, the preemption count unknown
    assert lc.evaluate(_kv(T0 + 6)) == []
    assert len(lc.open_recommendations()) == 1
    resolved = lc.evaluate(_kv(T0 + 9, preemptions_increase=0))
    assert [t.kind for t in resolved] == ["resolved"]
    assert resolved[0].recommendation.id == opened[0].recommendation.id


def test_a_restored_incident_is_not_resolved_by_the_first_window_after_a_restart() -> None:
    first = Lifecycle([RULE])
    first.evaluate(_kv(T0, preemptions_increase=5))
    rec = first.evaluate(_kv(T0 + 3, preemptions_increase=5))[0].recommendation
    restarted = Lifecycle([RULE])
    restarted.restore([rec])
    assert restarted.evaluate(_kv(T0 + 20)) == []
    assert [r.id for r in restarted.open_recommendations()] == [rec.id]


ADMISSION = AdmissionThrashRule()


def _admission(**kw: Any) -> Any:
    # two requests per replica, each holding ~half the pool: the shape admission thrash reads
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.98,
        "requests_running": 2,
        "requests_waiting": 0,
        "preemptions_increase": None,
    }
    stats.update(kw)
    return ev(**stats)


def test_admission_thrash_cannot_tell_with_unknown_preemptions_and_clears_once_known() -> None:
    assert ADMISSION.fires(_admission(preemptions_increase=2)).holds is True
    assert ADMISSION.clears(_admission()).holds is None
    assert ADMISSION.clears(_admission(preemptions_increase=0)).holds is True
