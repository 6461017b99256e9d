"""The simulator's latency error against a deployment's own engine histograms over a history window (issue 17
part 4). Pure: no I/O, no clock.

``capacity-advisor simulate --prometheus URL`` reads a deployment's history (through ``backtest``'s replay, which
also calibrates its latency model as the daemon would), runs the simulator at the traffic the window observed, and
compares what the simulator predicts with what the engine measured over the same window:

* :func:`observed_window` — the window's truth from the engines' own counters and histograms: completions/s, mean
  prompt and output tokens (token counters ÷ completions), replicas, and the TPOT and TTFT histograms' increase over
  the window (:func:`advisor.telemetry.window_stats` per target, :func:`~advisor.telemetry.combine_targets` over
  them: the daemon's window arithmetic, counter resets included);
* :func:`compare` — one quantity: predicted ÷ observed − 1 of the mean (the histogram's ``sum ÷ count``), and of
  each quantile in :data:`QUANTILES` *where the histogram allows*: the simulator's per-request values are counted
  into the engine's own buckets and both quantiles are interpolated the same way (Prometheus
  ``histogram_quantile``, :func:`advisor.telemetry.histogram_quantile_estimate`), so the bucket width biases both
  alike; a quantile whose observed estimate falls in the ``+Inf`` bucket or below the lowest bound is not
  reported (the histogram only says it is beyond a bound).

TPOT is per request (vLLM ``request_time_per_output_token_seconds``: ``(last − first token) ÷ (tokens − 1)``,
:attr:`advisor.sim.engine.SimRequest.tpot`). Where the engine exports only the inter-token latency (``tpot_is_itl``:
one observation per token), the prediction is the token-weighted mean of the same gaps and no TPOT quantile is
compared (the simulator's request records keep no per-token gaps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.domain import Histogram, TimedSnapshot, rfc3339
from advisor.sim.engine import SimRequest
from advisor.telemetry import WindowStats, combine_targets, histogram_quantile_estimate, window_stats

__all__ = ["QUANTILES", "LatencyComparison", "LatencyError", "ObservedWindow", "compare", "observed_window"]

QUANTILES: Final = (0.5, 0.9, 0.99)
"""The quantiles compared where the engine's buckets allow (the SLO quantiles ``plan`` and the rules report)."""


@dataclass(frozen=True, slots=True)
class ObservedWindow:
    """What the deployment's engines measured over ``[start, end]`` (unix seconds).

    Attributes:
        replicas: targets with at least two points in the window.
        requests_per_second: completions per second, the whole deployment.
        prompt_tokens / output_tokens: mean per finished request (token counters' rates ÷ completions).
        running_mean: mean running requests per replica over the window's points; ``None`` unknown.
        tpot / ttft: the histograms' increase over the window (seconds); ``None`` when not exported.
        tpot_is_itl: the engine's TPOT histogram is inter-token latency (one observation per token).
    """

    start: float
    end: float
    replicas: int
    requests_per_second: float
    prompt_tokens: float
    output_tokens: float
    running_mean: float | None
    tpot: Histogram | None
    ttft: Histogram | None
    tpot_is_itl: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the window and the traffic it observed (means; the histograms' counts)."""
        return {
            "start": rfc3339(self.start),
            "end": rfc3339(self.end),
            "seconds": self.end - self.start,
            "replicas": self.replicas,
            "requests_per_second": self.requests_per_second,
            "prompt_tokens_mean": self.prompt_tokens,
            "output_tokens_mean": self.output_tokens,
            "running_per_replica_mean": self.running_mean,
            "tpot_observations": self.tpot.count if self.tpot is not None else None,
            "ttft_observations": self.ttft.count if self.ttft is not None else None,
            "tpot_is_itl": self.tpot_is_itl,
        }


def observed_window(points: Mapping[str, Sequence[TimedSnapshot]], start: float, end: float) -> ObservedWindow:
    """The window's truth from each target's points (any order; only those in ``[start, end]`` count).

    Raises:
        ValueError: ``end ≤ start``; no target has two points in the window; no request finished in it, or the
            token counters are not exported (the traffic cannot be known).
    """
    if not end > start:
        raise ValueError(f"the window must end after it starts ({start} → {end})")
    per_target: list[WindowStats] = []
    running: list[float] = []
    itl = False
    for history in points.values():
        inside = sorted((p for p in history if start <= p.timestamp <= end), key=lambda p: p.timestamp)
        if len(inside) < 2:
            continue
        per_target.append(window_stats(inside, end, end - start))
        running.extend(p.snapshot.requests_running for p in inside if p.snapshot.requests_running is not None)
        itl = itl or inside[-1].snapshot.tpot_is_itl
    if not per_target:
        raise ValueError(f"no target has two samples between {rfc3339(start)} and {rfc3339(end)}")
    s = combine_targets(per_target)
    done = s.requests_finished_per_second
    if not done or done <= 0:
        raise ValueError(f"no request finished between {rfc3339(start)} and {rfc3339(end)}")
    if not s.prompt_tokens_per_second or not s.generation_tokens_per_second:
        raise ValueError("the engines export no prompt or generation token counters: the traffic is unknown")
    return ObservedWindow(
        start=start,
        end=end,
        replicas=len(per_target),
        requests_per_second=done,
        prompt_tokens=s.prompt_tokens_per_second / done,
        output_tokens=s.generation_tokens_per_second / done,
        running_mean=math.fsum(running) / len(running) if running else None,
        tpot=s.tpot,
        ttft=s.ttft,
        tpot_is_itl=itl,
    )


def _binned(values: Sequence[float], like: Histogram) -> Histogram:
    """``values`` counted into ``like``'s bucket bounds (cumulative, as the engine would have)."""
    bounds = like.bounds()
    ordered = sorted(values)
    counts: list[float] = []
    i = 0
    for b in bounds:
        while i < len(ordered) and ordered[i] <= b:
            i += 1
        counts.append(float(i))
    return Histogram.from_counts(bounds, counts, float(len(ordered)), math.fsum(ordered))


def _ratio(predicted: float, observed: float) -> float | None:
    return predicted / observed - 1 if observed > 0 and math.isfinite(predicted) else None


@dataclass(frozen=True, slots=True)
class LatencyComparison:
    """One quantity (TPOT or TTFT), seconds: the simulator's prediction against the engine's histogram.

    ``mean_ratio`` is predicted ÷ observed mean − 1; ``quantiles`` maps ``p50``/``p90``/``p99`` to
    ``{predicted, observed, ratio, bucket: [lower, upper]}`` for the quantiles the buckets allow.
    """

    predicted_mean: float
    observed_mean: float
    mean_ratio: float | None
    predicted_count: int
    observed_count: float
    quantiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "predicted_mean_seconds": self.predicted_mean,
            "observed_mean_seconds": self.observed_mean,
            "mean_ratio": self.mean_ratio,
            "predicted_count": self.predicted_count,
            "observed_count": self.observed_count,
            "quantiles": {k: dict(v) for k, v in self.quantiles.items()},
        }


def compare(
    predicted: Sequence[float], observed: Histogram | None, weights: Sequence[float] | None = None
) -> LatencyComparison | None:
    """The simulator's values (seconds, one per request) against the engine's window histogram (module docstring).
    ``weights`` (one per value): a weighted mean only, no quantiles (the inter-token latency case). ``None`` when
    either side is empty.
    """
    if observed is None or observed.count <= 0 or not math.isfinite(observed.sum) or not predicted:
        return None
    observed_mean = observed.sum / observed.count
    if weights is not None:
        total = math.fsum(weights)
        if total <= 0:
            return None
        mean = math.fsum(v * w for v, w in zip(predicted, weights, strict=True)) / total
        return LatencyComparison(mean, observed_mean, _ratio(mean, observed_mean), len(predicted), observed.count)
    mean = math.fsum(predicted) / len(predicted)
    sim = _binned(predicted, observed)
    qs: dict[str, dict[str, Any]] = {}
    for q in QUANTILES:
        o = histogram_quantile_estimate(q, observed)
        p = histogram_quantile_estimate(q, sim)
        if o is None or p is None or o.value is None or p.value is None:
            continue
        if not (math.isfinite(o.upper_bound) and math.isfinite(o.lower_bound)):
            continue  # the histogram says only "beyond a bound"
        qs[f"p{round(q * 100)}"] = {
            "predicted": p.value,
            "observed": o.value,
            "ratio": _ratio(p.value, o.value),
            "bucket": [o.lower_bound, o.upper_bound],
        }
    return LatencyComparison(mean, observed_mean, _ratio(mean, observed_mean), len(predicted), observed.count, qs)


@dataclass(frozen=True, slots=True)
class LatencyError:
    """The simulator's error over a window: ``tpot``/``ttft`` comparisons (``None``: not measurable) and where the
    truth came from (``source``)."""

    window: ObservedWindow
    tpot: LatencyComparison | None
    ttft: LatencyComparison | None
    source: str

    @classmethod
    def of(cls, requests: Sequence[SimRequest], window: ObservedWindow, source: str) -> LatencyError:
        """Compare the simulator's finished ``requests`` (those measured) with ``window``."""
        done = [r for r in requests if r.first_token >= 0]
        multi = [r for r in done if r.generated > 1]
        tpots = [r.tpot for r in multi]
        weights = [float(r.generated - 1) for r in multi] if window.tpot_is_itl else None
        return cls(window, compare(tpots, window.tpot, weights), compare([r.ttft for r in done], window.ttft), source)

    def as_dict(self) -> dict[str, Any]:
        """``{tpot_ratio, ttft_ratio, window, source, observed, tpot, ttft}`` (ratios: predicted ÷ observed mean − 1,
        ``None`` when not measurable)."""
        return {
            "tpot_ratio": self.tpot.mean_ratio if self.tpot is not None else None,
            "ttft_ratio": self.ttft.mean_ratio if self.ttft is not None else None,
            "window": {"start": rfc3339(self.window.start), "end": rfc3339(self.window.end),
                       "seconds": self.window.end - self.window.start},
            "source": self.source,
            "observed": self.window.as_dict(),
            "tpot": self.tpot.as_dict() if self.tpot is not None else None,
            "ttft": self.ttft.as_dict() if self.ttft is not None else None,
        }  # fmt: skip
