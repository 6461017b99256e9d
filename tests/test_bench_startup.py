"""Issue 15, acceptance 5: ``bench/startup.py`` times ``capacity-advisor --help`` and ``plan`` in fresh
processes against the ``python -c pass`` floor. Smoke size only (one run of each): the figures are not judged
here (no timing assertion on a shared machine), the mechanics and the table are.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("via", ["script", "module"])
def test_startup_bench_prints_the_floor_help_and_plan(via: str) -> None:
    if via == "script" and not (Path(sys.executable).parent / "capacity-advisor").exists():
        pytest.skip("no capacity-advisor console script beside this interpreter (package not installed)")
    done = subprocess.run(
        [sys.executable, "bench/startup.py", "--runs", "1", "--bytecode", "bytecode", "--via", via],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: a goal missed on a loaded machine, not a broken bench
    lines = done.stdout.splitlines()
    assert lines[-1] in ("PASS", "FAIL")
    rows = {
        m.group(1): float(m.group(2)) for line in lines if (m := re.match(r"(floor|help|plan)\s+([\d.]+) \(", line))
    }
    assert set(rows) == {"floor", "help", "plan"}
    assert all(v > 0 for v in rows.values())
    expected = "capacity-advisor" if via == "script" else "-m advisor.cli"
    assert expected in next(line for line in lines if line.startswith("advisor command:"))


def test_startup_bench_refuses_a_baseline_that_names_no_commit() -> None:
    """A baseline REF that names no commit stops the bench with git's message, before any timing."""
    done = subprocess.run(
        [sys.executable, "bench/startup.py", "--runs", "1", "--baseline", "no-such-ref-xyz"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "no-such-ref-xyz" in done.stderr
