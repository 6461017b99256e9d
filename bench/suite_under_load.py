"""The whole test suite, run several times in a row while other processes keep every core busy (issue 19,
acceptance 2: timed assertions count cycles or allow jitter, so a loaded machine must not fail them).

The load: ``stress-ng --cpu N`` (Debian's ``stress-ng``) when it is on ``PATH``, else N Python processes each
spinning ``while True: pass`` — either way one busy process per usable CPU (``--busy``, default: the CPUs this
process may use, :func:`advisor.workers.usable_cpus`), started before the first run and killed after the last.

Each run is the README's test command's last step, ``python -m pytest`` with the repository's own ``addopts``
(``-n auto``: one test worker per usable CPU), plus ``-p no:cacheprovider`` so that runs do not reorder each other.
Prints per run its wall time, pytest's summary line, the 1-minute load average at its end and where its whole
output was written (the system's temporary folder); exits 1 when any
run failed. Extra arguments after ``--`` go to pytest (e.g. ``-- -m integration``).

Usage: ``.venv/bin/python bench/suite_under_load.py [--runs 2] [--busy N] [-- PYTEST-ARGS...]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from advisor.workers import usable_cpus

REPO = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^=* ?([0-9]+ (?:passed|failed|error).*) in [0-9.]+s")


def start_load(busy: int) -> list[subprocess.Popen[bytes]]:
    """``busy`` CPU-bound processes (one ``stress-ng`` with ``busy`` workers, or ``busy`` Python loops)."""
    if shutil.which("stress-ng"):
        return [subprocess.Popen(["stress-ng", "--cpu", str(busy), "--quiet"], stdout=subprocess.DEVNULL)]
    loop = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(loop) for _ in range(busy)]


def run_suite(extra: list[str], log: Path) -> tuple[int, float, str]:
    """One pytest run, its whole output written to ``log``: (exit status, wall seconds, pytest's summary line or
    "no summary")."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    log.write_text(proc.stdout + proc.stderr)
    lines = [m.group(1) for line in proc.stdout.splitlines() if (m := SUMMARY.match(line))]
    failed = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    for line in failed:
        print(f"    {line}", flush=True)
    return proc.returncode, wall, lines[-1] if lines else "no summary"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, extra = args[:at], args[at + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="suite runs in a row (default 2)")
    parser.add_argument("--busy", type=int, default=usable_cpus().cpus, help="busy processes (default: one per CPU)")
    ns = parser.parse_args(args)
    load = start_load(ns.busy)
    tool = "stress-ng" if shutil.which("stress-ng") else "python busy loops"
    print(f"load: {ns.busy} busy CPU worker(s) ({tool}) on {os.cpu_count()} CPU(s)", flush=True)
    worst = 0
    try:
        for i in range(1, ns.runs + 1):
            log = Path(tempfile.gettempdir()) / f"suite-under-load-{os.getpid()}-{i}.log"
            code, wall, summary = run_suite(extra, log)
            worst = max(worst, 1 if code else 0)
            print(
                f"run {i}: exit {code}, {wall:.0f} s, {summary}; load average {os.getloadavg()[0]:.1f}; output {log}",
                flush=True,
            )
    finally:
        for p in load:
            p.kill()
            p.wait()
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
