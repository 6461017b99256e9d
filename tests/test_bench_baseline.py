"""Issue 12, acceptance 6: ``bench/parse.py --baseline REF`` and ``bench/fleet.py --baseline REF`` measure REF and
this tree in one run — each side importing its own ``advisor`` — and leave no worktree behind.

Smoke sizes only (a stand-in exposition, one or two rounds): the figures are not judged here, the mechanics are.
Needs ``git`` and this checkout's history (skipped otherwise, e.g. from an unpacked sdist).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from advisor.standin import StandInEngine, StandInServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent


def _worktrees() -> list[str]:
    out = subprocess.run(["git", "-C", str(REPO), "worktree", "list", "--porcelain"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.startswith("worktree ")]


@pytest.fixture
def git_checkout() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and this repository's history (REPO/.git)")
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", "HEAD"]).returncode:
        pytest.skip("no HEAD commit to measure against")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_parse_baseline_measures_both_trees_side_by_side(git_checkout: None, tmp_path: Path) -> None:
    server = StandInServer(StandInEngine())
    try:
        (tmp_path / "standin-vllm.prom").write_bytes(generate_latest(server.registry))
    finally:
        server.server_close()
    before = _worktrees()
    done = _run(["bench/parse.py", str(tmp_path), "--baseline", "HEAD", "--rounds", "2", "--round-ms", "2"])
    assert done.returncode in (0, 1), done.stderr  # 1 = a verdict of FAIL, which smoke sizes may give
    out = done.stdout
    base = re.search(r"^baseline: .*\(advisor from (\S+)\)$", out, re.M)
    cur = re.search(r"^current: .*\(advisor from (\S+)\)$", out, re.M)
    assert base and cur, out
    assert Path(cur.group(1)) == REPO / "advisor"
    assert Path(base.group(1)).name == "advisor" and not Path(base.group(1)).is_relative_to(REPO)
    assert not Path(base.group(1)).exists()  # the temporary worktree is gone …
    assert _worktrees() == before  # … and unregistered
    (line,) = [x for x in out.splitlines() if x.startswith("standin-vllm.prom")]
    assert re.search(r"\d+\.\d{3}× +\d+\.\d\d +\d+\.\d\d ", line), line  # ours current ÷ baseline, min, max
    assert re.search(r"^ours current ÷ baseline: geometric mean \d+\.\d{3}×", out, re.M), out


def test_fleet_baseline_runs_each_side_in_its_own_process(git_checkout: None) -> None:
    before = _worktrees()
    done = _run(["bench/fleet.py", "--baseline", "HEAD", "--sizes", "10", "--repeats", "1", "--cycles", "1"])
    assert done.returncode in (0, 1), done.stderr
    out = done.stdout
    m = re.search(r"^advisor: baseline from (\S+), current from (\S+)$", out, re.M)
    assert m, out
    assert Path(m.group(2)) == REPO / "advisor" and not Path(m.group(1)).is_relative_to(REPO)
    assert _worktrees() == before
    (line,) = [x for x in out.splitlines() if x.strip().startswith("10 targets:")]
    assert re.search(r"CPU ms/target [\d.]+ / [\d.]+ = \d+\.\d{3}×", line), line
    assert re.search(r"up 10 / 10 = 1\.000×", line), line  # every target answered on both sides
