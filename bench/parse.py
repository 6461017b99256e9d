"""Extraction throughput: parse_exposition(text, keep=adapter.wants) vs prometheus-client's full parse.

For each capture in ../shared/engine-metrics (read at run time, never copied):

* **full** — ``prometheus_client.parser.text_string_to_metric_families(text)`` with every sample of every
  family iterated: what a consumer without a selective parser pays to get the same values (the parse is
  lazy, so not iterating would time nothing).
* **ours** — ``parse_exposition(text, keep)`` with ``keep`` the detected engine's adapter ``wants`` (DCGM
  captures have no adapter and keep nothing): the values the advisor reads, with every line still validated.

Both sides parse the same ``str`` (no I/O, no decoding). Ours parses the same text at every call: after
the warm-up every kept series is in the parser's series cache (its labels parsed once), as at a target's later
scrapes. They are timed side by side in one run: each round times a batch of full parses then a batch of ours (the
order alternating between rounds), so machine noise
hits both alike, and the ratio reported is the **median of the per-round ratios**. The clock is the
process's CPU time by default (``--clock cpu``: time spent descheduled on a shared machine is not counted,
for either side); ``--clock wall`` uses ``time.perf_counter``. Before timing, the result
of ours is checked against prometheus-client's (the bench refuses to report a speed for wrong values), and
one untimed warm-up call builds the adapter's scan plan, as the first scrape of a target does; ``cold µs``
is that first call, shown for information.

**Large pages** (issue 15), generated at run time from the vLLM 0.33 capture in DIR (never stored) into a
temporary directory and measured beside the captures:

* ``gen-vllm-dp<N>`` — the capture's families with every series of ``engine="0"`` repeated for ``engine="0"``
  … ``"N-1"`` (vLLM V1 with ``--data-parallel-size N`` exposes each DP engine's series on one page);
* ``gen-vllm-lora<K>`` — the capture with a ``vllm:lora_requests_info`` family of K series inserted
  mid-page (:data:`advisor.engines.vllm.LORA_REQUESTS_INFO`: one series per combination of running and waiting
  adapters seen, never removed; the adapter does not read it).

For each, besides ours and the full parse, the **Python regex floor** is timed the same way:
``REGEX_FLOOR.findall(text)``, one compiled regex returning the lines of the families the vLLM adapter reads
(the same lines ours turns into samples; checked), with no validation and no conversion. Its pattern is
``^(?:NAMES)[{ ].*$`` (multiline), NAMES the adapter's sample names factored by common prefixes (the fastest
form found of a regex that returns those lines alone). The goal is ours ≥ the floor in MB/s on every page
(``ours/floor`` ≥ 1.0): the median over the rounds of each round's ratio, ours and the floor timed back to back
in that round, as the full parse's ratio is (a machine shared with other work slows whole rounds; a ratio of
two medians taken apart mixes rounds run at different speeds). Its least and greatest round are printed beside.

Usage: ``.venv/bin/python bench/parse.py [--rounds N] [--round-ms MS] [--clock cpu|wall] [--no-pages] [DIR]``.
Prints one line per capture and page, the minimum ratio and ``PASS``/``FAIL`` for the ≥ 10× goal, then the
MB/s table of the large pages with the floor and ``PASS``/``FAIL`` for the floor goal; exit status 1 on
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
import gc
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from advisor.engines import detect_engine, get_adapter, vllm
from advisor.sources.exposition import parse_exposition, parse_exposition_full

GOAL = 10.0
FLOOR_GOAL = 1.0
"""Ours ÷ the regex floor, in MB/s, on every large page."""
DP_RANKS = (24, 96)
"""``engine`` label values 0..N-1 of the DP pages (about 1 and 4 MB)."""
LORA_SERIES = (6_500, 24_000)
"""``vllm:lora_requests_info`` series of the LoRA pages (about 1 and 5 MB)."""
CAPTURE_GLOB = "vllm-0.33*.prom"
"""The capture the large pages are built from (``../shared/engine-metrics``)."""


def _factored(names: list[str]) -> str:
    """A regex alternation of ``names`` factored by common prefixes (``["ab", "ac"]`` → ``a(?:b|c)``)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name[:1], []).append(name[1:])
    parts = []
    for head, tails in sorted(groups.items()):
        if not head:
            continue
        rest = [t for t in tails if t]
        inner = _factored(rest) if rest else ""
        if rest and "" in tails:
            inner = f"(?:{inner})?"
        parts.append(re.escape(head) + inner)
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


REGEX_FLOOR = re.compile(rf"^{_factored(sorted(vllm.WANTED_SAMPLE_NAMES))}[{{ ].*$", re.MULTILINE)
"""The Python regex floor: ``REGEX_FLOOR.findall(text)`` → the lines of the families the vLLM adapter reads."""


def _blocks(text: str) -> list[list[str]]:
    """The lines of ``text`` per family: a block starts at each ``# HELP`` (or a ``# TYPE`` not after its HELP)."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        head = line.startswith("# HELP ") or (
            line.startswith("# TYPE ") and not (blocks and blocks[-1][-1].split(" ")[2:3] == line.split(" ")[2:3])
        )
        if head or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def dp_page(capture: str, ranks: int) -> str:
    """``capture`` with each family's ``engine="0"`` series repeated for ``engine="0"`` … ``"ranks-1"``."""
    out: list[str] = []
    for block in _blocks(capture):
        samples = [line for line in block if not line.startswith("#")]
        ranked = [line for line in samples if 'engine="0"' in line]
        out += [line for line in block if line.startswith("#")]
        out += [line for line in samples if 'engine="0"' not in line]
        for r in range(ranks):
            out += [line.replace('engine="0"', f'engine="{r}"') for line in ranked]
    return "\n".join(out) + "\n"


def lora_page(capture: str, series: int) -> str:
    """``capture`` with a ``vllm:lora_requests_info`` family of ``series`` series (distinct adapter combinations
    of 200 adapters, ``max_lora`` 8) inserted between its families, halfway down the page."""
    rnd = random.Random(15)
    adapters = [f"lora-{i}" for i in range(200)]
    name, labels = vllm.LORA_REQUESTS_INFO, vllm.LORA_INFO_LABELS
    lines = [f"# HELP {name} Running stats on lora requests.", f"# TYPE {name} gauge"]
    seen: set[tuple[str, str]] = set()
    while len(seen) < series:
        combo = (",".join(rnd.sample(adapters, rnd.randint(0, 8))), ",".join(rnd.sample(adapters, rnd.randint(0, 4))))
        if combo not in seen:
            seen.add(combo)
            body = ",".join(f'{k}="{v}"' for k, v in zip(labels, ("8", *combo), strict=True))
            lines.append(f"{name}{{{body}}} {1.7344241e9 + len(seen) * 0.25!r}")
    blocks = _blocks(capture)
    half = len(blocks) // 2
    return "\n".join([*(x for b in blocks[:half] for x in b), *lines, *(x for b in blocks[half:] for x in b)]) + "\n"


def generate_pages(directory: Path, out: Path) -> list[Path]:
    """Write the large pages built from ``directory``'s vLLM 0.33 capture into ``out``; ``[]`` without it."""
    found = sorted(directory.glob(CAPTURE_GLOB))
    if not found:
        return []
    capture = found[0].read_text()
    pages = {f"gen-vllm-dp{n}.prom": dp_page(capture, n) for n in DP_RANKS}
    pages |= {f"gen-vllm-lora{k}.prom": lora_page(capture, k) for k in LORA_SERIES}
    for name, text in pages.items():
        (out / name).write_text(text)
    return [out / name for name in pages]


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
    floor: Callable[[], object] | None = None  # the regex floor (large pages only)
    n_floor: int = 0

    @property
    def megabytes(self) -> float:
        """The page's size in MB (10⁶ bytes of UTF-8)."""
        return len(self.text.encode()) / 1e6


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

    cap = Capture(
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
    if path.name.startswith("gen-vllm-"):

        def floor(text: str = text) -> object:
            return REGEX_FLOOR.findall(text)

        if len(REGEX_FLOOR.findall(text)) != cap.kept:
            raise SystemExit(f"{path.name}: the regex floor returns other lines than ours reads")
        cap.floor, cap.n_floor = floor, calls_for(floor, round_ms / 1000)
    return cap


def time_round(cap: Capture, r: int) -> tuple[float, float, float]:
    """One round: a batch of full parses, a batch of ours and (large pages) a batch of the regex floor, the order
    alternating with ``r``; the floor's seconds are ``nan`` for a capture."""
    t_floor = math.nan
    if r % 2:
        t_ours = batch_time(cap.ours, cap.n_ours)
        if cap.floor is not None:
            t_floor = batch_time(cap.floor, cap.n_floor)
        t_full = batch_time(cap.full, cap.n_full)
    else:
        t_full = batch_time(cap.full, cap.n_full)
        if cap.floor is not None:
            t_floor = batch_time(cap.floor, cap.n_floor)
        t_ours = batch_time(cap.ours, cap.n_ours)
    return t_full, t_ours, t_floor


def floor_table(rows: list[tuple[str, float, int, list[float], list[float]]]) -> list[str]:
    """The large pages' lines: ``(name, MB, kept, ours s per round, floor s per round)`` → the median MB/s of
    both, and ours ÷ floor as the median of the rounds' ratios (with the least and greatest); the names whose
    median ratio is below :data:`FLOOR_GOAL`."""
    print(
        f"{'large page':26} {'MB':>6} {'kept':>6} {'ours MB/s':>10} {'floor MB/s':>10} {'ours/floor':>10}"
        f" {'min':>6} {'max':>6}"
    )
    below: list[str] = []
    for name, mb, kept, ours, floor in rows:
        ratios = [f / o for o, f in zip(ours, floor, strict=True)]
        ratio = statistics.median(ratios)
        if ratio < FLOOR_GOAL:
            below.append(name)
        print(
            f"{name:26} {mb:6.2f} {kept:6d} {mb / statistics.median(ours):10.0f} "
            f"{mb / statistics.median(floor):10.0f} {ratio:9.2f}× {min(ratios):5.2f}× {max(ratios):5.2f}×"
        )
    return below


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
    parser.add_argument("--no-pages", action="store_true", help="measure the captures only (no large pages)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pages", help=argparse.SUPPRESS)  # a worker: the directory of the generated pages
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    paths = sorted(Path(args.directory).glob("*.prom"))
    if not paths:
        print(f"no captures in {args.directory}", file=sys.stderr)
        return 2
    if args.worker:
        return worker(paths + (sorted(Path(args.pages).glob("gen-*.prom")) if args.pages else []), args.round_ms)
    with tempfile.TemporaryDirectory(prefix="advisor-parse-pages-") as tmp:
        pages = [] if args.no_pages else generate_pages(Path(args.directory), Path(tmp))
        if not args.no_pages and not pages:
            print(f"no {CAPTURE_GLOB} capture in {args.directory}: no large pages", file=sys.stderr)
        args.pages = tmp if pages else None
        if args.baseline:
            return compare(args, paths)
        return measure(args, paths + pages)


def measure(args: argparse.Namespace, paths: list[Path]) -> int:
    """This tree alone: one line per capture and page (ours vs the full parse), then the large pages' MB/s."""
    header = (
        f"{'capture':62} {'lines':>5} {'kept':>5} {'engine':>13} "
        f"{'full µs':>9} {'ours µs':>8} {'cold µs':>8} {'ratio':>6} {'min':>6} {'max':>6}"
    )
    print(header)
    worst = float("inf")
    failed: list[str] = []
    large: list[tuple[str, float, int, list[float], list[float]]] = []
    for path in paths:
        cap = prepare(path, args.round_ms)
        if cap is None:
            print(f"{path.name}: values differ from prometheus-client; no speed reported", file=sys.stderr)
            return 1
        # the heap as the daemon keeps it: what is alive after a cycle (here: the warmed-up caches and plans) is
        # frozen (advisor.heap.CycleHeap), so a collection scans only what arrived since; without it, every
        # page's samples promoted to the oldest generation trigger full passes over the caches of every capture
        # measured so far, which land in whichever side's round they fall in
        gc.collect()
        gc.freeze()
        ratios: list[float] = []
        full_times: list[float] = []
        ours_times: list[float] = []
        floor_times: list[float] = []
        for r in range(args.rounds):  # interleaved, alternating which side goes first
            t_full, t_ours, t_floor = time_round(cap, r)
            full_times.append(t_full)
            ours_times.append(t_ours)
            floor_times.append(t_floor)
            ratios.append(t_full / t_ours)
        if cap.floor is not None:
            large.append((path.stem, cap.megabytes, cap.kept, ours_times, floor_times))
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
    below: list[str] = []
    if large:
        print()
        below = floor_table(large)
        verdict = "FAIL" if below else "PASS"
        print(f"ours ÷ the regex floor in MB/s (goal ≥ {FLOOR_GOAL:g}× on every large page): {verdict}")
        for name in below:
            print(f"  below the floor: {name}")
    return 0 if not failed and not below else 1


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
                     "cold": c.cold, "full_samples": c.full_samples, "mb": c.megabytes}
                    for c in caps
                ],
            }  # fmt: skip
        timed = [time_round(c, request["round"]) for c in caps]
        return {"full": [t[0] for t in timed], "ours": [t[1] for t in timed], "floor": [t[2] for t in timed]}

    serve(handle)
    return 0


def compare(args: argparse.Namespace, paths: list[Path]) -> int:
    """``--baseline REF``: both sides in worker subprocesses, rounds interleaved; one line per capture."""
    from baseline import REPO, Worker, baseline_tree, describe, dirty, ratio_stats

    began = time.perf_counter()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--round-ms", str(args.round_ms)]
    cmd += ["--clock", args.clock, str(Path(args.directory).resolve())]
    cmd += ["--pages", args.pages] if args.pages else []
    sides = ("baseline", "current")
    with baseline_tree(args.baseline) as tree:
        workers = {"baseline": Worker("baseline", cmd, tree), "current": Worker("current", cmd, REPO)}
        try:
            info = {side: w.ask({"op": "info"}) for side, w in workers.items()}
            full: dict[str, list[list[float]]] = {side: [] for side in sides}
            ours: dict[str, list[list[float]]] = {side: [] for side in sides}
            floors: dict[str, list[list[float]]] = {side: [] for side in sides}
            for r in range(args.rounds):  # baseline, current, current, baseline, …
                for side in sides if r % 2 == 0 else sides[::-1]:
                    answer = workers[side].ask({"op": "round", "round": r})
                    full[side].append(answer["full"])
                    ours[side].append(answer["ours"])
                    floors[side].append(answer.get("floor", [math.nan] * len(answer["ours"])))
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
    large: list[tuple[str, float, int, float, float, float]] = []
    for i, cap in enumerate(info["current"]["captures"]):
        base_cap = info["baseline"]["captures"][i]
        o = {side: [round_[i] for round_ in ours[side]] for side in sides}
        f = {side: [round_[i] for round_ in full[side]] for side in sides}
        med, lo, hi = ratio_stats(o["current"], o["baseline"])
        full_med, _, _ = ratio_stats(f["current"], f["baseline"])
        speedup = {side: statistics.median(a / b for a, b in zip(f[side], o[side], strict=True)) for side in sides}
        meds.append(med)
        noise.append(full_med)
        floor_times = [round_[i] for round_ in floors["current"]]
        if cap["name"].startswith("gen-") and not any(map(math.isnan, floor_times)):
            large.append(
                (Path(cap["name"]).stem, cap["mb"], cap["kept"], statistics.median(o["baseline"]),
                 statistics.median(o["current"]), statistics.median(floor_times))
            )  # fmt: skip
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
    below: list[str] = []
    if large:
        print()
        print(
            f"{'large page':26} {'MB':>6} {'kept':>6} {'base MB/s':>10} {'cur MB/s':>10} {'floor MB/s':>10} "
            f"{'cur/floor':>10} {'base/floor':>10}"
        )
        for name, mb, kept, base, cur, floor in large:
            if floor / cur < FLOOR_GOAL:
                below.append(name)
            print(
                f"{name:26} {mb:6.2f} {kept:6d} {mb / base:10.0f} {mb / cur:10.0f} {mb / floor:10.0f} "
                f"{floor / cur:9.2f}× {floor / base:9.2f}×"
            )
        print(f"current ÷ the regex floor in MB/s (goal ≥ {FLOOR_GOAL:g}× on every large page): "
              f"{'FAIL' if below else 'PASS'}")  # fmt: skip
        for name in below:
            print(f"  below the floor: {name}")
    return 0 if verdict == "PASS" and not below else 1


if __name__ == "__main__":
    sys.exit(main())
