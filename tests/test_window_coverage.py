"""Coverage (the fraction of the window's expected scrapes that arrived, a factor of every confidence) counts a
complete history as complete when the scrapes drift by a few milliseconds (issue 13, "confidence").

Seen with ``capacity-advisor run`` against the demo's engines (1 s scrapes, 5 s window): no scrape missed, yet
``kv_saturation`` (base 0.9) read 0.75 at most evaluations and 0.9 at some — 5 or 6 of the 6 expected samples,
depending on whether the oldest scrape landed a few ms inside the window or outside it.
"""

from __future__ import annotations

from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.evaluate import Quality, TargetView, evaluate_deployment
from tests.factories import context

URL = "http://10.0.0.5:8000/metrics"


def _snap(i: int) -> EngineSnapshot:
    return EngineSnapshot(
        engine="vllm",
        requests_running=4,
        requests_waiting=0,
        generation_tokens_total=1_000.0 + 100 * i,
        prompt_tokens_total=5_000.0 + 500 * i,
        requests_finished_total=10.0 + i,
        kv_cache_usage_ratio=0.1,
        kv_cache_capacity_tokens=432_000,
        process_start_time_seconds=1.0e9,
    )


def _coverage(
    offsets: list[float],
    now: float = 1_000.0,
    window: float = 5.0,
    interval: float = 1.0,
    scrapes_per_target: int | None = None,
) -> float:
    hist = tuple(TimedSnapshot(URL, now - off, _snap(i)) for i, off in enumerate(sorted(offsets, reverse=True)))
    view = TargetView(URL, True, None, None, hist)
    ev, _ = evaluate_deployment(
        context(), [view], now, window, Quality(interval), scrapes_per_target=scrapes_per_target
    )
    return ev.coverage()


def test_every_scrape_arrived_a_few_ms_late_is_full_coverage() -> None:
    # six scrapes 1 s apart, the newest 20 ms before the evaluation: 5.02 s … 0.02 s ago — none missed
    assert _coverage([5.02, 4.02, 3.02, 2.02, 1.02, 0.02]) == 1.0


def test_a_missed_scrape_still_lowers_it() -> None:
    # the scrape 2.02 s ago is missing: 5 of the 6 expected
    assert _coverage([5.02, 4.02, 3.02, 1.02, 0.02]) == 5 / 6
    # a sample a whole interval before the window does not count: 6.02 s ago, with 1.02 s missing
    assert _coverage([6.02, 5.02, 4.02, 3.02, 2.02, 0.02]) == 5 / 6


def test_once_expects_the_two_scrapes_it_takes_however_long_its_window() -> None:
    # once --interval 2 against a target that took 3 s a scrape: its window is 3 + 2 + 3 s of scraping plus one
    # interval, 10 s, which at 2 s would "hold" ⌊10 ÷ 2⌋ + 1 = 6 scrapes; once takes 2, each stamped when it ended
    assert _coverage([5.0, 0.0], window=10.0, interval=2.0, scrapes_per_target=2) == 1.0
    # one of its two scrapes failed: 1 of 2
    assert _coverage([0.0], window=10.0, interval=2.0, scrapes_per_target=2) == 1 / 2


def test_the_daemon_still_expects_what_its_window_holds() -> None:
    # no count given (the daemon): the same two scrapes in a 10 s window at 2 s are 2 of the 6 it holds
    assert _coverage([5.0, 0.0], window=10.0, interval=2.0) == 2 / 6


def test_a_window_the_tracker_thins_still_counts_every_scrape_that_arrived() -> None:
    """The daemon's defaults (15 s scrapes, a 5 min window): the tracker keeps at most 8 points a window
    (``advisor.tracker.record``), but 21 scrapes arrived, so coverage is 1 — it read 11 of 21 (0.52) on a healthy
    target and halved every confidence (daemon breaker: ``samples=11 expected=21 coverage=0.52`` every cycle). A
    target that missed every other scrape still reads about half."""
    from advisor.tracker import Tracker

    def coverage(every: int) -> tuple[float, int]:
        tr = Tracker([], evaluation_window=300.0, scrape_interval=15.0, quality=Quality(15.0, 3, 60.0))
        tr.set_deployments([(context(), [URL])])
        now = 0.0
        for k in range(60):
            now = 1_000.0 + 15 * k
            if k % every == 0:
                tr.observe("chat-8b", URL, TimedSnapshot(URL, now, _snap(k)))
            tr.trim(now)
        (res,) = tr.evaluate(now).results
        assert len(tr.history("chat-8b", URL)) < 21  # thinned
        return res.evaluation.coverage(), len(tr.history("chat-8b", URL))

    assert coverage(1)[0] == 1.0
    assert 0.45 < coverage(2)[0] < 0.6
