"""Per-engine loads and replica ages the rules read (advisor.evaluate.running_by_engine, replica_ages)."""

from __future__ import annotations

from advisor.domain import EngineSnapshot, RankValues, TimedSnapshot
from advisor.evaluate import TargetView, replica_ages, running_by_engine


def _view(url: str, snap: EngineSnapshot, at: float = 1_000_000.0) -> TargetView:
    return TargetView(url, True, None, None, (TimedSnapshot(url, at, snap),))


def test_a_target_of_data_parallel_ranks_counts_each_rank_as_an_engine() -> None:
    # vllm#48808's skew inside one target (breaker, 2026-12-06: two DP-2 targets at 100 / 0 each read 100 / 100)
    ranks = (RankValues("0", requests_running=100.0), RankValues("1", requests_running=0.0))
    up = [
        _view("http://a/metrics", EngineSnapshot(engine="vllm", ranks=ranks)),
        _view("http://b/metrics", EngineSnapshot(engine="vllm")),
    ]
    got = running_by_engine(up, (("http://a/metrics", 100.0), ("http://b/metrics", 40.0)))
    assert got == (("http://a/metrics rank 0", 100.0), ("http://a/metrics rank 1", 0.0), ("http://b/metrics", 40.0))


def test_a_start_time_the_host_clock_cannot_read_is_unknown_not_zero() -> None:
    now = 1_000_000.0
    day = EngineSnapshot(engine="vllm", process_start_time_seconds=now - 86_400.0)
    young = EngineSnapshot(engine="vllm", process_start_time_seconds=now - 145.0)
    millis = EngineSnapshot(engine="vllm", process_start_time_seconds=(now - 86_400.0) * 1000)  # ms for seconds
    ahead = EngineSnapshot(engine="vllm", process_start_time_seconds=now + 600.0)  # the engine's clock 10 min ahead
    assert replica_ages([_view("a", day), _view("b", young)]) == (145.0, 86_400.0)
    assert replica_ages([_view("a", day), _view("b", millis), _view("c", ahead)]) == (86_400.0, 86_400.0)
    assert replica_ages([_view("a", EngineSnapshot(engine="vllm", process_start_time_seconds=0.0))]) is None
