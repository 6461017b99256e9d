"""The fp8 KV-cache turn in the spelling the deployment's engine release takes: SGLang took only ``auto`` and
``fp8_e5m2`` until sgl-project/sglang PR #2786 (merged 2025-01-08, released in 0.4.2); on an older release
``--kv-cache-dtype fp8_e4m3`` is refused by argparse and the server does not start (field-state round 75, sglang
PR #1204 on 0.2.14)."""

from __future__ import annotations

import pytest

from advisor import conventions as c
from advisor.engines.flags import flag_for


@pytest.mark.parametrize(
    ("engine", "version", "flag"),
    [
        ("sglang", "0.2.14", "--kv-cache-dtype fp8_e5m2"),
        ("sglang", "0.4.1.post7", "--kv-cache-dtype fp8_e5m2"),
        ("sglang", "0.4.2", "--kv-cache-dtype fp8_e4m3"),
        ("sglang", "0.5.4", "--kv-cache-dtype fp8_e4m3"),
        ("sglang", None, "--kv-cache-dtype fp8_e4m3"),  # unstated: the current releases' spelling
        ("sglang", "not-a-version", "--kv-cache-dtype fp8_e4m3"),
        ("vllm", "0.4.0", "--kv-cache-dtype fp8"),  # vLLM's own "fp8" at every release
    ],
)
def test_the_fp8_cache_is_spelled_as_the_release_takes_it(engine: str, version: str | None, flag: str) -> None:
    assert flag_for(engine, c.DIAL_KV_CACHE_DTYPE, "fp8", version) == flag


def test_other_dials_ignore_the_version() -> None:
    assert flag_for("sglang", c.DIAL_MAX_NUM_SEQS, 64, "0.2.14") == flag_for("sglang", c.DIAL_MAX_NUM_SEQS, 64)
