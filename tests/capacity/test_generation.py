"""Issue 16, kind C: which vLLM engine generation runs, as ``EngineArgs._is_v1_supported_oracle``
(``vllm/engine/arg_utils.py``) decides it, and acceptance 4: ``plan --json`` shows each term of the accounting.

Expected generations are read from the released vLLM wheels (0.8.0 … 0.11.0), not from our code:

* 0.8.0–0.10.1: ``if current_platform.is_cuda() and current_platform.get_device_capability().major < 8:
  _raise_or_fallback(feature_name="Compute Capability < 8.0")``; 0.10.2 dropped it (PRs #23614/#24022,
  "Enable V1 for compute capability < 8.0"); 0.11.0's ``vllm/engine/llm_engine.py`` is V1's (no V0).
* ``--kv-cache-dtype``: 0.8.0–0.8.1 any non-``auto`` falls back; 0.8.2–0.10.1 only FP8 on FlashAttention 3
  (``flash_attn_supports_fp8``: compute capability 9.x) passes, plus capability 10.0 from 0.10.0; 0.10.2 passes
  MLA models (FlashMLA) on any GPU.
* pipeline parallelism: 0.8.3–0.8.5 ``pipeline_parallel_size > 1 and distributed_executor_backend != "ray"``
  falls back; 0.9.1 accepts the default backend.
* ``_raise_or_fallback`` under ``VLLM_USE_V1=1``: ``NotImplementedError("VLLM_USE_V1=1 is not supported with
  …")``; ``VLLM_USE_V1=0``: V0 (``try_v1 = envs.VLLM_USE_V1 or not envs.is_set("VLLM_USE_V1")``).
"""

from __future__ import annotations

import json

import pytest

from advisor.capacity.generation import Accounting, engine_accounting, vllm_accounting
from advisor.capacity.kv import profile_for_version
from advisor.errors import CapacityError
from tests.inprocess import run_cli

T4 = (7, 5)
V100 = (7, 0)
A100 = (8, 0)
L40S = (8, 9)
H100 = (9, 0)
B200 = (10, 0)


def test_a_t4_on_0_8_5_falls_back_to_v0_because_of_its_compute_capability() -> None:
    acc = vllm_accounting("0.8.5", compute_capability=T4)
    assert (acc.engine, acc.generation, acc.version) == ("vllm", "v0", "0.8.5")
    assert acc.reason.startswith("V0: compute capability 7.5 < 8.0")
    assert "_is_v1_supported_oracle" in acc.reason


def test_an_h100_on_0_8_5_runs_v1() -> None:
    acc = vllm_accounting("0.8.5", compute_capability=H100)
    assert acc.generation == "v1"
    assert acc.reason == "V1: vLLM 0.8.5 ≥ 0.8 default"


@pytest.mark.parametrize("capability", [T4, H100, None])
def test_before_0_8_every_gpu_runs_v0(capability: tuple[int, int] | None) -> None:
    acc = vllm_accounting("0.7.3", compute_capability=capability)
    assert acc.generation == "v0"
    assert "0.7.3 < 0.8" in acc.reason


@pytest.mark.parametrize(("version", "capability"), [("0.8.0", V100), ("0.9.2", T4), ("0.10.1.1", T4)])
def test_every_release_from_0_8_to_0_10_1_checks_the_compute_capability(
    version: str, capability: tuple[int, int]
) -> None:
    assert vllm_accounting(version, compute_capability=capability).generation == "v0"


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0", "0.12.0"])
def test_a_t4_runs_v1_from_0_10_2_and_after_v0_was_removed(version: str) -> None:
    acc = vllm_accounting(version, compute_capability=T4)
    assert acc.generation == "v1"


def test_vllm_0_11_has_no_v0_even_when_asked_for_it() -> None:
    acc = vllm_accounting("0.11.0", compute_capability=T4, use_v1=False)
    assert acc.generation == "v1" and "no V0 engine" in acc.reason


def test_vllm_use_v1_1_on_a_t4_is_refused_as_vllm_refuses_it() -> None:
    with pytest.raises(CapacityError, match=r"refuses VLLM_USE_V1=1 .*compute capability 7\.5"):
        vllm_accounting("0.8.5", compute_capability=T4, use_v1=True)


def test_vllm_use_v1_0_forces_v0_before_0_11() -> None:
    acc = vllm_accounting("0.9.2", compute_capability=H100, use_v1=False)
    assert acc.generation == "v0" and "VLLM_USE_V1=0" in acc.reason


@pytest.mark.parametrize(
    ("version", "generation"), [("0.1.0", "v0"), ("0.5.0", "v0"), ("0.6.3.post1", "v0"), ("0.6.4", "v1")]
)
def test_vllm_use_v1_1_before_any_v1_engine_runs_v0(version: str, generation: str) -> None:
    """Breaker 31: ``--vllm-use-v1 1 --engine-version 0.5.0`` planned V1 ("opt-in before 0.8"); releases before 0.6.4
    have no ``vllm/v1`` and ignore the variable (vLLM PR #9289, merged 2024-10-22, first released in 0.6.4)."""
    acc = vllm_accounting(version, compute_capability=H100, use_v1=True)
    assert acc.generation == generation
    if generation == "v0":
        assert "no V1 engine" in acc.reason


def test_a_version_not_given_is_the_current_default() -> None:
    acc = vllm_accounting(None, compute_capability=T4)
    assert (acc.generation, acc.version) == ("v1", None)
    assert acc.reason == "V1: version not given: the current default"


@pytest.mark.parametrize(
    ("version", "capability", "is_mla", "generation"),
    [
        ("0.8.1", H100, False, "v0"),  # any non-auto KV dtype falls back
        ("0.8.5", H100, False, "v1"),  # FA3 FP8 on Hopper
        ("0.9.2", A100, False, "v0"),  # FA2: no FP8
        ("0.9.2", B200, False, "v0"),  # FA3 is Hopper-only
        ("0.10.0", B200, False, "v1"),  # is_device_capability(100)
        ("0.10.2", L40S, False, "v0"),  # FlashAttention default, no FP8 on Ada
        ("0.10.2", A100, True, "v1"),  # MLA: FlashMLA takes an FP8 cache
    ],
)
def test_an_fp8_kv_cache_falls_back_where_the_release_cannot_attend_over_it(
    version: str, capability: tuple[int, int], is_mla: bool, generation: str
) -> None:
    acc = vllm_accounting(version, compute_capability=capability, kv_cache_dtype="fp8", is_mla=is_mla)
    assert acc.generation == generation, acc.reason
    if generation == "v0":
        assert "--kv-cache-dtype fp8" in acc.reason


@pytest.mark.parametrize(
    ("version", "use_v1", "generation"),
    [("0.8.2", None, "v0"), ("0.8.2", True, "v1"), ("0.8.5", None, "v0"), ("0.9.0", None, "v0"), ("0.9.1", None, "v1")],
)
def test_pipeline_parallelism_on_the_default_executor(version: str, use_v1: bool | None, generation: str) -> None:
    acc = vllm_accounting(version, compute_capability=H100, pipeline_parallel_size=2, use_v1=use_v1)
    assert acc.generation == generation, acc.reason


def test_pipeline_parallelism_under_vllm_use_v1_1_is_refused_on_0_8_5() -> None:
    with pytest.raises(CapacityError, match="pipeline parallelism"):
        vllm_accounting("0.8.5", compute_capability=H100, pipeline_parallel_size=2, use_v1=True)


@pytest.mark.parametrize(("version", "generation"), [("0.8.5", "v0"), ("0.9.0", "v1")])
def test_rocm_runs_v0_on_0_8_where_v1_was_experimental(version: str, generation: str) -> None:
    assert vllm_accounting(version, platform="rocm").generation == generation


@pytest.mark.parametrize(("version", "generation"), [("0.9.1", "v0"), ("0.9.2", "v1")])
def test_a_float32_model_falls_back_until_0_9_2(version: str, generation: str) -> None:
    assert vllm_accounting(version, compute_capability=H100, dtype="float32").generation == generation


@pytest.mark.parametrize(
    ("quantization", "version", "generation"),
    [("bitsandbytes", "0.8.2", "v0"), ("gguf", "0.8.5", "v0"), ("gguf", "0.9.0", "v1")],
)
def test_quantizations_v1_could_not_compile(quantization: str, version: str, generation: str) -> None:
    acc = vllm_accounting(version, compute_capability=H100, quantization=quantization)
    assert acc.generation == generation


def test_an_unknown_gpu_is_taken_as_v1_and_says_what_would_change_it() -> None:
    acc = vllm_accounting("0.8.5")
    assert acc.generation == "v1" and "compute capability is unknown" in acc.reason


def test_profile_for_version_still_answers_from_the_version_alone() -> None:
    assert (profile_for_version("0.6.6.post1"), profile_for_version("0.8.5"), profile_for_version(None)) == (
        "vllm-v0",
        "vllm-v1",
        "vllm-v1",
    )


def test_other_engines_are_their_own_generation() -> None:
    acc = engine_accounting("sglang", "0.4.6")
    assert (acc.engine, acc.generation, acc.version) == ("sglang", "sglang", "0.4.6")
    assert acc.profile == "sglang"
    assert Accounting("vllm", "v0", "0.8.5", "x").profile == "vllm-v0"


# --- the deployment resolver and `plan` --------------------------------------------------------------------

LLAMA_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
QWEN_05B = ["--model", "Qwen/Qwen2.5-0.5B"]


def _plan_json(*args: str) -> dict[str, object]:
    r = run_cli("plan", *args, "--json")
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def test_a_t4_on_0_8_5_is_sized_with_the_v0_profile() -> None:
    """vLLM 0.8.5 on a T4 runs V0 (the oracle's compute-capability fallback), so its pool is V0's: the same as
    0.7.3's, not 0.10.2's (V1 on the T4)."""
    args = [*QWEN_05B, "--gpu", "t4", "--max-model-len", "4096"]
    on_085 = _plan_json(*args, "--engine-version", "0.8.5")
    assert on_085["accounting"] == {
        "engine": "vllm",
        "generation": "v0",
        "version": "0.8.5",
        "reason": "V0: compute capability 7.5 < 8.0 (vLLM 0.8.5 falls back to V0: engine/arg_utils.py "
        "_is_v1_supported_oracle)",
    }
    on_073 = _plan_json(*args, "--engine-version", "0.7.3")
    on_0102 = _plan_json(*args, "--engine-version", "0.10.2")
    assert on_085["kv_cache_tokens"] == on_073["kv_cache_tokens"] != on_0102["kv_cache_tokens"]
    assert on_0102["accounting"]["generation"] == "v1"  # type: ignore[index]
    # an H100 on the same release runs V1
    h100 = _plan_json(*QWEN_05B, "--gpu", "h100", "--max-model-len", "4096", "--engine-version", "0.8.5")
    assert h100["accounting"]["generation"] == "v1"  # type: ignore[index]


def test_plan_text_says_why_the_generation_was_chosen() -> None:
    r = run_cli("plan", *QWEN_05B, "--gpu", "t4", "--max-model-len", "4096", "--engine-version", "0.8.5")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("accounting"))
    assert "V0: compute capability 7.5 < 8.0" in line and "[vllm-v0 start-up profile]" in line


def test_plan_vllm_use_v1_forces_the_generation_or_is_refused_as_vllm_refuses_it() -> None:
    args = [*QWEN_05B, "--gpu", "h100", "--max-model-len", "4096", "--engine-version", "0.9.2"]
    assert _plan_json(*args, "--vllm-use-v1", "0")["accounting"]["generation"] == "v0"  # type: ignore[index]
    r = run_cli("plan", *QWEN_05B, "--gpu", "t4", "--max-model-len", "4096", "--engine-version", "0.8.5",
                "--vllm-use-v1", "1")  # fmt: skip
    assert r.returncode == 2 and "refuses VLLM_USE_V1=1" in r.stderr


TERMS = (
    "weights_bytes_per_gpu",
    "activation_peak_bytes_per_gpu",
    "cuda_graph_bytes_per_gpu",
    "non_torch_bytes_per_gpu",
    "kv_pool_bytes_per_gpu",
)


@pytest.mark.parametrize(
    ("args", "block_bytes"),
    [
        # Llama-3.1-8B: 16-token blocks × 2 × 32 layers × 8 KV heads × 128 × 2 B = 2 MiB
        ([*LLAMA_8B, "--gpu", "h100", "--max-model-len", "8192"], 16 * 2 * 32 * 8 * 128 * 2),
        ([*LLAMA_8B, "--gpu", "a100-40gb", "--max-model-len", "8192", "--engine-version", "0.6.6"], 16 * 131072),
        ([*LLAMA_8B, "--gpu", "h100", "--tp", "2", "--max-model-len", "8192", "--enforce-eager"], 16 * 65536),
        # Qwen2.5-0.5B: 16 × 2 × 24 layers × 2 KV heads × 64 × 2 B
        ([*QWEN_05B, "--gpu", "t4", "--max-model-len", "4096", "--engine-version", "0.8.5"], 16 * 2 * 24 * 2 * 64 * 2),
    ],
)
def test_plan_json_shows_each_term_and_they_add_up_to_the_budget(args: list[str], block_bytes: int) -> None:
    """vLLM's own identity (``gpu_worker.py`` ``determine_available_memory``, V0 ``worker.py``
    ``determine_num_available_blocks``): available KV = total × utilization − weights − activation peak −
    non-torch (− CUDA graphs from 0.21); so the five terms add up to total × utilization within a block."""
    out = _plan_json(*args)
    terms = [out[k] for k in TERMS]
    assert all(isinstance(t, int) and t >= 0 for t in terms), terms
    budget = out["gpu_memory_bytes"] * out["gpu_memory_utilization"]  # type: ignore[operator]
    assert abs(sum(terms) - budget) < block_bytes  # type: ignore[arg-type]
    assert out["cuda_graph_bytes_per_gpu"] == 0  # vLLM ≤ 0.20 captures graphs after sizing the cache
    assert out["overhead_bytes_per_gpu"] == sum(terms[1:4])  # type: ignore[arg-type]
    assert set(out["accounting"]) == {"engine", "generation", "version", "reason"}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("engine", "activation_known", "non_torch_known"),
    [("sglang", False, False), ("tgi", True, True), ("trtllm", True, True), ("llamacpp", False, False)],
)
def test_other_engines_give_the_terms_their_rule_has_and_null_for_the_rest(
    engine: str, activation_known: bool, non_torch_known: bool
) -> None:
    out = _plan_json(*LLAMA_8B, "--gpu", "h100", "--max-model-len", "8192", "--engine", engine)
    assert out["accounting"] == {
        "engine": engine,
        "generation": engine,
        "version": None,
        "reason": out["accounting"]["reason"],  # type: ignore[index]
    }
    assert (out["activation_peak_bytes_per_gpu"] is not None) == activation_known
    assert (out["non_torch_bytes_per_gpu"] is not None) == non_torch_known
    assert out["cuda_graph_bytes_per_gpu"] is None  # no rule here counts graphs: unknown, not 0
    assert isinstance(out["weights_bytes_per_gpu"], int) and isinstance(out["kv_pool_bytes_per_gpu"], int)


def test_the_api_plan_returns_the_same_terms_and_accounting_object_as_plan_json() -> None:
    from advisor.api_models import PlanRequest
    from advisor.server import plan

    req = PlanRequest.model_validate(
        {"deployment": {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM", "max_model_len": 8192}}
    )
    before = plan(req)["before"]
    cli = _plan_json(*LLAMA_8B, "--gpu", "H100-SXM", "--max-model-len", "8192")
    for key in (*TERMS, "accounting"):
        assert before[key] == cli[key], key
    assert before["accounting"]["generation"] == "v1"


def test_a_source_build_without_tags_is_an_unknown_release_not_vllm_0_1() -> None:
    """setuptools-scm's no-tag fallback "0.1.devN+g<sha>" (printed by a 2025 vLLM source build, vllm-project/vllm
    PR #20665: "vLLM API server version 0.1.dev7548+gbaba038") names no release; read as 0.1 it sized DeepSeek's
    cache as pre-0.7 multi-head attention. A tagged dev build keeps its release."""
    from advisor.capacity.generation import parse_version

    assert parse_version("0.1.dev7548+gbaba038") is None
    assert parse_version("0.9.1.dev705+g01220ce89") == (0, 9, 1)
    assert parse_version("0.1") == (0, 1)
