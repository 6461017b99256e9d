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


def test_a_block_override_beyond_the_gpu_is_refused() -> None:
    """``--num-gpu-blocks-override`` sizes the pool whatever the profile; blocks (16 tokens × 128 KiB per token for
    Llama-3.1-8B in bf16 = 2 MiB each) that cannot sit beside the weights fail to allocate at start-up: refused,
    exit 3 (breaker 31: 100,000 blocks planned with exit 0 and a warning)."""
    r = run_cli(*BASE, "--num-gpu-blocks-override", "100000")
    # 100,000 blocks x 2 MiB = 195.3 GiB on a 79.15 GiB H100
    assert r.returncode == 3 and "195.31 GiB" in r.stderr and "cannot be allocated" in r.stderr
    # 1,000 blocks = 1.95 GiB: fits
    fits = run_cli(*BASE, "--num-gpu-blocks-override", "1000")
    assert fits.returncode == 0 and "cannot be allocated" not in fits.stderr


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


@pytest.mark.parametrize("method", ["awq", "gptq", "fp8"])
def test_llamacpp_refuses_a_checkpoint_quantization_it_cannot_load(method: str) -> None:
    """Breaker 31: ``--engine llamacpp --quantization awq`` planned AWQ's 4.36 GiB of weights, exit 0; llama.cpp
    loads GGUF files only. Refused naming the flag that sizes a GGUF file."""
    r = run_cli(*BASE, "--engine", "llamacpp", "--quantization", method)
    assert r.returncode == 2
    assert f"--quantization {method}" in r.stderr and "--gguf-file-type" in r.stderr
    gguf = run_cli(*BASE, "--engine", "llamacpp", "--gguf-file-type", "Q4_K_M")
    assert gguf.returncode == 0, gguf.stderr


@pytest.mark.parametrize("ratio", ["1", "1.5", "0", "nan"])
def test_target_ratio_says_one_range_and_keeps_it(ratio: str) -> None:
    """Breaker 31: argparse said "at most 1", then ``--target-ratio 1`` was refused as "must be below 1"."""
    r = run_cli(*BASE, "--ttft", "2", "--tpot", "0.1", "--target-ratio", ratio)
    assert r.returncode == 2
    assert "must be a fraction in (0, 1)" in r.stderr and "at most" not in r.stderr
