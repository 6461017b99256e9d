"""``--baseline REF`` for the bench scripts: the same measurement on a git ref and on this tree, side by side.

:func:`baseline_tree` checks REF out (detached) into a temporary ``git worktree`` and removes it at the end
(also on errors and Ctrl-C). Each side runs in its own Python subprocess with ``PYTHONPATH`` set to its tree, so
it imports that tree's ``advisor`` package (checked: :func:`check_import` fails the worker when ``advisor``
comes from anywhere else, e.g. an editable install of another checkout). The measuring code is this tree's
bench script in both subprocesses — only the package under test differs.

:class:`Worker` is a persistent subprocess answering one JSON line per request (for interleaved rounds: A B A B
…); :func:`run_once` runs a subprocess for one measurement (a fresh process, for memory figures).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def describe(ref: str) -> str:
    """``ref`` as ``<short hash> <subject>`` (exits with git's message when it names no commit)."""
    return _git("log", "-1", "--format=%h %s", f"{ref}^{{commit}}", "--")[:72]


def dirty() -> str:
    """``" + uncommitted changes"`` when this tree differs from HEAD (tracked files), else ``""``."""
    return " + uncommitted changes" if _git("status", "--porcelain", "--untracked-files=no") else ""


@contextmanager
def baseline_tree(ref: str) -> Iterator[Path]:
    """A detached checkout of ``ref`` in a temporary ``git worktree``; removed (and pruned) on exit.

    Raises:
        SystemExit: ``ref`` names no commit, or git could not add the worktree (git's message).
    """
    verify = ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"]
    if subprocess.run(verify, stdout=subprocess.DEVNULL).returncode:
        raise SystemExit(f"--baseline {ref!r}: no such commit in {REPO}")
    tmp = Path(tempfile.mkdtemp(prefix="advisor-baseline-"))
    tree = tmp / "tree"
    try:
        _git("worktree", "add", "--detach", "--quiet", str(tree), ref)
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)


def env_for(tree: Path) -> dict[str, str]:
    """This process's environment with ``PYTHONPATH`` = ``tree`` alone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    return env


def check_import(tree: str) -> str:
    """Import ``advisor`` and check it is ``tree``'s; return its path.

    Raises:
        SystemExit: ``advisor`` was imported from elsewhere.
    """
    import advisor

    where = Path(advisor.__file__).resolve()
    if not where.is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"worker for {tree} imported advisor from {where}; PYTHONPATH did not take effect")
    return str(where.parent)


class Worker:
    """A subprocess (``cmd``, ``PYTHONPATH`` = ``tree``) answering one JSON line per JSON request line."""

    def __init__(self, name: str, cmd: Sequence[str], tree: Path) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env_for(tree), cwd=tree
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request``, return the answer.

        Raises:
            RuntimeError: the worker exited (its stderr went to ours).
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} worker exited with {self.proc.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Ask the worker to stop; kill it if it does not within 10 s."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                self.proc.kill()
                self.proc.wait()


def serve(handle: Any, out: TextIO = sys.stdout) -> None:
    """Worker side of :class:`Worker`: answer each request line on stdin with ``handle(request)``."""
    for line in sys.stdin:
        out.write(json.dumps(handle(json.loads(line))) + "\n")
        out.flush()


def run_once(cmd: Sequence[str], tree: Path) -> dict[str, Any]:
    """Run ``cmd`` with ``PYTHONPATH`` = ``tree``; return the JSON object on its last stdout line.

    Raises:
        RuntimeError: it failed (with the end of its stderr).
    """
    done = subprocess.run(list(cmd), capture_output=True, text=True, env=env_for(tree), cwd=tree)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} in {tree} exited with {done.returncode}: {done.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def ratio_stats(current: Sequence[float], baseline: Sequence[float]) -> tuple[float, float, float]:
    """Per-round ratios current ÷ baseline (rounds paired in order): median, min, max."""
    ratios = [c / b for c, b in zip(current, baseline, strict=True) if b > 0]
    if not ratios:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(ratios), min(ratios), max(ratios)
