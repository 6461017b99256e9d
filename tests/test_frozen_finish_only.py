"""The frozen check and engines whose token counters move only when a request finishes (issue 13).

SGLang counts a request's prompt and generated tokens when it finishes (python/sglang/srt/metrics/collector.py,
``observe_one_finished_request``); vLLM counts them every scheduler step (vllm/v1/metrics/loggers.py). Four
2,000-token generations at 20 tokens/s keep SGLang's counters still for 100 s on a healthy engine: calling that
data ``stale`` would silence every capacity rule, so the frozen check leaves such engines to the stalled rule,
which knows the engine and waits out a request's lifetime.
"""

from __future__ import annotations

import pytest

from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.evaluate import Quality, TargetView, stall_span, target_state

URL = "http://e:8000/metrics"


def _still_history(engine: str) -> tuple[TimedSnapshot, ...]:
    """Samples every 15 s over 90 s: 4 running, 6 waiting, counters standing at the same values."""
    snap = EngineSnapshot(
        engine=engine,
        requests_running=4,
        requests_waiting=6,
        generation_tokens_total=120_000,
        prompt_tokens_total=400_000,
    )
    return tuple(TimedSnapshot(URL, 1000.0 + 15 * i, snap) for i in range(7))


@pytest.mark.parametrize("engine", ["sglang", "tgi", "llamacpp"])
def test_still_counters_of_a_finish_only_engine_are_not_frozen(engine: str) -> None:
    hist = _still_history(engine)
    state, reason = target_state(TargetView(URL, True, None, None, hist), 1090.0, Quality(15.0, 3, 60.0))
    assert (state, reason) == ("fresh", "ok")


def test_still_counters_of_vllm_are_frozen() -> None:
    hist = _still_history("vllm")
    state, reason = target_state(TargetView(URL, True, None, None, hist), 1090.0, Quality(15.0, 3, 60.0))
    assert state == "stale"
    assert reason.startswith("frozen: 4 requests running") and "90s" in reason


def _prefill_history(usages: list[float | None]) -> tuple[TimedSnapshot, ...]:
    """vLLM, one request running through a long chunked prefill: samples every 15 s, counters still (V1 counts a
    prompt's tokens when its prefill completes), KV usage as given."""
    return tuple(
        TimedSnapshot(
            URL,
            1000.0 + 15 * i,
            EngineSnapshot(
                engine="vllm",
                requests_running=1,
                requests_waiting=0,
                generation_tokens_total=120_000,
                prompt_tokens_total=400_000,
                kv_cache_usage_ratio=u,
            ),
        )
        for i, u in enumerate(usages)
    )


def test_a_long_prefill_filling_blocks_is_not_frozen() -> None:
    """rwlove/home-ops#13384: a 96k-token prefill moved KV usage 0.083 → 0.095 with every counter still; the
    engine is working (its scheduler allocates blocks), so its data stays fresh and no stall is counted."""
    hist = _prefill_history([0.083, 0.085, 0.087, 0.089, 0.091, 0.093, 0.095])
    state, reason = target_state(TargetView(URL, True, None, None, hist), 1090.0, Quality(15.0, 3, 60.0))
    assert (state, reason) == ("fresh", "ok")
    assert stall_span(hist) == 0.0


def test_a_kv_gauge_that_stands_still_with_the_counters_is_frozen() -> None:
    hist = _prefill_history([0.09] * 7)
    state, reason = target_state(TargetView(URL, True, None, None, hist), 1090.0, Quality(15.0, 3, 60.0))
    assert state == "stale" and reason.startswith("frozen: 1 requests running")
    assert stall_span(hist) == 90.0
