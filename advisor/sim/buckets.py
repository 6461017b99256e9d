"""Histogram bucket bounds the engines use, and a small pure histogram that accumulates into them.

Bounds are the engines' defaults as read from their released code (``../shared/reference/
engine-metrics-catalog.md`` §1.2 and §2.2):

* vLLM V1 0.8.5 → 0.33: ``vllm/v1/metrics/loggers.py`` (0.33: ``vllm/v1/metrics/buckets.py``).
* SGLang 0.5.4 → 0.5.23: ``python/sglang/srt/observability/metrics_collector.py``.

The simulator's replicas feed :class:`BucketHistogram` objects (no prometheus-client in the pure core); the
exposition (:mod:`advisor.sim.exposition`) renders them as the engines' histogram families.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Final

__all__ = [
    "SGLANG_E2E",
    "SGLANG_ITL",
    "SGLANG_QUEUE",
    "SGLANG_TOKENS",
    "SGLANG_TTFT",
    "VLLM_ITERATION_TOKENS",
    "VLLM_ITL",
    "VLLM_PARAMS_N",
    "VLLM_PREEMPTIONS",
    "VLLM_REQUEST_LATENCY",
    "VLLM_TTFT",
    "BucketHistogram",
    "one_two_five",
]

VLLM_TTFT: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)  # fmt: skip
"""``vllm:time_to_first_token_seconds`` (V1 0.8.5 → 0.33; vLLM PR #15202 added the tail)."""

VLLM_ITL: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""``vllm:inter_token_latency_seconds`` and ``vllm:request_time_per_output_token_seconds``."""

VLLM_REQUEST_LATENCY: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip
"""e2e, queue, inference, prefill and decode time histograms (seconds)."""

VLLM_ITERATION_TOKENS: Final = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
"""``vllm:iteration_tokens_total`` (tokens per engine step)."""

VLLM_PARAMS_N: Final = (1, 2, 5, 10, 20)
"""``vllm:request_params_n``."""

VLLM_PREEMPTIONS: Final = (1, 2, 3, 4, 5, 10, 20)
"""``vllm:request_num_preemptions`` (0.33)."""

SGLANG_TTFT: Final = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
"""``sglang:time_to_first_token_seconds`` (0.4.10 → 0.5.23)."""

SGLANG_ITL: Final = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
    0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
"""``sglang:inter_token_latency_seconds`` and ``sglang:request_time_per_output_token_seconds``."""

SGLANG_E2E: Final = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
)  # fmt: skip
"""``sglang:e2e_request_latency_seconds`` (0.5.4 / 0.5.23)."""

SGLANG_QUEUE: Final = (
    0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
    200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
)  # fmt: skip
"""``sglang:queue_time_seconds`` (0.5.23)."""

SGLANG_TOKENS: Final = (
    100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12500, 15000, 17500,
    20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000,
    1000000, 1100000,
)  # fmt: skip
"""``sglang:prompt_tokens_histogram`` / ``generation_tokens_histogram`` / ``uncached_prompt_tokens_histogram``."""


def one_two_five(limit: int) -> tuple[int, ...]:
    """vLLM's token-count buckets: the 1-2-5 series up to and including ``limit`` (``build_1_2_5_buckets``).

    >>> one_two_five(8192)[-3:]
    (1000, 2000, 5000)
    """
    out: list[int] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > limit:
                return tuple(out)
            out.append(v)
        exponent += 1


class BucketHistogram:
    """Cumulative-on-render histogram: per-bucket counts (last = +Inf), sum and count. Values in the
    histogram's unit (seconds, tokens). ``le`` semantics: a value equal to a bound falls in that bucket."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        """Add ``n`` observations of ``value``."""
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[tuple[float, int]]:
        """``[(le, cumulative count), …]`` ending with ``(inf, count)``."""
        out: list[tuple[float, int]] = []
        acc = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            acc += n
            out.append((bound, acc))
        return out
