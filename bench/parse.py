"""Extraction throughput: parse_exposition(text, keep=adapter.wants) vs prometheus-client's full parse.

For each capture in ../shared/engine-metrics (read at run time, never copied), both are timed side by side
in one run, interleaved round by round so machine noise hits both alike, and the ratio is printed. The full
parse is ``text_string_to_metric_families`` with every sample iterated (what a reader of all families pays).
``keep`` is the detected engine's adapter ``wants``; DCGM captures have no adapter and keep nothing.

Usage: ``.venv/bin/python bench/parse.py [--seconds S] [DIR]``. Exit status 1 if any ratio is below 10.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from advisor.engines import detect_engine, get_adapter
from advisor.sources.exposition import parse_exposition, parse_exposition_full
from advisor.sources.selective_parser import _TEXT_RE

GOAL = 10.0


def full_parse(text: str) -> None:
    for family in text_string_to_metric_families(text):
        for _ in family.samples:
            pass


def per_call(fn: Callable[[], object], budget: float) -> float:
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return elapsed / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "directory", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "engine-metrics")
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="time per capture and side (default 1)")
    args = parser.parse_args()
    paths = sorted(Path(args.directory).glob("*.prom"))
    if not paths:
        print(f"no captures in {args.directory}", file=sys.stderr)
        return 2
    print(f"{'capture':62} {'lines':>5} {'engine':>13} {'path':>5} {'full µs':>9} {'ours µs':>8} {'ratio':>6}")
    worst = float("inf")
    for path in paths:
        text = path.read_text()
        engine = detect_engine(parse_exposition_full(text))
        keep = get_adapter(engine).wants if engine not in (None, "dcgm") else (lambda name: False)
        full_t = ours_t = 0.0
        rounds = 5
        for _ in range(rounds):  # interleaved: both sides see the same machine state
            full_t += per_call(lambda: full_parse(text), args.seconds / rounds)  # noqa: B023
            ours_t += per_call(lambda: parse_exposition(text, keep), args.seconds / rounds)  # noqa: B023
        ratio = full_t / ours_t
        worst = min(worst, ratio)
        tier = "fast" if _TEXT_RE.fullmatch(text) else "exact"
        print(
            f"{path.name[:62]:62} {text.count(chr(10)):5d} {engine or '-':>13} {tier:>5} "
            f"{full_t / rounds * 1e6:9.1f} {ours_t / rounds * 1e6:8.1f} {ratio:5.1f}×"
        )
    print(f"worst ratio {worst:.1f}× (goal ≥ {GOAL:g}×)")
    return 0 if worst >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
