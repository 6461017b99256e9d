"""A deployment as the operator describes it → the capacity pass's inputs under ITS engine's accounting.

One function, :func:`deployment_inputs`, turns what a config file, ``plan``, the API or ``simulate`` state
(engine, model, GPU, parallelism and each engine's own knobs, by the engine's flag names) into
:class:`~advisor.capacity.kv.CapacityInputs` with every engine default resolved; :func:`deployment_capacity`
runs :func:`~advisor.capacity.kv.capacity_pass` on it. So the daemon, the API, ``plan`` and ``simulate`` size
one deployment with the same numbers, and an SGLang, TGI, TensorRT-LLM or llama.cpp deployment is never sized
with vLLM's accounting.

Engine names: the config's engines map to an accounting by :func:`accounting_engine`
(``triton-trtllm`` → ``trtllm``; ``dynamo`` and ``auto`` → ``vllm``, the engine behind most Dynamo workers
and the detected engine not yet being known when the deployment is sized).

Defaults each engine applies when a knob is not given (sources: the engine files cited in
:mod:`advisor.capacity.kv` and :mod:`advisor.capacity.engines`):

* vLLM: ``block_size`` :func:`~advisor.capacity.kv.vllm_default_block_size`, ``max_num_seqs``
  :func:`~advisor.capacity.kv.vllm_default_max_num_seqs`, the overhead profile of ``engine_version``.
* SGLang: ``block_size`` is ``--page-size``; ``mem_fraction_static`` its GPU rule.
* TGI: ``block_size`` is ``BLOCK_SIZE`` (1 from TGI 3, 16 before); ``max_num_batched_tokens`` is
  ``--max-batch-prefill-tokens``.
* TensorRT-LLM: ``block_size`` is ``tokens_per_block``; ``max_num_batched_tokens`` is ``max_num_tokens``.
* llama.cpp: ``parallel`` defaults to ``max_num_seqs`` (else 1); the cache type is ``kv_cache_dtype`` (f16
  for ``auto``).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.capacity.engines import (
    TGI_DEFAULT_CUDA_MEMORY_FRACTION,
    EngineCapacity,
    engine_capacity_pass,
    sglang_default_mem_fraction_static,
)
from advisor.capacity.hardware import GIB
from advisor.capacity.kv import (
    CapacityInputs,
    EngineSettings,
    parse_version,
    profile_for_version,
    vllm_default_block_size,
    vllm_default_max_num_seqs,
)
from advisor.capacity.models import ModelArch
from advisor.errors import CapacityError

__all__ = ["DeploymentSpec", "accounting_engine", "deployment_capacity", "deployment_inputs", "spec_from_settings"]

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

    Attributes:
        engine: a configured engine name (:func:`accounting_engine`).
        model: the architecture.
        gpu_memory_bytes: the device total, bytes; ``gpu_name`` its catalog name ("" when unknown);
            ``nvlink_sharp`` its interconnect.
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
        engine_version: the engine's version (vLLM: the V0/V1 profile; TGI: its block size).
        enforce_eager: vLLM ``--enforce-eager``.
        mem_fraction_static: SGLang; cuda_memory_fraction: TGI; free_gpu_memory_fraction and max_tokens:
            TensorRT-LLM ``kv_cache_config``; ctx_size, parallel, kv_unified: llama.cpp.
    """

    engine: str
    model: ModelArch
    gpu_memory_bytes: int
    gpu_name: str = ""
    nvlink_sharp: bool = False
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
    mem_fraction_static: float | None = None
    cuda_memory_fraction: float | None = None
    free_gpu_memory_fraction: float | None = None
    max_tokens: int | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    kv_unified: bool = False


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
)
"""The settings a deployment (config or API request) states under the same names as :class:`DeploymentSpec`."""


def spec_from_settings(
    settings: object,
    *,
    engine: str,
    model: ModelArch,
    gpu_memory_bytes: int,
    gpu_name: str,
    nvlink_sharp: bool,
    gpu_memory_utilization: float | None,
    gpu_memory_used_by_others_gib: float,
    free_gpu_memory_fraction: float | None,
    max_tokens: int | None,
) -> DeploymentSpec:
    """The :class:`DeploymentSpec` of a stated deployment: the config's ``deployments[]`` entry and the API's
    plan request both carry the :data:`_STATED` settings under these names; the rest is passed resolved
    (GPU, model, the budget only when stated, others' memory in GiB, TensorRT-LLM's ``kv_cache_config``)."""
    stated = {name: getattr(settings, name) for name in _STATED}
    return DeploymentSpec(
        engine=engine,
        model=model,
        gpu_memory_bytes=gpu_memory_bytes,
        gpu_name=gpu_name,
        nvlink_sharp=nvlink_sharp,
        gpu_memory_utilization=gpu_memory_utilization,
        gpu_memory_used_by_others_bytes=int(gpu_memory_used_by_others_gib * GIB),
        free_gpu_memory_fraction=free_gpu_memory_fraction,
        max_tokens=max_tokens,
        **stated,
    )


def deployment_inputs(spec: DeploymentSpec) -> CapacityInputs:
    """The capacity pass's inputs for ``spec``, under its engine's accounting, every default resolved.

    Raises:
        CapacityError: an engine with no accounting, or inputs the pass refuses (naming the field).
    """
    engine = accounting_engine(spec.engine)
    version = spec.engine_version
    if engine == "vllm":
        return CapacityInputs(
            model=spec.model,
            gpu_memory_bytes=spec.gpu_memory_bytes,
            tensor_parallel_size=spec.tensor_parallel_size,
            gpu_memory_utilization=VLLM_DEFAULT_UTILIZATION
            if spec.gpu_memory_utilization is None
            else spec.gpu_memory_utilization,
            max_model_len=spec.max_model_len,
            dtype=spec.dtype,
            quantization=spec.quantization,
            kv_cache_dtype=spec.kv_cache_dtype,
            max_num_seqs=spec.max_num_seqs or vllm_default_max_num_seqs(version, spec.gpu_memory_bytes, spec.gpu_name),
            max_num_batched_tokens=spec.max_num_batched_tokens,
            block_size=spec.block_size or vllm_default_block_size(spec.model, version),
            kv_cache_memory_bytes=spec.kv_cache_memory_bytes,
            num_gpu_blocks_override=spec.num_gpu_blocks_override,
            overhead_profile=profile_for_version(version),
            engine_version=version,
            enforce_eager=spec.enforce_eager,
            pipeline_parallel_size=spec.pipeline_parallel_size,
            enable_expert_parallel=spec.enable_expert_parallel,
            nvlink_sharp=spec.nvlink_sharp,
            engine="vllm",
            data_parallel_size=spec.data_parallel_size,
            gpu_memory_used_by_others_bytes=spec.gpu_memory_used_by_others_bytes,
        )
    parsed = parse_version(version)
    # SGLang's and TGI's memory fraction travels as the budget dial (gpu_memory_utilization), resolved here
    budget = VLLM_DEFAULT_UTILIZATION
    if engine == "sglang":
        budget = spec.mem_fraction_static or sglang_default_mem_fraction_static(
            spec.gpu_memory_bytes, spec.tensor_parallel_size, spec.pipeline_parallel_size
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
        gpu_memory_bytes=spec.gpu_memory_bytes,
        tensor_parallel_size=spec.tensor_parallel_size,
        gpu_memory_utilization=budget,
        max_model_len=spec.max_model_len,
        dtype=spec.dtype,
        quantization=spec.quantization,
        kv_cache_dtype="auto" if engine == "llamacpp" else spec.kv_cache_dtype,
        max_num_seqs=spec.max_num_seqs or OTHER_ENGINE_MAX_NUM_SEQS,
        kv_cache_memory_bytes=spec.kv_cache_memory_bytes if engine == "sglang" else None,
        engine_version=version,
        pipeline_parallel_size=spec.pipeline_parallel_size,
        enable_expert_parallel=spec.enable_expert_parallel,
        nvlink_sharp=spec.nvlink_sharp,
        engine=engine,
        engine_settings=settings,
        data_parallel_size=spec.data_parallel_size,
        gpu_memory_used_by_others_bytes=spec.gpu_memory_used_by_others_bytes,
    )


def deployment_capacity(spec: DeploymentSpec) -> tuple[CapacityInputs, EngineCapacity]:
    """(inputs, the engine's capacity with its parameters and notes) for ``spec``: :func:`deployment_inputs`
    then :func:`~advisor.capacity.engines.engine_capacity_pass` (whose ``result`` is what
    :func:`~advisor.capacity.kv.capacity_pass` returns for those inputs).

    Raises:
        CapacityError: as :func:`deployment_inputs` and the engine's rule.
    """
    inputs = deployment_inputs(spec)
    return inputs, engine_capacity_pass(inputs.engine, inputs, inputs.engine_settings)
