"""``plan``: a flag the engine does not read is refused, naming it (issue 19: "flags that do not apply to a mode
are refused, not ignored"; issue 17 had them noted and ignored).

Found by a new-user walkthrough: ``plan --engine tgi --dp 2`` printed "--dp does not apply to --engine tgi;
ignored" and then doubled the pool (988,606 tokens, 120.68 sequences); ``--ctx-size`` with vLLM was dropped
without a word. Each case now exits 2 naming the flag; without it the pass runs.
"""

from __future__ import annotations

import pytest

from tests.inprocess import run_cli

BASE = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]


@pytest.mark.parametrize(
    ("engine", "extra", "flag"),
    [
        ("tgi", ["--dp", "2"], "--dp"),
        ("llamacpp", ["--dp", "2"], "--dp"),
        # llama.cpp splits layers over the GPUs --tp counts; TGI shards by tensor only: neither has stages
        ("llamacpp", ["--pp", "2"], "--pp"),
        ("tgi", ["--pp", "2"], "--pp"),
        ("vllm", ["--ctx-size", "4096"], "--ctx-size"),
        ("vllm", ["--mem-fraction-static", "0.5"], "--mem-fraction-static"),
        ("vllm", ["--max-loras", "4"], "--max-loras"),
        ("sglang", ["--enable-lora"], "--enable-lora"),
        # breaker 13: the negated and zero forms passed silently (they compared equal to a store_true default)
        ("sglang", ["--no-enable-prefix-caching"], "--enable-prefix-caching"),
        ("tgi", ["--no-enable-chunked-prefill"], "--enable-chunked-prefill"),
        ("trtllm", ["--cpu-offload-gb", "0"], "--cpu-offload-gb"),
    ],
)
def test_a_flag_the_engine_does_not_read_is_refused(engine: str, extra: list[str], flag: str) -> None:
    assert run_cli(*BASE, "--engine", engine, "--json").returncode == 0
    r = run_cli(*BASE, "--engine", engine, *extra, "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert flag in r.stderr and ("does not apply to --engine" in r.stderr or "without --enable-lora" in r.stderr)


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


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_pipeline_stages_are_read_where_the_engine_has_them(engine: str) -> None:
    r = run_cli(*BASE, "--engine", engine, "--pp", "2", "--json")
    assert r.returncode == 0, r.stderr


def test_llamacpp_parallel_and_max_num_seqs_that_disagree_are_refused() -> None:
    """Breaker 13: both are llama.cpp's --parallel; plan used 4 of '--parallel 4 --max-num-seqs 8' without a word,
    where check-config refuses the pair. The same value is one setting."""
    base = [*BASE, "--engine", "llamacpp", "--parallel", "4"]
    r = run_cli(*base, "--max-num-seqs", "8", "--json")
    assert r.returncode == 2 and r.stdout == "" and "contradicts --max-num-seqs 8" in r.stderr, r.stderr
    assert run_cli(*base, "--max-num-seqs", "4", "--json").returncode == 0
