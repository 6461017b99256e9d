"""Issue 16, kinds A, B and I: the overhead terms follow the engine's own rule for the release and the install.

Every expected figure is copied from a published vLLM log (URL and line cited) or is hand arithmetic from the
engine's source, written out in the test; none comes from running our code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.capacity.deployment import DeploymentSpec, deployment_inputs
from advisor.capacity.kv import CapacityInputs, activation_peak_bytes, non_torch_bytes_per_gpu, vllm_capacity_pass
from advisor.capacity.models import ModelArch
from advisor.cli import main
from advisor.config import resolve_model
from advisor.errors import CapacityError

GIB = 1 << 30


def _inputs(model: str, gib: float, **kw: object) -> CapacityInputs:
    return CapacityInputs(model=resolve_model(model, Path.cwd()), gpu_memory_bytes=int(gib * GIB), **kw)  # type: ignore[arg-type]


def _plan(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, float]:
    assert main(["plan", *args, "--json"]) == 0
    out: dict[str, float] = json.loads(capsys.readouterr().out)
    return out


# --- A. V0's forward peak follows the model file ---------------------------------------------------------------

RTX3090_V064 = "https://github.com/vllm-project/vllm/issues/10517"
"""Llama-3.1-8B-Instruct on one RTX 3090, vLLM 0.6.4 (the one-line 'Memory profiling results' format of 0.6.4 only):
20k: "Loading model weights took 14.9888 GB" and "Memory profiling results: total_gpu_memory=23.58GiB
initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB
non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90", "# GPU blocks: 1952";
29k: "peak_torch_memory=17.98GiB ... non_torch_memory=0.35GiB kv_cache_size=2.89GiB", "# GPU blocks: 1478".
0.6.4's peak_torch_memory is the allocator's absolute peak, weights included."""


@pytest.mark.parametrize(("max_model_len", "peak_torch_gib"), [(20000, 17.06), (29000, 17.98)])
def test_v0_llama_forward_peak_matches_the_0_6_4_rtx3090_log(max_model_len: int, peak_torch_gib: float) -> None:
    """V0 without chunked prefill profiles max_model_len tokens; the forward is above the sampler
    (256 × 128,256 × 39 B = 1.19 GiB), so the activation is peak_torch_memory − weights (14.99 GiB)."""
    inp = _inputs(
        "meta-llama/Llama-3.1-8B-Instruct",
        23.58,
        max_model_len=max_model_len,
        overhead_profile="vllm-v0",
        engine_version="0.6.4",
    )
    forward, sampler = activation_peak_bytes(inp)
    assert forward > sampler
    assert forward / GIB == pytest.approx(peak_torch_gib - 14.99, abs=0.02), RTX3090_V064


def test_the_0_6_4_rtx3090_log_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    """Kinds A and B together: 3.81 GiB of KV, 1,952 blocks of 16 × 128 KiB (RTX3090_V064, 20k)."""
    out = _plan(
        capsys,
        [
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu-memory-gib",
            "23.58",
            "--max-model-len",
            "20000",
            "--engine-version",
            "0.6.4",
        ],
    )
    assert out["kv_cache_blocks"] == pytest.approx(1952, rel=0.01), RTX3090_V064


def _v0(model: ModelArch, tokens: int, tp: int = 1) -> int:
    inp = CapacityInputs(
        model=model,
        gpu_memory_bytes=80 * GIB,
        tensor_parallel_size=tp,
        max_num_batched_tokens=tokens,
        max_num_seqs=1,  # the sampler term stays far below the forward
        overhead_profile="vllm-v0",
        engine_version="0.7.3",
    )
    return activation_peak_bytes(inp)[0]


def test_v0_qwen2_holds_gate_up_until_down_proj() -> None:
    """qwen2.py Qwen2MLP.forward (v0.6.6, v0.7.3): ``gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up);
    x, _ = self.down_proj(x)``: at down_proj the model loop's hidden, the residual, the MLP input (3h), gate_up
    (2i), the activation (i) and down_proj's output (h) live: 4h + 3i. Qwen2.5-7B (h 3584, i 18944), 4096 bf16
    tokens: 4096 × 2 × (4 × 3584 + 3 × 18944) bytes."""
    qwen = resolve_model("Qwen/Qwen2.5-7B-Instruct", Path.cwd())
    assert _v0(qwen, 4096) == 4096 * 2 * (4 * 3584 + 3 * 18944)
    # at TP 2 the intermediate tensors are split, the hidden-wide ones are not
    assert _v0(qwen, 4096, tp=2) == 4096 * 2 * (4 * 3584 + 3 * 18944 // 2)


def test_v0_llama_frees_gate_up_after_the_activation() -> None:
    """llama.py LlamaMLP.forward (v0.6.6, v0.7.3): ``x, _ = self.gate_up_proj(x); x = self.act_fn(x)`` drops
    gate_up once the activation exists: the peak is at act_fn, 3h + 2i + i. Mistral-7B (MistralForCausalLM →
    llama.py in registry.py; h 4096, i 14336), 8192 bf16 tokens."""
    mistral = resolve_model("mistralai/Mistral-7B-Instruct-v0.3", Path.cwd())
    assert _v0(mistral, 8192) == 8192 * 2 * (3 * 4096 + 3 * 14336)


def test_v0_two_matrix_mlp() -> None:
    """phi.py PhiMLP (v0.7.3): ``fc1`` → ``act`` (a new tensor) → ``fc2``; the block runs attention and MLP in
    parallel, so the model loop's hidden, the normed input and the attention output (3h) live beside fc1's output
    and the activation (2i). Phi-2's config.json (h 2560, i 10240, model_type phi), 2048 fp16 tokens."""
    phi2 = ModelArch.from_hf_config(
        {
            "architectures": ["PhiForCausalLM"],
            "model_type": "phi",
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "vocab_size": 51200,
            "max_position_embeddings": 2048,
            "torch_dtype": "float16",
        },
        "microsoft/phi-2",
    )
    assert _v0(phi2, 2048) == 2048 * 2 * (3 * 2560 + 2 * 10240)


def test_v1_keeps_its_compiled_forward_factors() -> None:
    """V1 compiles and fuses the model (torch.compile, CUDA graphs); its factors stay 6h + 3i per token."""
    inp = _inputs("Qwen/Qwen2.5-7B-Instruct", 80, max_num_batched_tokens=4096, max_num_seqs=1)
    assert activation_peak_bytes(inp)[0] == 4096 * 2 * (6 * 3584 + 3 * 18944)


# --- B. non-torch memory by release -----------------------------------------------------------------------------


def test_0_6_4_counts_the_cuda_context_and_other_processes_as_non_torch() -> None:
    """worker.py determine_num_available_blocks at v0.6.4.post1: ``non_torch_allocations = (total − free) −
    allocated_bytes.current``: the CUDA context and libraries (0.35 GiB on one GPU, RTX3090_V064) and whatever
    other processes hold. From v0.6.5 (memory_profiling from init_device's baseline) only the increase counts
    (0.10 GiB on one GPU)."""
    others = 3 * GIB
    old = _inputs(
        "meta-llama/Llama-3.1-8B-Instruct",
        23.58,
        overhead_profile="vllm-v0",
        engine_version="0.6.4",
        gpu_memory_used_by_others_bytes=others,
    )
    assert non_torch_bytes_per_gpu(old) == int(0.35 * GIB) + others
    new = _inputs(
        "meta-llama/Llama-3.1-8B-Instruct",
        23.58,
        overhead_profile="vllm-v0",
        engine_version="0.6.5",
        gpu_memory_used_by_others_bytes=others,
    )
    assert non_torch_bytes_per_gpu(new) == int(0.10 * GIB)


@pytest.mark.parametrize(("version", "whole_device"), [("0.8.5", True), ("0.9.0", True), ("0.9.1", False)])
def test_v1_counts_the_whole_device_until_0_9_1(version: str, whole_device: bool) -> None:
    """v1/worker/gpu_worker.py determine_available_memory: to v0.9.0 ``peak_memory += (total − free) −
    allocated``; v0.9.1 moves to memory_profiling(self.init_snapshot, ...) and checks the free memory in
    init_device ("Free memory on device ... is less than desired GPU memory utilization")."""
    inp = _inputs(
        "meta-llama/Llama-3.1-8B-Instruct", 79.15, engine_version=version, gpu_memory_used_by_others_bytes=GIB
    )
    expected = int(0.35 * GIB) + GIB if whole_device else int(0.13 * GIB)
    assert non_torch_bytes_per_gpu(inp) == expected


def test_other_processes_shrink_the_pool_where_the_release_counts_them_and_refuse_the_start_where_it_checks() -> None:
    """8 GiB held by other processes on a 23.58 GiB GPU at budget 0.9 (21.22 GiB > the 15.58 GiB free): vLLM 0.6.4
    starts and counts the 8 GiB as its own non-torch memory, so the pool is 8 GiB smaller than on a free GPU;
    0.6.6 measures from its baseline and runs out of memory allocating the cache: a refusal here."""
    common: dict[str, object] = {"max_model_len": 4096, "overhead_profile": "vllm-v0"}
    free = vllm_capacity_pass(_inputs("Qwen/Qwen2.5-0.5B", 23.58, engine_version="0.6.4", **common))
    others = {"gpu_memory_used_by_others_bytes": 8 * GIB, **common}
    shared = vllm_capacity_pass(_inputs("Qwen/Qwen2.5-0.5B", 23.58, engine_version="0.6.4", **others))
    assert free.kv_pool_bytes_per_gpu - shared.kv_pool_bytes_per_gpu == pytest.approx(8 * GIB, abs=1)
    with pytest.raises(CapacityError, match=r"other processes hold 8\.00 GiB"):
        vllm_capacity_pass(_inputs("Qwen/Qwen2.5-0.5B", 23.58, engine_version="0.6.6", **others))


# --- I. the sampler warm-up by install --------------------------------------------------------------------------


HELD_HIDDEN = (2048 + 2 * 1024) * 4096 * 2
"""V1 ≥ 0.9: the hidden states ``profile_run`` holds through the sampler warm-up for :func:`_sampler`'s Llama-3.1-8B
(hidden 4,096, bf16): the dummy forward's 2,048 tokens, their gather at the 1,024 sequences' last tokens and
``_dummy_sampler_run``'s ``torch.rand_like`` of it (``vllm/v1/worker/gpu_model_runner.py``)."""


def _sampler(
    version: str | None, sampler: str | None = None, profile: str = "vllm-v1", v2_model_runner: bool | None = None
) -> int:
    inp = _inputs(
        "meta-llama/Llama-3.1-8B-Instruct",
        79.15,
        max_num_seqs=1024,
        max_num_batched_tokens=2048,
        engine_version=version,
        overhead_profile=profile,
        sampler=sampler,
        v2_model_runner=v2_model_runner,
    )
    return activation_peak_bytes(inp)[1]


def test_flashinfer_sampler_is_the_image_default_on_v1_0_8_to_0_11() -> None:
    """topk_topp_sampler.py: V1 0.9-0.11 use FlashInfer when it is importable and VLLM_USE_FLASHINFER_SAMPLER is
    not 0 (the official image installs it); flashinfer_sample → top_k_top_p_sampling_from_logits: bf16 logits (2)
    + their fp32 copy (4) + top_k_mask_logits' output (4) + its softmax (4) = 14 B per logit, no sort. V1 0.8.x
    samples from probabilities with flashinfer 0.2.1: 2 + 4 + 4 = 10 B. From 0.12 FlashInfer is opt-in: the
    torch sampler's 39 B (sort values 4 + int64 indices 8 + torch.sort's scratch, measured on 0.11 logs)."""
    rows_vocab = 1024 * 128256
    held = HELD_HIDDEN  # from 0.9 the profile run holds the dummy forward's hidden states through the warm-up
    assert _sampler("0.10.2") == rows_vocab * 14 + held
    assert _sampler("0.11.0") == rows_vocab * 14 + held
    assert _sampler("0.8.5") == rows_vocab * 10
    assert _sampler("0.12.0") == rows_vocab * 39 + held
    assert _sampler(None) == rows_vocab * 39
    assert _sampler("0.10.2", "torch") == rows_vocab * 39 + held
    assert _sampler("0.12.0", "flashinfer") == rows_vocab * 14 + held


def test_flashinfer_sampler_is_the_default_again_from_0_21_where_the_gpu_runs_it() -> None:
    """``vllm/envs.py``: ``VLLM_USE_FLASHINFER_SAMPLER`` unset is None (off) in 0.20.0 and True in 0.21.0
    (vllm-project/vllm#40376, "Enable FlashInfer top-k/top-p sampler by default"); 0.21's ``TopKTopPSampler``
    falls back to the torch sampler quietly where ``FlashInferBackend.supports_compute_capability`` fails
    (7.5 ≤ capability ≤ 12.1), e.g. a V100 (7.0)."""
    rows_vocab = 1024 * 128256
    # 0.20's torch sampler no longer sorts: the Triton top-k/top-p kernel (0.17+) masks in place, 14 B + ~80 MiB
    assert _sampler("0.20.0") == rows_vocab * 14 + (80 << 20) + HELD_HIDDEN
    assert _sampler("0.21.0") == rows_vocab * 14 + HELD_HIDDEN
    # the V1 runner's warm-up (VLLM_USE_V2_MODEL_RUNNER=0): 0.28 defaults Llama to Model Runner V2, whose dummy
    # sampler holds the bf16 logits alone (test_v2_model_runner.py), 1024 rows (2048 batched tokens) × 2 B
    assert _sampler("0.28.0", v2_model_runner=False) == rows_vocab * 14 + HELD_HIDDEN
    assert _sampler("0.28.0") == rows_vocab * 2
    from advisor.capacity.kv import default_sampler

    assert default_sampler("vllm-v1", "0.21.0", (7, 0)) == "torch"
    assert default_sampler("vllm-v1", "0.21.0", (9, 0)) == "flashinfer"


def test_v0_sampler_is_torch_unless_flashinfer_is_asked_for() -> None:
    """V0 (model_executor/layers/sampler.py, 0.6-0.7): FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1; it then
    skips _apply_top_k_top_p's sort: bf16 logits (2) + fp32 logits (4) + probs (4) + logprobs (4) = 14 B."""
    rows_vocab = 1024 * 128256
    assert _sampler("0.6.6", profile="vllm-v0") == rows_vocab * 39
    assert _sampler("0.6.6", "flashinfer", profile="vllm-v0") == rows_vocab * 14


def test_plan_takes_the_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """``plan --sampler``: the torch sampler's warm-up (256 × 128,256 × 39 B = 1.19 GiB) is above the forward
    on an L40S-sized budget with 2,048 batched tokens, FlashInfer's (0.43 GiB) is not, so torch leaves less KV."""
    args = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-gib", "44.42", "--max-model-len", "8192"]
    args += ["--engine-version", "0.10.2", "--max-num-batched-tokens", "2048"]
    torch = _plan(capsys, [*args, "--sampler", "torch"])
    flashinfer = _plan(capsys, [*args, "--sampler", "flashinfer"])
    default = _plan(capsys, args)
    assert default["kv_cache_blocks"] == flashinfer["kv_cache_blocks"] > torch["kv_cache_blocks"]
    with pytest.raises(SystemExit):
        main(["plan", *args, "--sampler", "triton", "--json"])


def test_a_deployment_states_its_sampler() -> None:
    model = resolve_model("meta-llama/Llama-3.1-8B-Instruct", Path.cwd())
    spec = DeploymentSpec(engine="vllm", model=model, gpu="h100-sxm", engine_version="0.10.2", sampler="torch")
    assert deployment_inputs(spec).sampler == "torch"
    with pytest.raises(CapacityError, match="sampler 'triton' unknown"):
        CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, sampler="triton")


def test_the_torch_sampler_stops_sorting_the_vocabulary_in_0_17() -> None:
    """vLLM 0.17.0's release notes: "Triton-based top-k and top-p sampler kernels (#33538)"; ``apply_top_k_top_p``
    then masks the logits in place with Triton (``topk_topp_sampler.py``: ``if HAS_TRITON: return
    apply_top_k_top_p_triton(...)``), so the warm-up holds bf16 logits, their fp32 copy, the softmax and the
    exponential noise (2 + 4 + 4 + 4 = 14 B) and the kernel's ~80 MiB of buffers. vLLM 0.19.0 prints "2.87 GiB for
    peak activation" for gpt-oss-20b on an H100 at its default 1,024 sequences (llm-d-incubation/llm-d-planner at
    d3121e05), where the sort's 39 B would take 7.48 GiB; the 0.10/0.11-era image of llm-d-benchmark's table prints
    7.38 GiB for the same model and sequences."""
    rows_vocab = 1024 * 128256
    assert _sampler("0.16.0") == rows_vocab * 39 + HELD_HIDDEN
    assert _sampler("0.17.0") == rows_vocab * 14 + (80 << 20) + HELD_HIDDEN


@pytest.mark.parametrize(("version", "peak_gib"), [("0.19.0", 2.87), ("0.11.0", 7.38)])
def test_gpt_oss_20b_activation_peak_is_the_engine_s_own_breakdown(version: str, peak_gib: float) -> None:
    """The engines' "Actual usage is … for peak activation" for gpt-oss-20b on one H100 at the default 1,024
    sequences and 8,192 batched tokens, torch sampler: 2.87 GiB on 0.19.0 (llm-d-incubation/llm-d-planner at
    d3121e05), 7.38 GiB on the 0.10/0.11-era image (llm-d/llm-d-benchmark at 25933486, the sort's warm-up)."""
    assert _h100_0_19_peak_gib("openai/gpt-oss-20b", version) == pytest.approx(peak_gib, rel=0.05)


def _h100_0_19_peak_gib(model: str, version: str, tensor_parallel_size: int = 1) -> float:
    """The activation peak (GiB) of ``model`` as the llm-d 0.19 sweep ran it: an H100 (79.19 GiB), 1,024
    sequences, 8,192 batched tokens and context, V1's torch sampler, at ``version``."""
    inp = _inputs(
        model,
        79.19,
        tensor_parallel_size=tensor_parallel_size,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        max_model_len=8192,
        engine_version=version,
        overhead_profile="vllm-v1",
        sampler="torch",
    )
    return max(activation_peak_bytes(inp)) / GIB


@pytest.mark.parametrize(("version", "difference_gib"), [("0.19.0", 0.08), ("0.8.5", 0.0)])
def test_the_profile_holds_the_forward_s_hidden_states_through_the_sampler_warm_up(
    version: str, difference_gib: float
) -> None:
    """vLLM 0.19.0 on an H100 at TP 2 (llm-d-incubation/llm-d-planner at d3121e05, 8,192 batched tokens, 1,024
    sequences, the same 152,064-token vocabulary and torch sampler): "2.29 GiB for peak activation" for
    Qwen2.5-72B-Instruct against "2.21 GiB" for Qwen2.5-7B-Instruct. Both peaks are the sampler warm-up's, whose
    logits are the same size; ``profile_run`` keeps ``hidden_states`` ([8,192, hidden]) and
    ``last_hidden_states`` ([1,024, hidden]) alive through it, and ``_dummy_sampler_run`` adds a ``rand_like``
    of the latter: (8,192 + 2,048) × (8,192 − 3,584) × 2 B = 0.088 GiB, the logs' 0.08 within their rounding.
    V1 0.8.x's ``_dummy_run`` returned only the gathered rows (no difference)."""
    large, small = (
        _h100_0_19_peak_gib(m, version, 2) for m in ("Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    )
    assert large - small == pytest.approx(difference_gib, abs=0.011)


LLMD_0_19 = (
    "https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/"
    "accuracy/results/v0.19.0/logs/"
)
"""vLLM 0.19.0 DEBUG start-up logs on an H100 80GB HBM3 (79.19 GiB), Llama-3.1-8B-Instruct, util 0.95, 8,192 batched
tokens, 1,024 sequences: "Total non KV cache memory: 17.12GiB … non-torch forward increase memory: 0.25GiB" at TP 1,
"11.47GiB … 2.07GiB" at TP 2, TP 4 3.77 + 1.89 + 2.13 GiB; the TP ≥ 2 runs log "Enabled custom fusions:
allreduce_rms" and "Initialized FlashInfer All Reduce workspace" inside the profile."""


@pytest.mark.parametrize(("tp", "non_kv_gib"), [(1, 17.12), (2, 11.47), (4, 3.77 + 1.89 + 2.13)])
def test_the_allreduce_fusion_workspace_counts_at_tp_2_and_4_on_an_nvswitch_h100(tp: int, non_kv_gib: float) -> None:
    inp = _inputs(
        "meta-llama/Llama-3.1-8B-Instruct",
        79.19,
        tensor_parallel_size=tp,
        gpu_memory_utilization=0.95,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        max_model_len=8192,
        engine_version="0.19.0",
        overhead_profile="vllm-v1",
        sampler="torch",
        nvlink_sharp=True,
        compute_capability=(9, 0),
    )
    result = vllm_capacity_pass(inp)
    assert result.kv_pool_bytes_per_gpu / GIB == pytest.approx(0.95 * 79.19 - non_kv_gib, abs=0.3)


def test_the_fusion_workspace_is_counted_only_where_vllm_builds_it() -> None:
    """On by default from 0.17 for compute capability 9.x/10.x with TP > 1 and one stage, multicast needed
    (NVSwitch); FlashInfer's rounding ends with 0.22's FlashInfer 0.6.11 (not measured after)."""

    def non_torch(**kw: object) -> float:
        base: dict[str, object] = {
            "tensor_parallel_size": 2,
            "engine_version": "0.19.0",
            "overhead_profile": "vllm-v1",
            "nvlink_sharp": True,
            "compute_capability": (9, 0),
        }
        base.update(kw)
        return non_torch_bytes_per_gpu(_inputs("meta-llama/Llama-3.1-8B-Instruct", 79.19, **base)) / GIB

    assert non_torch() == pytest.approx(2.08, abs=0.01)
    assert non_torch(tensor_parallel_size=4) == pytest.approx(2.17, abs=0.01)
    for off in (
        {"tensor_parallel_size": 1},
        {"nvlink_sharp": False},  # PCIe, A100's NVLink without multicast
        {"compute_capability": (8, 0)},
        {"engine_version": "0.16.0"},
        {"engine_version": "0.22.0"},
        {"pipeline_parallel_size": 2},
    ):
        assert non_torch(**off) < 1.0, off
