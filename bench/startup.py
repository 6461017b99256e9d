"""Start-up time of the ``capacity-advisor`` command: a fresh interpreter per run, wall time, median of N runs.

Three commands are timed, each in a new process (``subprocess.run``, output to ``/dev/null``, wall clock
``time.perf_counter`` around the whole run: interpreter start, imports, work, exit):

* ``floor`` — ``python -c pass`` with the same interpreter and environment: what any Python command pays
  (the venv's ``site``, its ``.pth`` files), shown so the figures above it can be read as the advisor's own;
* ``help`` — ``capacity-advisor --help`` (goal: median under 80 ms);
* ``plan`` — ``capacity-advisor plan --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-SXM --max-model-len 8192``
  (goal: median under 150 ms).

``capacity-advisor`` is the console script installed beside the interpreter running this script
(``.venv/bin/capacity-advisor``, the entry point ``advisor.cli:main``); ``--via module`` runs
``python -m advisor.cli`` instead. ``PYTHONPATH`` is set to the tree measured, so the console script imports that
tree's ``advisor`` (checked once per tree: the run fails if ``advisor`` comes from anywhere else, e.g. the
editable install of another checkout).

Two conditions, each measured (``--bytecode``, default ``both``):

* ``source`` — ``PYTHONDONTWRITEBYTECODE=1``, as on this machine's shared venv (the environment sets it): the
  standard library and site-packages load from their bytecode caches, but every ``advisor`` module imported is
  compiled from its source at each start (unless the tree has ``__pycache__`` folders of its own). The issue's
  figures (``--help`` 175 ms, ``plan`` 376 ms) were taken so;
* ``bytecode`` — ``PYTHONPYCACHEPREFIX`` set to a temporary folder filled by one untimed run of each command
  first: every module loads from bytecode, as from a ``pip install``-ed package (pip compiles at install).

Each round runs every command once, in an order that rotates between rounds, so machine noise is spread over all
of them. Prints per command the median, min and max in ms, the median above the floor, the median CPU time of
the process (user + system: less sensitive than wall time to waiting for a core on a loaded machine, for
information) and ``PASS``/``FAIL`` of the wall-time medians against the goals; exit status 1 on ``FAIL``.

``--baseline REF`` (e.g. ``--baseline main``) also measures git ref REF, checked out into a temporary
``git worktree`` (``bench/baseline.py``; removed at the end): each round runs each command on both trees,
alternating which goes first (baseline, current, then current, baseline, …). Per command it prints both medians,
the **median of the per-round ratios current ÷ baseline** with their min and max, and the speed-up; the floor's
ratio (the same interpreter on both sides) shows the noise of the run.

Usage: ``.venv/bin/python bench/startup.py [--runs 20] [--via script|module] [--bytecode source|bytecode|both]
[--baseline REF]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from baseline import REPO, baseline_tree, describe, dirty, env_for, ratio_stats

CONDITIONS = ("source", "bytecode")

PLAN_ARGS = ("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192")
GOALS_MS = {"help": 80.0, "plan": 150.0}
"""Issue 15, acceptance 5: the median of 20 runs of each command, milliseconds."""


def commands(via: str) -> dict[str, list[str]]:
    """The timed commands by name: ``floor``, ``help``, ``plan`` (argv lists).

    Raises:
        SystemExit: ``via`` is ``script`` and no ``capacity-advisor`` is installed beside this interpreter.
    """
    if via == "script":
        script = Path(sys.executable).parent / "capacity-advisor"
        if not script.exists():
            raise SystemExit(f"no console script at {script}: install the package, or use --via module")
        advisor = [str(script)]
    else:
        advisor = [sys.executable, "-m", "advisor.cli"]
    return {
        "floor": [sys.executable, "-c", "pass"],
        "help": [*advisor, "--help"],
        "plan": [*advisor, *PLAN_ARGS],
    }


def side_env(tree: Path, condition: str, cache: Path) -> dict[str, str]:
    """The environment of a run: ``PYTHONPATH`` = ``tree``; ``source``: ``PYTHONDONTWRITEBYTECODE=1``;
    ``bytecode``: caches read and written under ``cache`` (``PYTHONPYCACHEPREFIX``), none under the tree."""
    env = env_for(tree)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if condition == "source":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def check_tree(tree: Path) -> None:
    """Fail unless ``PYTHONPATH`` = ``tree`` makes the interpreter import ``tree``'s ``advisor``.

    Raises:
        SystemExit: ``advisor`` came from elsewhere.
    """
    code = "import advisor, pathlib; print(pathlib.Path(advisor.__file__).resolve())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env_for(tree), cwd=tree, check=True
    )
    where = Path(done.stdout.strip())
    if not where.is_relative_to(tree.resolve()):
        raise SystemExit(f"PYTHONPATH={tree} imports advisor from {where}: the measure would not be of {tree}")


def run_once(argv: Sequence[str], tree: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, ``getrusage(RUSAGE_CHILDREN)``) of one run of ``argv`` in a
    fresh process (environment ``env``, cwd ``tree``).

    Raises:
        SystemExit: the command failed (its stderr is shown).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tree, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr[-1500:]}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


Times = dict[str, dict[str, list[float]]]
"""Seconds by tree (``current``, ``baseline``), then command."""


def measure(cmds: dict[str, list[str]], trees: dict[str, Path], runs: int, condition: str) -> tuple[Times, Times]:
    """One untimed run of each command on each tree, then ``runs`` rounds; in each, every command once on every
    tree, orders rotating. Wall seconds and CPU seconds."""
    names = list(cmds)
    sides = list(trees)
    times: Times = {s: {n: [] for n in names} for s in sides}
    cpu: Times = {s: {n: [] for n in names} for s in sides}
    with tempfile.TemporaryDirectory(prefix="advisor-startup-pyc-") as cache:
        envs = {side: side_env(trees[side], condition, Path(cache)) for side in sides}
        for name in names:
            for side in sides:
                run_once(cmds[name], trees[side], envs[side])
        for r in range(runs):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                for side in sides if r % 2 == 0 else sides[::-1]:
                    wall, used = run_once(cmds[name], trees[side], envs[side])
                    times[side][name].append(wall)
                    cpu[side][name].append(used)
    return times, cpu


def ms(values: Sequence[float]) -> str:
    """``median (min–max)`` of ``values`` (seconds), in milliseconds."""
    return f"{statistics.median(values) * 1e3:7.1f} ({min(values) * 1e3:6.1f}–{max(values) * 1e3:6.1f})"


def verdicts(times: dict[str, list[float]], condition: str) -> list[str]:
    """``FAIL`` lines for the commands whose median misses its goal (empty: all pass)."""
    return [
        f"{name} ({condition}): median {statistics.median(times[name]) * 1e3:.1f} ms, goal under {goal:g} ms"
        for name, goal in GOALS_MS.items()
        if statistics.median(times[name]) * 1e3 >= goal
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; print the table and the verdict. Returns 1 when a goal is missed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument(
        "--via",
        choices=["script", "module"],
        default="script",
        help="script: the venv's capacity-advisor console script (default); module: python -m advisor.cli",
    )
    parser.add_argument("--baseline", metavar="REF", help="also measure git ref REF, side by side (see above)")
    parser.add_argument(
        "--bytecode",
        choices=[*CONDITIONS, "both"],
        default="both",
        help="source: advisor compiled at each start; bytecode: cached (see above); default both",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    cmds = commands(args.via)
    conditions = CONDITIONS if args.bytecode == "both" else (args.bytecode,)
    print(f"interpreter: {sys.executable} (Python {sys.version.split()[0]})")
    print(f"advisor command: {' '.join(cmds['help'][:-1])}; {args.runs} runs each, fresh process, wall time")
    failed: list[str] = []
    if args.baseline is None:
        check_tree(REPO)
        print(f"tree: {REPO}{dirty()}")
        for condition in conditions:
            wall, cpu = measure(cmds, {"current": REPO}, args.runs, condition)
            times = wall["current"]
            print(f"-- {condition}")
            print(f"{'command':<8} {'median ms (min–max)':>24} {'above floor':>12} {'cpu ms':>7}  goal")
            floor = statistics.median(times["floor"])
            for name, values in times.items():
                goal = f"< {GOALS_MS[name]:g} ms" if name in GOALS_MS else ""
                above = f"{(statistics.median(values) - floor) * 1e3:9.1f} ms" if name != "floor" else ""
                used = statistics.median(cpu["current"][name]) * 1e3
                print(f"{name:<8} {ms(values):>24} {above:>12} {used:7.1f}  {goal}")
            failed += verdicts(times, condition)
    else:
        with baseline_tree(args.baseline) as tree:
            check_tree(REPO)
            check_tree(tree)
            print(f"baseline: {describe(args.baseline)}")
            print(f"current:  {REPO}{dirty()}")
            for condition in conditions:
                both, cpu = measure(cmds, {"baseline": tree, "current": REPO}, args.runs, condition)
                print(f"-- {condition}")
                print(
                    f"{'command':<8} {'baseline ms (min–max)':>24} {'current ms (min–max)':>24} "
                    f"{'current÷baseline (min–max)':>28} {'speed-up':>9} {'cpu ms base/cur':>16}  goal"
                )
                for name in cmds:
                    base, cur = both["baseline"][name], both["current"][name]
                    med, lo, hi = ratio_stats(cur, base)
                    goal = f"< {GOALS_MS[name]:g} ms" if name in GOALS_MS else "(same on both: the noise)"
                    used = "/".join(
                        f"{statistics.median(cpu[side][name]) * 1e3:.1f}" for side in ("baseline", "current")
                    )
                    print(
                        f"{name:<8} {ms(base):>24} {ms(cur):>24} {med:14.3f} ({lo:5.2f}–{hi:5.2f}) "
                        f"{statistics.median(base) / statistics.median(cur):8.2f}× {used:>16}  {goal}"
                    )
                failed += verdicts(both["current"], condition)
    for line in failed:
        print(f"FAIL {line}")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
