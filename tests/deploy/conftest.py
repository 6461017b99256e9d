"""Shared paths and helpers for the deploy/ tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def need_binary(name: str) -> str:
    """The path of ``name`` on PATH, or skip the test saying what is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (scripts/install-system-deps installs it)")
    return path
