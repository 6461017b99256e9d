"""Extraction throughput: parse_exposition(text, keep=adapter.wants) vs prometheus-client's full parse.

For each capture in ../shared/engine-metrics (read at run time, never copied):

* **full** — ``prometheus_client.parser.text_string_to_metric_families(text)`` with every sample of every
  family iterated: what a consumer without a selective parser pays to get the same values (the parse is
  lazy, so not iterating would time nothing).
* **ours** — ``parse_exposition(text, keep)`` with ``keep`` the detected engine's adapter ``wants`` (DCGM
  captures have no adapter and keep nothing): the values the advisor reads, with every line still validated.

Both sides parse the same ``str`` (no I/O, no decoding). They are timed side by side in one run: each round
times a batch of full parses then a batch of ours (the order alternating between rounds), so machine noise
hits both alike, and the ratio reported is the **median of the per-round ratios**. The clock is the
process's CPU time by default (``--clock cpu``: time spent descheduled on a shared machine is not counted,
for either side); ``--clock wall`` uses ``time.perf_counter``. Before timing, the result
of ours is checked against prometheus-client's (the bench refuses to report a speed for wrong values), and
one untimed warm-up call builds the adapter's scan plan, as the first scrape of a target does; ``cold µs``
is that first call, shown for information.

Usage: ``.venv/bin/python bench/parse.py [--rounds N] [--round-ms MS] [--clock cpu|wall] [DIR]``.
Prints one line per capture, the minimum ratio and ``PASS``/``FAIL`` for the ≥ 10× goal; exit status 1 on
``FAIL``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from advisor.engines import detect_engine, get_adapter
from advisor.sources.exposition import parse_exposition, parse_exposition_full

GOAL = 10.0


def full_parse(text: str) -> int:
    """What a naive consumer does: the full parse, every sample of every family materialized."""
    n = 0
    for family in text_string_to_metric_families(text):
        n += len(family.samples)
    return n


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]


def batch_time(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call over ``calls`` back-to-back calls."""
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def calls_for(fn: Callable[[], object], seconds: float) -> int:
    """How many calls of ``fn`` take about ``seconds`` (at least 1)."""
    per = batch_time(fn, 3)
    return max(1, int(seconds / per))


def same_values(text: str, keep: Callable[[str], bool]) -> bool:
    ours = parse_exposition(text, keep)
    ref = parse_exposition_full(text, keep)
    if list(ours) != list(ref):
        return False
    for name, samples in ref.items():
        for a, b in zip(ours[name], samples, strict=True):
            if (a.name, dict(a.labels), type(a.value)) != (b.name, dict(b.labels), type(b.value)):
                return False
            if not (a.value == b.value or (a.value != a.value and b.value != b.value)):  # NaN == NaN here
                return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "directory", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "engine-metrics")
    )
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per capture (default 15)")
    parser.add_argument("--round-ms", type=float, default=40.0, help="time per side per round (default 40 ms)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="cpu (default) or wall time")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    paths = sorted(Path(args.directory).glob("*.prom"))
    if not paths:
        print(f"no captures in {args.directory}", file=sys.stderr)
        return 2
    header = (
        f"{'capture':62} {'lines':>5} {'kept':>5} {'engine':>13} "
        f"{'full µs':>9} {'ours µs':>8} {'cold µs':>8} {'ratio':>6} {'min':>6} {'max':>6}"
    )
    print(header)
    worst = float("inf")
    failed: list[str] = []
    for path in paths:
        text = path.read_text()
        engine = detect_engine(parse_exposition_full(text))
        keep: Callable[[str], bool] = (
            get_adapter(engine).wants if engine not in (None, "dcgm") else (lambda name: False)
        )
        start = time.perf_counter()
        kept = parse_exposition(text, keep)  # warm-up: the first scrape builds the adapter's scan plan
        cold = time.perf_counter() - start
        if not same_values(text, keep):
            print(f"{path.name}: values differ from prometheus-client; no speed reported", file=sys.stderr)
            return 1
        full_samples = full_parse(text)

        def full(text: str = text) -> int:
            return full_parse(text)

        def ours(text: str = text, keep: Callable[[str], bool] = keep) -> object:
            return parse_exposition(text, keep)

        n_full = calls_for(full, args.round_ms / 1000)
        n_ours = calls_for(ours, args.round_ms / 1000)
        ratios: list[float] = []
        full_times: list[float] = []
        ours_times: list[float] = []
        for r in range(args.rounds):  # interleaved, alternating which side goes first
            if r % 2:
                t_ours = batch_time(ours, n_ours)
                t_full = batch_time(full, n_full)
            else:
                t_full = batch_time(full, n_full)
                t_ours = batch_time(ours, n_ours)
            full_times.append(t_full)
            ours_times.append(t_ours)
            ratios.append(t_full / t_ours)
        ratio = statistics.median(ratios)
        worst = min(worst, ratio)
        if ratio < GOAL:
            failed.append(path.name)
        print(
            f"{path.name[:62]:62} {text.count(chr(10)):5d} {sum(map(len, kept.values())):5d} {engine or '-':>13} "
            f"{statistics.median(full_times) * 1e6:9.1f} {statistics.median(ours_times) * 1e6:8.1f} "
            f"{cold * 1e6:8.0f} {ratio:5.1f}× {min(ratios):5.1f}× {max(ratios):5.1f}×"
            f"   ({full_samples} samples in the full parse)"
        )
    verdict = "PASS" if not failed else "FAIL"
    print(f"clock: {args.clock}; {args.rounds} interleaved rounds of ~{args.round_ms:g} ms per side and capture")
    print(f"minimum median ratio {worst:.1f}× (goal ≥ {GOAL:g}× on every capture): {verdict}")
    for name in failed:
        print(f"  below goal: {name}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
