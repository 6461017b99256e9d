"""Histogram bucket bounds the engines use, and a small pure histogram that accumulates into them.

The bounds are engine facts and live in the engine catalog (:mod:`advisor.engines.reference`, cited there);
they are re-exported here for the simulator's metrics.

The simulator's replicas feed :class:`BucketHistogram` objects (no prometheus-client in the pure core); the
exposition (:mod:`advisor.sim.exposition`) renders them as the engines' histogram families.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from advisor.engines.reference import (
    SGLANG_E2E,
    SGLANG_ITL,
    SGLANG_QUEUE,
    SGLANG_TOKENS,
    SGLANG_TTFT,
    VLLM_ITERATION_TOKENS,
    VLLM_ITL,
    VLLM_PARAMS_N,
    VLLM_PREEMPTIONS,
    VLLM_REQUEST_LATENCY,
    VLLM_TTFT,
    one_two_five,
)

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
