"""SGLang's ``max_total_num_tokens`` against published start-up logs (issue 16, kind H).

SGLang (``model_runner.py`` ``ModelRunner.profile_max_num_token``, 0.3.6–0.5.9 alike)::

    rest = available_after_load − total_gpu_memory × (1 − mem_fraction_static)
         = total_gpu_memory × mem_fraction_static − weights
    max_total_num_tokens = rest × 2^30 // cell_size

where ``total_gpu_memory`` is the memory free at the end of ``init_torch_distributed`` (the "Load weight begin.
avail mem" line), not the device total. Before this change the plan multiplied the device total (and, without
a version, took the 0.4.8–0.5.2 default), so each case below came out high (+0.7 % to +27 %). Each expectation
is the engine's own logged number, and the plan must land within 5 % of it. Inputs are those the source states
(model, GPU, TP, fraction or version); where one is inferred the test says which and why.
"""

from __future__ import annotations

import json

import pytest

from advisor.cli import main


def _tokens(capsys: pytest.CaptureFixture[str], *args: str) -> int:
    assert main(["plan", "--engine", "sglang", "--max-model-len", "8192", *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tokens = out["kv_cache_tokens"]
    assert isinstance(tokens, int)
    return tokens


def test_qwen3_235b_fp8_on_4_h100(capsys: pytest.CaptureFixture[str]) -> None:
    """https://github.com/vllm-project/vllm/issues/21348 (2025-07-22):

        launched `Qwen3-235B-A22B-FP8` on both vLLM and SGLang on 4xH100 GPUs
        KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB
        python3 -m sglang.launch_server --model /path/to/Qwen3-235B-A22B-FP8 --tp 4 ... --mem-fraction-static 0.93

    Cell: 94 layers × 1 KV head per rank × 128 × 2 × 2 B = 48,128 B; 367,404 × 24,064 B = 8.23 GiB per K, as
    logged. The preset Qwen3-235B-A22B-Instruct-2507-FP8 has the FP8 checkpoint's shapes (94 layers, 4 KV heads,
    128 experts of 1,536, block-wise fp8); "H100" is taken as the SXM part (both 80 GB parts have one CUDA total).
    Before: 0.93 × 79.15 − 55.16 GiB = 18.45 GiB → 411,557 tokens (+12.0 %).
    """
    fraction = ("--mem-fraction-static", "0.93")
    tokens = _tokens(capsys, "--model", "qwen3-235b-a22b-fp8", "--gpu", "h100", "--tp", "4", *fraction)
    assert tokens == pytest.approx(367_404, rel=0.05)


def test_llama_3_3_70b_on_8_h200_default_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    """https://github.com/sgl-project/sglang/pull/11716 (2025-10-16), description:

        python3 -m sglang.launch_server --model meta-llama/Llama-3.3-70B-Instruct --tp 8 --port 30000 ...
        [TP6] Init torch distributed ends. mem usage=2.01 GB
        [TP5] Load weight begin. avail mem=137.29 GB
        [TP5] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB

    No --mem-fraction-static: the default of that date's server_args.py (≥ 0.5.3 rule) on an H200 at TP 8:
    reserved = 512 + 1.5 × 8192 + 2 × 512 + 8/8 × 1024 = 14,848 MiB → 0.896 of 143,165 MiB. The GPU is inferred
    from the memory line: 137.29 GB free after 2.01 GB of NCCL init fits only the 139.81 GiB H200.
    Cell 80 layers × 1 KV head × 128 × 2 × 2 B = 40,960 B. Before: 0.886 × 139.81 − 16.46 GiB → 2,815,720
    (+0.73 %: the older default's smaller fraction happened to offset the resident memory it ignored).
    """
    tokens = _tokens(capsys, "--model", "llama-3.3-70b", "--gpu", "h200", "--tp", "8")
    assert tokens == pytest.approx(2_795_207, rel=0.005)  # within 0.5 %: the resident memory is this log's


def test_qwq_32b_on_4_l4_sglang_0_4_3(capsys: pytest.CaptureFixture[str]) -> None:
    """https://github.com/didier-durand/llms-in-clouds/blob/3e1df42ab328cb05c90df01ef331a1214ed6e336/docs/sglang.md
    (4 × L4 on g6.12xlarge, ARG SGL_VERSION="0.4.3.post4"):

        python3.12 -m sglang.launch_server --model Qwen/QwQ-32B ... --tensor-parallel-size 4 ...
        server_args=ServerArgs(... mem_fraction_static=0.85, ... tp_size=4, ...)
        [TP0] Init torch distributed ends. mem usage=0.13 GB
        [TP0] Load weight begin. avail mem=21.63 GB
        [TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, mem usage=15.54 GB.
        [TP0] max_total_num_tokens=46611, ...

    0.85 is 0.4.3's TP-only default at TP 4 (no flag given). Inferred: QwQ-32B's architecture is taken as the
    Qwen2.5-32B preset's (Qwen2ForCausalLM, 64 layers, 8 KV heads, hidden 5,120, intermediate 27,648, vocabulary
    152,064: the same checkpoint shapes). Hand check from the log: (6.09 − 21.63 × 0.15) GiB ÷ 65,536 B = 46,620.
    Before: the 0.4.8–0.5.2 default (0.88) × 22.07 − 15.27 GiB → 59,051 tokens (+26.7 %).
    """
    tokens = _tokens(capsys, "--model", "qwen2.5-32b", "--gpu", "l4", "--tp", "4", "--engine-version", "0.4.3.post4")
    assert tokens == pytest.approx(46_611, rel=0.05)


def test_memory_held_by_others_leaves_the_fraction_of_what_is_free(capsys: pytest.CaptureFixture[str]) -> None:
    """What other processes hold is outside ``total_gpu_memory`` (the free memory SGLang reads): 10 GiB held
    costs mem_fraction_static × 10 GiB of pool, 0.9 × 10 GiB ÷ 131,072 B = 73,728 tokens of Llama-3.1-8B."""
    base = ("--model", "llama-3.1-8b", "--gpu", "h100", "--mem-fraction-static", "0.9")
    lost = _tokens(capsys, *base) - _tokens(capsys, *base, "--gpu-memory-used-by-others-gib", "10")
    assert lost == pytest.approx(73_728, abs=1)
