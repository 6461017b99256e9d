"""What the capacity pass reads and returns: :class:`CapacityInputs` (with the checks vLLM makes before it
starts), :class:`EngineSettings` (the other engines' knobs) and :class:`CapacityResult`.

:class:`CapacityInputs` refuses, as :class:`~advisor.errors.CapacityError`, every combination the engine refuses at
start-up (each check cites the engine file that refuses it), and resolves the engine's defaults that depend on
several inputs (:attr:`CapacityInputs.profile_tokens`, :attr:`CapacityInputs.effective_sampler`). The pass itself:
:mod:`advisor.capacity.kv`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.capacity.generation import Accounting, kv_cache_dtype_problems, parse_version
from advisor.capacity.hardware import GIB
from advisor.capacity.lora import LoRASettings, lora_problems
from advisor.capacity.mixedprecision import TABLE_GROUPS
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import (
    bnb_4bit_bytes,
    device_support_problems,
    resolve_dtype,
    weight_bytes_per_param,
)
from advisor.capacity.profiles import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    OVERHEAD_PROFILES,
    SAMPLERS,
    V0_CHUNKED_PREFILL_2048_SINCE,
    V1_CHUNKED_PREFILL_OFF_SINCE,
    default_sampler,
    sampler_problems,
    uses_v2_model_runner,
)
from advisor.capacity.speculative import SpeculativeDraft
from advisor.errors import CapacityError

MAX_NUM_GPU_BLOCKS: Final = 1_000_000_000
"""``--num-gpu-blocks-override`` at most (a billion blocks: 16 billion tokens at 16 per block, far past any GPU):
the config's bound and the bound on what an engine may report (a larger number is a broken page, never a pool)."""


MAX_KV_CACHE_MEMORY_BYTES: Final = 16384 * 2**30
"""``--kv-cache-memory-bytes`` at most, 16 TiB per GPU (100× today's largest GPU): the config's and a report's bound."""


ACCOUNTING_ENGINES: Final = ("vllm", "sglang", "tgi", "trtllm", "llamacpp")
"""Engines with their own KV accounting (:mod:`advisor.capacity.engines`)."""


@dataclass(frozen=True)
class EngineSettings:
    """Engine-specific knobs, by each engine's own flag name (None = the engine's default).

    Attributes:
        mem_fraction_static: SGLang ``--mem-fraction-static``.
        page_size: SGLang ``--page-size`` (1).
        cuda_memory_fraction: TGI ``--cuda-memory-fraction`` (1.0).
        max_batch_prefill_tokens: TGI ``--max-batch-prefill-tokens`` (4096).
        tgi_block_size: TGI ``BLOCK_SIZE`` (1 for TGI ≥ 3 flashinfer, 16 for TGI 2 paged attention).
        free_gpu_memory_fraction: TensorRT-LLM ``kv_cache_config.free_gpu_memory_fraction`` (0.9).
        tokens_per_block: TensorRT-LLM ``tokens_per_block`` (32).
        max_num_tokens: TensorRT-LLM ``max_num_tokens`` (8192).
        max_tokens: TensorRT-LLM ``kv_cache_config.max_tokens``: a cap on the pool, tokens (the smaller of it
            and the fraction's memory is used, ``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig``).
        ctx_size: llama.cpp ``--ctx-size`` (total cells over all slots).
        parallel: llama.cpp ``--parallel`` (slots).
        kv_unified: llama.cpp ``--kv-unified``: the slots share one buffer, so a request may use the whole
            context (``src/llama-context.cpp``: ``n_ctx_seq = kv_unified ? n_ctx : n_ctx / n_seq_max``).
        llamacpp_kv_type: llama.cpp ``--cache-type-k/-v`` (f16).
    """

    mem_fraction_static: float | None = None
    page_size: int | None = None
    cuda_memory_fraction: float | None = None
    max_batch_prefill_tokens: int | None = None
    tgi_block_size: int | None = None
    free_gpu_memory_fraction: float | None = None
    tokens_per_block: int | None = None
    max_num_tokens: int | None = None
    max_tokens: int | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    kv_unified: bool = False
    llamacpp_kv_type: str = "f16"


@dataclass(frozen=True)
class CapacityInputs:
    """Everything the capacity pass reads (vLLM flag names in brackets).

    Attributes:
        model: the architecture.
        gpu_memory_bytes: device total as CUDA reports it, bytes (:attr:`GPUSpec.memory_bytes`).
        tensor_parallel_size: GPUs per pipeline stage [``--tensor-parallel-size``].
        gpu_memory_utilization: fraction of the device total vLLM may use [``--gpu-memory-utilization``].
        max_model_len: the longest request, tokens; None → ``model.context_tokens``
            [``--max-model-len``].
        dtype: weight/compute dtype [``--dtype``], ``auto`` = checkpoint dtype (float32 → bfloat16).
        quantization: ``None`` (the checkpoint's own method, if any), ``fp8``, ``int8``, ``awq``, ``gptq``,
            ``mxfp4``, ``nvfp4`` [``--quantization``].
        kv_cache_dtype: [``--kv-cache-dtype``] ``auto`` (= compute dtype), ``fp8``, ``fp8_e4m3``,
            ``fp8_e5m2``.
        max_num_seqs: the batch cap, sequences [``--max-num-seqs``]; sizes the sampler warm-up.
        max_num_batched_tokens: tokens per step [``--max-num-batched-tokens``]; sizes the activation peak.
            None → the engine's default (see :attr:`profile_tokens`).
        block_size: tokens per KV block [``--block-size``].
        kv_cache_memory_bytes: per-GPU KV pool override, bytes [``--kv-cache-memory-bytes``].
        num_gpu_blocks_override: the pool fixed by the operator, blocks [``--num-gpu-blocks-override``]:
            replaces the block count the profile yields (``vllm/v1/core/kv_cache_utils.py``
            ``may_override_num_blocks``, V0 ``LLMEngine._initialize_kv_caches``), whatever the memory; the pool
            is then exactly ``N × block_size`` tokens.
        overhead_profile: key of :data:`OVERHEAD_PROFILES`.
        engine_version: the vLLM version the figures should follow (pick the profile with
            :func:`profile_for_version`); it also selects what counts as non-torch memory
            (:attr:`counts_whole_device`) and the default sampler (:func:`default_sampler`).
        enforce_eager: no CUDA graphs [``--enforce-eager``] (graphs are outside the sized budget in ≤ 0.10).
        pipeline_parallel_size: pipeline stages [``--pipeline-parallel-size``]; each holds its share of layers.
        enable_expert_parallel: experts are split whole across the TP ranks [``--enable-expert-parallel``].
        nvlink_sharp: the GPUs sit behind an NVSwitch with NVLink SHARP (:attr:`GPUSpec.nvlink_sharp`); with
            TP > 2 NCCL then allocates NVLS buffers (see :func:`non_torch_bytes_per_gpu`).
        engine: whose KV accounting sizes the pool, one of :data:`ACCOUNTING_ENGINES` (``vllm``: this
            module; the others: :mod:`advisor.capacity.engines`). :func:`capacity_pass` dispatches on it.
        engine_settings: the other engines' own knobs (:class:`EngineSettings`).
        data_parallel_size: data-parallel ranks behind one endpoint [``--data-parallel-size``; SGLang
            ``--dp-size``], each a full copy of the model on TP × PP GPUs with its own KV pool. The result
            counts blocks, tokens and concurrency over all ranks; a request still has to fit one rank.
        gpu_memory_used_by_others_bytes: memory other processes hold on each GPU before the engine starts,
            bytes. Engines that measure free memory lose it from the pool (SGLang, TGI, TensorRT-LLM); vLLM
            budgets ``gpu_memory_utilization`` × total for itself and refuses to start when less is free; vLLM
            releases that count the whole device as non-torch memory (V0 ≤ 0.6.4, V1 0.8-0.9.0) lose it from the
            pool instead (:func:`non_torch_bytes_per_gpu`).
        disable_hybrid_kv_cache_manager: [``--disable-hybrid-kv-cache-manager``] vLLM V1 ≥ 0.9.1 then keeps a
            sliding-window hybrid in one full-attention group (:func:`hybrid_kv_layout`). vLLM also sets it
            itself with a KV connector (``--kv-transfer-config``), KV events, or off CUDA/ROCm.
        compute_capability: the GPU's CUDA compute capability, ``(major, minor)`` (``GPUSpec.compute_capability``);
            None = unknown. It picks vLLM's MXFP4 MoE kernel and so the padding of MXFP4 experts
            (:func:`~advisor.capacity.precision.mxfp4_padded_expert_shape`): unknown pads nothing.
        sampler: the top-k/top-p sampler the warm-up runs, ``flashinfer`` (no sort) or ``torch`` (sorts the
            vocabulary); None = what the official ``vllm/vllm-openai`` image runs (:func:`default_sampler`:
            FlashInfer on V1 0.8-0.11.0, the torch sampler otherwise) [``VLLM_USE_FLASHINFER_SAMPLER``, and whether
            flashinfer is installed].
        accounting: which engine generation sizes the pool and why
            (:func:`advisor.capacity.generation.vllm_accounting`, decided by the deployment resolver from the
            version, the GPU's compute capability and the features); None → the ``overhead_profile``'s, from
            ``engine_version`` alone. Its profile must be ``overhead_profile``.
        cpu_offload_bytes: weights vLLM may move to host memory on each GPU, bytes [``--cpu-offload-gb`` × 2³⁰];
            see :func:`cpu_offload_bytes_per_gpu`.
        mla_align_kv_cache: V0 pads MLA cache entries to 256 bytes [``VLLM_CUDA_MEM_ALIGN_KV_CACHE``, default on];
            False: unpadded (576 bf16 elements = 1,152 B, not 1,280).
        speculative: the draft of ``--speculative-config`` (:mod:`advisor.capacity.speculative`): its attention
            layers share the KV pool, its weights load on the GPU; None = no speculative decoding.
        estimate_cuda_graphs: vLLM ≥ 0.20 subtracts its CUDA-graph estimate before the KV cache
            [``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default on]; see :func:`cuda_graph_bytes_per_gpu`.
        lora: vLLM's LoRA dials [``--enable-lora`` with ``--max-loras``, ``--max-lora-rank``,
            ``--lora-extra-vocab-size``, ``--lora-dtype``, ``--fully-sharded-loras``]; None = LoRA off. See
            :func:`lora_bytes_per_gpu`.
        enable_chunked_prefill: [``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``] None = the
            engine's default; it sizes the profile batch when ``max_num_batched_tokens`` is None
            (:attr:`profile_tokens`).
        num_scheduler_steps: V0's ``--num-scheduler-steps`` (multi-step scheduling, 1 = off); with chunked prefill
            it sizes the profile batch (:attr:`profile_tokens`).
        v2_model_runner: vLLM's model runner [``VLLM_USE_V2_MODEL_RUNNER``]: True = Model Runner V2
            (``vllm/v1/worker/gpu/``), False = V1 (``gpu_model_runner.py``), None = the release's default for the
            model (:attr:`uses_v2_model_runner`). It decides the sampler warm-up of the profile
            (:func:`~advisor.capacity.overhead.activation_peak_bytes`).
        enable_prefix_caching: [``--enable-prefix-caching`` / ``--no-enable-prefix-caching``] None = the engine's
            default. It changes what a recurrent hybrid's request holds in vLLM V1 (the Mamba cache mode,
            :func:`~advisor.capacity.kvlayout.recurrent_hybrid_layout`); nothing else here counts it.
    """

    model: ModelArch
    gpu_memory_bytes: int
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    block_size: int = 16
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    overhead_profile: str = "vllm-v1"
    engine_version: str | None = None
    enforce_eager: bool = False
    pipeline_parallel_size: int = 1
    enable_expert_parallel: bool = False
    nvlink_sharp: bool = False
    engine: str = "vllm"
    engine_settings: EngineSettings = field(default_factory=EngineSettings)
    data_parallel_size: int = 1
    gpu_memory_used_by_others_bytes: int = 0
    disable_hybrid_kv_cache_manager: bool = False
    compute_capability: tuple[int, int] | None = None
    sampler: str | None = None
    accounting: Accounting | None = None
    cpu_offload_bytes: int = 0
    mla_align_kv_cache: bool = True
    speculative: SpeculativeDraft | None = None
    estimate_cuda_graphs: bool = True
    lora: LoRASettings | None = None
    enable_chunked_prefill: bool | None = None
    num_scheduler_steps: int = 1
    v2_model_runner: bool | None = None
    enable_prefix_caching: bool | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        problems += _group_size_problems(self)
        if self.lora is not None:
            if self.engine != "vllm":
                problems.append(f"--enable-lora and its dials are vLLM's; engine {self.engine!r} has no such flag")
            else:
                problems += lora_problems(self.lora, self.model, self.engine_version, self.tensor_parallel_size)
        problems += _quantization_mismatch_problems(self)
        problems += kv_cache_dtype_problems(
            self.kv_cache_dtype, self.compute_capability, self.engine_version, self.engine
        )
        if self.engine == "vllm":
            problems += device_support_problems(self.dtype, self.effective_quantization, self.compute_capability)
            problems += sampler_problems(self.sampler, self.compute_capability)
        if self.sampler is not None and self.sampler not in SAMPLERS:
            problems.append(f"sampler {self.sampler!r} unknown; known: {', '.join(SAMPLERS)}")
        if self.cpu_offload_bytes < 0:
            problems.append(f"cpu_offload_gb must be ≥ 0, got {self.cpu_offload_bytes / GIB:g}")
        if self.engine not in ACCOUNTING_ENGINES:
            problems.append(f"engine {self.engine!r} has no KV accounting; known: {', '.join(ACCOUNTING_ENGINES)}")
        if self.data_parallel_size < 1:
            problems.append(f"data_parallel_size must be ≥ 1, got {self.data_parallel_size}")
        if not 0 <= self.gpu_memory_used_by_others_bytes < self.gpu_memory_bytes:
            problems.append(
                f"gpu_memory_used_by_others must be ≥ 0 and below the GPU's memory "
                f"({self.gpu_memory_bytes / GIB:.2f} GiB), got {self.gpu_memory_used_by_others_bytes / GIB:.2f} GiB"
            )
        if self.gpu_memory_bytes <= 0:
            problems.append(f"gpu_memory_bytes must be > 0, got {self.gpu_memory_bytes}")
        if self.tensor_parallel_size < 1:
            problems.append(f"tensor_parallel_size must be ≥ 1, got {self.tensor_parallel_size}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            problems.append(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.max_model_len is not None and self.max_model_len < 1:
            problems.append(f"max_model_len must be ≥ 1, got {self.max_model_len}")
        if self.max_num_seqs < 1:
            problems.append(f"max_num_seqs must be ≥ 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < 1:
            problems.append(f"max_num_batched_tokens must be ≥ 1, got {self.max_num_batched_tokens}")
        batched = self.max_num_batched_tokens
        if self.engine == "vllm" and batched is not None and 1 <= batched < self.max_num_seqs:
            # the batch cap the engine runs, defaulted or stated (breaker 26: 64 beside the default 1,024 passed)
            problems.append(VLLM_BATCHED_BELOW_SEQS.format(batched=batched, seqs=self.max_num_seqs))
        if self.pipeline_parallel_size < 1 or self.pipeline_parallel_size > self.model.num_layers:
            problems.append(f"pipeline_parallel_size must be in 1..{self.model.num_layers}")
        if self.block_size < 1:
            problems.append(f"block_size must be ≥ 1, got {self.block_size}")
        if self.kv_cache_memory_bytes is not None and not 0 <= self.kv_cache_memory_bytes <= MAX_KV_CACHE_MEMORY_BYTES:
            problems.append(
                f"kv_cache_memory_bytes must be in 0..{MAX_KV_CACHE_MEMORY_BYTES} (16 TiB), "
                f"got {self.kv_cache_memory_bytes}"
            )
        if self.num_gpu_blocks_override is not None and (
            isinstance(self.num_gpu_blocks_override, bool)
            or not isinstance(self.num_gpu_blocks_override, int)
            or not 1 <= self.num_gpu_blocks_override <= MAX_NUM_GPU_BLOCKS
        ):
            problems.append(
                f"num_gpu_blocks_override must be an integer in 1..{MAX_NUM_GPU_BLOCKS:,}, "
                f"got {self.num_gpu_blocks_override!r}"
            )
        if self.overhead_profile not in OVERHEAD_PROFILES:
            problems.append(
                f"overhead_profile {self.overhead_profile!r} unknown; known: {', '.join(OVERHEAD_PROFILES)}"
            )
        acc = self.accounting
        if acc is not None and acc.engine == self.engine == "vllm" and acc.profile != self.overhead_profile:
            problems.append(f"accounting {acc.profile!r} is not overhead_profile {self.overhead_profile!r}")
        # llama.cpp splits whole layers over its GPUs (--split-mode layer, the default; llamacpp_capacity), never
        # heads: any GPU count serves any model
        tp = self.tensor_parallel_size if self.engine != "llamacpp" else 1
        m = self.model
        if tp >= 1 and not _heads_split(m, tp):
            problems.append(
                f"{m.name}: {m.num_attention_heads} attention heads are not divisible by tensor_parallel_size {tp}"
            )
        if m.vision_parameters and m.vision_heads and tp >= 1 and m.vision_heads % tp != 0:
            problems.append(
                f"{m.name}: the vision tower's {m.vision_heads} attention heads (vision_config.num_heads) are not "
                f"divisible by tensor_parallel_size {tp}: vLLM splits them over the TP ranks (Qwen-VL vision "
                "attention: dist_utils.divide(num_heads, tp_size)); serve text only (--language-model-only) or use "
                "another TP"
            )
        if m.mamba_groups and tp >= 1 and (m.mamba_heads % tp or (m.mamba_groups % tp and m.mamba_groups != 1)):
            # vLLM mamba_mixer2.py MambaMixer2: "Tensor parallel world size must divide num heads"; the groups must
            # divide over TP or be one group, which each rank then keeps whole (extra_groups_for_head_shards)
            problems.append(
                f"{m.name}: its Mamba-2 mixer's {m.mamba_heads} heads (mamba_num_heads / mamba_n_heads) and "
                f"{m.mamba_groups} groups (n_groups / mamba_n_groups) do not split over tensor_parallel_size {tp}: "
                "vLLM needs TP to divide the heads, and the groups unless there is one"
            )
        if not m.is_mla and tp >= 1 and (m.num_kv_heads % tp if m.num_kv_heads >= tp else tp % m.num_kv_heads) != 0:
            problems.append(f"{m.name}: {m.num_kv_heads} KV heads cannot be split or replicated evenly over TP={tp}")
        batched = self.max_num_batched_tokens
        off = self.enable_chunked_prefill is False  # only where the operator turns it off: V0's own default
        if not problems and self.engine == "vllm" and batched is not None and off and not self.chunked_prefill:
            length = self.effective_max_model_len
            if batched < length:
                problems.append(VLLM_STEP_BELOW_CONTEXT.format(batched=batched, length=length))
        if problems:
            raise CapacityError("; ".join(problems))

    @property
    def effective_max_model_len(self) -> int:
        """``max_model_len`` or, when None, the model's context as vLLM derives it (:attr:`ModelArch.context_tokens`:
        ``max_position_embeddings``, extended by a rope scaling), tokens."""
        return self.max_model_len if self.max_model_len is not None else self.model.context_tokens

    @property
    def compute_dtype(self) -> str:
        """The serving dtype (``auto`` resolved; see :func:`~advisor.capacity.precision.resolve_dtype`)."""
        return resolve_dtype(self.dtype, self.model.torch_dtype)

    @property
    def effective_quantization(self) -> str | None:
        """``quantization`` or, when None, the checkpoint's own method (vLLM reads ``quantization_config``)."""
        own = self.model.checkpoint_quantization
        if self.quantization is None or _modelopt_override(self.quantization, own) or _loader_name(self, own):
            return own
        return self.quantization

    @property
    def quantized_weight_bytes(self) -> float:
        """Bytes per quantized linear parameter under :attr:`effective_quantization` (0.0 when unquantized): the
        width the checkpoint's ``quantization_config`` states when the method is the checkpoint's own (GPTQ/AWQ
        ``bits`` and ``group_size``, :attr:`ModelArch.checkpoint_weight_bits`; vLLM loads the tensors as
        stored), else the method's usual width (:func:`~advisor.capacity.precision.weight_bytes_per_param`).
        vLLM's bitsandbytes 4-bit (a 4-bit checkpoint, or in-flight quantization of an unquantized one): nested or
        fp32 absmax by :attr:`ModelArch.bnb_double_quant` (in flight: always nested) and the release
        (:func:`~advisor.capacity.precision.bnb_4bit_bytes`)."""
        q = self.effective_quantization
        if q is None:
            return 0.0
        groups = self.model.checkpoint_weight_groups
        if groups and q == self.model.checkpoint_quantization:  # mixed: the mean of the decoder layers' groups
            quantized = [g for g in groups if g.bytes_per_parameter is not None and g.name not in TABLE_GROUPS]
            params = sum(g.parameters for g in quantized)
            return sum(g.parameters * (g.bytes_per_parameter or 0.0) for g in quantized) / params if params else 0.0
        stated = self.model.checkpoint_weight_bits
        own = self.model.checkpoint_quantization
        same = own is not None and _method_family(q) == _method_family(own)
        if self.engine == "vllm" and _method_family(q) == "bitsandbytes" and not (same and stated and stated >= 8):
            # in flight: _unquantized_generator's quantize_4bit(compress_statistics=True) nests every layer
            nested = self.model.bnb_double_quant if same else True
            return bnb_4bit_bytes(nested=nested, release=parse_version(self.engine_version))
        if stated is not None and same:
            return stated / 8
        return weight_bytes_per_param(self.compute_dtype, q)

    @property
    def effective_sampler(self) -> str:
        """``sampler`` or, when None, the official image's (:func:`default_sampler`)."""
        return self.sampler or default_sampler(self.overhead_profile, self.engine_version, self.compute_capability)

    @property
    def uses_v2_model_runner(self) -> bool:
        """Whether vLLM profiles with Model Runner V2: :attr:`v2_model_runner` when set (V1 profiles only), else
        the release's default for the model and speculative method (:func:`uses_v2_model_runner`)."""
        if self.overhead_profile != "vllm-v1":
            return False
        if self.v2_model_runner is not None:
            return self.v2_model_runner
        method = self.speculative.method if self.speculative is not None else None
        return uses_v2_model_runner(self.model, self.engine_version, self.overhead_profile, method)

    @property
    def counts_whole_device(self) -> bool:
        """Whether this vLLM release counts all memory torch did not allocate as non-torch, the CUDA context
        and other processes included (:attr:`OverheadModel.whole_device_before`); False when no version is given."""
        parsed = parse_version(self.engine_version)
        before = OVERHEAD_PROFILES[self.overhead_profile].whole_device_before
        return parsed is not None and parsed < before

    @property
    def profile_tokens(self) -> int:
        """Tokens in vLLM's profile batch: ``max_num_batched_tokens`` or the engine's default.

        V1: 8192 on ≥ 70 GiB GPUs, else 2048 (API-server defaults, ``vllm/engine/arg_utils.py``); with
        ``enable_chunked_prefill`` False, ``max(max_model_len, that)`` from :data:`V1_CHUNKED_PREFILL_OFF_SINCE`
        (earlier V1 releases turn chunked prefill back on). V0: chunked prefill is on by default only when
        ``max_model_len > 32768`` and the model is neither MLA nor multimodal (``_set_default_args_v0``; 0.6.3
        ``EngineArgs.create_engine_config``), and an explicit ``enable_chunked_prefill`` overrides that rule;
        chunked, 2048 tokens (512 before :data:`V0_CHUNKED_PREFILL_2048_SINCE`), else ``max(max_model_len, 2048)``
        (``SchedulerConfig``, ``vllm/config.py``, 0.6.3-0.7.3). Chunked with ``num_scheduler_steps`` > 1:
        ``max(max_model_len, 2048)`` too ("Multi-step Chunked-Prefill doesn't allow prompt-chunking",
        ``SchedulerConfig.__post_init__`` in the 0.6.6.post1, 0.7.2, 0.8.5.post1 and 0.10.0 wheels).

        Example: Llama-3.1-405B, V0 0.6.3, ``max_model_len`` 131,072 with ``enable_chunked_prefill`` False (what
        ``benchmarks/benchmark_throughput.py`` passes unless ``--enable-chunked-prefill`` is given): 131,072
        tokens, not 2048.
        """
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        length = self.effective_max_model_len
        parsed = parse_version(self.engine_version)
        if self.overhead_profile == "vllm-v0":
            if not self.chunked_prefill or self.num_scheduler_steps > 1:
                return max(length, 2048)
            return 512 if parsed is not None and parsed < V0_CHUNKED_PREFILL_2048_SINCE else 2048
        default = DEFAULT_MAX_NUM_BATCHED_TOKENS if self.gpu_memory_bytes >= 70 * GIB else 2048
        if not self.chunked_prefill:
            return max(length, default)
        return default

    @property
    def chunked_prefill(self) -> bool:
        """Whether vLLM splits long prompts into chunks (the rules of :attr:`profile_tokens`): V1 always, unless
        ``enable_chunked_prefill`` is False from :data:`V1_CHUNKED_PREFILL_OFF_SINCE` (earlier V1 releases turn it
        back on); V0 as ``enable_chunked_prefill`` says, else only when ``max_model_len > 32768`` and the model is
        neither MLA nor multimodal (``_set_default_args_v0``). vLLM's rule: other engines' chunking is theirs."""
        parsed = parse_version(self.engine_version)
        if self.overhead_profile == "vllm-v0":
            chunked = self.enable_chunked_prefill
            if chunked is None:
                chunked = (
                    self.effective_max_model_len > 32768 and not self.model.is_mla and not self.model.vision_parameters
                )
            return chunked
        return not (
            self.enable_chunked_prefill is False and parsed is not None and parsed >= V1_CHUNKED_PREFILL_OFF_SINCE
        )


VLLM_BATCHED_BELOW_SEQS: Final = (
    'max_num_batched_tokens {batched} is below max_num_seqs {seqs}: vLLM refuses to start ("max_num_batched_tokens '
    'must be greater than or equal to max_num_seqs", vllm/config/scheduler.py SchedulerConfig._verify_args: each '
    "running sequence needs at least one token of the step); raise max_num_batched_tokens or lower max_num_seqs"
)
"""vLLM's own start-up check on the step budget against the batch cap, as check-config and plan say it."""
VLLM_STEP_BELOW_CONTEXT: Final = (
    "max_num_batched_tokens {batched} is below max_model_len {length} with chunked prefill off: vLLM refuses to start "
    '("max_num_batched_tokens … is smaller than max_model_len …", vllm/config/scheduler.py '
    "SchedulerConfig._verify_args: without chunking a prompt must fit one step); raise max_num_batched_tokens to "
    "{length}, lower max_model_len, or turn chunked prefill on"
)
"""vLLM's start-up check of the step budget against the context when prompts are not chunked, as plan and check-config
say it; applied where ``--no-enable-chunked-prefill`` is given (and the release honours it,
:attr:`CapacityInputs.chunked_prefill`), not to V0's default off below 32,768 tokens, where published logs show
releases starting with a smaller budget (DeepSeek-R1 on 0.7.3: 32,000 of 128,000)."""


@dataclass(frozen=True)
class CapacityResult:
    """The capacity of one replica (``tensor_parallel_size`` GPUs). Bytes, tokens, blocks.

    Attributes:
        weights_bytes_per_gpu: model weights resident on each GPU.
        kv_cache_bytes_per_token: KV bytes one token occupies across the replica's GPUs (per-GPU × TP; KV
            heads replicated under TP > kv_heads are counted once per copy, as they are stored).
        kv_cache_bytes_per_token_per_gpu: ``2 × layers × kv_heads_per_gpu × head_dim × kv bytes``.
        overhead_bytes_per_gpu: activation peak + non-torch (+ CUDA graphs) per GPU (modelled).
        kv_pool_bytes_per_gpu: memory handed to the KV cache on each GPU.
        kv_cache_blocks: blocks per replica (each block spans all TP ranks), summed over its data-parallel
            ranks.
        kv_cache_tokens: ``kv_cache_blocks × block_size``.
        max_concurrency: ``kv_cache_blocks ÷ ceil(max_model_len ÷ block_size)``: full-length requests the
            pool holds at once, as vLLM prints "Maximum concurrency" (e.g. 11.12); over data-parallel ranks
            only when one such request fits a rank (else the one rank's fraction, below 1).
        data_parallel_size: the ranks counted in the blocks, tokens and concurrency.
        max_request_tokens: the longest request one sequence can hold when the engine caps it below the pool
            (llama.cpp: a slot's ``ctx_size ÷ parallel`` cells, ``n_ctx_seq`` in ``src/llama-context.cpp``);
            ``None`` when a request may use the whole pool.
        max_model_len, block_size, tensor_parallel_size, gpu_memory_bytes, gpu_memory_utilization: inputs
            echoed.
        model_name, dtype, quantization, kv_cache_dtype, overhead_profile: input summary (dtype resolved).
        encoder_profile: the vision encoder's run in vLLM V1's profile, part of the activation peak
            (:meth:`advisor.capacity.encoder.EncoderProfile.as_dict`: modality, items, tokens per item, peak and
            output bytes per GPU, what is not modelled); None when the engine's profile runs no encoder.
        activation_peak_bytes_per_gpu: the torch activation peak of the engine's profile run, bytes per GPU
            (vLLM: ``max(forward, sampler)`` of :func:`activation_peak_bytes`); None when the engine's rule has
            no such term (unknown, never 0 for unknown).
        cuda_graph_bytes_per_gpu: CUDA-graph memory counted before the KV cache, bytes per GPU
            (:func:`cuda_graph_bytes_per_gpu`: vLLM's estimate from 0.20; before, graphs are captured after the
            cache is sized; 0 under ``--enforce-eager``); None when unknown.
        non_torch_bytes_per_gpu: memory outside torch's allocator that the engine counts (CUDA context,
            NCCL), bytes per GPU (:func:`non_torch_bytes_per_gpu`); None when unknown. Under vLLM's accounting
            ``weights + activation + non_torch + cuda_graph + kv_pool = gpu_memory × utilization`` (less
            than a byte of rounding) unless the pool is fixed by the operator.
        accounting: whose accounting and which generation sized the pool, and why
            (:class:`~advisor.capacity.generation.Accounting`).
        cpu_offload_bytes_per_gpu: weights ``--cpu-offload-gb`` keeps in host memory, bytes per GPU (already out of
            ``weights_bytes_per_gpu``; :func:`cpu_offload_bytes_per_gpu`); None when the engine has no such dial.
        draft_weights_bytes_per_gpu: the ``--speculative-config`` draft's weights, bytes per GPU (already in
            ``weights_bytes_per_gpu``; :func:`draft_weights_bytes_per_gpu`); None when the engine has no such dial.
        lora_bytes_per_gpu: the ``--enable-lora`` adapter slots, bytes per GPU (:func:`lora_bytes_per_gpu`; in
            ``weights_bytes_per_gpu`` where vLLM's budget counts them, :func:`~advisor.capacity.lora.lora_counted`);
            None when the engine has no such dial.
        recurrent_blocks: a recurrent hybrid's pool in vLLM V1 (:func:`~advisor.capacity.kvlayout.
            recurrent_hybrid_layout`): (pool blocks of one rank, attention groups, state blocks every request holds
            whatever its length); :meth:`concurrency_at` divides by them. None for other models.
    """

    weights_bytes_per_gpu: int
    kv_cache_bytes_per_token: int
    kv_cache_bytes_per_token_per_gpu: int
    overhead_bytes_per_gpu: int
    kv_pool_bytes_per_gpu: int
    kv_cache_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    max_model_len: int
    block_size: int
    tensor_parallel_size: int
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    model_name: str = ""
    dtype: str = ""
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    overhead_profile: str = "vllm-v1"
    data_parallel_size: int = 1
    max_request_tokens: int | None = None
    activation_peak_bytes_per_gpu: int | None = None
    cuda_graph_bytes_per_gpu: int | None = None
    non_torch_bytes_per_gpu: int | None = None
    accounting: Accounting | None = None
    cpu_offload_bytes_per_gpu: int | None = None
    draft_weights_bytes_per_gpu: int | None = None
    lora_bytes_per_gpu: int | None = None
    encoder_profile: dict[str, Any] | None = None
    recurrent_blocks: tuple[int, int, int] | None = None

    @property
    def fits_one_full_length_request(self) -> bool:
        """Whether one ``max_model_len`` request fits one rank (vLLM refuses to start otherwise)."""
        return self.max_concurrency >= 1.0

    @property
    def kv_cache_blocks_per_rank(self) -> int:
        """Blocks of one data-parallel rank (``kv_cache_blocks ÷ data_parallel_size``)."""
        return self.kv_cache_blocks // max(1, self.data_parallel_size)

    def concurrency_at(self, context_tokens: float) -> float:
        """Sequences the pool holds at a mean context of ``context_tokens`` tokens.

        ``kv_cache_blocks ÷ ceil(context_tokens ÷ block_size)`` (paged allocation: a sequence holds whole
        blocks); a recurrent hybrid's pool ÷ (attention groups × that + its state blocks) (:attr:`recurrent_blocks`).
        Contexts below one token count as one block.

        Raises:
            CapacityError: ``context_tokens`` is negative or not finite.
        """
        if not math.isfinite(context_tokens) or context_tokens < 0:
            raise CapacityError(f"context_tokens must be a finite number ≥ 0, got {context_tokens}")
        blocks_per_seq = max(1, math.ceil(context_tokens / self.block_size))
        if self.recurrent_blocks is not None:
            # a recurrent hybrid: every request also holds its state pages, however short (vLLM
            # get_max_concurrency_for_kv_cache_config: the sum over the groups), so a short request is not
            # kv_cache_blocks ÷ its attention blocks: Qwen3.5-9B (1 attention + 3 state groups, 2 pages each in
            # the align mode) holds 1 + 6 blocks at 1,000 tokens, not 1
            pool, attention_groups, state_blocks = self.recurrent_blocks
            per_rank = pool / (attention_groups * blocks_per_seq + state_blocks)
            return per_rank * self.data_parallel_size if per_rank >= 1 else per_rank
        per_rank = self.kv_cache_blocks_per_rank / blocks_per_seq
        # a request lives on one data-parallel rank: ranks add up only for requests that fit one
        return per_rank * self.data_parallel_size if per_rank >= 1 else per_rank

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field, plus GiB conveniences and an ``inputs`` summary."""
        return {
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "kv_cache_bytes_per_token_per_gpu": self.kv_cache_bytes_per_token_per_gpu,
            "overhead_bytes_per_gpu": self.overhead_bytes_per_gpu,
            "kv_pool_bytes_per_gpu": self.kv_pool_bytes_per_gpu,
            "activation_peak_bytes_per_gpu": self.activation_peak_bytes_per_gpu,
            "cuda_graph_bytes_per_gpu": self.cuda_graph_bytes_per_gpu,
            "non_torch_bytes_per_gpu": self.non_torch_bytes_per_gpu,
            "accounting": None if self.accounting is None else self.accounting.as_dict(),
            "cpu_offload_bytes_per_gpu": self.cpu_offload_bytes_per_gpu,
            "draft_weights_bytes_per_gpu": self.draft_weights_bytes_per_gpu,
            "lora_bytes_per_gpu": self.lora_bytes_per_gpu,
            "encoder_profile": self.encoder_profile,
            "kv_cache_blocks": self.kv_cache_blocks,
            "kv_cache_tokens": self.kv_cache_tokens,
            "max_concurrency": self.max_concurrency,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
            "tensor_parallel_size": self.tensor_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "kv_cache_blocks_per_rank": self.kv_cache_blocks_per_rank,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "fits_one_full_length_request": self.fits_one_full_length_request,
            "gib": {
                "gpu_memory": round(self.gpu_memory_bytes / GIB, 2),
                "weights_per_gpu": round(self.weights_bytes_per_gpu / GIB, 2),
                "overhead_per_gpu": round(self.overhead_bytes_per_gpu / GIB, 2),
                "kv_pool_per_gpu": round(self.kv_pool_bytes_per_gpu / GIB, 2),
            },
            "inputs": {
                "model": self.model_name,
                "dtype": self.dtype,
                "quantization": self.quantization,
                "kv_cache_dtype": self.kv_cache_dtype,
                "overhead_profile": self.overhead_profile,
            },
        }


def _method_family(method: str) -> str:
    """A quantization method without vLLM's kernel suffix (``gptq_marlin`` → ``gptq``): the same checkpoint format."""
    return method.strip().lower().removesuffix("_marlin")


_SAME_METHOD: Final = {"modelopt_fp4": "nvfp4"}
"""Quantization names that are one checkpoint format under two names (ModelOpt's NVFP4 checkpoints, which
:func:`~advisor.capacity.models._checkpoint_quantization` reads as ``nvfp4``)."""


_MODELOPT_NAMES: Final = frozenset({"modelopt", "modelopt_fp4", "modelopt_mixed"})
"""vLLM's names of the ModelOpt loaders (``--quantization``)."""
_MODELOPT_CHECKPOINTS: Final = frozenset({"nvfp4", "modelopt_mixed"})
"""The checkpoint methods :func:`~advisor.capacity.models._checkpoint_quantization` reads from a ModelOpt
``quantization_config`` whose ``quant_algo`` a ModelOpt loader overrides the user's choice with."""


def _modelopt_override(quantization: str, own: str | None) -> bool:
    """Whether vLLM replaces ``--quantization`` ``quantization`` (a ModelOpt name) by the checkpoint's own ModelOpt
    method ``own``: ``ModelConfig._verify_quantization`` (``vllm/config/model.py``, 0.24.0) asks each override
    method in turn, and ``ModelOptNvFp4Config`` / ``ModelOptMixedPrecisionConfig.override_quantization_method``
    return ``modelopt_fp4`` / ``modelopt_mixed`` from the checkpoint's ``quant_algo`` (an FP4 algorithm /
    ``MIXED_PRECISION``) whatever the user named, so ``--quantization modelopt`` loads a MIXED_PRECISION checkpoint
    as ``modelopt_mixed`` instead of being refused."""
    return own in _MODELOPT_CHECKPOINTS and quantization.strip().lower() in _MODELOPT_NAMES


def _loader_name(inputs: CapacityInputs, own: str | None) -> bool:
    """Whether ``--quantization`` names the checkpoint's loader as vLLM prints it
    (:attr:`~advisor.capacity.models.ModelArch.checkpoint_quant_method`) where the plan reads the checkpoint under
    another name: ``compressed-tensors`` for a compressed-tensors FP8 checkpoint read as ``fp8`` (llm-d-planner's
    0.19.0 log of RedHatAI's Llama-3.3-70B FP8-dynamic prints ``quantization=compressed-tensors``)."""
    loader = inputs.model.checkpoint_quant_method
    q = inputs.quantization
    return own is not None and loader is not None and q is not None and _method_family(q) == _method_family(loader)


def _quantization_mismatch_problems(inputs: CapacityInputs) -> list[str]:
    """vLLM refuses a ``--quantization`` other than the method the checkpoint's ``quantization_config`` states
    (``vllm/config/model.py`` ``ModelConfig._verify_quantization``, 0.6-0.21: "Quantization method specified in
    the model config (fp8) does not match the quantization method specified in the `quantization` argument (awq)";
    SGLang's ``model_config.py`` copies the check). The Marlin kernel names (``gptq_marlin``, ``awq_marlin``) are
    the checkpoint's own format (:func:`_method_family`)."""
    own = inputs.model.checkpoint_quantization
    q = inputs.quantization
    if own is None or q is None:
        return []

    def family(method: str) -> str:
        name = _method_family(method)
        return _SAME_METHOD.get(name, name)

    # a compressed-tensors checkpoint read as fp8: vLLM compares the loader's name, and no other method overrides
    # it (ModelOpt's override_quantization_method claims its own checkpoints whatever --quantization says, so a
    # ModelOpt FP8 checkpoint under --quantization fp8 loads)
    renamed = inputs.model.checkpoint_quant_method == "compressed-tensors" and own != "compressed-tensors"
    if (family(q) == family(own) and not renamed) or _modelopt_override(q, own) or _loader_name(inputs, own):
        return []
    stored = inputs.model.checkpoint_quant_method or own
    return [
        f"quantization {q!r} (--quantization) contradicts {inputs.model.name}'s checkpoint, stored as {stored!r} "
        f'(config.json quantization_config): vLLM refuses it ("Quantization method specified in the model config '
        f'({stored}) does not match the quantization method specified in the `quantization` argument ({q})"); leave '
        "quantization unset to load the checkpoint as stored"
    ]


def _heads_split(model: ModelArch, tp: int) -> bool:
    """Whether ``tp`` TP ranks split the attention heads evenly, which vLLM requires ("Total number of attention heads
    must be divisible by tensor parallel size", ``ModelConfig.verify_with_parallel_config``)."""
    return model.num_attention_heads % tp == 0


def _group_size_problems(inputs: CapacityInputs) -> list[str]:
    """vLLM refuses a GPTQ/AWQ layer whose input rows per TP rank the group size does not divide (``gptq.py``
    ``GPTQLinearMethod.create_weights``: "The input size is not aligned with the quantized weight shape. This can be
    caused by too large tensor parallel size."; ``awq.py`` likewise; the Marlin kernels'
    ``verify_marlin_supports_shape``). The row-parallel layers split their input over TP: ``o_proj``
    (heads × head_dim) and ``down_proj`` (intermediate); the others take the whole hidden size."""
    m = inputs.model
    group = m.checkpoint_group_size
    own = m.checkpoint_quantization
    q = inputs.effective_quantization
    if group is None or group <= 0 or own is None or q is None or _method_family(q) != _method_family(own):
        return []
    tp = inputs.tensor_parallel_size

    def misaligned(ranks: int) -> list[str]:
        """The layer inputs the group size does not divide at TP ``ranks``, each with its rows per rank."""
        inputs_per_rank = {
            "hidden_size": m.hidden_size,
            "o_proj input (heads × head_dim ÷ TP)": m.num_attention_heads * m.head_dim // ranks,
            "down_proj input (intermediate_size ÷ TP)": m.intermediate_size // ranks,
        }
        if m.is_moe:
            inputs_per_rank["expert down_proj input (moe_intermediate_size ÷ TP)"] = m.moe_intermediate_size // ranks
        return [f"{what} {rows}" for what, rows in inputs_per_rank.items() if rows % group]

    bad = misaligned(tp)
    if not bad:
        return []
    # a smaller TP helps only where the whole widths are multiples of the group (a TP never mends the hidden size)
    smaller = next((t for t in range(tp - 1, 0, -1) if _heads_split(m, t) and not misaligned(t)), None)
    remedy = (
        f"use tensor_parallel_size {smaller} or smaller"
        if smaller is not None
        else "no tensor_parallel_size loads it: it needs a checkpoint quantized with a group size that divides them"
    )
    return [
        f"{m.name}: quantization group size {group} does not divide {', '.join(bad)} at TP={tp}: vLLM refuses to "
        f'load it ("The input size is not aligned with the quantized weight shape"); {remedy}'
    ]
