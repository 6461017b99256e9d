"""Replay Poisson arrivals through the desired-replicas lead (:class:`advisor.signals.ReplicaLead`) at the defaults.

Run by hand (not a test, not run by CI)::

    .venv/bin/python bench/lead_replay.py                          # bursts, ramps, flat loads: ~40 s
    .venv/bin/python bench/lead_replay.py --quick                  # fewer runs per kind
    .venv/bin/python bench/lead_replay.py --scale-up-window 360    # the README's setting for loads in steps

Each kind is replayed twice, side by side: with the lead as it is, and with the trend extrapolated whatever its
newest rates do (``_rise_goes_on`` always true: the rule before it). The defaults: 15 s cycles, a 5 min window
(the lead's horizon), ``scale_up_window`` 60 s and ``scale_down_window`` 300 s; 2 replicas of 1 request/s each
within the SLO unless a kind says otherwise; no replica advice (the lead alone). The arrival rate of each cycle is
the window's count ÷ 300 s, as the daemon's flow balance reads it on a steady engine.

Printed per kind: for bursts and flat loads, the runs in which desired replicas rose above the running count and
the highest count; for ramps, the median of (first cycle led − first cycle the window's rate passed the running
count's capacity), seconds (negative: ahead), and the runs never led.
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
import statistics
from collections.abc import Callable, Sequence
from unittest import mock

from advisor import signals
from advisor.rules.replicas import ReplicaStabilizer
from advisor.signals import ReplicaLead

CYCLE_SECONDS = 15.0
WINDOW_SECONDS = 300.0
UP_SECONDS, DOWN_SECONDS = 60.0, 300.0
"""``rules.replicas.scale_up_window`` / ``scale_down_window`` defaults (``--scale-up-window`` sets the first)."""

Rate = Callable[[float], float]


def arrivals(rnd: random.Random, rate: Rate, end: float, batch: int = 1) -> list[float]:
    """Arrival times (s) of a Poisson process of ``rate(t)`` requests/s over [0, end), 1 s at a time; ``batch``
    requests per arrival (burstier than Poisson)."""
    out: list[float] = []
    for t in range(int(end)):
        mean = rate(float(t)) / batch
        n = _poisson(rnd, mean)
        for _ in range(n):
            out.extend([t + rnd.random()] * batch)
    out.sort()
    return out


def _poisson(rnd: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    if mean > 50:
        return max(0, round(rnd.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rnd.random()
        if p < limit:
            return k
        k += 1


def window_rate(times: Sequence[float], now: float) -> float:
    """Requests/s arrived in (now − window, now]."""
    return (bisect.bisect_right(times, now) - bisect.bisect_right(times, now - WINDOW_SECONDS)) / WINDOW_SECONDS


def desired(rates: Sequence[float | None], current: int, capacity: float, up: float = UP_SECONDS) -> list[int]:
    """max(current, lead) each cycle, the lead fed ``rates`` (one per cycle from t = window), its scale-up window
    ``up`` seconds."""
    lead = ReplicaLead(ReplicaStabilizer(up, DOWN_SECONDS), WINDOW_SECONDS)
    out = []
    for k, r in enumerate(rates):
        now = WINDOW_SECONDS + k * CYCLE_SECONDS
        led = lead.lead("d", now, current, r, capacity, None, None, WINDOW_SECONDS)
        out.append(max(current, led or 0))
    return out


def cycles(end: float) -> list[float]:
    return [WINDOW_SECONDS + k * CYCLE_SECONDS for k in range(int((end - WINDOW_SECONDS) / CYCLE_SECONDS))]


def bursts(runs: int, up: float) -> list[tuple[str, str]]:
    rows = []
    for base, current in ((1.5, 2), (0.5, 1)):
        for seconds in (30, 60, 90):
            for extra in (2.0, 5.0, 10.0):

                def rate(t: float, base: float = base, seconds: int = seconds, extra: float = extra) -> float:
                    return base + (extra if 1200 <= t < 1200 + seconds else 0.0)

                led, top = 0, current
                for seed in range(runs):
                    times = arrivals(random.Random(seed), rate, 3000.0)
                    got = desired([window_rate(times, t) for t in cycles(3000.0)], current, 1.0, up)
                    led += max(got) > current
                    top = max(top, max(got))
                rows.append(
                    (f"burst {seconds} s +{extra:g}/s on {base}, {current} running", f"{led}/{runs} led, max {top}")
                )
    return rows


def _ramp(l0: float, l1: float, start: float, seconds: float) -> Rate:
    return lambda t: l0 if t < start else l1 if t > start + seconds else l0 + (l1 - l0) * (t - start) / seconds


def ramps(runs: int, up: float) -> list[tuple[str, str]]:
    kinds = [
        (1, 3, 600, 2, 1.0),
        (1, 3, 1200, 2, 1.0),
        (1, 3, 2400, 2, 1.0),
        (0.5, 3, 1800, 2, 1.0),
        (10, 40, 1200, 2, 10.0),
        (0.5, 5, 600, 2, 1.0),
        (1, 2, 3600, 1, 1.2),
        (0.5, 1, 3600, 1, 0.7),
        (0.3, 0.8, 1200, 2, 0.25),
        (0.2, 0.6, 1200, 1, 0.25),
    ]
    rows = []
    for l0, l1, seconds, current, capacity in kinds:
        rate = _ramp(l0, l1, 900.0, seconds)
        end = 900.0 + seconds + 900.0
        deltas, never = [], 0
        for seed in range(runs):
            times = arrivals(random.Random(seed), rate, end)
            at = cycles(end)
            rates = [window_rate(times, t) for t in at]
            got = desired(rates, current, capacity, up)
            first = next((t for t, d in zip(at, got, strict=True) if d > current), None)
            expected = next(t for t in at if _mean_window(rate, t) > current * capacity)
            if first is None:
                never += 1
            else:
                deltas.append(first - expected)
        median = f"{statistics.median(deltas):+.0f} s" if deltas else "-"
        rows.append(
            (
                f"ramp {l0} → {l1}/s over {seconds:.0f} s, {current} of {capacity}/s",
                f"lead {median} vs the window passing capacity, never {never}/{runs}",
            )
        )
    return rows


def _mean_window(rate: Rate, now: float) -> float:
    n = 200
    return sum(rate(now - WINDOW_SECONDS + WINDOW_SECONDS * (i + 0.5) / n) for i in range(n)) / n


def flat(runs: int, up: float) -> list[tuple[str, str]]:
    rows = []
    for batch in (1, 5, 20):
        for lam in (1.5, 1.8, 1.9, 2.05, 2.5, 2.9):
            led, top = 0, 2

            def level(_t: float, lam: float = lam) -> float:
                return lam

            for seed in range(runs):
                times = arrivals(random.Random(1000 * seed + int(100 * lam) + batch), level, 3900.0, batch)
                got = desired([window_rate(times, t) for t in cycles(3900.0)], 2, 1.0, up)
                led += max(got) > 2
                top = max(top, max(got))
            rows.append((f"flat {lam}/s, {batch} per arrival, 2 of 1/s running (1 h)", f"{led}/{runs} led, max {top}"))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Print every kind with and without the going-on test."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 runs per kind instead of 10–20")
    parser.add_argument(
        "--scale-up-window", type=float, default=UP_SECONDS, metavar="S", help=f"seconds (default {UP_SECONDS:g})"
    )
    args = parser.parse_args(argv)
    if not math.isfinite(args.scale_up_window) or args.scale_up_window < 0:
        parser.error(f"--scale-up-window must be a finite number of seconds ≥ 0, got {args.scale_up_window!r}")
    n = 4 if args.quick else 10
    runs: dict[Callable[[int, float], list[tuple[str, str]]], int] = {
        bursts: n,
        ramps: n + 2 if not args.quick else n,
        flat: 2 * n if not args.quick else n,
    }
    print(
        f"scale_up_window {args.scale_up_window:g} s, scale_down_window {DOWN_SECONDS:g} s, window {WINDOW_SECONDS:g} s"
    )
    for section, count in runs.items():
        now = section(count, args.scale_up_window)
        with mock.patch.object(signals, "_rise_goes_on", lambda *_: True):
            before = section(count, args.scale_up_window)
        for (kind, got), (_, was) in zip(now, before, strict=True):
            print(f"{kind:58} {got:46} (without the going-on test: {was})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
