"""Issue 16, kind D: flags that move weights or memory in vLLM's start-up accounting.

Every expected figure is the engine's own log or hand arithmetic from its source (cited per test), never a
figure our code printed.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import replace
from unittest.mock import patch

import pytest

from advisor.capacity.kv import (
    CapacityInputs,
    cpu_offload_bytes_per_gpu,
    cuda_graph_bytes_per_gpu,
    draft_weights_bytes_per_gpu,
    kv_bytes_per_token_per_gpu,
    vllm_capacity_pass,
    weights_bytes_per_gpu,
)
from advisor.capacity.models import get_preset
from advisor.capacity.speculative import parse_speculative_config
from advisor.errors import CapacityError
from tests.inprocess import CliRun, run_cli

GIB = 1 << 30
LLAMA = get_preset("meta-llama/Llama-3.1-8B-Instruct")
H100 = int(79.15 * GIB)
LLAMA_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM"]


def _plan(*args: str, env: dict[str, str] | None = None) -> CliRun:
    with patch.dict(os.environ, env or {}):
        return run_cli("plan", *args)


def _llama(**kw: object) -> CapacityInputs:
    return CapacityInputs(model=LLAMA, gpu_memory_bytes=H100, max_model_len=8192, **kw)  # type: ignore[arg-type]


# --- EAGLE / MTP drafts share the KV pool ----------------------------------------------------------------


def test_an_eagle_draft_layer_takes_pages_of_the_pool_as_the_engine_logged() -> None:
    """vllm-project/vllm#19996 (vLLM 0.9.1.dev705, H100 80GB, Llama 3.1 8B with EAGLE):
    "Available KV cache memory: 51.63 GiB" / "GPU KV cache size: 410,128 tokens". 32 target layers + 1 draft
    layer × 2 (K, V) × 8 KV heads × 128 × 2 B = 135,168 B per token; floor(51.63 GiB ÷ (16 × 135,168)) = 25,633
    blocks = 410,128 tokens (32 layers alone would give 422,9xx)."""
    r = _plan(
        *LLAMA_8B,
        "--max-model-len",
        "131072",
        "--kv-cache-memory-gib",
        "51.63",
        "--json",
        "--speculative-config",
        '{"method": "eagle", "num_speculative_tokens": 3}',
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["kv_cache_bytes_per_token"] == 33 * 2 * 8 * 128 * 2 == 135_168
    assert out["kv_cache_tokens"] == 410_128


def test_the_eagle_head_weights_load_on_the_gpu() -> None:
    """``llama_eagle.py`` (0.21.0): one LlamaDecoderLayer of the target's shape (qkv 4096 × 6144, o 4096², gate_up
    and down 3 × 4096 × 14336, the post-attention norm; the input norm is dropped) and ``fc`` 8192 → 4096;
    embeddings and LM head shared with the target. 25,165,824 + 16,777,216 + 176,160,768 + 4,096 + 33,554,432 =
    251,662,336 parameters × 2 B (bf16)."""
    draft = parse_speculative_config('{"method": "eagle"}', LLAMA)
    assert draft is not None and draft.draft_layers == 1
    assert draft.draft_parameters == 251_662_336
    base = _llama()
    with_draft = replace(base, speculative=draft)
    assert draft_weights_bytes_per_gpu(with_draft) == 503_324_672
    assert weights_bytes_per_gpu(with_draft) - weights_bytes_per_gpu(base) == 503_324_672


def test_deepseek_mtp_adds_its_one_nextn_layer_and_its_weights() -> None:
    """DeepSeek-V3/R1 config.json: ``num_nextn_predict_layers: 1``. ``deepseek_mtp.py``: a full decoder layer
    (MLA attention 187,105,280 parameters; 256 routed + 1 shared experts of 3 × 7168 × 2048 = 44,040,192; router
    256 × 7168) + eh_proj 2 × 7168² + 5 norms of 7168 = 11,610,065,920 parameters. Its MLA layer caches one
    576-element latent per token: 62 × 576 × 2 B = 71,424 B per token in bf16 (V1)."""
    r1 = get_preset("deepseek-ai/DeepSeek-R1")
    draft = parse_speculative_config({"method": "deepseek_mtp", "num_speculative_tokens": 1}, r1)
    assert draft is not None and draft.draft_layers == 1
    assert (
        draft.draft_parameters
        == (187_105_280 + 257 * 44_040_192 + 256 * 7168 + 2 * 7168 * 7168 + 5 * 7168)
        == 11_610_065_920
    )
    inputs = CapacityInputs(
        model=r1,
        gpu_memory_bytes=int(139.81 * GIB),
        tensor_parallel_size=8,
        block_size=64,
        kv_cache_dtype="bfloat16",
        speculative=draft,
    )
    assert kv_bytes_per_token_per_gpu(inputs) == 62 * 576 * 2


def test_ngram_has_no_draft_and_changes_nothing() -> None:
    base = vllm_capacity_pass(_llama())
    ngram = parse_speculative_config('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}', LLAMA)
    assert vllm_capacity_pass(_llama(speculative=ngram)) == base


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("{not json", "speculative_config: not valid JSON"),
        ("[1, 2]", "speculative_config must be a JSON object"),
        ('{"num_speculative_tokens": 3}', "speculative_config.method is required"),
        ('{"method": "lookahead"}', "speculative_config.method 'lookahead' unknown"),
        ('{"method": "eagle", "num_speculative_tokens": 0}', "speculative_config.num_speculative_tokens"),
        ('{"method": "eagle", "draft_tensor_parallel_size": true}', "speculative_config.draft_tensor_parallel_size"),
        ('{"method": "eagle3"}', "speculative_config.draft_parameters"),
        ('{"method": "draft_model", "model": "x"}', "speculative_config.draft_layers"),
        ('{"method": "mtp"}', "speculative_config.draft_layers"),  # Llama states no num_nextn_predict_layers
    ],
)
def test_a_speculative_config_that_cannot_be_costed_is_refused_naming_the_key(raw: str, names: str) -> None:
    with pytest.raises(CapacityError, match=names.replace("(", r"\(").replace("[", r"\[")):
        parse_speculative_config(raw, LLAMA)
    r = _plan(*LLAMA_8B, "--max-model-len", "8192", "--speculative-config", raw)
    assert r.returncode == 2 and names in r.stderr


# --- --cpu-offload-gb -------------------------------------------------------------------------------------


def test_cpu_offload_moves_whole_parameters_of_the_decoder_layers_until_the_budget_is_reached() -> None:
    """``vllm/model_executor/offloader/uva.py`` ``_maybe_offload_to_cpu`` (0.21.0): parameter by parameter,
    checking ``cpu_offload_bytes >= cpu_offload_max_bytes`` before each, budget ``int(4 × 1024**3)``. A Llama-3.1-8B
    bf16 layer: qkv 50,331,648 + o 33,554,432 + gate_up 234,881,024 + down 117,440,512 + 2 norms × 8,192 =
    436,224,000 B. Nine layers = 3,926,016,000; the 10th layer's qkv, o and gate_up reach 4,244,783,104 < 4 GiB,
    its down_proj crosses: 4,362,223,616 B."""
    offloaded = 9 * 436_224_000 + 50_331_648 + 33_554_432 + 234_881_024 + 117_440_512
    assert offloaded == 4_362_223_616
    inputs = _llama(cpu_offload_bytes=4 * GIB)
    assert cpu_offload_bytes_per_gpu(inputs) == offloaded
    assert weights_bytes_per_gpu(_llama()) - weights_bytes_per_gpu(inputs) == offloaded
    # a budget past every layer offloads the 32 layers, never the embedding or the LM head
    assert cpu_offload_bytes_per_gpu(_llama(cpu_offload_bytes=64 * GIB)) == 32 * 436_224_000
    r = _plan(*LLAMA_8B, "--max-model-len", "8192", "--cpu-offload-gb", "4", "--json")
    base = _plan(*LLAMA_8B, "--max-model-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    out, before = json.loads(r.stdout), json.loads(base.stdout)
    assert before["weights_bytes_per_gpu"] - out["weights_bytes_per_gpu"] == offloaded
    assert out["cpu_offload_bytes_per_gpu"] == offloaded
    assert out["kv_pool_bytes_per_gpu"] - before["kv_pool_bytes_per_gpu"] in (offloaded, offloaded + 1)


def test_cpu_offload_lets_weights_larger_than_the_gpu_load() -> None:
    """vLLM's own example (``vllm/config/offload.py`` ``cpu_offload_gb``, 0.21.0): "load a 13B model with BF16
    weight, which requires at least 26GB GPU memory" on a 24 GB GPU with 10 GiB offloaded."""
    args = ["--model", "meta-llama/Llama-2-13b-hf", "--gpu-memory-gib", "22.5", "--max-model-len", "4096"]
    assert _plan(*args).returncode == 3  # vLLM would refuse to start (issue 19, acceptance 4)
    r = _plan(*args, "--cpu-offload-gb", "10", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kv_cache_tokens"] > 4096


def test_cpu_offload_gb_is_a_number_of_gib_and_vllm_only() -> None:
    assert _plan(*LLAMA_8B, "--max-model-len", "8192", "--cpu-offload-gb", "-1").returncode == 2
    assert _plan(*LLAMA_8B, "--max-model-len", "8192", "--cpu-offload-gb", "nan").returncode == 2
    r = _plan(*LLAMA_8B, "--max-model-len", "8192", "--engine", "sglang", "--cpu-offload-gb", "4")
    assert r.returncode == 2 and "--cpu-offload-gb does not apply to --engine sglang" in r.stderr  # issue 19


# --- VLLM_CUDA_MEM_ALIGN_KV_CACHE=0 ------------------------------------------------------------------------


def test_unaligned_v0_mla_entries_are_576_bf16_elements() -> None:
    """V0 ``vllm/worker/cache_engine.py`` ``_allocate_kv_cache`` (0.7.3): ``align_to_256bytes`` only when
    ``envs.VLLM_CUDA_MEM_ALIGN_KV_CACHE`` (default "1"): 576 × 2 = 1,152 B → 1,280 aligned, 1,152 unaligned;
    61 layers: 78,080 vs 70,272 B per token."""
    r1 = get_preset("deepseek-ai/DeepSeek-R1")
    aligned = CapacityInputs(
        model=r1,
        gpu_memory_bytes=int(139.81 * GIB),
        tensor_parallel_size=8,
        overhead_profile="vllm-v0",
        engine_version="0.7.3",
    )
    assert kv_bytes_per_token_per_gpu(aligned) == 61 * 1280 == 78_080
    assert kv_bytes_per_token_per_gpu(replace(aligned, mla_align_kv_cache=False)) == 61 * 1152 == 70_272
    args = [
        "--model",
        "deepseek-ai/DeepSeek-R1",
        "--tp",
        "8",
        "--engine-version",
        "0.7.3",
        "--gpu",
        "H200-SXM",
        "--max-model-len",
        "16384",
        "--kv-cache-memory-gib",
        "40",
        "--json",
    ]
    on = json.loads(_plan(*args).stdout)
    off = json.loads(_plan(*args, env={"VLLM_CUDA_MEM_ALIGN_KV_CACHE": "0"}).stdout)
    assert (on["kv_cache_bytes_per_token_per_gpu"], off["kv_cache_bytes_per_token_per_gpu"]) == (78_080, 70_272)
    assert off["kv_cache_blocks"] == 40 * GIB // (16 * 70_272)


# --- the CUDA-graph estimate, subtracted before KV from vLLM 0.20 ------------------------------------------

PUBLISHED_ESTIMATES_GIB = [
    0.36,  # gpustack/runner#251, vLLM 0.27.1, TP 2: "Estimated CUDA graph memory: 0.36 GiB total"
    0.17,  # noonghunna/club-3090#127, TP 4: "Estimated CUDA graph memory: 0.17 GiB total"
    2.43,  # MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#25: "CUDA graph pool memory: … 2.43 GiB (estimated)"
    1.58,  # Qwen3.5-9B on L40S, vLLM 0.18.0 (tests/capacity/truth/vllm_v1.yaml, github-file-id 57489989625)
    0.64,  # Qwen3.5-4B, vLLM 0.22.0, PIECEWISE=51 FULL=35 (github-file-id 55770092662)
    0.78,  # PIECEWISE=51 (512) FULL=35 (256) (github-file-id 51781852921)
    0.37,  # PIECEWISE=35 (256) FULL=19 (128) (github-file-id 67144197265)
    1.97,  # TP 2 (github-file-id 60171799662)
    1.21,  # PIECEWISE=11 (64) FULL=7 (32) (github-file-id 52221836498)
    0.61,  # PIECEWISE=5 (16) FULL=4 (8) (github-file-id 61544841280)
    0.22,  # PIECEWISE=15 (96) (github-file-id 55529542778)
    0.36,  # PIECEWISE=1 FULL=1 (github-file-id 52377383460)
]


def test_the_cuda_graph_estimate_is_subtracted_from_vllm_0_20_on() -> None:
    """``vllm/envs.py`` ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to "0" in the 0.19.0 wheel and "1"
    in 0.20.0 and 0.21.0; ``gpu_worker.py`` ``determine_available_memory`` subtracts
    ``cudagraph_memory_estimate_applied`` from the KV budget. The term is the published estimates' median."""
    median = statistics.median(PUBLISHED_ESTIMATES_GIB)
    old = _llama(engine_version="0.19.0", sampler="torch")  # 0.21 also turns FlashInfer's sampler back on
    assert cuda_graph_bytes_per_gpu(old) == 0
    for version in ("0.20.0", "0.21.0", "0.28.0"):
        # V1's runner throughout (0.28 would default Llama to Model Runner V2, another warm-up)
        new = _llama(engine_version=version, sampler="torch", v2_model_runner=False)
        assert cuda_graph_bytes_per_gpu(new) / GIB == pytest.approx(median, abs=0.01)
        drop = vllm_capacity_pass(old).kv_pool_bytes_per_gpu - vllm_capacity_pass(new).kv_pool_bytes_per_gpu
        assert drop == cuda_graph_bytes_per_gpu(new)
    assert cuda_graph_bytes_per_gpu(_llama(engine_version="0.21.0", enforce_eager=True)) == 0
    assert cuda_graph_bytes_per_gpu(_llama(engine_version="0.21.0", estimate_cuda_graphs=False)) == 0
    args = [*LLAMA_8B, "--max-model-len", "8192", "--engine-version", "0.21.0", "--sampler", "torch", "--json"]
    on = json.loads(_plan(*args).stdout)
    off = json.loads(_plan(*args, env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}).stdout)
    assert on["cuda_graph_bytes_per_gpu"] == cuda_graph_bytes_per_gpu(_llama(engine_version="0.21.0", sampler="torch"))
    assert off["cuda_graph_bytes_per_gpu"] == 0
    assert off["kv_pool_bytes_per_gpu"] - on["kv_pool_bytes_per_gpu"] == on["cuda_graph_bytes_per_gpu"]


# --- the config file ---------------------------------------------------------------------------------------


def _config(**keys: object) -> dict[str, object]:
    dep = {
        "name": "a",
        "engine": "vllm",
        "targets": ["http://x:8000/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
        **keys,
    }
    return {"deployments": [dep]}


def test_the_config_keys_reach_the_capacity_pass() -> None:
    from advisor.config import capacity_inputs, parse_config

    cfg = parse_config(_config(cpu_offload_gb=4, speculative_config={"method": "eagle", "num_speculative_tokens": 3}))
    inputs = capacity_inputs(cfg.deployments[0])
    assert cpu_offload_bytes_per_gpu(inputs) == 4_362_223_616
    assert kv_bytes_per_token_per_gpu(inputs) == 135_168


@pytest.mark.parametrize(
    ("keys", "names"),
    [
        ({"speculative_config": {"method": "lookahead"}}, "speculative_config.method 'lookahead' unknown"),
        ({"speculative_config": "{bad"}, "speculative_config: not valid JSON"),
        ({"speculative_config": {"method": "eagle3"}}, "speculative_config.draft_parameters"),
        ({"cpu_offload_gb": -1}, "cpu_offload_gb: Input should be greater than or equal to 0"),
        ({"engine": "sglang", "cpu_offload_gb": 4}, "cpu_offload_gb: a setting of vllm"),
    ],
)
def test_bad_config_keys_are_refused_naming_the_key(keys: dict[str, object], names: str) -> None:
    from advisor.config import parse_config
    from advisor.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config(_config(**keys))
    assert names in str(err.value)
