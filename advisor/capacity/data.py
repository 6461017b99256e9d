"""The capacity model's package data: ``advisor/data`` (``gpus.csv``, ``models.json``, ``instances.csv``), shipped
in the package beside its modules.

Read as files next to this module rather than through :mod:`importlib.resources`, whose import (with its
readers, ``tempfile`` and ``zipfile``) costs more at every start of ``capacity-advisor plan`` than the pass itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

DATA_DIR: Final = Path(__file__).resolve().parent.parent / "data"
"""The folder of the package data, ``advisor/data``."""


def read_data(name: str) -> str:
    """The UTF-8 text of ``advisor/data/<name>`` (``"gpus.csv"``).

    Raises:
        OSError: the file is missing (a broken install).
    """
    return (DATA_DIR / name).read_text(encoding="utf-8")


ISO_DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}$")
"""A price table's ``price_as_of``: an ISO 8601 calendar date, ``YYYY-MM-DD``."""
