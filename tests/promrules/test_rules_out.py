"""Issue 19 follow-up: ``rules generate --out`` errors name the flag and the path, nothing is written unless every
file can be, and an empty ``--out`` is refused (through the real CLI in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "advisor.example.yaml"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "advisor.cli", "rules", "generate", "--config", str(EXAMPLE), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_an_unmakeable_out_names_the_flag_and_the_path() -> None:
    """Seen: "No such file or directory" alone, naming neither. /proc refuses new entries (proc(5))."""
    r = _cli("--out", "/proc/nope")
    assert r.returncode == 2, r.stderr
    assert "--out /proc/nope: No such file or directory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_folder_that_cannot_take_one_file_gets_none(tmp_path: Path) -> None:
    """``kubernetes`` under --out is a file, so the manifests cannot be written there: before, the top-level
    rule files were written and then it failed. Now none is written and the error names the flag and the path."""
    (tmp_path / "kubernetes").write_text("not a folder\n")
    r = _cli("--out", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert f"--out {tmp_path}: {tmp_path / 'kubernetes'}: " in r.stderr, r.stderr
    assert "nothing was written" in r.stderr
    left = sorted(p.name for p in tmp_path.rglob("*"))
    assert left == ["kubernetes"], left


def test_an_empty_out_is_refused() -> None:
    r = _cli("--out", "")
    assert r.returncode == 2
    assert "--out" in r.stderr and "empty" in r.stderr, r.stderr
