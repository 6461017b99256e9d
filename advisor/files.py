"""Bounded reads of the files an operator points the advisor at (config, secrets, file_sd, model config.json,
state and outbox): regular files only, capped in size, UTF-8.

A path that is a FIFO, a socket or a device would block a read forever or return endless bytes, freezing the
daemon's loop (and with it SIGTERM handling); such paths are refused at open, without blocking.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["MAX_FILE_BYTES", "is_stream", "read_stream_capped", "read_text_capped"]

MAX_FILE_BYTES: Final = 16 * 1024 * 1024
"""Config, model config.json and file_sd files larger than this are refused (a config is kilobytes)."""


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB" if n >= 1024 else f"{n} bytes"


def read_text_capped(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """Read a UTF-8 text file of at most ``limit`` bytes.

    The file is opened non-blocking and checked with ``fstat`` before any read, so a FIFO without a writer
    fails at once instead of hanging.

    Raises:
        OSError: unreadable, missing, not a regular file (a directory, FIFO, socket or device), or larger than
            ``limit``; ``strerror`` says which.
        UnicodeDecodeError: not UTF-8.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {_size(limit)}")
    return data.decode("utf-8")


def is_stream(name: str) -> bool:
    """Whether ``name`` is standard input (``-``, ``/dev/stdin``) or a pipe this process inherited (``/dev/fd/N``:
    a shell's process substitution, ``<(kubectl get cm …)``, whose writer runs beside it): what a one-shot command
    such as ``check-config`` reads to its end. A named FIFO elsewhere is not one: it may have no writer, and is
    refused at open like every other non-regular path (:func:`read_text_capped`)."""
    if name in ("-", "/dev/stdin"):
        return True
    if not name.startswith(("/dev/fd/", "/proc/self/fd/")):
        return False
    try:
        return stat.S_ISFIFO(os.stat(name).st_mode)
    except OSError:
        return False


def read_stream_capped(stream: BinaryIO, limit: int = MAX_FILE_BYTES) -> str:
    """Read a UTF-8 stream (standard input, a pipe) to its end, at most ``limit`` bytes.

    Blocks until the writer closes it: for one-shot commands only, never in the daemon's loop.

    Raises:
        OSError: unreadable, or more than ``limit`` bytes (``strerror`` says which).
        UnicodeDecodeError: not UTF-8.
    """
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {_size(limit)}")
    return data.decode("utf-8")
