"""``capacity-advisor`` run in the test process, through the console script's own entry point.

``python -m advisor.cli ARGS`` is ``sys.exit(advisor.cli.main(ARGS))``: a subprocess adds only the interpreter's
start-up and the imports (~1 s a call on a loaded machine). Tests that ask the CLI a question (``once``,
``check-config``, ``plan --json`` …) and read its exit code and output call :func:`run_cli`, which runs the same
``main`` with the same argv. The entry point itself (``-m advisor.cli``, the console script, signals, exit on a
broken pipe) keeps its subprocess tests (tests/test_cli.py, tests/test_demo.py, the daemon tests).

Several runs may go at once (from several threads): while any run is active, ``sys.stdout`` and ``sys.stderr`` are
routes that send each write to the buffers of the run whose thread wrote it (``print`` and ``main``'s log handler
both look ``sys.stdout``/``sys.stderr`` up at write time); a write from any other thread (a scrape pool's worker
logging) goes where the stream pointed before.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from dataclasses import dataclass
from typing import TextIO

from advisor.cli import main


@dataclass(frozen=True)
class CliRun:
    """One ``capacity-advisor`` run: its exit code and what it printed (the fields of
    ``subprocess.CompletedProcess`` the tests read)."""

    returncode: int
    stdout: str
    stderr: str


class _Route(io.TextIOBase):
    """A text stream that writes to the calling thread's buffer, else to ``fallback``."""

    def __init__(self, index: int, fallback: TextIO) -> None:
        super().__init__()
        self.index = index
        self.fallback = fallback

    def _target(self) -> TextIO:
        bufs = _BUFFERS.get(threading.get_ident())
        return bufs[self.index] if bufs is not None else self.fallback

    def write(self, s: str) -> int:
        self._target().write(s)
        return len(s)

    def flush(self) -> None:
        self._target().flush()


_LOCK = threading.Lock()
_BUFFERS: dict[int, tuple[io.StringIO, io.StringIO]] = {}
_ACTIVE = 0
_SAVED: tuple[TextIO, TextIO, list[logging.Handler], int] | None = None


def _enter() -> None:
    global _ACTIVE, _SAVED
    with _LOCK:
        if _ACTIVE == 0:
            root = logging.getLogger()
            _SAVED = (sys.stdout, sys.stderr, root.handlers[:], root.level)
            sys.stdout = _Route(0, sys.stdout)  # type: ignore[assignment]
            sys.stderr = _Route(1, sys.stderr)  # type: ignore[assignment]
        _ACTIVE += 1


def _leave() -> None:
    global _ACTIVE, _SAVED
    with _LOCK:
        _ACTIVE -= 1
        if _ACTIVE == 0 and _SAVED is not None:
            sys.stdout, sys.stderr, handlers, level = _SAVED
            root = logging.getLogger()
            root.handlers[:] = handlers
            root.setLevel(level)
            _SAVED = None


def run_cli(*argv: str, timeout: float = 180.0) -> CliRun:
    """Run ``capacity-advisor ARGV`` in this process: :func:`advisor.cli.main` with stdout and stderr captured
    (``main`` sends its log handler to the captured stderr too). argparse's exit (bad flags, ``--help``) becomes
    the exit code, as in a subprocess; any other exception propagates and fails the test (a subprocess would have
    printed the traceback and exited 1). ``main`` runs in a worker thread so that a run that does not stop within
    ``timeout`` seconds fails the test, as ``subprocess.run(timeout=…)`` did (these sub-commands install no signal
    handler; ``run`` and ``demo`` do, and keep their subprocess tests). The root logger's handlers and level,
    which ``main`` replaces, are restored when the last run ends.

    Raises:
        AssertionError: the run did not finish within ``timeout`` seconds.
    """
    out, err = io.StringIO(), io.StringIO()
    result: list[int] = []
    raised: list[BaseException] = []

    def target() -> None:
        _BUFFERS[threading.get_ident()] = (out, err)
        try:
            result.append(main(list(argv)))
        except SystemExit as exc:
            result.append(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        except BaseException as exc:  # re-raised in the caller's thread
            raised.append(exc)
        finally:
            del _BUFFERS[threading.get_ident()]

    _enter()
    try:
        worker = threading.Thread(target=target, name="capacity-advisor", daemon=True)
        worker.start()
        worker.join(timeout)
    finally:
        _leave()
    if worker.is_alive():
        raise AssertionError(f"capacity-advisor {' '.join(argv)} did not finish within {timeout:g} s")
    if raised:
        raise raised[0]
    return CliRun(result[0], out.getvalue(), err.getvalue())
