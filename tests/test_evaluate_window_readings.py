"""The window readings the admission-wedge and over-provisioning rules read (:func:`advisor.evaluate.
evaluate_deployment`): requests waiting for capacity at the window's emptiest scrape, whether any replica's own KV
usage moved, and the fullest and busiest data-parallel rank at the newest scrape."""

from __future__ import annotations

from typing import Any

from advisor.domain import EngineSnapshot, RankValues, TimedSnapshot
from advisor.evaluate import (
    TargetView,
    _kv_usage_moved,
    _rank_values,
    _stuck_ranks,
    _waiting_capacity_min,
    window_snapshots,
)


def _view(url: str, *points: tuple[float, dict[str, Any]]) -> TargetView:
    history = tuple(TimedSnapshot(url, t, EngineSnapshot(engine="vllm", **kw)) for t, kw in points)
    return TargetView(url, True, None, None, history)


def test_waiting_for_capacity_is_the_emptiest_scrape_summed_over_replicas() -> None:
    a = _view(
        "a",
        (10.0, {"requests_waiting_by_reason": {"capacity": 19.0}}),
        (11.0, {"requests_waiting_by_reason": {"capacity": 4.0}}),
    )
    b = _view(
        "b",
        (10.0, {"requests_waiting_by_reason": {"capacity": 3.0}}),
        (11.0, {"requests_waiting_by_reason": {"capacity": 7.0}}),
    )
    assert _waiting_capacity_min(window_snapshots([a, b], 9.0, 11.0)) == 4.0 + 3.0
    # a scrape outside the window does not count; one without the split makes it unknown
    assert _waiting_capacity_min(window_snapshots([a], 10.5, 11.0)) == 4.0
    c = _view("c", (10.0, {"requests_waiting_by_reason": {"capacity": 5.0}}), (11.0, {}))
    assert _waiting_capacity_min(window_snapshots([a, c], 9.0, 11.0)) is None


def test_kv_usage_moved_is_read_per_replica_not_across_them() -> None:
    still_low = _view("a", (10.0, {"kv_cache_usage_ratio": 0.15}), (11.0, {"kv_cache_usage_ratio": 0.15}))
    still_high = _view("b", (10.0, {"kv_cache_usage_ratio": 0.25}), (11.0, {"kv_cache_usage_ratio": 0.25}))
    moving = _view("c", (10.0, {"kv_cache_usage_ratio": 0.25}), (11.0, {"kv_cache_usage_ratio": 0.26}))
    assert _kv_usage_moved(window_snapshots([still_low, still_high], 9.0, 11.0)) is False
    assert _kv_usage_moved(window_snapshots([still_low, moving], 9.0, 11.0)) is True
    assert _kv_usage_moved(window_snapshots([_view("d", (11.0, {"kv_cache_usage_ratio": 0.2}))], 9.0, 11.0)) is None


def test_rank_values_are_the_known_ones_of_every_rank() -> None:
    snap = EngineSnapshot(
        engine="vllm",
        ranks=(
            RankValues("0", kv_cache_usage_ratio=0.72, requests_running=27.0),
            RankValues("1", kv_cache_usage_ratio=0.135, requests_running=5.0),
            RankValues("2", kv_cache_usage_ratio=float("nan"), requests_running=None),
        ),
    )
    assert max(_rank_values([snap], "kv_cache_usage_ratio")) == 0.72
    assert max(_rank_values([snap], "requests_running")) == 27.0
    assert _rank_values([EngineSnapshot(engine="vllm")], "requests_running") == []


def _ranks(*values: tuple[str, float, float, float]) -> dict[str, Any]:
    """``ranks`` of (rank, running, waiting, usage)."""
    return {
        "ranks": tuple(
            RankValues(r, requests_running=run, requests_waiting=wait, kv_cache_usage_ratio=u)
            for r, run, wait, u in values
        )
    }


def test_a_rank_with_a_queue_nothing_running_and_an_empty_pool_at_every_scrape_is_stuck() -> None:
    stuck = _view(
        "http://x:1/metrics",
        (10.0, _ranks(("0", 6, 0, 0.35), ("5", 0, 9, 0.0))),
        (11.0, _ranks(("0", 6, 0, 0.35), ("5", 0, 11, 0.0))),
    )
    assert _stuck_ranks(window_snapshots([stuck], 9.0, 11.0)) == ("http://x:1/metrics rank 5",)
    # admitted between the scrapes, or a pool in use, or no other rank running, or a single scrape: not stuck
    admitted = _view(
        "a", (10.0, _ranks(("0", 6, 0, 0.3), ("5", 0, 9, 0.0))), (11.0, _ranks(("0", 6, 0, 0.3), ("5", 3, 6, 0.01)))
    )
    used = _view(
        "b", (10.0, _ranks(("0", 6, 0, 0.3), ("5", 0, 9, 0.2))), (11.0, _ranks(("0", 6, 0, 0.3), ("5", 0, 9, 0.2)))
    )
    alone = _view(
        "c", (10.0, _ranks(("0", 0, 0, 0.0), ("5", 0, 9, 0.0))), (11.0, _ranks(("0", 0, 0, 0.0), ("5", 0, 9, 0.0)))
    )
    once = _view("d", (11.0, _ranks(("0", 6, 0, 0.3), ("5", 0, 9, 0.0))))
    assert _stuck_ranks(window_snapshots([admitted, used, alone, once], 9.0, 11.0)) == ()


def test_a_rank_whose_readings_do_not_change_is_not_called_stuck() -> None:
    # SGLang refreshes a rank's gauges at a prefill batch, every 40 decode steps or every 30 s idle: two equal
    # readings may be one stale sample, so a stuck rank's queue must be seen growing
    same = _view(
        "http://x:1/metrics",
        (10.0, _ranks(("0", 6, 0, 0.35), ("5", 0, 9, 0.0))),
        (11.0, _ranks(("0", 6, 0, 0.35), ("5", 0, 9, 0.0))),
    )
    assert _stuck_ranks(window_snapshots([same], 9.0, 11.0)) == ()
