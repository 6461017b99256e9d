"""``plan``: a flag the engine does not read is said to be ignored, and IS ignored.

Found by a new-user walkthrough: ``plan --engine tgi --dp 2`` printed "--dp does not apply to --engine tgi;
ignored" and then doubled the pool (988,606 tokens, 120.68 sequences); ``--ctx-size`` with vLLM was dropped
without a word. Each case compares the pass with the flag to the pass without it (same numbers) and checks the
note and ``ignored_flags``.
"""

from __future__ import annotations

import pytest

from tests.inprocess import run_cli
from tests.rules.helpers import plan

BASE = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]


@pytest.mark.parametrize(
    ("engine", "extra", "flag"),
    [
        ("tgi", ["--dp", "2"], "--dp"),
        ("llamacpp", ["--dp", "2"], "--dp"),
        ("vllm", ["--ctx-size", "4096"], "--ctx-size"),
        ("vllm", ["--mem-fraction-static", "0.5"], "--mem-fraction-static"),
    ],
)
def test_an_ignored_flag_changes_nothing(engine: str, extra: list[str], flag: str) -> None:
    without = plan([*BASE, "--engine", engine, "--json"])
    with_ = plan([*BASE, "--engine", engine, *extra, "--json"])
    assert with_["kv_cache_tokens"] == without["kv_cache_tokens"]
    assert with_["max_concurrency"] == pytest.approx(without["max_concurrency"])
    if engine != "vllm":
        assert flag in with_["ignored_flags"]


def test_a_block_override_beyond_the_gpu_is_warned() -> None:
    """``--num-gpu-blocks-override`` sizes the pool whatever the memory; when the blocks (16 tokens × 128 KiB
    per token for Llama-3.1-8B in bf16 = 2 MiB each) cannot fit beside the weights, vLLM fails at start-up."""

    def stderr(blocks: int) -> str:
        r = run_cli(*BASE, "--num-gpu-blocks-override", str(blocks))
        assert r.returncode == 0, r.stderr
        return r.stderr

    # 100,000 blocks x 2 MiB = 195.3 GiB on a 79.15 GiB H100
    assert "195.31 GiB" in stderr(100_000) and "fails to allocate" in stderr(100_000)
    # 1,000 blocks = 1.95 GiB: fits
    assert "fails to allocate" not in stderr(1_000)
