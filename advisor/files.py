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
from typing import Final

__all__ = ["MAX_FILE_BYTES", "read_text_capped"]

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
