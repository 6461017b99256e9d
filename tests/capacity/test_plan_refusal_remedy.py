"""Issue 19, "a refusal names the smallest fix that works": the ``reason`` of a refused ``plan`` says what to
change from the fixes actually found (:func:`advisor.capacity.fixes.fixes`), never a fixed list. Seen: Llama-3.1-70B
in bf16 on one RTX 4090 said "raise tensor_parallel_size, quantize, or use a larger GPU" while the only single
change that fits is ``--tp 8`` (quantizing alone does not).

By hand (https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct: 70.55 B parameters; an RTX 4090 has 24 GB,
23.58 GiB as CUDA reports it, https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/): at
``--gpu-memory-utilization`` 0.9 (even 0.95: 22.4 GiB) 21.22 GiB may be used. bf16 weights are 70.55e9 × 2 B =
131.4 GiB; fp8 65.7 GiB and AWQ int4 ≈ 35 GiB on one GPU: neither fits. TP 2, 4, 8 give 65.7, 32.9, 16.4 GiB of
bf16 per GPU: only TP 8 fits. Llama-3.1-405B (405.85 B parameters) in bf16 is 756 GiB: 94.5 GiB per GPU at TP 8,
≈ 47 GiB per GPU as AWQ at TP 1 (and fp8 at TP 1 378 GiB): no single change fits.
"""

from __future__ import annotations

import json

import pytest

from tests.inprocess import run_cli

ON_A_4090 = ["plan", "--gpu", "RTX-4090", "--max-model-len", "8192"]


def test_the_reason_names_only_the_fix_that_was_found() -> None:
    r = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-70B-Instruct", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert [f["change"] for f in out["fixes"]] == ["--tp 8"]  # the fixes key stays
    assert out["reason"].endswith("may be used; `--tp 8` fits"), out["reason"]
    assert "quantiz" not in out["reason"].split("may be used")[1]
    assert "refused: " + out["reason"] in r.stderr  # stderr says the same reason


def test_the_table_and_stderr_say_the_same_fix_once() -> None:
    r = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-70B-Instruct")
    assert r.returncode == 3
    assert "quantize" not in r.stdout + r.stderr and "larger GPU" not in r.stdout + r.stderr
    rows = dict(line.split(None, 1) for line in r.stdout.splitlines() if line.startswith(("feasible", "smallest")))
    assert "`--tp 8` fits" in rows["smallest"]
    # one fix: not "each alone" (walkthrough, 2026-12-04)
    assert rows["smallest"].split(None, 1)[1] == "`--tp 8` fits (the capacity pass re-run with it)"
    assert "`--tp 8`" not in rows["feasible"]  # the problem row; the fix is said in its own row


def test_each_fix_also_says_vllms_own_flag() -> None:
    # plan's --tp is this command's short flag; vLLM's is --tensor-parallel-size (a fresh user took `--tp 8` for the
    # engine's, 2026-12-06): the JSON carries engine_flag, the table a row of them
    r = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-70B-Instruct", "--json")
    assert [f["engine_flag"] for f in json.loads(r.stdout)["fixes"]] == ["--tensor-parallel-size 8"]
    t = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-70B-Instruct")
    rows = [line for line in t.stdout.splitlines() if line.strip().startswith("as vllm flags")]
    assert rows and rows[0].split("flags", 1)[1].strip() == "--tensor-parallel-size 8", t.stdout


def test_a_refusal_on_another_engine_says_that_engines_flag() -> None:
    # TGI shards with --num-shard (text-generation-launcher), not vLLM's --tensor-parallel-size: the same refusal
    # (70B bf16 on one RTX 4090) on TGI's accounting
    r = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-70B-Instruct", "--engine", "tgi", "--json")
    assert r.returncode == 3, r.stderr
    assert [f["engine_flag"] for f in json.loads(r.stdout)["fixes"]] == ["--num-shard 8"]


def test_a_tgi_context_beyond_its_batch_tokens_is_a_refusal_with_tgis_fixes() -> None:
    # TGI's router refuses to start when --max-total-tokens exceeds the max_batch_total_tokens its warm-up inferred
    # (backends/v3/src/lib.rs: `if shard_max_total_tokens > max_supported_batch_total_tokens { return
    # Err(V3Error::NotEnoughMemory(..)) }`). Llama-3.1-8B bf16 on an L4 (22.03 GiB as CUDA reports it): 14.99 GiB of
    # weights leave ~50,000 tokens of 128 KiB; 131,072 cannot be one request. A fresh user's plan exited 0
    r = run_cli("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4", "--max-model-len", "131072",
                "--engine", "tgi", "--json")  # fmt: skip
    assert r.returncode == 3, (r.returncode, r.stderr)
    out = json.loads(r.stdout)
    assert out["feasible"] is False and "TGI refuses to start" in out["reason"], out["reason"]
    flags = [f["engine_flag"] for f in out["fixes"]]
    assert "--num-shard 2" in flags and any(f.startswith("--max-total-tokens ") for f in flags), flags
    for f in out["fixes"]:
        if f["engine_flag"].startswith("--max-total-tokens "):
            assert int(f["value"]) <= f["kv_cache_tokens"]  # the cap the fix names fits the pool it computed


def test_no_fp8_kv_fix_on_an_amd_part_without_fp8() -> None:
    # breaker 12: the daemon withheld fp8 KV on an MI210 (vllm#3981: half the throughput without FP8 hardware) while
    # plan's refusal offered it. Qwen2.5-14B at 0.5 of an MI210 cannot hold 24,576 tokens; on an MI300X (FP8) fp8 KV
    # is a fix
    args = ("plan", "--model", "Qwen/Qwen2.5-14B-Instruct", "--max-model-len", "24576", "--gpu-memory-utilization",
            "0.5", "--max-num-seqs", "16", "--json")  # fmt: skip
    mi210 = json.loads(run_cli(*args, "--gpu", "mi210").stdout)
    assert mi210["feasible"] is False
    assert all(f["flag"] != "--kv-cache-dtype" for f in mi210["fixes"]), mi210["fixes"]


def test_with_no_fix_found_the_reason_promises_none() -> None:
    r = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-405B-Instruct", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["fixes"] == []
    said = out["reason"].split("may be used; ")[1]
    assert said.startswith("no single change tried fits ("), said
    assert "` fits" not in said


@pytest.mark.parametrize(
    ("engine", "budget"),
    [
        # SGLang: mem_fraction_static (0.844 here, its default table) × the memory free before loading
        ("sglang", "mem_fraction_static"),
        # TGI: cuda_memory_fraction (default 1.0) × the GPU
        ("tgi", "cuda_memory_fraction"),
        # TensorRT-LLM: the GPU's free memory
        ("trtllm", "free memory"),
    ],
)
def test_every_engine_that_would_refuse_exits_3_with_the_fix_found(engine: str, budget: str) -> None:
    """The same refusal on SGLang, TGI and TensorRT-LLM: each budget is at most the RTX 4090's 23.58 GiB, so bf16
    at TP 2 (65.7 GiB) and 4 (32.9 GiB) does not fit and TP 8 (16.4 GiB, under SGLang's 0.844 × 19.48 too) does
    — exit 3, ``feasible: false`` and ``--tp 8``, as for vLLM (on 4dfbec4 these exited 2 with no JSON and a fixed
    "raise TP, quantize, or use a larger GPU")."""
    r = run_cli(*ON_A_4090, "--model", "meta-llama/Llama-3.1-70B-Instruct", "--engine", engine, "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False and budget in out["reason"], out
    assert [f["change"] for f in out["fixes"]] == ["--tp 8"]
    assert out["reason"].endswith("`--tp 8` fits") and "quantize" not in out["reason"], out["reason"]


# --- breaker 31: fixes beside memory other processes hold, and only flags the engine reads ---------------------

LLAMA_8B_H100 = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]


def _fixes(*extra: str) -> tuple[int, dict[str, object]]:
    r = run_cli(*LLAMA_8B_H100, *extra, "--json")
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize("pool", [[], ["--num-gpu-blocks-override", "25000"]])
def test_memory_held_by_others_is_fixed_by_a_lower_budget(pool: list[str]) -> None:
    """10 GiB held on a 79.15 GiB H100 leaves 69.15 GiB free; vLLM checks ``utilization × total`` ≤ free at start:
    0.87 × 79.15 = 68.86 ≤ 69.15, 0.88 × 79.15 = 69.65 > 69.15, so 0.87 is the highest that starts — found, where
    the search tried only higher budgets and said "no single change fits" (a fixed pool of 25,000 blocks, 48.8 GiB
    beside ~15 GiB of weights, fits what the others leave, and is fixed the same way)."""
    code, out = _fixes("--gpu-memory-used-by-others-gib", "10", *pool)
    assert code == 3
    assert [(f["flag"], f["value"]) for f in out["fixes"]][:1] == [("--gpu-memory-utilization", 0.87)]  # type: ignore[union-attr]
    fixed = run_cli(*LLAMA_8B_H100, "--gpu-memory-used-by-others-gib", "10", *pool, "--gpu-memory-utilization", "0.87")
    assert fixed.returncode == 0, fixed.stderr


def test_a_fixed_pool_beyond_what_others_leave_is_refused() -> None:
    """30,000 blocks (58.59 GiB) beside ~15 GiB of weights fit the GPU's 79.15 GiB but not the 69.15 GiB 10 GiB of
    other processes leave: the cache cannot be allocated, whatever the budget."""
    code, out = _fixes(
        "--gpu-memory-used-by-others-gib", "10", "--num-gpu-blocks-override", "30000", "--gpu-memory-utilization", "0.8"
    )
    assert code == 3
    assert "69.15 GiB other processes leave of the GPU's 79.15 GiB" in str(out["reason"])


def test_llamacpp_fixes_count_the_memory_others_hold_and_name_its_own_flags() -> None:
    """llama.cpp, Llama-3.1-8B (14.96 GiB of f16 weights less the 0.98 GiB token-embedding table llama.cpp keeps in
    host memory: 13.98 GiB on the GPU) with an 8,192-cell f16 cache (8,192 × 131,072 B = 1.00 GiB)
    beside 64.5 GiB held: 79.48 > 79.15 GiB. q8_0 halves the cache (0.50 GiB: 78.98 fits), 5,120 cells (0.625 GiB:
    79.1 fits), two GPUs halve both; ``--gpu-memory-utilization`` (which llama.cpp does not read) and FP8/AWQ
    checkpoints (it loads GGUF files) are neither tried nor named. Each fix, re-run, starts."""
    code, out = _fixes("--engine", "llamacpp", "--gpu-memory-used-by-others-gib", "64.5")
    assert code == 3
    assert [f["change"] for f in out["fixes"]] == [  # type: ignore[union-attr]
        "--kv-cache-dtype q8_0",
        "--max-model-len 5120",
        "--tp 2",
    ]
    base = [*LLAMA_8B_H100, "--engine", "llamacpp", "--gpu-memory-used-by-others-gib", "64.5"]
    for change in out["fixes"]:  # type: ignore[union-attr]
        r = run_cli(*base, *str(change["change"]).split())
        assert r.returncode == 0, (change, r.stderr)
    _, none = _fixes("--engine", "llamacpp", "--gpu-memory-used-by-others-gib", "78")
    assert "no single change tried fits (--kv-cache-dtype q8_0, a shorter --max-model-len, --tp up to 8)" in str(
        none["reason"]
    )


def test_a_tensorrt_llm_refusal_names_no_vllm_flag() -> None:
    code, out = _fixes("--engine", "trtllm", "--gpu-memory-used-by-others-gib", "78")
    assert code == 3
    assert "--gpu-memory-utilization" not in str(out["reason"]) and "--max-num-seqs" not in str(out["reason"])
