"""A deployment as the operator describes it → the GPU it runs on and the capacity pass's inputs under ITS
engine's accounting.

One frozen :class:`DeploymentSpec` states what a config file, ``plan``, the API, ``simulate`` or the search
say (engine, model, the GPU by name and/or memory, parallelism and each engine's own knobs, by the engine's
flag names), and one pure resolver, :func:`resolve_deployment`, turns it into a :class:`ResolvedDeployment`:
the GPU (:func:`resolve_gpu`: which catalog part, its interconnect), the
:class:`~advisor.capacity.kv.CapacityInputs` with every engine default resolved, and the engine's capacity.
So the daemon, the API, ``plan``, ``simulate`` and the search identify the same GPU and size one deployment
with the same numbers (a 139.81 GiB part given by memory alone is the H200 SXM, with NVLink SHARP, for all of
them), and an SGLang, TGI, TensorRT-LLM or llama.cpp deployment is never sized with vLLM's accounting.

Engine names: the config's engines map to an accounting by :func:`accounting_engine`
(``triton-trtllm`` → ``trtllm``; ``dynamo`` and ``auto`` → ``vllm``, the engine behind most Dynamo workers
and the detected engine not yet being known when the deployment is sized).

Defaults each engine applies when a knob is not given (sources: the engine files cited in
:mod:`advisor.capacity.kv` and :mod:`advisor.capacity.engines`):

* vLLM: the engine generation (V0/V1) :func:`~advisor.capacity.generation.vllm_accounting` decides from
  ``engine_version``, the GPU's compute capability and the features (``VLLM_USE_V1`` as ``vllm_use_v1``), and
  by it ``block_size`` :func:`~advisor.capacity.kv.vllm_default_block_size`, ``max_num_seqs``
  :func:`~advisor.capacity.kv.vllm_default_max_num_seqs` and the overhead profile.
* SGLang: ``block_size`` is ``--page-size``; ``mem_fraction_static`` its GPU rule.
* TGI: ``block_size`` is ``BLOCK_SIZE`` (1 from TGI 3, 16 before); ``max_num_batched_tokens`` is
  ``--max-batch-prefill-tokens``.
* TensorRT-LLM: ``block_size`` is ``tokens_per_block``; ``max_num_batched_tokens`` is ``max_num_tokens``.
* llama.cpp: ``parallel`` defaults to ``max_num_seqs`` (else 1); the cache type is ``kv_cache_dtype`` (f16
  for ``auto``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from advisor.capacity.engines import (
    TGI_DEFAULT_CUDA_MEMORY_FRACTION,
    EngineCapacity,
    engine_capacity_pass,
    sglang_default_mem_fraction_static,
)
from advisor.capacity.generation import engine_accounting, vllm_accounting
from advisor.capacity.hardware import GIB, GPUSpec, identify_gpu, is_alias
from advisor.capacity.kv import (
    CapacityInputs,
    CapacityResult,
    EngineSettings,
    parse_version,
    vllm_default_block_size,
    vllm_default_max_num_seqs,
)
from advisor.capacity.lora import LoRASettings
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import resolve_dtype
from advisor.capacity.speculative import parse_speculative_config
from advisor.errors import CapacityError

__all__ = [
    "LANGUAGE_MODEL_ONLY_ENGINES",
    "DeploymentSpec",
    "ResolvedDeployment",
    "ResolvedGPU",
    "StatedDeployment",
    "accounting_engine",
    "deployment_capacity",
    "deployment_inputs",
    "resolve_deployment",
    "resolve_gpu",
    "spec_from_settings",
]

_ACCOUNTING = {
    "vllm": "vllm",
    "sglang": "sglang",
    "tgi": "tgi",
    "trtllm": "trtllm",
    "triton-trtllm": "trtllm",
    "llamacpp": "llamacpp",
    "dynamo": "vllm",
    "auto": "vllm",
}

LANGUAGE_MODEL_ONLY_ENGINES: Final = frozenset({"llamacpp"})
"""Engines that serve a checkpoint's language model only: llama.cpp loads a vision tower from a separate ``--mmproj``
file, never from the model's GGUF, so its towers are left out as vLLM's ``--language-model-only`` leaves them."""

VLLM_DEFAULT_UTILIZATION = 0.9
"""vLLM's ``--gpu-memory-utilization`` default (``vllm/config/cache.py``)."""

OTHER_ENGINE_MAX_NUM_SEQS = 256
"""Batch cap assumed for the sampler-free engines' activation term when none is given (as ``plan``)."""


def accounting_engine(engine: str) -> str:
    """The KV accounting a configured engine name uses (see the module docstring).

    Raises:
        CapacityError: an engine name with no accounting.
    """
    try:
        return _ACCOUNTING[engine]
    except KeyError:
        raise CapacityError(f"engine {engine!r} has no KV accounting; known: {', '.join(_ACCOUNTING)}") from None


@dataclass(frozen=True)
class DeploymentSpec:
    """What the operator states about one deployment (None = the engine's default).

    The GPU is stated as the config and the API state it (:func:`resolve_gpu` identifies the part): ``gpu``
    (a catalog name, key or alias; with ``gpu_memory_bytes`` any label), ``gpu_memory_bytes`` (the device
    total as CUDA reports it, overriding the catalog's), or both; at least one.

    Attributes:
        engine: a configured engine name (:func:`accounting_engine`).
        model: the architecture.
        gpu_memory_bytes: the stated device total, bytes (None = the catalog part's).
        gpu: the stated GPU name (None = identified from ``gpu_memory_bytes`` when only one part has it).
        tensor_parallel_size, pipeline_parallel_size, data_parallel_size: GPUs per stage, stages, ranks.
        enable_expert_parallel: experts split whole over the TP × DP GPUs.
        gpu_memory_utilization: vLLM ``--gpu-memory-utilization`` (None = 0.9); not read for other engines.
            For SGLang and TGI the inputs' ``gpu_memory_utilization`` carries their own resolved fraction
            (``mem_fraction_static``, ``cuda_memory_fraction``: the flags the memory-budget dial maps to,
            ``advisor/rules/flags.py``), so a turned dial moves each engine's pool as its own flag would.
        max_model_len, dtype, quantization, kv_cache_dtype, max_num_seqs, max_num_batched_tokens,
            block_size: the shared dials (vLLM names; each engine's meaning in the module docstring).
        kv_cache_memory_bytes: vLLM ``--kv-cache-memory-bytes``, per GPU (read for SGLang too, as a pool
            stated in bytes; TGI, TensorRT-LLM and llama.cpp have no such setting).
        num_gpu_blocks_override: vLLM ``--num-gpu-blocks-override``.
        gpu_memory_used_by_others_bytes: memory other processes hold on each GPU.
        engine_version: the engine's version (vLLM: the V0/V1 profile; TGI: its block size; SGLang: its default
            mem_fraction_static).
        enforce_eager: vLLM ``--enforce-eager``.
        enable_chunked_prefill: vLLM ``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``; None = the
            engine's default (:attr:`~advisor.capacity.kv.CapacityInputs.profile_tokens`).
        num_scheduler_steps: vLLM V0 ``--num-scheduler-steps`` (1 = off): it sends 0.8.0-0.10.0 to V0
            (:data:`~advisor.capacity.generation.MULTI_STEP_FALLBACK_UNTIL`) and sizes V0's chunked profile batch.
        enable_prefix_caching: vLLM ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``; None = the
            engine's default (it sets a recurrent hybrid's Mamba cache mode,
            :func:`~advisor.capacity.kvlayout.recurrent_hybrid_layout`).
        sampler: vLLM's top-k/top-p sampler, ``flashinfer`` or ``torch`` (None = the official image's:
            :func:`advisor.capacity.kv.default_sampler`).
        vllm_use_v1: vLLM's ``VLLM_USE_V1`` environment variable (None: unset, the engine's oracle decides;
            True/False force V1/V0 where the release allows it).
        cpu_offload_bytes: vLLM ``--cpu-offload-gb`` × 2³⁰, per GPU.
        speculative_config: vLLM ``--speculative-config``, the JSON text
            (:func:`~advisor.capacity.speculative.parse_speculative_config`).
        mla_align_kv_cache: vLLM V0 ``VLLM_CUDA_MEM_ALIGN_KV_CACHE`` (default on).
        estimate_cuda_graphs: vLLM ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` (default on).
        lora: vLLM ``--enable-lora`` and its dials (:class:`~advisor.capacity.lora.LoRASettings`); None = off.
        mem_fraction_static: SGLang; cuda_memory_fraction: TGI; free_gpu_memory_fraction and max_tokens:
            TensorRT-LLM ``kv_cache_config``; ctx_size, parallel, kv_unified: llama.cpp.
    """

    engine: str
    model: ModelArch
    gpu_memory_bytes: int | None = None
    gpu: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    gpu_memory_used_by_others_bytes: int = 0
    engine_version: str | None = None
    enforce_eager: bool = False
    sampler: str | None = None
    mem_fraction_static: float | None = None
    cuda_memory_fraction: float | None = None
    free_gpu_memory_fraction: float | None = None
    max_tokens: int | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    kv_unified: bool = False
    vllm_use_v1: bool | None = None
    cpu_offload_bytes: int = 0
    speculative_config: str | None = None
    mla_align_kv_cache: bool = True
    estimate_cuda_graphs: bool = True
    lora: LoRASettings | None = None
    enable_chunked_prefill: bool | None = None
    num_scheduler_steps: int = 1
    enable_prefix_caching: bool | None = None


_STATED: tuple[str, ...] = (
    "tensor_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "max_model_len",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "kv_cache_memory_bytes",
    "num_gpu_blocks_override",
    "mem_fraction_static",
    "cuda_memory_fraction",
    "ctx_size",
    "parallel",
    "kv_unified",
    "sampler",
    "engine_version",
    "pipeline_parallel_size",
    "enforce_eager",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "vllm_use_v1",
)
"""The settings a deployment (config or API request) states under the same names as :class:`DeploymentSpec`."""


class StatedDeployment(Protocol):
    """A deployment as the config's ``deployments[]`` entry and the API's plan request state it: the
    :data:`_STATED` settings, the GPU (``gpu`` name, ``gpu_memory_gib``, ``gpu_memory_used_by_others_gib``,
    GiB = 2³⁰ bytes), vLLM's ``cpu_offload_gb`` (GiB per GPU) and ``speculative_config`` (a mapping)."""

    @property
    def gpu(self) -> str | None: ...
    @property
    def gpu_memory_gib(self) -> float | None: ...
    @property
    def gpu_memory_used_by_others_gib(self) -> float: ...
    @property
    def cpu_offload_gb(self) -> float: ...
    @property
    def speculative_config(self) -> Mapping[str, Any] | None: ...


def spec_from_settings(
    settings: StatedDeployment,
    *,
    engine: str,
    model: ModelArch,
    gpu_memory_utilization: float | None,
    free_gpu_memory_fraction: float | None,
    max_tokens: int | None,
) -> DeploymentSpec:
    """The :class:`DeploymentSpec` of a stated deployment: the config's ``deployments[]`` entry and the API's
    plan request both carry the :data:`_STATED` settings under these names, and ``gpu``,
    ``gpu_memory_gib`` and ``gpu_memory_used_by_others_gib`` (GiB = 2³⁰ bytes); the rest is passed resolved
    (the engine, the model, the budget only when stated, TensorRT-LLM's ``kv_cache_config``)."""
    stated = {name: getattr(settings, name) for name in _STATED}
    memory_gib: float | None = settings.gpu_memory_gib
    return DeploymentSpec(
        engine=engine,
        model=model,
        gpu=settings.gpu,
        gpu_memory_bytes=None if memory_gib is None else int(memory_gib * GIB),
        gpu_memory_utilization=gpu_memory_utilization,
        gpu_memory_used_by_others_bytes=int(settings.gpu_memory_used_by_others_gib * GIB),
        free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_tokens=max_tokens,
        cpu_offload_bytes=int(settings.cpu_offload_gb * GIB),
        speculative_config=None if settings.speculative_config is None else json.dumps(settings.speculative_config),
        **stated,
    )


@dataclass(frozen=True)
class ResolvedGPU:
    """The GPU a deployment runs on, as :func:`resolve_gpu` identifies it.

    Attributes:
        name: the catalog name when the part is known (``NVIDIA H200 SXM``), else the stated label, else the
            memory (``139.8 GiB``).
        memory_bytes: the device total, bytes: the stated memory, else the catalog part's.
        part: the catalog entry (bandwidth, FLOP/s, interconnect), or None when no one part is meant (a label
            outside the catalog, or a memory several parts or none have).
        nvlink_sharp: the part sits behind an NVSwitch with NVLink SHARP; None when the part is unknown
            (unknown, not "no": the capacity pass then counts no NVLS buffers).
        identified: how the part was identified when the operator did not name it exactly (by its memory alone,
            or through an alias that stands for several variants); "" otherwise.
    """

    name: str
    memory_bytes: int
    part: GPUSpec | None
    nvlink_sharp: bool | None
    identified: str = ""


def resolve_gpu(name: str | None, memory_bytes: int | None) -> ResolvedGPU:
    """The GPU a deployment states by ``name`` and/or ``memory_bytes`` (:func:`advisor.capacity.hardware.identify_gpu`):
    a name is looked up in the catalog (with the memory stated too, a name outside it is only a label); the
    memory alone names the one part with that CUDA total (139.81 GiB → the H200 SXM) or none (79.15 GiB is
    an A100 80GB or an H100). The stated memory always wins over the catalog's.

    Raises:
        CapacityError: neither is given (naming ``gpu``); UnknownGPUError: a name outside the catalog and no
            memory.
    """
    if name is None and memory_bytes is None:
        raise CapacityError("gpu: give a catalog GPU name (gpu) or the device memory (gpu_memory_gib)")
    part = identify_gpu(name, memory_bytes)
    identified = ""
    if memory_bytes is None:
        assert part is not None and name is not None  # identify_gpu raises for an unknown name without memory
        memory_bytes = part.memory_bytes
        if is_alias(name, part):
            identified = f"{part.name} (from {name!r}; `catalog gpus` lists the other variants)"
    elif part is not None and name is None:
        identified = f"{part.name}, the only catalog GPU with {memory_bytes / GIB:.2f} GiB"
    shown = part.name if part is not None else name if name is not None else f"{memory_bytes / GIB:g} GiB"
    return ResolvedGPU(
        name=shown,
        memory_bytes=memory_bytes,
        part=part,
        nvlink_sharp=None if part is None else part.nvlink_sharp,
        identified=identified,
    )


@dataclass(frozen=True)
class ResolvedDeployment:
    """One deployment resolved: what the daemon's rules, the API, ``plan``, ``simulate`` and the search read.

    Attributes:
        spec: what was stated.
        gpu: the GPU it runs on (:func:`resolve_gpu`).
        inputs: the capacity pass's inputs, every engine default resolved (:func:`deployment_inputs`).
        capacity: the engine's capacity, its parameters and notes
            (:func:`~advisor.capacity.engines.engine_capacity_pass`).
    """

    spec: DeploymentSpec
    gpu: ResolvedGPU
    inputs: CapacityInputs
    capacity: EngineCapacity

    @property
    def result(self) -> CapacityResult:
        """The capacity pass's result (what :func:`~advisor.capacity.kv.capacity_pass` returns for ``inputs``)."""
        return self.capacity.result


def resolve_deployment(spec: DeploymentSpec) -> ResolvedDeployment:
    """The one resolver: ``spec`` → its GPU, its inputs under its engine's accounting and its capacity. Pure
    (catalog look-ups only).

    Raises:
        CapacityError: the GPU cannot be identified (:func:`resolve_gpu`), an engine with no accounting, or
            inputs the pass refuses (naming the field), or no memory left for the KV cache.
    """
    gpu = resolve_gpu(spec.gpu, spec.gpu_memory_bytes)
    inputs = _inputs(spec, gpu)
    return ResolvedDeployment(spec, gpu, inputs, engine_capacity_pass(inputs.engine, inputs, inputs.engine_settings))


def deployment_inputs(spec: DeploymentSpec) -> CapacityInputs:
    """The capacity pass's inputs for ``spec``, under its engine's accounting, every default resolved.

    Raises:
        CapacityError: the GPU cannot be identified, an engine with no accounting, or inputs the pass refuses
            (naming the field).
    """
    return _inputs(spec, resolve_gpu(spec.gpu, spec.gpu_memory_bytes))


def _inputs(spec: DeploymentSpec, gpu: ResolvedGPU) -> CapacityInputs:
    """:func:`deployment_inputs` for a GPU already resolved."""
    engine = accounting_engine(spec.engine)
    memory = gpu.memory_bytes
    nvlink_sharp = bool(gpu.nvlink_sharp)
    # vLLM reads the device's name for its max-num-seqs default (the A100 keeps 256)
    device_name = gpu.part.name if gpu.part is not None else (spec.gpu or "")
    version = spec.engine_version
    if engine == "vllm":
        part = gpu.part
        platform = None
        if part is not None:
            platform = "cuda" if part.compute_capability else ("rocm" if part.vendor == "AMD" else "other")
        accounting = vllm_accounting(
            version,
            compute_capability=None if part is None else part.compute_capability,
            platform=platform,
            kv_cache_dtype=spec.kv_cache_dtype,
            dtype=resolve_dtype(spec.dtype, spec.model.torch_dtype),
            quantization=spec.quantization or spec.model.checkpoint_quantization,
            is_mla=spec.model.is_mla,
            pipeline_parallel_size=spec.pipeline_parallel_size,
            use_v1=spec.vllm_use_v1,
            num_scheduler_steps=spec.num_scheduler_steps,
        )
        profile = accounting.profile
        return CapacityInputs(
            model=spec.model,
            gpu_memory_bytes=memory,
            tensor_parallel_size=spec.tensor_parallel_size,
            gpu_memory_utilization=VLLM_DEFAULT_UTILIZATION
            if spec.gpu_memory_utilization is None
            else spec.gpu_memory_utilization,
            max_model_len=spec.max_model_len,
            dtype=spec.dtype,
            quantization=spec.quantization,
            kv_cache_dtype=spec.kv_cache_dtype,
            max_num_seqs=spec.max_num_seqs or vllm_default_max_num_seqs(version, memory, device_name, profile=profile),
            max_num_batched_tokens=spec.max_num_batched_tokens,
            block_size=spec.block_size or vllm_default_block_size(spec.model, version, profile=profile),
            kv_cache_memory_bytes=spec.kv_cache_memory_bytes,
            num_gpu_blocks_override=spec.num_gpu_blocks_override,
            overhead_profile=profile,
            engine_version=version,
            enforce_eager=spec.enforce_eager,
            enable_chunked_prefill=spec.enable_chunked_prefill,
            num_scheduler_steps=spec.num_scheduler_steps,
            enable_prefix_caching=spec.enable_prefix_caching,
            # FlashInfer samples on CUDA only: elsewhere vLLM ignores VLLM_USE_FLASHINFER_SAMPLER and sorts
            # (topk_topp_sampler.py TopKTopPSampler.__init__: the FlashInfer branch is under is_cuda(), 0.8-0.21)
            sampler=spec.sampler if platform in (None, "cuda") else "torch",
            pipeline_parallel_size=spec.pipeline_parallel_size,
            enable_expert_parallel=spec.enable_expert_parallel,
            nvlink_sharp=nvlink_sharp,
            engine="vllm",
            data_parallel_size=spec.data_parallel_size,
            gpu_memory_used_by_others_bytes=spec.gpu_memory_used_by_others_bytes,
            compute_capability=None if part is None else part.compute_capability,
            accounting=accounting,
            cpu_offload_bytes=spec.cpu_offload_bytes,
            speculative=parse_speculative_config(spec.speculative_config, spec.model, spec.tensor_parallel_size),
            mla_align_kv_cache=spec.mla_align_kv_cache,
            estimate_cuda_graphs=spec.estimate_cuda_graphs,
            lora=spec.lora,
        )
    parsed = parse_version(version)
    # SGLang's and TGI's memory fraction travels as the budget dial (gpu_memory_utilization), resolved here
    budget = VLLM_DEFAULT_UTILIZATION
    if engine == "sglang":
        budget = spec.mem_fraction_static or sglang_default_mem_fraction_static(
            memory, spec.tensor_parallel_size, spec.pipeline_parallel_size, version
        )
    elif engine == "tgi":
        budget = spec.cuda_memory_fraction or TGI_DEFAULT_CUDA_MEMORY_FRACTION
    settings = EngineSettings(
        page_size=spec.block_size if engine == "sglang" else None,
        max_batch_prefill_tokens=spec.max_num_batched_tokens if engine == "tgi" else None,
        tgi_block_size=(spec.block_size or (16 if parsed is not None and parsed < (3,) else 1))
        if engine == "tgi"
        else None,
        free_gpu_memory_fraction=spec.free_gpu_memory_fraction if engine == "trtllm" else None,
        tokens_per_block=spec.block_size if engine == "trtllm" else None,
        max_num_tokens=spec.max_num_batched_tokens if engine == "trtllm" else None,
        max_tokens=spec.max_tokens if engine == "trtllm" else None,
        ctx_size=spec.ctx_size if engine == "llamacpp" else None,
        parallel=(spec.parallel or spec.max_num_seqs) if engine == "llamacpp" else None,
        kv_unified=spec.kv_unified and engine == "llamacpp",
        llamacpp_kv_type="f16" if spec.kv_cache_dtype == "auto" else spec.kv_cache_dtype,
    )
    return CapacityInputs(
        model=spec.model,
        gpu_memory_bytes=memory,
        tensor_parallel_size=spec.tensor_parallel_size,
        gpu_memory_utilization=budget,
        max_model_len=spec.max_model_len,
        dtype=spec.dtype,
        quantization=spec.quantization,
        kv_cache_dtype="auto" if engine == "llamacpp" else spec.kv_cache_dtype,
        # llama.cpp's concurrency is its slots (--parallel, :func:`advisor.capacity.engines.llamacpp_capacity`'s
        # default 1): the rules' max_num_seqs dial and the slots pool's usage read it, never the 256 assumed for the
        # other engines' activation term (a field state: --parallel 15 with one slot busy read 1/256 busy)
        max_num_seqs=(spec.parallel or spec.max_num_seqs or 1)
        if engine == "llamacpp"
        else (spec.max_num_seqs or OTHER_ENGINE_MAX_NUM_SEQS),
        kv_cache_memory_bytes=spec.kv_cache_memory_bytes if engine == "sglang" else None,
        engine_version=version,
        pipeline_parallel_size=spec.pipeline_parallel_size,
        enable_expert_parallel=spec.enable_expert_parallel,
        nvlink_sharp=nvlink_sharp,
        engine=engine,
        engine_settings=settings,
        data_parallel_size=spec.data_parallel_size,
        gpu_memory_used_by_others_bytes=spec.gpu_memory_used_by_others_bytes,
        accounting=engine_accounting(engine, version),
    )


def deployment_capacity(spec: DeploymentSpec) -> tuple[CapacityInputs, EngineCapacity]:
    """(inputs, the engine's capacity with its parameters and notes) for ``spec``: :func:`deployment_inputs`
    then :func:`~advisor.capacity.engines.engine_capacity_pass` (whose ``result`` is what
    :func:`~advisor.capacity.kv.capacity_pass` returns for those inputs).

    Raises:
        CapacityError: as :func:`deployment_inputs` and the engine's rule.
    """
    resolved = resolve_deployment(spec)
    return resolved.inputs, resolved.capacity
