"""``capacity-advisor`` run in the test process, through the console script's own entry point.

``python -m advisor.cli ARGS`` is ``sys.exit(advisor.cli.main(ARGS))``: a subprocess adds only the interpreter's
start-up and the imports (~1 s a call on a loaded machine). Tests that ask the CLI a question (``once``,
``check-config``, ``plan --json`` …) and read its exit code and output call :func:`run_cli`, which runs the same
``main`` with the same argv. The entry point itself (``-m advisor.cli``, the console script, signals, exit on a
broken pipe) keeps its subprocess tests (tests/test_cli.py, tests/test_demo.py, the daemon tests).
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from dataclasses import dataclass

from advisor.cli import main


@dataclass(frozen=True)
class CliRun:
    """One ``capacity-advisor`` run: its exit code and what it printed (the fields of
    ``subprocess.CompletedProcess`` the tests read)."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*argv: str, timeout: float = 180.0) -> CliRun:
    """Run ``capacity-advisor ARGV`` in this process: :func:`advisor.cli.main` with stdout and stderr captured
    (``main`` sends its log handler to the captured stderr too). argparse's exit (bad flags, ``--help``) becomes
    the exit code, as in a subprocess; any other exception propagates and fails the test (a subprocess would have
    printed the traceback and exited 1). ``main`` runs in a worker thread so that a run that does not stop within
    ``timeout`` seconds fails the test, as ``subprocess.run(timeout=…)`` did (these sub-commands install no signal
    handler; ``run`` and ``demo`` do, and keep their subprocess tests). The root logger's handlers and level,
    which ``main`` replaces, are restored afterwards.

    Raises:
        AssertionError: the run did not finish within ``timeout`` seconds.
    """
    out, err = io.StringIO(), io.StringIO()
    result: list[int] = []
    raised: list[BaseException] = []

    def target() -> None:
        try:
            result.append(main(list(argv)))
        except SystemExit as exc:
            result.append(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        except BaseException as exc:  # re-raised in the test's thread
            raised.append(exc)

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            worker = threading.Thread(target=target, name="capacity-advisor", daemon=True)
            worker.start()
            worker.join(timeout)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    if worker.is_alive():
        raise AssertionError(f"capacity-advisor {' '.join(argv)} did not finish within {timeout:g} s")
    if raised:
        raise raised[0]
    return CliRun(result[0], out.getvalue(), err.getvalue())
