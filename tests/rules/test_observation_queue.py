"""The window's prefill time for the online calibration (``advisor.rules.observation.window_observation``): mean TTFT
− mean queue time only while the waiting queue held still. vLLM observes a request's TTFT at its first token and its
queue time when it finishes (``vllm/v1/metrics/loggers.py``), so while the queue grows the window's TTFTs are the
newest requests' long waits and its queue times older, shorter ones (daemon breaker: a growing queue read a 4.49 s
"prefill" for a true 0.088 s and the calibration halved the deployment's prefill speed)."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.rules.observation import window_observation
from tests.rules.helpers import ctx, ev, hist


def _ev(waiting_first: float, waiting: float) -> Any:
    # 20 requests: TTFT 4.59 s on average, queue time 0.1 s (hand figures, not the engine's)
    return ev(
        dep=ctx(gpu="h100-sxm"),
        requests_running=64,
        requests_waiting=waiting,
        requests_waiting_first=waiting_first,
        requests_finished_per_second=2.0,
        prompt_tokens_per_second=2_000.0,
        generation_tokens_per_second=600.0,
        ttft=hist((10.0, 20), total_sum=20 * 4.59),
        queue_time=hist((10.0, 20), total_sum=20 * 0.1),
    )


def test_a_queue_that_held_still_gives_ttft_less_queue_time() -> None:
    obs = window_observation(_ev(40, 44))
    assert obs is not None and obs.prefill_seconds == pytest.approx(4.49)


@pytest.mark.parametrize(("first", "last"), [(0, 600), (600, 0), (10, 2)])
def test_a_queue_that_moved_gives_no_prefill_figure(first: float, last: float) -> None:
    obs = window_observation(_ev(first, last))
    assert obs is not None and obs.prefill_seconds is None and obs.ttft_seconds is None
