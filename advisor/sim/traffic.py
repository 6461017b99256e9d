"""Traffic for the simulator: arrival processes, request lengths and replayed traces (pure, seeded).

A :class:`TrafficProfile` pairs an arrival process with a length distribution, or replays a trace. Its
:meth:`TrafficProfile.arrivals` yields :class:`Arrival` values in time order from a ``random.Random``; the
same seed gives the same requests, whatever the engine configuration (the sweep compares dials on identical
traffic — common random numbers).

Arrival processes (rates in requests per second, times in seconds since the start):

=====================  ========================================================================================
:class:`Poisson`       exponential gaps, mean ``1 / rate`` (coefficient of variation 1)
:class:`GammaGaps`     Gamma-distributed gaps with mean ``1 / rate`` and coefficient of variation ``cv`` (> 1:
                       bursty; shape ``k = 1 / cv²``, scale ``1 / (rate · k)``)
:class:`OnOff`         Poisson at ``rate_on`` for ``on_seconds``, then at ``rate_off`` for ``off_seconds``,
                       repeating (a square-wave modulated rate)
:class:`LinearRamp`    Poisson at ``rate_from`` for ``rest``, rising linearly to ``rate_to`` over ``ramp``, held at
                       ``rate_to`` for ``hold``, repeating (a load ramp an autoscaler can lead)
:class:`DailyCurve`    Poisson whose rate follows ``mean · (1 + amplitude · sin(2π (t + phase) / period))`` —
                       the diurnal curve; ``period`` may be shortened to replay a day quickly
=====================  ========================================================================================

The modulated processes are drawn by thinning (Lewis & Shedler, "Simulation of nonhomogeneous Poisson
processes by thinning", Naval Research Logistics Quarterly 26(3), 1979): candidates at the peak rate, each
kept with probability ``rate(t) / peak``.

Lengths: :class:`LognormalLengths` (prompt and output lengths independent lognormals with the given means
and coefficients of variation; ``σ² = ln(1 + cv²)``, ``μ = ln(mean) − σ²/2``) or :class:`EmpiricalLengths`
(rows drawn uniformly from a list, e.g. a CSV of real lengths: :func:`parse_lengths_csv`). A trace
(:func:`parse_trace_csv`) fixes arrival times and lengths together.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

__all__ = [
    "Arrival",
    "ArrivalProcess",
    "DailyCurve",
    "EmpiricalLengths",
    "GammaGaps",
    "LengthDistribution",
    "LinearRamp",
    "LognormalLengths",
    "OnOff",
    "Poisson",
    "TrafficError",
    "TrafficProfile",
    "parse_lengths_csv",
    "parse_trace_csv",
]


class TrafficError(ValueError):
    """An invalid traffic parameter or an unreadable lengths/trace text; the message names the field or line."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """One request: arrival ``time`` (seconds since the start), ``prompt_tokens`` and ``output_tokens`` (the
    tokens the client will receive if nothing truncates it)."""

    time: float
    prompt_tokens: int
    output_tokens: int


def _check(name: str, value: float, minimum: float, *, strict: bool = False) -> None:
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise TrafficError(f"{name} must be a finite number {'>' if strict else '≥'} {minimum:g}, got {value!r}")


class ArrivalProcess(Protocol):
    """Something that draws arrival times."""

    @property
    def mean_rate(self) -> float:
        """Long-run requests per second."""
        ...

    def times(self, rng: random.Random) -> Iterator[float]:
        """Arrival times, increasing, without end (or ending when the rate is 0)."""
        ...

    def scaled(self, mean_rate: float) -> ArrivalProcess:
        """The same shape at another long-run rate."""
        ...


@dataclass(frozen=True)
class Poisson:
    """Poisson arrivals at ``rate`` requests/s."""

    rate: float

    def __post_init__(self) -> None:
        _check("rate", self.rate, 0.0)

    @property
    def mean_rate(self) -> float:
        return self.rate

    def times(self, rng: random.Random) -> Iterator[float]:
        t = 0.0
        if self.rate <= 0:
            return
        while True:
            t += rng.expovariate(self.rate)
            yield t

    def scaled(self, mean_rate: float) -> Poisson:
        return Poisson(mean_rate)


@dataclass(frozen=True)
class GammaGaps:
    """Renewal arrivals with Gamma gaps: mean ``1 / rate`` s, coefficient of variation ``cv`` (1 = Poisson)."""

    rate: float
    cv: float = 2.0

    def __post_init__(self) -> None:
        _check("rate", self.rate, 0.0)
        _check("cv", self.cv, 0.0, strict=True)

    @property
    def mean_rate(self) -> float:
        return self.rate

    def times(self, rng: random.Random) -> Iterator[float]:
        if self.rate <= 0:
            return
        shape = 1.0 / (self.cv * self.cv)
        scale = 1.0 / (self.rate * shape)
        t = 0.0
        while True:
            t += rng.gammavariate(shape, scale)
            yield t

    def scaled(self, mean_rate: float) -> GammaGaps:
        return replace(self, rate=mean_rate)


def _thinned(rate_at: _RateFn, peak: float, rng: random.Random) -> Iterator[float]:
    if peak <= 0:
        return
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if rng.random() * peak < rate_at(t):
            yield t


class _RateFn(Protocol):
    def __call__(self, t: float) -> float: ...


@dataclass(frozen=True)
class OnOff:
    """Poisson at ``rate_on`` for ``on_seconds``, then ``rate_off`` for ``off_seconds``, repeating."""

    rate_on: float
    rate_off: float = 0.0
    on_seconds: float = 30.0
    off_seconds: float = 30.0

    def __post_init__(self) -> None:
        _check("rate_on", self.rate_on, 0.0)
        _check("rate_off", self.rate_off, 0.0)
        _check("on_seconds", self.on_seconds, 0.0, strict=True)
        _check("off_seconds", self.off_seconds, 0.0, strict=True)

    @property
    def mean_rate(self) -> float:
        period = self.on_seconds + self.off_seconds
        return (self.rate_on * self.on_seconds + self.rate_off * self.off_seconds) / period

    def rate_at(self, t: float) -> float:
        """Requests/s at time ``t``."""
        return self.rate_on if t % (self.on_seconds + self.off_seconds) < self.on_seconds else self.rate_off

    def times(self, rng: random.Random) -> Iterator[float]:
        return _thinned(self.rate_at, max(self.rate_on, self.rate_off), rng)

    def scaled(self, mean_rate: float) -> OnOff:
        k = mean_rate / self.mean_rate if self.mean_rate > 0 else 0.0
        return replace(self, rate_on=self.rate_on * k, rate_off=self.rate_off * k)


@dataclass(frozen=True)
class LinearRamp:
    """Poisson at ``rate_from`` for ``rest_seconds``, then a rate rising linearly from ``rate_from`` to ``rate_to``
    over ``ramp_seconds``, then ``rate_to`` for ``hold_seconds``, repeating (period ``rest + ramp + hold``).

    Example: ``LinearRamp(0.3, 3.0, ramp_seconds=100, hold_seconds=50, rest_seconds=200)``: 0.3/s until 200 s,
    1.65/s at 250 s, 3/s from 300 to 350 s, 0.3/s again from 350 s; mean (0.3 × 200 + 1.65 × 100 + 3 × 50) ÷ 350 =
    1.071/s.
    """

    rate_from: float
    rate_to: float
    ramp_seconds: float = 60.0
    hold_seconds: float = 0.0
    rest_seconds: float = 60.0

    def __post_init__(self) -> None:
        _check("rate_from", self.rate_from, 0.0)
        _check("rate_to", self.rate_to, 0.0)
        _check("ramp_seconds", self.ramp_seconds, 0.0, strict=True)
        _check("hold_seconds", self.hold_seconds, 0.0)
        _check("rest_seconds", self.rest_seconds, 0.0)

    @property
    def mean_rate(self) -> float:
        ramp = (self.rate_from + self.rate_to) / 2 * self.ramp_seconds
        period = self.rest_seconds + self.ramp_seconds + self.hold_seconds
        return (self.rate_from * self.rest_seconds + ramp + self.rate_to * self.hold_seconds) / period

    def rate_at(self, t: float) -> float:
        """Requests/s at time ``t``."""
        x = t % (self.rest_seconds + self.ramp_seconds + self.hold_seconds) - self.rest_seconds
        if x < 0:
            return self.rate_from
        if x < self.ramp_seconds:
            return self.rate_from + (self.rate_to - self.rate_from) * x / self.ramp_seconds
        return self.rate_to

    def times(self, rng: random.Random) -> Iterator[float]:
        return _thinned(self.rate_at, max(self.rate_from, self.rate_to), rng)

    def scaled(self, mean_rate: float) -> LinearRamp:
        k = mean_rate / self.mean_rate if self.mean_rate > 0 else 0.0
        return replace(self, rate_from=self.rate_from * k, rate_to=self.rate_to * k)


@dataclass(frozen=True)
class DailyCurve:
    """Poisson with rate ``mean · (1 + amplitude · sin(2π (t + phase_seconds) / period_seconds))``.

    ``amplitude`` in [0, 1]: 0.6 gives a peak 4× the trough. The default phase starts at the mean rate,
    rising; ``period_seconds`` 86,400 is a day (shorten it to replay a day in minutes).
    """

    mean: float
    amplitude: float = 0.6
    period_seconds: float = 86_400.0
    phase_seconds: float = 0.0

    def __post_init__(self) -> None:
        _check("mean", self.mean, 0.0)
        _check("period_seconds", self.period_seconds, 0.0, strict=True)
        if not 0.0 <= self.amplitude <= 1.0:
            raise TrafficError(f"amplitude must be in [0, 1], got {self.amplitude!r}")

    @property
    def mean_rate(self) -> float:
        return self.mean

    def rate_at(self, t: float) -> float:
        """Requests/s at time ``t``."""
        return self.mean * (
            1.0 + self.amplitude * math.sin(2 * math.pi * (t + self.phase_seconds) / self.period_seconds)
        )

    def times(self, rng: random.Random) -> Iterator[float]:
        return _thinned(self.rate_at, self.mean * (1.0 + self.amplitude), rng)

    def scaled(self, mean_rate: float) -> DailyCurve:
        return replace(self, mean=mean_rate)


class LengthDistribution(Protocol):
    """Draws (prompt tokens, output tokens) pairs."""

    def draw(self, rng: random.Random) -> tuple[int, int]:
        """One (prompt, output) pair, each ≥ 1 token."""
        ...


def _lognormal_params(mean: float, cv: float) -> tuple[float, float] | None:
    if cv <= 0:
        return None
    sigma2 = math.log1p(cv * cv)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


@dataclass(frozen=True)
class LognormalLengths:
    """Independent lognormal prompt and output lengths (tokens), clipped to [1, ``max_*``].

    Defaults: 1,500 ± 50 % prompt tokens, 300 ± 100 % output tokens (chat-like; ShareGPT-style traces have
    output coefficients of variation near 1).
    """

    prompt_mean: float = 1500.0
    prompt_cv: float = 0.5
    output_mean: float = 300.0
    output_cv: float = 1.0
    max_prompt_tokens: int = 1_000_000
    max_output_tokens: int = 1_000_000

    def __post_init__(self) -> None:
        _check("prompt_mean", self.prompt_mean, 1.0)
        _check("output_mean", self.output_mean, 1.0)
        _check("prompt_cv", self.prompt_cv, 0.0)
        _check("output_cv", self.output_cv, 0.0)

    @cached_property
    def _params(self) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
        """(μ, σ) of the underlying normal for prompt and output, computed once (None: cv 0, the mean itself):
        ``σ² = ln(1 + cv²)``, ``μ = ln(mean) − σ²/2``."""
        return _lognormal_params(self.prompt_mean, self.prompt_cv), _lognormal_params(self.output_mean, self.output_cv)

    def draw(self, rng: random.Random) -> tuple[int, int]:
        pp, po = self._params
        p = round(rng.lognormvariate(*pp) if pp is not None else self.prompt_mean)
        o = round(rng.lognormvariate(*po) if po is not None else self.output_mean)
        return min(max(1, p), self.max_prompt_tokens), min(max(1, o), self.max_output_tokens)


@dataclass(frozen=True)
class EmpiricalLengths:
    """(prompt, output) rows drawn uniformly with replacement, e.g. from :func:`parse_lengths_csv`."""

    rows: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.rows:
            raise TrafficError("lengths: no rows (at least one prompt_tokens,output_tokens row is needed)")

    def draw(self, rng: random.Random) -> tuple[int, int]:
        return self.rows[rng.randrange(len(self.rows))]


@dataclass(frozen=True)
class TrafficProfile:
    """What arrives: ``process`` × ``lengths``, or ``trace`` (replayed as is; ``process`` and ``lengths`` are
    then ignored). ``trace_time_scale`` stretches (> 1) or compresses (< 1) the trace's clock."""

    process: ArrivalProcess = field(default_factory=lambda: Poisson(1.0))
    lengths: LengthDistribution = field(default_factory=LognormalLengths)
    trace: tuple[Arrival, ...] = ()
    trace_time_scale: float = 1.0

    @property
    def mean_rate(self) -> float:
        """Long-run requests per second (a trace: its count over its span)."""
        if self.trace:
            span = (self.trace[-1].time - self.trace[0].time) * self.trace_time_scale
            return len(self.trace) / span if span > 0 else float(len(self.trace))
        return self.process.mean_rate

    def with_rate(self, mean_rate: float) -> TrafficProfile:
        """The same profile at another mean rate (a trace is time-scaled to reach it)."""
        _check("mean_rate", mean_rate, 0.0, strict=True)
        if self.trace:
            current = self.mean_rate
            return replace(self, trace_time_scale=self.trace_time_scale * current / mean_rate)
        return replace(self, process=self.process.scaled(mean_rate))

    def arrivals(self, seed: int | str) -> Iterator[Arrival]:
        """Requests in arrival order. Times and lengths draw from separate streams seeded from ``seed``, so a
        change of rate does not change the lengths drawn."""
        if self.trace:
            t0 = self.trace[0].time
            for a in self.trace:
                yield Arrival((a.time - t0) * self.trace_time_scale, a.prompt_tokens, a.output_tokens)
            return
        times = random.Random(f"{seed}/arrivals")
        sizes = random.Random(f"{seed}/lengths")
        for t in self.process.times(times):
            p, o = self.lengths.draw(sizes)
            yield Arrival(t, p, o)


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _rows(text: str, what: str, columns: int) -> Iterator[tuple[int, list[str]]]:
    """Each data row's line number and first ``columns`` cells: blank lines and ``#`` comments skipped, and a header —
    the first other row, when none of its cells is a number (``arrival_seconds,prompt_tokens,output_tokens``; a
    first row ``0.5s,100,50`` is data, refused by its reader, not dropped as a header: breaker 16)."""
    reader = csv.reader(io.StringIO(text))
    first = True
    for lineno, row in enumerate(reader, start=1):
        cells = [c.strip() for c in row]
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        if first and not any(_number(c) for c in cells):
            first = False
            continue
        first = False
        if len(cells) < columns:
            raise TrafficError(f"{what} line {lineno}: expected {columns} columns, got {len(cells)}")
        yield lineno, cells[:columns]


def _positive_int(cell: str, what: str, lineno: int, column: str) -> int:
    try:
        v = float(cell)
    except ValueError:
        raise TrafficError(f"{what} line {lineno}: {column} is not a number: {cell!r}") from None
    if not math.isfinite(v) or v < 1:
        raise TrafficError(f"{what} line {lineno}: {column} must be ≥ 1, got {cell!r}")
    if v != math.floor(v):  # a count of tokens: 100.0 is 100, 100.5 is no count (breaker 15: rounded silently)
        raise TrafficError(f"{what} line {lineno}: {column} must be a whole number of tokens, got {cell!r}")
    return int(v)


def parse_lengths_csv(text: str) -> EmpiricalLengths:
    """``prompt_tokens,output_tokens`` per line (a header line and ``#`` comments are skipped; columns after the
    second are ignored: a request id, a label).

    Raises:
        TrafficError: a line with too few columns, a value below 1 or not whole (the line number is given), or no
            rows.
    """
    rows: list[tuple[int, int]] = []
    for lineno, (p, o) in _rows(text, "lengths", 2):
        rows.append(
            (_positive_int(p, "lengths", lineno, "prompt_tokens"), _positive_int(o, "lengths", lineno, "output_tokens"))
        )
    if not rows:
        raise TrafficError("lengths: no rows (at least one prompt_tokens,output_tokens row is needed)")
    return EmpiricalLengths(tuple(rows))


def parse_trace_csv(text: str) -> tuple[Arrival, ...]:
    """``arrival_seconds,prompt_tokens,output_tokens`` per line (header and ``#`` comments skipped; columns after
    the third are ignored: a request id, a label), sorted by time.

    Raises:
        TrafficError: a malformed line, a negative or non-finite time, a token count below 1 or not whole, or an
            empty trace.
    """
    out: list[Arrival] = []
    for lineno, (t, p, o) in _rows(text, "trace", 3):
        try:
            at = float(t)
        except ValueError:
            raise TrafficError(f"trace line {lineno}: arrival time is not a number: {t!r}") from None
        if not math.isfinite(at) or at < 0:
            raise TrafficError(f"trace line {lineno}: arrival time must be a finite number ≥ 0, got {t!r}")
        out.append(
            Arrival(
                at,
                _positive_int(p, "trace", lineno, "prompt_tokens"),
                _positive_int(o, "trace", lineno, "output_tokens"),
            )
        )
    if not out:
        raise TrafficError("trace: no requests")
    out.sort(key=lambda a: a.time)
    return tuple(out)
