"""Issue 19, "``plan`` says no when the engine would say no": a configuration vLLM refuses to start exits 3
(acceptance 4), the table and ``--json`` say ``feasible: false`` with the ``reason``, and the refusal names the
single changes that fit, each found by re-running the capacity pass.

Expected values are hand arithmetic from the models' published shapes, not from running the advisor:

* Llama-3.1-70B: 70.55 B parameters × 2 bytes (bf16) = 141.1 GB = 131.4 GiB of weights
  (https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct). One H100 SXM has 79.15 GiB; even at
  ``--gpu-memory-utilization 0.95`` only 75.2 GiB may be used, so no utilization, KV dtype or context length
  fixes it; AWQ int4 (~0.5 byte per linear weight: ~35 GiB + ~2 GiB embeddings) leaves ~30 GiB of pool.
* Llama-3.1-8B: 8.03 B × 2 = 16.06 GB = 14.96 GiB of weights; KV per token 32 layers × 8 KV heads × 128 × 2 (K, V)
  × 2 bytes = 131,072 B (128 KiB), so one 131,072-token request needs 16 GiB of KV. An L4 (22.07 GiB) at 0.9
  gives 19.86 GiB: 19.86 − 14.96 − ~1.3 (activations, CUDA context) ≈ 3.6 GiB of pool ≈ 29,000 tokens. fp8 KV
  doubles that (~58,000 tokens < 131,072), AWQ weights (~5.5 GiB) leave ~13 GiB ≈ 106,000 tokens (< 131,072):
  neither fits; TP 2 halves the KV per GPU (64 KiB) and the weights (7.5 GiB), leaving ~10.9 GiB ≈ 178,000 tokens.
"""

from __future__ import annotations

import json

from tests.inprocess import CliRun, run_cli

LLAMA_70B = ["--model", "meta-llama/Llama-3.1-70B-Instruct"]
LLAMA_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct"]


def _plan(*args: str) -> CliRun:
    return run_cli("plan", *args)


def _changes(out: dict[str, object]) -> list[str]:
    fixes = out["fixes"]
    assert isinstance(fixes, list)
    return [f["change"] for f in fixes]


def test_weights_that_do_not_fit_exit_3_and_say_so_in_json() -> None:
    r = _plan(*LLAMA_70B, "--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False
    assert "weights need 131.4" in out["reason"]  # 141.1 GB = 131.4 GiB by hand
    changes = _changes(out)
    assert "--quantization awq" in changes
    assert any(c.startswith("--tp ") for c in changes)
    # 131.4 GiB > 0.95 × 79.15 GiB: no dial of the same GPU and checkpoint fits
    assert not any(c.split()[0] in ("--gpu-memory-utilization", "--kv-cache-dtype", "--max-model-len") for c in changes)
    assert "Traceback" not in r.stderr and "refused:" in r.stderr


def test_llamacpp_weights_beyond_the_gpu_exit_3_with_fixes_that_fit_the_gpu() -> None:
    """Breaker 13: 70B bf16 (129.5 GiB as llama.cpp counts it) on one 44.4 GiB L40S exited 0 with an all-GPU TPOT
    and a note. The weights alone exceed the GPU: exit 3, feasible false. Its fixes are those whose weights and
    32,768 f16 cells (10 GiB: 80 layers × 8 KV heads × 128 × 2 × 2 B × 32,768) fit 44.4 GiB: TP 2 leaves 64.7 GiB of
    weights per GPU and a 4-bit checkpoint ~37 GiB + 10 GiB, neither fits; 4 GPUs do (32.4 + 2.5 GiB)."""
    r = _plan(*LLAMA_70B, "--gpu", "L40S", "--max-model-len", "32768", "--engine", "llamacpp", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False and "alone exceed" in out["reason"], out["reason"]
    changes = _changes(out)
    assert "--tp 4" in changes, changes
    assert not any(c.split()[0] in ("--gpu-memory-utilization", "--max-model-len", "--quantization") for c in changes)
    assert "--tp 2" not in changes


def test_llamacpp_weights_and_cells_beyond_the_gpu_exit_3_as_the_fixes_judge_them() -> None:
    """Breaker 14: Qwen2.5-32B Q8_0 at TP 2 on L4s, 65,536 f16 cells over 4 slots: 15.8 GiB of weights + 8 GiB of
    cells per GPU (64 layers × 8 KV heads × 128 × 2 × 2 B × 65,536 ÷ 2 GPUs) exceed 22.07 GiB. It printed a TPOT,
    exit 0, while the fixes of the same model at TP 1 did not count TP 2 as fitting. Exit 3 now, with TP 4."""
    r = _plan("--engine", "llamacpp", "--model", "Qwen/Qwen2.5-32B-Instruct", "--gpu", "L4", "--max-model-len", "8192",
              "--gguf-file-type", "Q8_0", "--ctx-size", "65536", "--parallel", "4", "--tp", "2", "--json")  # fmt: skip
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False and "do NOT fit" in out["reason"], out["reason"]
    assert "--tp 4" in _changes(out)


def test_weights_that_do_not_fit_say_so_in_the_table() -> None:
    r = _plan(*LLAMA_70B, "--gpu", "H100-SXM", "--max-model-len", "8192")
    assert r.returncode == 3
    rows = dict(line.split(None, 1) for line in r.stdout.splitlines() if line.startswith(("feasible", "smallest")))
    assert rows["feasible"].startswith("NO: ") and "weights need" in rows["feasible"]
    assert "`--quantization awq`" in rows["smallest"]


def test_a_pool_that_cannot_hold_one_max_length_request_exits_3_with_the_fixes_that_fit() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "L4", "--max-model-len", "131072", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False and "cannot hold one request of max-model-len 131,072" in out["reason"]
    assert out["max_concurrency"] < 1  # the pass's own keys stay
    tokens = out["kv_cache_tokens"]
    assert 3.0 * 2**30 / 131_072 < tokens < 4.0 * 2**30 / 131_072  # ~3.6 GiB of pool at 128 KiB a token
    fixes = {f["flag"]: f for f in out["fixes"]}
    assert "--kv-cache-dtype" not in fixes and "--quantization" not in fixes  # ~58k and ~106k tokens: too few
    assert fixes["--tp"]["value"] == 2
    mml = fixes["--max-model-len"]["value"]
    assert mml % 1024 == 0 and tokens - 1024 < mml <= tokens  # the longest multiple of 1,024 the pool holds
    assert [f["flag"] for f in out["fixes"]].index("--max-model-len") < [f["flag"] for f in out["fixes"]].index(
        "--tp"
    )  # smallest change first: the same GPU before a second one


def test_a_fix_it_names_does_start() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "L4", "--max-model-len", "131072", "--json")
    fix = next(f for f in json.loads(r.stdout)["fixes"] if f["flag"] == "--max-model-len")
    again = _plan(*LLAMA_8B, "--gpu", "L4", "--max-model-len", str(fix["value"]), "--json")
    assert again.returncode == 0
    out = json.loads(again.stdout)
    assert out["feasible"] is True and out["reason"] is None and out["fixes"] == []


def test_a_configuration_that_starts_exits_0_and_says_feasible() -> None:
    r = _plan(*LLAMA_8B, "--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["feasible"] is True
