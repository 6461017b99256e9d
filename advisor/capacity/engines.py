"""KV capacity under engines other than vLLM: SGLang, TGI, TensorRT-LLM and llama.cpp.

Each engine turns a memory budget into KV tokens in its own way; this module reproduces each rule closely
enough for the rules to reason about every engine, reusing the architecture arithmetic of
:mod:`advisor.capacity.kv` (weights per GPU, KV bytes per token per GPU, activation of a forward pass).
All four are *documented approximations*: the terms each engine measures at start-up (free memory after
the CUDA context, the warm-up peak) are modelled, and where the engine logs its capacity, the live rules
should use the log. The sources read (file and function) are cited per engine.

SGLang — ``python/sglang/srt/model_executor/model_runner.py`` (``ModelRunner.init_torch_distributed``,
``profile_max_num_token``, ``init_memory_pool``; read in the 0.3.6, 0.4.x and 0.5.2–0.5.9 wheels) and
``python/sglang/srt/server_args.py`` (default ``mem_fraction_static``, by version: see
:func:`sglang_default_mem_fraction_static`)::

    free_before_load  = total − resident_before_load − memory other processes hold      (per GPU)
        (``total_gpu_memory``: ``get_available_gpu_memory`` at the end of ``init_torch_distributed``, the
         "Load weight begin. avail mem" line; resident = CUDA context + NCCL/custom all-reduce buffers,
         :func:`sglang_resident_before_load_bytes`)
    rest              = available_after_load − free_before_load × (1 − mem_fraction_static)
                      = free_before_load × mem_fraction_static − weights
    cell_size         = kv_heads_per_gpu × head_dim × layers × 2 × kv bytes   (MLA: (kv_lora_rank +
                        qk_rope_head_dim) × layers × kv bytes, not divided by TP)
    max_total_num_tokens = rest × 2^30 // cell_size, rounded down to page_size (1 by default)

  Not modelled: ``--max-total-tokens`` (a cap, the smaller wins), speculative decoding (the pool grows by
  ``max_num_reqs × (steps × topk + draft tokens) + 100`` shared with the draft model), hybrid sliding-window and
  Mamba models' split pools, and the all-reduce MIN over ranks of the free memory (equal ranks assumed).

TGI — ``server/text_generation_server/models/flash_causal_lm.py`` (``FlashCausalLM.warmup``),
``server/text_generation_server/utils/import_utils.py`` (``get_cuda_free_memory``) and
``server/text_generation_server/models/globals.py`` (``TGI_WIGGLE_ROOM`` = 0.95, ``BLOCK_SIZE``)::

    free        = free after the warm-up prefill of max_batch_prefill_tokens − (1 − cuda_memory_fraction)
                  × total                                  (--cuda-memory-fraction, default 1.0; what other
                                                            processes hold is not free)
    num_blocks  = (free × 0.95) // (BLOCK_SIZE × KV bytes per token per GPU)
    max_batch_total_tokens = num_blocks × BLOCK_SIZE       (BLOCK_SIZE 1 with the flashinfer attention of
                                                            TGI ≥ 3, 16 with the paged kernels of TGI 2)

  The free memory after warm-up is modelled as total − weights − the forward peak of the warm-up batch
  (``max_batch_prefill_tokens``, default 4096) − non-torch memory; the blocks of the warm-up batch that TGI
  adds back (at most 4096 tokens) are ignored.

TensorRT-LLM — ``tensorrt_llm/llmapi/llm_args.py`` (``KvCacheConfig.free_gpu_memory_fraction`` default
0.9, ``tokens_per_block`` default 32; TensorRT engines built by ≤ 0.16 default to 64) and
``tensorrt_llm/_torch/pyexecutor/_util.py`` (``KvCacheCreator``: the fraction applies to the memory free
after the weights and a warm-up of ``max_num_tokens``)::

    free    = total − weights − forward peak at max_num_tokens (default 8192) − non-torch memory
    blocks  = (free × free_gpu_memory_fraction) // (tokens_per_block × KV bytes per token per GPU)
              (free: what other processes hold is not free; kv_cache_config.max_tokens, when given, caps
              the blocks at ceil(max_tokens ÷ tokens_per_block): "the minimum will be used")
    tokens  = blocks × tokens_per_block

llama.cpp — ``src/llama-context.cpp`` (``llama_context`` constructor: ``n_ctx`` padded, ``n_ctx_seq =
n_ctx / n_seq_max``), ``src/llama-kv-cache.cpp`` (one K and one V tensor of ``n_ctx`` cells per layer,
``type_k``/``type_v`` f16 by default) and ``tools/server/server.cpp`` (``--parallel`` slots)::

    pool    = ctx_size cells (padded up to a multiple of 256), allocated whatever the GPU memory (builds from
              late 2025, PR #17046, also pad each slot's share to 256 without --kv-unified: not modelled)
    slot    = ctx_size ÷ parallel tokens: the longest request a slot serves (ctx_size with --kv-unified,
              the slots then share the cells: ``n_ctx_seq = kv_unified ? n_ctx : n_ctx / n_seq_max``)
    bytes   = 2 × layers × kv_heads × head_dim × kv type bytes per cell (f16 2, q8_0 34/32, q4_0 18/32),
              layers split across GPUs (``--split-mode layer``), no tensor-parallel split of heads
    concurrency = parallel when max-model-len ≤ slot, else 0

  The GPU memory does not size the pool: it only decides whether weights + pool fit (else llama.cpp fails
  to allocate or must offload layers with ``-ngl``), which is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

from advisor.capacity.generation import engine_accounting
from advisor.capacity.hardware import GIB
from advisor.capacity.kv import (
    ACCOUNTING_ENGINES,
    OVERHEAD_PROFILES,
    CapacityInputs,
    CapacityResult,
    EngineSettings,
    across_ranks,
    activation_peak_bytes,
    kv_bytes_per_token_per_gpu,
    max_concurrency,
    parse_version,
    weights_bytes_per_gpu,
)
from advisor.capacity.models import ModelArch
from advisor.capacity.weights import llamacpp_weights_bytes_per_gpu
from advisor.errors import CapacityError, UnknownNameError, WontStartError

__all__ = [
    "ENGINES",
    "LLAMACPP_CTX_PADDING",
    "LLAMACPP_KV_TYPE_BYTES",
    "SGLANG_CUDA_CONTEXT_BYTES",
    "SGLANG_LEGACY_MEM_FRACTION",
    "SGLANG_TP_INIT_BYTES",
    "SGLANG_TP_INIT_NVSWITCH_BYTES_PER_GPU",
    "TGI_WIGGLE_ROOM",
    "EngineCapacity",
    "EngineSettings",
    "engine_capacity_pass",
    "llamacpp_capacity",
    "sglang_capacity",
    "sglang_default_mem_fraction_static",
    "sglang_resident_before_load_bytes",
    "tgi_capacity",
    "trtllm_capacity",
]

ENGINES: Final = ACCOUNTING_ENGINES
"""Engine names ``plan --engine`` accepts (:data:`advisor.capacity.kv.ACCOUNTING_ENGINES`)."""

MIB: Final = 1 << 20
TGI_WIGGLE_ROOM: Final = 0.95
"""``TGI_WIGGLE_ROOM`` default in TGI's ``models/globals.py``: 5 % of the free memory is left unused."""
TGI_DEFAULT_CUDA_MEMORY_FRACTION: Final = 1.0
"""``--cuda-memory-fraction`` default of ``text-generation-launcher``."""
TGI_DEFAULT_PREFILL_TOKENS: Final = 4096
"""``--max-batch-prefill-tokens`` default of ``text-generation-launcher``."""
TRTLLM_DEFAULT_FREE_FRACTION: Final = 0.9
TRTLLM_DEFAULT_TOKENS_PER_BLOCK: Final = 32
TRTLLM_DEFAULT_MAX_NUM_TOKENS: Final = 8192
LLAMACPP_CTX_PADDING: Final = 256
"""``n_ctx`` is rounded up to a multiple of the KV cache padding (256 in current llama.cpp)."""
LLAMACPP_MAX_SEQUENCES: Final = 256
"""The most slots (``--parallel``) llama.cpp starts with: ``LLAMA_MAX_SEQ`` (``src/llama-cparams.h``); a context
with more throws "n_seq_max must be <= 256" (``src/llama-context.cpp``), so the server does not come up."""
LLAMACPP_KV_TYPE_BYTES: Final[dict[str, float]] = {
    "f16": 2.0,
    "float16": 2.0,
    "bf16": 2.0,
    "bfloat16": 2.0,
    "f32": 4.0,
    "float32": 4.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
}
"""Bytes per K/V element of llama.cpp's ``--cache-type-k/-v`` (q8_0: 32 int8 + one f16 scale per block)."""
SGLANG_LEGACY_MEM_FRACTION: Final[dict[int, float]] = {1: 0.88, 2: 0.87, 4: 0.85, 8: 0.81, 16: 0.79}
"""The TP-only ``mem_fraction_static`` table of SGLang 0.4.0–0.4.5 (``server_args.py``), for reference
(:func:`sglang_default_mem_fraction_static` applies it by version)."""
SGLANG_CUDA_CONTEXT_BYTES: Final = int(0.5 * GIB)
"""CUDA context resident before SGLang measures its free memory (:func:`sglang_resident_before_load_bytes`)."""
SGLANG_TP_INIT_BYTES: Final = int(0.26 * GIB)
"""``Init torch distributed`` memory at TP > 1 off NVSwitch (:func:`sglang_resident_before_load_bytes`)."""
SGLANG_TP_INIT_NVSWITCH_BYTES_PER_GPU: Final = int((2.01 - 0.26) / 8 * GIB)
"""Further ``Init torch distributed`` memory per GPU of the TP group on NVSwitch nodes
(:func:`sglang_resident_before_load_bytes`)."""


@dataclass(frozen=True)
class EngineCapacity:
    """An engine's capacity: the common :class:`CapacityResult` plus the engine's own parameters and notes.

    Attributes:
        engine: ``sglang``, ``tgi``, ``trtllm`` or ``llamacpp``.
        result: weights, pool, blocks (pages / slots' cells), tokens, concurrency.
        parameters: the engine settings actually used (defaults resolved), by the engine's flag names.
        notes: what is approximated and what the engine would report.
    """

    engine: str
    result: CapacityResult
    parameters: dict[str, float | int | str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _fraction(name: str, value: float) -> float:
    if not 0.0 < value <= 1.0:
        raise CapacityError(f"{name} must be in (0, 1], got {value}")
    return value


def _v1(inputs: CapacityInputs, block_size: int) -> CapacityInputs:
    """The inputs with the vLLM-V1 shapes (no V0 MLA padding or absorbed weights) and the engine's block."""
    return replace(
        inputs,
        overhead_profile="vllm-v1",
        block_size=block_size,
        kv_cache_memory_bytes=None,
        num_gpu_blocks_override=None,
        accounting=None,
    )


def _result(
    inputs: CapacityInputs,
    weights: int,
    overhead: int,
    pool: int,
    per_token_gpu: int,
    blocks: int,
    engine: str,
    *,
    activation: int | None = None,
    non_torch: int | None = None,
) -> CapacityResult:
    """The engine's result; ``activation`` and ``non_torch``: the terms its rule subtracts, None where the rule
    has none (unknown, not 0). No rule here counts CUDA graphs, so that term is unknown (None)."""
    max_len = inputs.effective_max_model_len
    return CapacityResult(
        weights_bytes_per_gpu=weights,
        kv_cache_bytes_per_token=per_token_gpu * inputs.tensor_parallel_size * inputs.pipeline_parallel_size,
        kv_cache_bytes_per_token_per_gpu=per_token_gpu,
        overhead_bytes_per_gpu=overhead,
        kv_pool_bytes_per_gpu=pool,
        kv_cache_blocks=blocks,
        kv_cache_tokens=blocks * inputs.block_size,
        max_concurrency=max_concurrency(inputs, pool, blocks, max_len),
        max_model_len=max_len,
        block_size=inputs.block_size,
        tensor_parallel_size=inputs.tensor_parallel_size,
        gpu_memory_bytes=inputs.gpu_memory_bytes,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        model_name=inputs.model.name,
        dtype=inputs.compute_dtype,
        quantization=inputs.quantization,
        kv_cache_dtype=inputs.kv_cache_dtype,
        overhead_profile=engine,
        activation_peak_bytes_per_gpu=activation,
        non_torch_bytes_per_gpu=non_torch,
        accounting=engine_accounting(engine, inputs.engine_version),
    )


def _check_weights(inputs: CapacityInputs, weights: int, budget: float, what: str) -> None:
    if weights >= budget:
        raise WontStartError(
            f"{inputs.model.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={inputs.tensor_parallel_size} "
            f"but {what} is {budget / GIB:.2f} GiB",
            "raise TP, quantize, or use a larger GPU",
        )


def _runtime_bytes(inputs: CapacityInputs) -> int:
    """CUDA context, cuBLAS workspaces (+ NCCL under TP): the non-torch terms of the vLLM V1 profile."""
    om = OVERHEAD_PROFILES["vllm-v1"]
    return om.non_torch_bytes + (om.tp_non_torch_bytes if inputs.tensor_parallel_size > 1 else 0)


def _forward_bytes(inputs: CapacityInputs, tokens: int) -> int:
    """Forward-pass activation peak over ``tokens`` tokens (the :class:`OverheadModel` forward term)."""
    forward, _ = activation_peak_bytes(replace(inputs, max_num_batched_tokens=tokens, max_num_seqs=1))
    return forward


# --- SGLang ------------------------------------------------------------------------------------------------


def _sglang_tp_table(parallel: int, tp8: float = 0.81) -> float:
    """The TP-only default of SGLang ≤ 0.4.7 (``server_args.py`` ``ServerArgs.__post_init__``)."""
    if parallel >= 16:
        return 0.79
    if parallel >= 8:
        return tp8
    if parallel >= 4:
        return 0.85
    return 0.87 if parallel >= 2 else 0.88


def sglang_default_mem_fraction_static(
    gpu_memory_bytes: int, tp: int = 1, pp: int = 1, engine_version: str | None = None
) -> float:
    """SGLang's default ``mem_fraction_static`` at ``engine_version`` (``python/sglang/srt/server_args.py``;
    None = the newest rule). ``gpu_mem`` is the device memory in MiB (SGLang reads ``nvidia-smi``'s
    ``memory.total``; we take the CUDA total, about 0.5 GiB less on an H100, which moves the fraction by
    ≤ 0.001). The rules, by the wheel each was read from:

    * < 0.4.0 (0.3.6): TP ≥ 16 0.79, ≥ 8 0.82, ≥ 4 0.85, ≥ 2 0.87, else 0.88.
    * 0.4.0–0.4.5: the same table with 0.81 at TP ≥ 8.
    * 0.4.6: that table when ``gpu_mem`` ≤ 81,920, else ``(gpu_mem − 13·1024) / gpu_mem``.
    * 0.4.7: the table over TP × PP when ≤ 81,920, else 0.88; then 0.79 above 180,000 MiB, and above
      96 GiB ``min(f + 48·1024·(1 − f)/gpu_mem, (gpu_mem − 18·1024)/gpu_mem)``.
    * 0.4.8–0.5.2: ``round((gpu_mem − reserved) / gpu_mem, 3)``, reserved (MiB) by GPU class: < 35 GiB
      (2.8 + TP·PP/10)·1024, < 90 GiB (9.5 + TP·PP/2)·1024, < 160 GiB (12 + TP·PP/2)·1024, else 32·1024.
    * ≥ 0.5.3 (``_handle_gpu_memory_settings``): reserved = 512 + 1.5 × max(chunked_prefill_size, 2048)
      + 2 × cuda_graph_max_bs + TP·PP/8 · 1024, at least 10·1024 above 60 GiB; chunked_prefill_size and
      cuda_graph_max_bs by class: < 20 GiB 2048/8, < 35 GiB 2048/(16 (0.5.3–0.5.4) or 24 if TP < 4, else 80),
      < 60 GiB 4096/(32 if TP < 4 else 160), < 160 GiB 8192/(256 if TP < 4 else 512), else 16384/512.

    Not modelled (no input carries them): + 2 GiB reserved with speculative decoding (6 GiB STANDALONE),
    + 4 GiB (≥ 0.5.3: + 3 × cuda_graph_max_bs × DP) with DP attention, × 0.9 for multimodal models (≥ 0.4.9),
    + 8 MiB per piecewise-CUDA-graph size when that is enabled.

    >>> sglang_default_mem_fraction_static(80 * GIB, engine_version="0.5.2")   # (81920 − 10240) / 81920
    0.875
    >>> sglang_default_mem_fraction_static(80 * GIB)    # (81920 − (512 + 12288 + 512 + 128)) / 81920
    0.836
    """
    gpu_mem = gpu_memory_bytes / MIB
    parallel = tp * pp
    version = parse_version(engine_version)
    if version is not None and version < (0, 4, 0):
        return _sglang_tp_table(tp, tp8=0.82)
    if version is not None and version < (0, 4, 6):
        return _sglang_tp_table(tp)
    if version is not None and version < (0, 4, 7):
        return _sglang_tp_table(tp) if gpu_mem <= 81920 else (gpu_mem - 13 * 1024) / gpu_mem
    if version is not None and version < (0, 4, 8):
        fraction = _sglang_tp_table(parallel) if gpu_mem <= 81920 else 0.88
        if gpu_mem > 180_000:
            return 0.79
        if gpu_mem > 96 * 1024:
            return min(fraction + 48 * 1024 * (1 - fraction) / gpu_mem, (gpu_mem - 18 * 1024) / gpu_mem)
        return fraction
    if version is not None and version < (0, 5, 3):
        if gpu_mem < 35 * 1024:
            reserved = (2.8 + parallel / 10) * 1024
        elif gpu_mem < 90 * 1024:
            reserved = (9.5 + parallel / 2) * 1024
        elif gpu_mem < 160 * 1024:
            reserved = (12 + parallel / 2) * 1024
        else:
            reserved = 32 * 1024.0
        return round((gpu_mem - reserved) / gpu_mem, 3)
    chunked, graph_bs = _sglang_chunk_and_graph_bs(gpu_mem, tp, version)
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + parallel / 8 * 1024
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mem - reserved) / gpu_mem, 3)


def _sglang_chunk_and_graph_bs(gpu_mem: float, tp: int, version: tuple[int, ...] | None) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) defaults of SGLang ≥ 0.5.3 by ``gpu_mem`` (MiB)
    (``server_args.py`` ``ServerArgs._handle_gpu_memory_settings``)."""
    small = tp < 4
    if gpu_mem < 20 * 1024:
        return 2048, 8
    if gpu_mem < 35 * 1024:
        return 2048, (16 if version is not None and version < (0, 5, 5) else 24) if small else 80
    if gpu_mem < 60 * 1024:
        return 4096, 32 if small else 160
    if gpu_mem < 160 * 1024:
        return 8192, 256 if small else 512
    return 16384, 512


def sglang_resident_before_load_bytes(inputs: CapacityInputs) -> int:
    """What SGLang's process holds on each GPU when it measures the free memory that ``mem_fraction_static``
    multiplies (``ModelRunner.init_torch_distributed`` returns ``get_available_gpu_memory`` taken after
    ``init_distributed_environment``; 0.3.6–0.5.9 alike), bytes: the CUDA context, plus NCCL and custom
    all-reduce buffers when TP × PP > 1.

    * :data:`SGLANG_CUDA_CONTEXT_BYTES` (0.5 GiB): device total − "Load weight begin. avail mem" −
      "Init torch distributed ends. mem usage": 139.81 − 137.29 − 2.01 = 0.51 GiB on H200
      (sgl-project/sglang#11716); one GPU: "mem usage=0.00 GB" (sgl-project/sglang#15426).
    * :data:`SGLANG_TP_INIT_BYTES` (0.26 GiB ± 0.13): "Init torch distributed ends. mem usage" at TP 4 over
      PCIe, 0.13 GB on 4 × L4 with 0.4.3.post4 (didier-durand/llms-in-clouds docs/sglang.md) and 0.39 GB on
      4 × RTX PRO 6000 in 2026 (sgl-project/sglang#40558): their mean.
    * NVSwitch nodes (``nvlink_sharp``) allocate more per GPU of the group (NCCL's NVLS buffers):
      :data:`SGLANG_TP_INIT_NVSWITCH_BYTES_PER_GPU` × TP, from "mem usage=2.01 GB" at TP 8 on H200
      (sgl-project/sglang#11716): (2.01 − 0.26) / 8 GiB per GPU, a two-point fit.
    """
    resident = SGLANG_CUDA_CONTEXT_BYTES
    tp = inputs.tensor_parallel_size
    if tp * inputs.pipeline_parallel_size > 1:
        resident += SGLANG_TP_INIT_BYTES
        if inputs.nvlink_sharp and tp > 1:
            resident += SGLANG_TP_INIT_NVSWITCH_BYTES_PER_GPU * min(tp, 8)
    return resident


def sglang_capacity(inputs: CapacityInputs, settings: EngineSettings | None = None) -> EngineCapacity:
    """SGLang's ``max_total_num_tokens`` (see the module docstring).

    Example: Llama-3.1-8B bf16 on an 80 GiB GPU, TP1, SGLang 0.5.2: mem_fraction_static 0.875; free before
    load 80 − 0.5 = 79.5 GiB; 0.875 × 79.5 − 14.99 weights = 54.57 GiB; ÷ 131,072 B per token = 447,068 tokens.
    """
    s = settings or EngineSettings()
    page = s.page_size or 1
    if page < 1:
        raise CapacityError(f"page_size must be ≥ 1, got {page}")
    inp = _v1(inputs, page)
    mfs = s.mem_fraction_static
    given = mfs is not None or inputs.engine == "sglang"
    if mfs is None and inputs.engine == "sglang":
        mfs = inputs.gpu_memory_utilization  # the budget dial carries it (advisor.capacity.deployment)
    if mfs is None:
        mfs = sglang_default_mem_fraction_static(
            inp.gpu_memory_bytes, inp.tensor_parallel_size, inp.pipeline_parallel_size, inputs.engine_version
        )
    mfs = _fraction("mem_fraction_static", mfs)
    weights = weights_bytes_per_gpu(inp)
    resident = sglang_resident_before_load_bytes(inp)
    free_before_load = inp.gpu_memory_bytes - inputs.gpu_memory_used_by_others_bytes - resident
    budget = free_before_load * mfs
    if inputs.kv_cache_memory_bytes is not None:
        pool = inputs.kv_cache_memory_bytes
    else:
        _check_weights(inp, weights, budget, f"mem_fraction_static {mfs} × the memory free before loading")
        pool = math.floor(budget - weights)
    cell = kv_bytes_per_token_per_gpu(inp)
    tokens = pool // cell // page * page
    notes = (
        f"mem_fraction_static {mfs} ({'given or resolved' if given else 'SGLang default'}) of the memory free "
        f"before loading ({free_before_load / GIB:.2f} GiB: the device less "
        f"{resident / GIB:.2f} GiB of CUDA context and NCCL buffers"
        + (" and the memory other processes hold" if inputs.gpu_memory_used_by_others_bytes else "")
        + "): weights and KV pool share it; activations and CUDA graphs use the rest",
        "tokens are SGLang's max_total_num_tokens (token-granular pages); use the engine's log line "
        "'max_total_num_tokens=' where available",
    )
    params: dict[str, float | int | str] = {"mem_fraction_static": mfs, "page_size": page}
    if inputs.engine_version:
        params["engine_version"] = inputs.engine_version
    return EngineCapacity(
        "sglang", _result(inp, weights, resident, pool, cell, tokens // page, "sglang"), params, notes
    )


# --- TGI ---------------------------------------------------------------------------------------------------


def tgi_capacity(inputs: CapacityInputs, settings: EngineSettings | None = None) -> EngineCapacity:
    """TGI's ``max_batch_total_tokens`` inferred at warm-up (see the module docstring).

    Example: Llama-3.1-8B bf16 on an 80 GiB GPU, TP1, defaults: free = 80 − 14.99 weights − 0.52 warm-up
    forward (4096 tokens) − 0.13 runtime = 64.37 GiB; × 0.95 ÷ 131,072 B = 500,918 tokens (BLOCK_SIZE 1).
    """
    s = settings or EngineSettings()
    block = s.tgi_block_size or 1
    inp = _v1(inputs, block)
    frac = s.cuda_memory_fraction
    if frac is None:
        # the budget dial carries it for a TGI deployment (advisor.capacity.deployment)
        frac = inputs.gpu_memory_utilization if inputs.engine == "tgi" else TGI_DEFAULT_CUDA_MEMORY_FRACTION
    frac = _fraction("cuda_memory_fraction", frac)
    prefill = s.max_batch_prefill_tokens or TGI_DEFAULT_PREFILL_TOKENS
    weights = weights_bytes_per_gpu(inp)
    activation, runtime = _forward_bytes(inp, prefill), _runtime_bytes(inp)
    overhead = activation + runtime
    total = inp.gpu_memory_bytes
    if inputs.kv_cache_memory_bytes is not None:
        pool = inputs.kv_cache_memory_bytes
    else:
        _check_weights(inp, weights, total * frac, f"cuda_memory_fraction {frac} × the GPU")
        free = max(0.0, total - inputs.gpu_memory_used_by_others_bytes - weights - overhead - (1 - frac) * total)
        pool = math.floor(free * TGI_WIGGLE_ROOM)
    per_token = kv_bytes_per_token_per_gpu(inp)
    blocks = pool // (block * per_token)
    if blocks <= 0:
        raise WontStartError(
            f"{inp.model.name}: no memory left for TGI's KV cache after weights and warm-up",
            "raise TP, quantize, or use a larger GPU",
        )
    notes = (
        f"free memory after a warm-up prefill of {prefill} tokens, less (1 − {frac}) × total, × TGI_WIGGLE_ROOM "
        f"{TGI_WIGGLE_ROOM}",
        "tokens are TGI's inferred max_batch_total_tokens ('Setting max batch total tokens to …' in its log)",
    )
    params: dict[str, float | int | str] = {
        "cuda_memory_fraction": frac,
        "max_batch_prefill_tokens": prefill,
        "block_size": block,
    }
    result = _result(inp, weights, overhead, pool, per_token, blocks, "tgi", activation=activation, non_torch=runtime)
    return EngineCapacity("tgi", result, params, notes)


# --- TensorRT-LLM ------------------------------------------------------------------------------------------


def memory_budget(inputs: CapacityInputs) -> float:
    """The fraction that sizes the deployment's KV pool, the value of the ``gpu_memory_utilization`` dial:
    TensorRT-LLM's ``kv_cache_free_gpu_memory_fraction`` (a share of the memory the weights and activations leave,
    :data:`TRTLLM_DEFAULT_FREE_FRACTION` unless set; :func:`trtllm_capacity` reads no other), else
    ``gpu_memory_utilization`` (a share of the device, as vLLM reads it and the other engines' fractions are read)."""
    if inputs.engine == "trtllm":
        s = inputs.engine_settings.free_gpu_memory_fraction
        return TRTLLM_DEFAULT_FREE_FRACTION if s is None else s
    return inputs.gpu_memory_utilization


def memory_budget_name(inputs: CapacityInputs) -> str:
    """The setting :func:`memory_budget` reads, as the engine names it (``kv_cache_free_gpu_memory_fraction`` on
    TensorRT-LLM, else ``gpu_memory_utilization``)."""
    return "kv_cache_free_gpu_memory_fraction" if inputs.engine == "trtllm" else "gpu_memory_utilization"


def with_memory_budget(inputs: CapacityInputs, value: float) -> CapacityInputs:
    """``inputs`` with :func:`memory_budget` set to ``value`` (0–1]: TensorRT-LLM's free fraction, else
    ``gpu_memory_utilization``. Raises :class:`~advisor.errors.CapacityError` for a value out of range."""
    if inputs.engine == "trtllm":
        _fraction("kv_cache_free_gpu_memory_fraction", value)
        return replace(inputs, engine_settings=replace(inputs.engine_settings, free_gpu_memory_fraction=value))
    return replace(inputs, gpu_memory_utilization=value)


def trtllm_capacity(inputs: CapacityInputs, settings: EngineSettings | None = None) -> EngineCapacity:
    """TensorRT-LLM's KV pool: ``kv_cache_free_gpu_memory_fraction`` of what is free after the weights and
    activations, in blocks of ``tokens_per_block`` (see the module docstring).

    Example: Llama-3.1-8B bf16 on an 80 GiB GPU, TP1, defaults: free = 80 − 14.99 − 1.03 (forward at 8192
    tokens) − 0.13 = 63.85 GiB; × 0.9 ÷ (32 × 131,072 B) = 14,711 blocks = 470,752 tokens.
    """
    s = settings or EngineSettings()
    tpb = s.tokens_per_block or TRTLLM_DEFAULT_TOKENS_PER_BLOCK
    inp = _v1(inputs, tpb)
    frac = _fraction(
        "kv_cache_free_gpu_memory_fraction",
        TRTLLM_DEFAULT_FREE_FRACTION if s.free_gpu_memory_fraction is None else s.free_gpu_memory_fraction,
    )
    max_tokens = s.max_num_tokens or TRTLLM_DEFAULT_MAX_NUM_TOKENS
    weights = weights_bytes_per_gpu(inp)
    activation, runtime = _forward_bytes(inp, max_tokens), _runtime_bytes(inp)
    overhead = activation + runtime
    if inputs.kv_cache_memory_bytes is not None:
        pool = inputs.kv_cache_memory_bytes
    else:
        free = inp.gpu_memory_bytes - inputs.gpu_memory_used_by_others_bytes
        _check_weights(inp, weights, free, "the GPU's free memory")
        pool = math.floor(max(0, free - weights - overhead) * frac)
    per_token = kv_bytes_per_token_per_gpu(inp)
    blocks = pool // (tpb * per_token)
    notes = [
        f"{frac} of the memory free after weights and a {max_tokens}-token activation workspace",
        "TensorRT-LLM logs the pool as '[MemUsageChange] Allocated … GiB for max tokens in paged KV cache (…)'",
    ]
    params: dict[str, float | int | str] = {
        "kv_cache_free_gpu_memory_fraction": frac,
        "tokens_per_block": tpb,
        "max_num_tokens": max_tokens,
    }
    if s.max_tokens is not None:
        # kv_cache_config.max_tokens caps the pool: the smaller of it and the fraction's memory is used
        capped = -(-s.max_tokens // tpb)
        if capped < blocks:
            notes.append(f"kv_cache_config.max_tokens {s.max_tokens:,} caps the pool below the memory fraction")
        blocks = min(blocks, capped)
        pool = min(pool, blocks * tpb * per_token)
        params["max_tokens"] = s.max_tokens
    if blocks <= 0:
        raise WontStartError(
            f"{inp.model.name}: no memory left for TensorRT-LLM's KV cache after weights",
            "raise TP, quantize, or use a larger GPU",
        )
    result = _result(
        inp, weights, overhead, pool, per_token, blocks, "trtllm", activation=activation, non_torch=runtime
    )
    return EngineCapacity("trtllm", result, params, tuple(notes))


# --- llama.cpp ---------------------------------------------------------------------------------------------


def memory_overcommit(result: CapacityResult, others_bytes: int = 0) -> str | None:
    """For an engine whose KV pool is set in tokens, not from free memory (llama.cpp's ``--ctx-size``): why the
    weights and the pool do not fit on the GPU, in numbers, or ``None``.

    ``weights + pool + others`` (bytes per GPU, ``others``: memory other processes hold) above the GPU's memory
    means the cache cannot be allocated with every layer on the GPU: llama.cpp then fails at load, or — where its
    automatic fitting applies (``--fit``, on by default in late-2025 builds) — shrinks the context or keeps layers
    on the CPU, so the pool or the speed is not what the configuration says. The compute buffers (0.3–1 GiB) come on
    top and are not counted, so ``None`` is not a guarantee.
    """
    need = result.weights_bytes_per_gpu + result.kv_pool_bytes_per_gpu + others_bytes
    if need <= result.gpu_memory_bytes:
        return None
    held = f" + {others_bytes / GIB:.2f} GiB held by other processes" if others_bytes else ""
    return (
        f"weights {result.weights_bytes_per_gpu / GIB:.2f} GiB + KV {result.kv_pool_bytes_per_gpu / GIB:.2f} GiB per "
        f"GPU{held} do NOT fit in {result.gpu_memory_bytes / GIB:.2f} GiB: the cache cannot be allocated with every "
        "layer on the GPU (lower the context or the slots, or quantize the cache)"
    )


def llamacpp_capacity(inputs: CapacityInputs, settings: EngineSettings | None = None) -> EngineCapacity:
    """llama.cpp's KV cache: ``--ctx-size`` cells whatever the GPU memory, split over ``--parallel`` slots.

    ``tensor_parallel_size`` is read as the number of GPUs the layers are split over (``--split-mode
    layer``); heads are not split. Example: Llama-3.1-8B, ``-c 32768 -np 4``, f16 cache: 32,768 cells ×
    2 × 32 × 8 × 128 × 2 B = 4 GiB, 8,192 tokens per slot, 4 concurrent requests of ≤ 8,192 tokens.
    """
    s = settings or EngineSettings()
    kv_type = s.llamacpp_kv_type.strip().lower()
    if kv_type not in LLAMACPP_KV_TYPE_BYTES:
        raise UnknownNameError(f"unknown llama.cpp cache type {kv_type!r}; known: {', '.join(LLAMACPP_KV_TYPE_BYTES)}")
    parallel = s.parallel or 1
    max_len = inputs.effective_max_model_len
    ctx = s.ctx_size if s.ctx_size is not None else max_len * parallel
    if parallel < 1 or ctx < 1:
        raise CapacityError(f"llama.cpp needs ctx_size ≥ 1 and parallel ≥ 1, got {ctx} and {parallel}")
    ctx = -(-ctx // LLAMACPP_CTX_PADDING) * LLAMACPP_CTX_PADDING
    gpus = inputs.tensor_parallel_size
    m = inputs.model
    split = replace(inputs, tensor_parallel_size=1, pipeline_parallel_size=min(gpus, m.num_layers))
    inp = _v1(split, 1)
    layers_on_gpu = math.ceil(m.attention_layers / inp.pipeline_parallel_size)
    if m.is_mla:
        per_layer = m.mla_latent_elements * LLAMACPP_KV_TYPE_BYTES[kv_type]
    else:
        per_layer = 2 * m.num_kv_heads * m.head_dim * LLAMACPP_KV_TYPE_BYTES[kv_type]
    per_token = math.ceil(per_layer * layers_on_gpu)
    pool = ctx * per_token
    weights = llamacpp_weights_bytes_per_gpu(inp)
    slot = ctx if s.kv_unified else ctx // parallel
    concurrency = float(parallel) if max_len <= slot else 0.0
    if s.kv_unified and max_len <= slot:
        concurrency = float(min(parallel, ctx // max(1, max_len)))
    others = inputs.gpu_memory_used_by_others_bytes
    result = CapacityResult(
        weights_bytes_per_gpu=weights,
        kv_cache_bytes_per_token=per_token * inp.pipeline_parallel_size,
        kv_cache_bytes_per_token_per_gpu=per_token,
        overhead_bytes_per_gpu=0,
        kv_pool_bytes_per_gpu=pool,
        kv_cache_blocks=ctx,
        kv_cache_tokens=ctx,
        max_concurrency=concurrency,
        max_model_len=max_len,
        block_size=1,
        tensor_parallel_size=gpus,
        gpu_memory_bytes=inputs.gpu_memory_bytes,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        model_name=m.name,
        dtype=inp.compute_dtype,
        quantization=inputs.quantization,
        kv_cache_dtype=kv_type,
        overhead_profile="llamacpp",
        max_request_tokens=None if s.kv_unified else slot,
        accounting=engine_accounting("llamacpp", inputs.engine_version),
    )
    overcommit = memory_overcommit(result, others)
    notes = [
        f"the pool is --ctx-size {ctx} cells regardless of GPU memory; {parallel} slot(s) "
        + (f"sharing them (--kv-unified), up to {slot} tokens each" if s.kv_unified else f"of {slot} tokens each"),
        overcommit
        or (
            f"weights {weights / GIB:.2f} GiB + KV {pool / GIB:.2f} GiB per GPU "
            + (f"+ {others / GIB:.2f} GiB held by other processes " if others else "")
            + f"fit in {inputs.gpu_memory_bytes / GIB:.2f} GiB (plus llama.cpp's compute buffers, typically 0.3-1 GiB)"
        ),
    ]
    if max_len > slot:
        notes.append(f"max-model-len {max_len} exceeds the {slot}-token slot: such requests are refused")
    if s.parallel is None:  # said, not silently taken as known (walkthrough, 2026-12-07)
        notes.append(
            "parallel 1 assumed (not given): a llama-server started without -np runs 4 slots sharing --ctx-size "
            "(auto --parallel with --kv-unified, ggml-org/llama.cpp PR #16736, October 2025; one slot before): "
            "give parallel and kv_unified as the server runs"
        )
    params: dict[str, float | int | str] = {"ctx_size": ctx, "parallel": parallel, "cache_type": kv_type}
    if s.kv_unified:
        params["kv_unified"] = "true"
    return EngineCapacity("llamacpp", result, params, tuple(notes))


def refuse_unsized_towers(m: ModelArch) -> None:
    """Refuse a model whose encoder towers are on but not sized (:attr:`ModelArch.unsized_towers`: Gemma 4's vision
    and audio towers), naming them and the settings that turn them off.

    Raises:
        CapacityError: a tower is on.
    """
    if not m.unsized_towers:
        return
    towers = " and ".join(m.unsized_towers)
    several = len(m.unsized_towers) > 1
    raise CapacityError(
        f"{m.name}: its {towers} tower{'s' if several else ''} (config.json "
        f"{', '.join(t + '_config' for t in m.unsized_towers)}) {'are' if several else 'is'} not sized (weights "
        "and the encoder's run in the memory profile), so the capacity pass cannot plan it with "
        f"{'them' if several else 'it'} on; plan it as served text-only: --language-model-only (or "
        "--limit-mm-per-prompt at 0 for every modality of the tower), language_model_only: true in a deployment"
    )


def engine_capacity_pass(engine: str, inputs: CapacityInputs, settings: EngineSettings | None = None) -> EngineCapacity:
    """Dispatch to the engine's rule (``vllm``: :func:`advisor.capacity.kv.vllm_capacity_pass`), one rank's
    result then counted over ``inputs.data_parallel_size`` ranks (:func:`advisor.capacity.kv.across_ranks`).
    :func:`advisor.capacity.kv.capacity_pass` calls this with ``inputs.engine`` and ``inputs.engine_settings``.

    Raises:
        CapacityError: an unknown engine, or the engine's rule leaves no KV memory.
    """
    from advisor.capacity.kv import vllm_capacity_pass

    m = inputs.model
    refuse_unsized_towers(m)
    if m.has_layer_kinds and engine != "vllm":
        raise CapacityError(
            f"{m.name}: its layers differ in head size or keep no KV of their own (Gemma 4); only vLLM's KV "
            f"accounting of such layers is modelled, not {engine}'s"
        )
    dp = inputs.data_parallel_size
    if engine == "vllm":
        return EngineCapacity("vllm", across_ranks(vllm_capacity_pass(inputs), dp))
    rules = {"sglang": sglang_capacity, "tgi": tgi_capacity, "trtllm": trtllm_capacity, "llamacpp": llamacpp_capacity}
    if engine not in rules:
        raise CapacityError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    cap = rules[engine](inputs, settings if settings is not None else inputs.engine_settings)
    return replace(cap, result=across_ranks(cap.result, dp)) if dp > 1 else cap
