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

``--baseline REF`` (e.g. ``--baseline main``) measures git ref REF and this tree side by side in one run: REF is
checked out into a temporary ``git worktree`` (removed at the end) and each side runs in its own worker
subprocess importing its own ``advisor`` (``PYTHONPATH`` = its tree; ``bench/baseline.py``). The rounds are
interleaved — baseline, current, current, baseline, … — each side timing every capture once per round as
above (a batch of full parses and a batch of ours, same clock). Per capture it prints ours µs for both, the
**median of the per-round ratios current ÷ baseline** with its min and max, the full ÷ ours speed-up for both,
and the full parse's own current ÷ baseline ratio — the same prometheus-client code on both sides, so its
distance from 1.0 shows the noise of the run. Verdict: ``PASS`` when every capture's ours current ÷ baseline
is at most ``1 + --tolerance`` (default 0.10) and the current tree still meets the ≥ 10× goal; exit status 1
otherwise. Default sizes (15 rounds of ~40 ms per side, capture and parse) take about 1–2 minutes for the 16
captures on a loaded two-core machine.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass
class Capture:
    """One capture ready to time: its text, the adapter's ``keep``, and calls per batch for each side."""

    path: Path
    text: str
    engine: str | None
    kept: int
    cold: float  # wall seconds of the first, untimed call (builds the adapter's scan plan)
    full_samples: int
    full: Callable[[], object]
    ours: Callable[[], object]
    n_full: int
    n_ours: int


def prepare(path: Path, round_ms: float) -> Capture | None:
    """Read and check one capture (``None`` when ours differs from prometheus-client's values)."""
    text = path.read_text()
    engine = detect_engine(parse_exposition_full(text))
    keep: Callable[[str], bool] = get_adapter(engine).wants if engine not in (None, "dcgm") else (lambda name: False)
    start = time.perf_counter()
    kept = parse_exposition(text, keep)  # warm-up: the first scrape builds the adapter's scan plan
    cold = time.perf_counter() - start
    if not same_values(text, keep):
        return None

    def full(text: str = text) -> int:
        return full_parse(text)

    def ours(text: str = text, keep: Callable[[str], bool] = keep) -> object:
        return parse_exposition(text, keep)

    return Capture(
        path,
        text,
        engine,
        sum(map(len, kept.values())),
        cold,
        full_parse(text),
        full,
        ours,
        calls_for(full, round_ms / 1000),
        calls_for(ours, round_ms / 1000),
    )


def time_round(cap: Capture, r: int) -> tuple[float, float]:
    """One round: a batch of full parses and a batch of ours, the order alternating with ``r``."""
    if r % 2:
        t_ours = batch_time(cap.ours, cap.n_ours)
        t_full = batch_time(cap.full, cap.n_full)
    else:
        t_full = batch_time(cap.full, cap.n_full)
        t_ours = batch_time(cap.ours, cap.n_ours)
    return t_full, t_ours


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "directory", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "engine-metrics")
    )
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per capture (default 15)")
    parser.add_argument("--round-ms", type=float, default=40.0, help="time per side per round (default 40 ms)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="cpu (default) or wall time")
    parser.add_argument("--baseline", metavar="REF", help="also measure git ref REF, side by side (see above)")
    parser.add_argument(
        "--tolerance", type=float, default=0.10, help="--baseline: allowed slowdown of ours (default 0.10)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    paths = sorted(Path(args.directory).glob("*.prom"))
    if not paths:
        print(f"no captures in {args.directory}", file=sys.stderr)
        return 2
    if args.worker:
        return worker(paths, args.round_ms)
    if args.baseline:
        return compare(args, paths)
    header = (
        f"{'capture':62} {'lines':>5} {'kept':>5} {'engine':>13} "
        f"{'full µs':>9} {'ours µs':>8} {'cold µs':>8} {'ratio':>6} {'min':>6} {'max':>6}"
    )
    print(header)
    worst = float("inf")
    failed: list[str] = []
    for path in paths:
        cap = prepare(path, args.round_ms)
        if cap is None:
            print(f"{path.name}: values differ from prometheus-client; no speed reported", file=sys.stderr)
            return 1
        ratios: list[float] = []
        full_times: list[float] = []
        ours_times: list[float] = []
        for r in range(args.rounds):  # interleaved, alternating which side goes first
            t_full, t_ours = time_round(cap, r)
            full_times.append(t_full)
            ours_times.append(t_ours)
            ratios.append(t_full / t_ours)
        ratio = statistics.median(ratios)
        worst = min(worst, ratio)
        if ratio < GOAL:
            failed.append(path.name)
        print(
            f"{path.name[:62]:62} {cap.text.count(chr(10)):5d} {cap.kept:5d} {cap.engine or '-':>13} "
            f"{statistics.median(full_times) * 1e6:9.1f} {statistics.median(ours_times) * 1e6:8.1f} "
            f"{cap.cold * 1e6:8.0f} {ratio:5.1f}× {min(ratios):5.1f}× {max(ratios):5.1f}×"
            f"   ({cap.full_samples} samples in the full parse)"
        )
    verdict = "PASS" if not failed else "FAIL"
    print(f"clock: {args.clock}; {args.rounds} interleaved rounds of ~{args.round_ms:g} ms per side and capture")
    print(f"minimum median ratio {worst:.1f}× (goal ≥ {GOAL:g}× on every capture): {verdict}")
    for name in failed:
        print(f"  below goal: {name}")
    return 0 if not failed else 1


# --- --baseline REF ---------------------------------------------------------------------------------------------


def worker(paths: list[Path], round_ms: float) -> int:
    """A side of ``--baseline``: prepare every capture, then answer ``{"op": "round", "round": r}`` requests with
    the seconds per call of each capture's full and ours batches (JSON lines on stdin/stdout)."""
    from baseline import check_import, serve

    where = check_import(os.environ.get("PYTHONPATH", ""))
    caps: list[Capture] = []
    for path in paths:
        cap = prepare(path, round_ms)
        if cap is None:
            print(f"{path.name}: values differ from prometheus-client ({where})", file=sys.stderr)
            return 1
        caps.append(cap)

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "info":
            return {
                "advisor": where,
                "captures": [
                    {"name": c.path.name, "lines": c.text.count(chr(10)), "kept": c.kept, "engine": c.engine,
                     "cold": c.cold, "full_samples": c.full_samples}
                    for c in caps
                ],
            }  # fmt: skip
        timed = [time_round(c, request["round"]) for c in caps]
        return {"full": [t[0] for t in timed], "ours": [t[1] for t in timed]}

    serve(handle)
    return 0


def compare(args: argparse.Namespace, paths: list[Path]) -> int:
    """``--baseline REF``: both sides in worker subprocesses, rounds interleaved; one line per capture."""
    from baseline import REPO, Worker, baseline_tree, describe, dirty, ratio_stats

    began = time.perf_counter()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--round-ms", str(args.round_ms)]
    cmd += ["--clock", args.clock, str(Path(args.directory).resolve())]
    sides = ("baseline", "current")
    with baseline_tree(args.baseline) as tree:
        workers = {"baseline": Worker("baseline", cmd, tree), "current": Worker("current", cmd, REPO)}
        try:
            info = {side: w.ask({"op": "info"}) for side, w in workers.items()}
            full: dict[str, list[list[float]]] = {side: [] for side in sides}
            ours: dict[str, list[list[float]]] = {side: [] for side in sides}
            for r in range(args.rounds):  # baseline, current, current, baseline, …
                for side in sides if r % 2 == 0 else sides[::-1]:
                    answer = workers[side].ask({"op": "round", "round": r})
                    full[side].append(answer["full"])
                    ours[side].append(answer["ours"])
        finally:
            for w in workers.values():
                w.close()
    print(f"baseline: {describe(args.baseline)}  (advisor from {info['baseline']['advisor']})")
    print(f"current:  {REPO} at {describe('HEAD')}{dirty()}  (advisor from {info['current']['advisor']})")
    print(
        f"{'capture':52} {'lines':>5} {'kept':>5} {'engine':>13} {'ours µs':>8} {'ours µs':>8} "
        f"{'cur/base':>8} {'min':>5} {'max':>5} {'×full':>6} {'×full':>6} {'full c/b':>8} {'cold µs':>8} {'cold µs':>8}"
    )
    print(f"{'':52} {'':5} {'':5} {'':13} {'base':>8} {'current':>8} {'':8} {'':5} {'':5} {'base':>6} {'cur':>6} "
          f"{'(noise)':>8} {'base':>8} {'current':>8}")  # fmt: skip
    slower: list[str] = []
    below_goal: list[str] = []
    meds: list[float] = []
    noise: list[float] = []
    for i, cap in enumerate(info["current"]["captures"]):
        base_cap = info["baseline"]["captures"][i]
        o = {side: [round_[i] for round_ in ours[side]] for side in sides}
        f = {side: [round_[i] for round_ in full[side]] for side in sides}
        med, lo, hi = ratio_stats(o["current"], o["baseline"])
        full_med, _, _ = ratio_stats(f["current"], f["baseline"])
        speedup = {side: statistics.median(a / b for a, b in zip(f[side], o[side], strict=True)) for side in sides}
        meds.append(med)
        noise.append(full_med)
        if med > 1 + args.tolerance:
            slower.append(cap["name"])
        if speedup["current"] < GOAL:
            below_goal.append(cap["name"])
        print(
            f"{cap['name'][:52]:52} {cap['lines']:5d} {cap['kept']:5d} {cap['engine'] or '-':>13} "
            f"{statistics.median(o['baseline']) * 1e6:8.1f} {statistics.median(o['current']) * 1e6:8.1f} "
            f"{med:7.3f}× {lo:5.2f} {hi:5.2f} {speedup['baseline']:5.1f}× {speedup['current']:5.1f}× "
            f"{full_med:7.3f}× {base_cap['cold'] * 1e6:8.0f} {cap['cold'] * 1e6:8.0f}"
        )
    geo = math.exp(statistics.fmean(math.log(m) for m in meds))
    verdict = "PASS" if not slower and not below_goal else "FAIL"
    print(
        f"clock: {args.clock}; {args.rounds} interleaved rounds of ~{args.round_ms:g} ms per side, capture and parse; "
        f"{time.perf_counter() - began:.0f} s"
    )
    print(
        f"ours current ÷ baseline: geometric mean {geo:.3f}×, worst {max(meds):.3f}× (tolerance "
        f"{1 + args.tolerance:.2f}×); full parse (same code both sides) {min(noise):.3f}..{max(noise):.3f}×: {verdict}"
    )
    for name in slower:
        print(f"  slower than the baseline: {name}")
    for name in below_goal:
        print(f"  below the ≥ {GOAL:g}× goal: {name}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
