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


def _coverage(offsets: list[float], now: float = 1_000.0) -> float:
    hist = tuple(TimedSnapshot(URL, now - off, _snap(i)) for i, off in enumerate(sorted(offsets, reverse=True)))
    ev, _ = evaluate_deployment(context(), [TargetView(URL, True, None, None, hist)], now, 5.0, Quality(1.0))
    return ev.coverage()


def test_every_scrape_arrived_a_few_ms_late_is_full_coverage() -> None:
    # six scrapes 1 s apart, the newest 20 ms before the evaluation: 5.02 s … 0.02 s ago — none missed
    assert _coverage([5.02, 4.02, 3.02, 2.02, 1.02, 0.02]) == 1.0


def test_a_missed_scrape_still_lowers_it() -> None:
    # the scrape 2.02 s ago is missing: 5 of the 6 expected
    assert _coverage([5.02, 4.02, 3.02, 1.02, 0.02]) == 5 / 6
    # a sample a whole interval before the window does not count: 6.02 s ago, with 1.02 s missing
    assert _coverage([6.02, 5.02, 4.02, 3.02, 2.02, 0.02]) == 5 / 6
