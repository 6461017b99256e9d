"""An fp8 KV cache the engine refuses on the GPU is refused by the capacity pass, so no rule proposes it:
vLLM 0.24+ below compute capability 8.0 (only Triton attention, which refuses fp8 below 8.9: vllm-project/vllm#47549)
and TensorRT-LLM below 8.9 (its support matrix lists no FP8 on Ampere)."""

from __future__ import annotations

import pytest

from advisor import conventions as c
from advisor.capacity.generation import kv_cache_dtype_problems
from advisor.capacity.models import get_preset
from advisor.rules.common import pool_turns
from advisor.rules.turns import turn
from tests.inprocess import run_cli
from tests.rules.helpers import ctx, ev

T4, A10, L40S = (7, 5), (8, 6), (8, 9)


@pytest.mark.parametrize(
    ("dtype", "cc", "version", "engine", "refused"),
    [
        ("fp8", T4, None, "vllm", True),  # the current release
        ("fp8_e4m3", T4, "0.24.0", "vllm", True),
        ("fp8", T4, "0.23.1", "vllm", False),  # before the floor: not established
        ("auto", T4, None, "vllm", False),
        ("fp8", A10, None, "vllm", False),  # FlashInfer runs it from 8.0
        ("fp8", None, None, "vllm", False),  # an unknown GPU refuses nothing
        ("fp8", A10, None, "trtllm", True),
        ("fp8", L40S, None, "trtllm", False),
        ("fp8", T4, None, "sglang", False),  # not established here
    ],
)
def test_which_fp8_caches_are_refused(
    dtype: str, cc: tuple[int, int] | None, version: str | None, engine: str, refused: bool
) -> None:
    problems = kv_cache_dtype_problems(dtype, cc, version, engine)
    assert bool(problems) is refused, problems


def test_no_rule_offers_fp8_kv_on_a_turing_gpu() -> None:
    model = get_preset("Qwen/Qwen2.5-1.5B-Instruct")
    dep = ctx(gpu="t4", model=model, max_model_len=4096, dtype="float16", compute_capability=T4)
    assert turn(dep.inputs, c.DIAL_KV_CACHE_DTYPE, "fp8") is None
    turns = {cand.turn.dial for cand in pool_turns(ev(dep=dep, requests_running=8, requests_waiting=4))}
    assert c.DIAL_KV_CACHE_DTYPE not in turns
    # on an A10 the same turn stands
    a10 = ctx(gpu="a10", model=model, max_model_len=4096, compute_capability=A10)
    assert turn(a10.inputs, c.DIAL_KV_CACHE_DTYPE, "fp8") is not None


def test_plan_refuses_an_fp8_cache_on_a_t4_naming_the_flag() -> None:
    r = run_cli(
        "plan",
        "--model",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "--gpu",
        "t4",
        "--dtype",
        "float16",
        "--kv-cache-dtype",
        "fp8",
        "--max-model-len",
        "4096",
    )
    assert r.returncode != 0
    assert "--kv-cache-dtype" in r.stderr and "47549" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("cc", "version", "refused"),
    [
        (A10, "0.11.0", True),  # vllm-project/vllm#26431 (RTX 3090, 8.6): Triton's fp8e4nv needs 8.9
        ((8, 0), "0.11.2", True),  # A100
        ((8, 0), "0.12.0", False),  # a priority list that validates each backend: not established, not refused
        ((8, 0), None, False),  # the current release: likewise
        (A10, "0.10.2", False),  # the oracle sent an fp8 cache back to V0, which serves it
        (L40S, "0.11.0", False),  # Ada has fp8e4nv
        ((9, 0), "0.11.0", False),  # FlashAttention 3 takes it
        ((12, 0), "0.11.0", False),  # Blackwell desktop: Triton at 12.0 ≥ 8.9
        (None, "0.11.0", False),
    ],
)
def test_a_turn_to_an_fp8_cache_must_start_with_the_default_attention_backend(
    cc: tuple[int, int] | None, version: str | None, refused: bool
) -> None:
    """vLLM 0.11 serves an fp8 cache on an 8.x GPU other than SM 9.0 by Triton attention, whose fp8 store needs
    SM 8.9 (``platforms/cuda.py`` ``get_attn_backend_cls``; "type fp8e4nv not supported in this architecture" on an
    RTX 3090, vllm-project/vllm#26431). A running fp8 cache there is not refused (it runs, so a FlashInfer backend
    serves it), but no turn proposes one."""
    from advisor.capacity.generation import kv_cache_dtype_turn_problems

    assert bool(kv_cache_dtype_turn_problems("fp8", cc, version, "vllm")) is refused
    assert not kv_cache_dtype_problems("fp8", cc, version, "vllm") or cc is None or cc < (8, 0)
    assert not kv_cache_dtype_turn_problems("auto", cc, version, "vllm")


def test_no_rule_offers_fp8_kv_on_an_ampere_gpu_on_vllm_0_11() -> None:
    model = get_preset("Qwen/Qwen2.5-1.5B-Instruct")

    def kv_turns(version: str) -> set[str]:
        dep = ctx(gpu="a10", model=model, max_model_len=4096, compute_capability=A10, engine_version=version)
        return {cand.turn.dial for cand in pool_turns(ev(dep=dep, requests_running=8, requests_waiting=4))}

    assert c.DIAL_KV_CACHE_DTYPE not in kv_turns("0.11.0")
    assert c.DIAL_KV_CACHE_DTYPE in kv_turns("0.10.2")
