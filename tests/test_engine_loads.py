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


def test_a_replica_that_appeared_late_in_the_window_is_not_judged_for_evenness() -> None:
    # breaker 9: a scale-up's new replicas answered /metrics idle before they joined the round robin, and a healthy
    # scale-up paged "the load is uneven". Window 60 s: A sampled from t-60, B from t-20 (later than half a window).
    from advisor.evaluate import running_load

    now = 1_000_000.0

    def history(url: str, since: float, running: float) -> TargetView:
        points = tuple(
            TimedSnapshot(url, now - s, EngineSnapshot(engine="vllm", requests_running=running))
            for s in range(int(since), -1, -5)
        )
        return TargetView(url, True, None, None, points)

    late = running_load([history("a", 60, 250.0), history("b", 20, 0.0)], now, 60.0)
    assert late.by_target == (("a", 250.0),)
    settled = running_load([history("a", 60, 250.0), history("b", 35, 0.0)], now, 60.0)
    assert settled.by_target == (("a", 250.0), ("b", 0.0))  # 25 s after A: within half the window
    assert late.peak == 250.0  # the load itself still counts every replica
