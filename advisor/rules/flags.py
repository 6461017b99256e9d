"""The engine flag (or config key) for each dial: read from the engine catalog.

The flag tables are engine facts and live in :mod:`advisor.engines.flags` (each engine's catalog entry
holds its table, :attr:`advisor.engines.catalog.CatalogEntry.flags`); rules call :func:`flag_for`.
"""

from __future__ import annotations

from advisor.engines.flags import (
    FLAGS,
    draft_length_flag,
    flag_for,
    mtp_speculation,
    speculation_available,
    token_pin_flag,
    vllm_legacy_ngram_flag,
)

__all__ = [
    "FLAGS",
    "draft_length_flag",
    "flag_for",
    "mtp_speculation",
    "speculation_available",
    "token_pin_flag",
    "vllm_legacy_ngram_flag",
]
