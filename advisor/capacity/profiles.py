"""vLLM's start-up profile by release: the overhead models, version gates and sampler defaults of the capacity pass.

What the engine's ``profile_run`` holds besides weights and KV cache (:class:`OverheadModel`, one per engine
generation in :data:`OVERHEAD_PROFILES`), the release each behaviour starts or ends at (``*_SINCE``), the V0 forward
factors read from the model files, the top-k/top-p sampler each release runs by default, and vLLM's own defaults for
``--max-num-seqs`` and ``--block-size``. Each constant's docstring names the engine file and version it is read from.
The steps that use them: :mod:`advisor.capacity.overhead` (activation, sampler, non-torch, CUDA graphs),
:mod:`advisor.capacity.inputs` (the profile batch), :mod:`advisor.capacity.kv` (the pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from advisor.capacity.generation import parse_version, vllm_accounting
from advisor.capacity.hardware import GIB
from advisor.capacity.models import ModelArch

MIB: Final = 1 << 20


GPUS_PER_NVLINK_NODE: Final = 8
"""GPUs behind one NVSwitch in an HGX/DGX node (H100, H200, B200): NCCL's intra-node peers and NVLS heads."""


NVLS_BYTES_PER_CHANNEL_HEAD: Final = int(4.95 * GIB / (2 * 24 * 8))
"""NCCL NVLink SHARP memory per channel per head per communicator (bytes), NCCL 2.19–2.22 (torch ≤ 2.6).

``src/transport/nvls.cc`` allocates ``nChannels × 2 × (NCCL_BUFFSIZE 4 MiB + 2 MiB)`` per head, 12 MiB per
channel per head; vLLM's NCCL log on 8 × H200 prints ``nvlsTotalSize 2415919104`` (24 channels, 8 heads: 2.25
GiB). Measured, switching NVLS off at TP 8 on 8 × H200 returns 17,595 → 227xx blocks of Llama-3.1-405B
(1,032,192 B each), 4.91–5.00 GiB, for V0's two communicators (vllm-project/vllm#9699): 10 % above
2 × 2.25 GiB. This constant carries the measured 4.95 GiB: 4.95 GiB ÷ (2 × 24 × 8) = 13.2 MiB."""


FUSED_MOE_CHUNK_TOKENS: Final = 32768
"""Tokens per fused-MoE call (``VLLM_FUSED_MOE_CHUNK_SIZE``); the MoE intermediates never exceed this chunk."""


CUDA_GRAPH_ESTIMATE_SINCE: Final = (0, 20)
"""The first vLLM release that subtracts its CUDA-graph memory estimate from the KV budget by default.

``vllm/v1/worker/gpu_worker.py`` ``Worker.determine_available_memory`` (0.20.0, 0.21.0): ``available =
requested − non_kv_cache_memory − cudagraph_memory_estimate_applied``, the estimate applied when
``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` holds. ``vllm/envs.py`` defaults it to "1" in the 0.20.0 and 0.21.0
wheels and to "0" in 0.19.0 (read from the PyPI wheels), although the log line of 0.20 and later says
"CUDA graph memory profiling is enabled (default since v0.21.0)". 0.18 and 0.19 compute and print the estimate
but apply it only when opted in ("In v0.19, CUDA graph memory profiling will be enabled by default …")."""


CUDA_GRAPH_ESTIMATE_ENV: Final = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
"""vLLM's switch for the CUDA-graph estimate (``vllm/envs.py``, 0.21.0): ``0`` turns the deduction off."""


MLA_ALIGN_ENV: Final = "VLLM_CUDA_MEM_ALIGN_KV_CACHE"
"""vLLM V0's switch for 256-byte MLA cache entries (``vllm/envs.py``, 0.7.x, default "1"; read by
``vllm/worker/cache_engine.py`` ``CacheEngine._allocate_kv_cache``): ``0`` leaves entries unpadded."""


DEFAULT_MAX_NUM_BATCHED_TOKENS: Final = 8192
"""Tokens in the profile batch when ``max_num_batched_tokens`` is None (V1 profile).

vLLM's own default depends on version and GPU: V1 0.8–0.9 used 2048 for the OpenAI server on most GPUs;
later releases use 8192 for the API server (16384 for the offline ``LLM`` class) on ≥ 70 GiB GPUs. V0
without chunked prefill used ``max(max_model_len, 2048)`` (the ``vllm-v0`` profile does that)."""


V0_CHUNKED_PREFILL_2048_SINCE: Final = (0, 6, 5)
"""The first V0 release whose chunked-prefill step defaults to 2048 tokens: ``SchedulerConfig.__post_init__``
(``vllm/config.py`` 0.6.5, 0.6.6, 0.7.3: ``self.max_num_batched_tokens = 2048``); 0.6.3.post1 and 0.6.4.post1
(``SchedulerConfig.__init__``) take 512 ("the values that have the best balance between ITL and TTFT on A100")."""


V1_CHUNKED_PREFILL_OFF_SINCE: Final = (0, 11, 1)
"""The first V1 release that honours ``--no-enable-chunked-prefill`` for generation models, sizing the step
``max(max_model_len, default)`` when ``max_num_batched_tokens`` is unset (``vllm/engine/arg_utils.py``
``EngineArgs._set_default_args``, 0.11.1, 0.11.2, 0.12.0: ``if not self.enable_chunked_prefill:
self.max_num_batched_tokens = max(model_config.max_model_len, self.max_num_batched_tokens)``). 0.8.5-0.11.0 set
``self.enable_chunked_prefill = True`` for every non-pooling model, whatever was asked."""


V0_MLP_REBINDING_TYPES: Final = frozenset({"llama", "mistral", "phi3", "aquila", "internlm", "internlm3", "xverse"})
"""``model_type``s vLLM V0 runs through ``llama.py``'s ``LlamaMLP``, whose ``forward`` rebinds ``x`` (``x, _ =
gate_up_proj(x); x = act_fn(x)``), so the gate-and-up output is freed once the activation is computed
(``vllm/model_executor/models/registry.py`` at v0.6.6 and v0.7.3: LlamaForCausalLM, MistralForCausalLM,
AquilaForCausalLM, InternLM(3)ForCausalLM and XverseForCausalLM → ``llama.py``; ``phi3.py``'s Phi3ForCausalLM
subclasses it; Yi's checkpoints say ``llama``). Every other gated MLP in those releases keeps ``gate_up`` until
``down_proj`` returns (``qwen2.py`` ``Qwen2MLP``, reused by ``qwen3.py``; ``deepseek_v2.py``, ``gemma*.py``,
``granite.py``, ``internlm2.py``, ``olmo*.py`` …: 19 of the 20 gated MLP classes of v0.7.3). Releases before
:data:`V0_MLP_REBINDING_SINCE` hold it in ``LlamaMLP`` too."""


V0_MLP_REBINDING_SINCE: Final = (0, 6, 4)
"""The first vLLM release whose ``LlamaMLP.forward`` rebinds ``x`` (``x, _ = self.gate_up_proj(x); x =
self.act_fn(x)``: the 0.6.4, 0.6.4.post1, 0.6.5 and 0.6.6.post1 wheels' ``llama.py``). 0.6.2 and 0.6.3 keep
``gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up)`` alive through ``down_proj``, like ``Qwen2MLP``,
so a build between those tags (``0.6.3.devN``) follows the ``holding`` factors."""


V0_FORWARD_FACTORS: Final[dict[str, tuple[float, float]]] = {
    "rebinding": (3.0, 3.0),
    "holding": (4.0, 3.0),
    "two_matrix": (3.0, 2.0),
}
"""(hidden factor, MLP factor) of vLLM V0's dense forward peak, by how the model code holds its MLP tensors: the
peak per token is ``hidden factor × hidden + MLP factor × intermediate ÷ TP`` activation elements, the most the
torch caching allocator holds at once over one decoder layer (V0 runs eagerly: no torch.compile, no fusion).

Read from the model files at v0.6.6 and v0.7.3. Throughout a layer three hidden-wide tensors live: the model
loop's ``hidden_states`` (the layer's input, which ``LlamaModel.forward`` keeps referenced while the layer runs;
the fused add-RMSNorm normalizes it in place), the residual, and the post-attention hidden state fed to the MLP.

* ``rebinding`` (``LlamaMLP``): gate_up (2i) + activation output (i) at ``act_fn``: 3h + 3i; at ``down_proj``
  gate_up is gone (3h + i + h), the larger phase when h > 2i (:data:`V0_DOWN_PROJ_MLP_FACTOR`).
* ``holding`` (``Qwen2MLP``): ``gate_up`` stays referenced until ``forward`` returns, so at ``down_proj`` 3h +
  2i + i + h: 4h + 3i.
* ``two_matrix`` (``PhiMLP``, ``GPT2MLP``, OPT …: ``ModelArch.gated_mlp`` False): ``fc1`` output (i) + activation
  output (i) beside the attention output of Phi's parallel block or GPT-2's ``ln_2`` output: 3h + 2i.

Check: Llama-3.1-8B at 20,000 tokens (bf16) is 20,000 × 2 × (3 × 4,096 + 3 × 14,336) = 2.06 GiB, and vLLM 0.6.4
logged ``peak_torch_memory=17.06GiB`` with 14.99 GiB of weights, 2.07 GiB (github.com/vllm-project/vllm/issues/10517).
The attention half of a layer (3h + qkv + attention output) is below these for every gated model we know; it is
taken when larger (:func:`v0_forward_elements_per_token`)."""


def v0_mlp_code(model: ModelArch, release: tuple[int, ...] | None = None) -> str:
    """Which key of :data:`V0_FORWARD_FACTORS` vLLM V0's model code for ``model`` follows: ``two_matrix`` when
    the MLP has no gate, ``rebinding`` for :data:`V0_MLP_REBINDING_TYPES` from :data:`V0_MLP_REBINDING_SINCE`
    (``release`` None: unknown, taken as such a release), else ``holding`` (also for an unknown ``model_type``:
    the pattern of nearly every gated model file, and the larger of the two)."""
    if not model.gated_mlp:
        return "two_matrix"
    if release is not None and release < V0_MLP_REBINDING_SINCE:
        return "holding"
    return "rebinding" if model.model_type in V0_MLP_REBINDING_TYPES else "holding"


V0_DOWN_PROJ_MLP_FACTOR: Final[dict[str, float]] = {"rebinding": 1.0, "holding": 3.0, "two_matrix": 1.0}
"""MLP-wide tensors alive while V0's ``down_proj`` (``fc2``) runs, by :func:`v0_mlp_code`: the activation output
alone where ``forward`` rebinds ``x`` (``LlamaMLP``; ``PhiMLP``'s ``fc1`` output is gone too), gate_up (2i) and
the activation output (i) where it is held (``Qwen2MLP``: ``gate_up, _ = self.gate_up_proj(x); x =
self.act_fn(gate_up); x, _ = self.down_proj(x)``, ``qwen2.py`` at v0.8.5.post1). With the three hidden-wide
tensors and ``down_proj``'s own output the phase holds ``4h + factor × i ÷ TP``: the peak of
:data:`V0_FORWARD_FACTORS` for ``holding``; for the others the peak when ``h > 2 × i ÷ TP`` (a wide model split
over many GPUs), and a 4-bit bitsandbytes linear adds a second output-wide tensor
(:func:`v0_forward_elements_per_token`)."""


def v0_forward_elements_per_token(
    model: ModelArch, tensor_parallel_size: int, *, bnb_4bit: bool = False, release: tuple[int, ...] | None = None
) -> float:
    """Activation elements per token at the peak of one V0 decoder layer on one GPU: the larger of the MLP
    phase (:data:`V0_FORWARD_FACTORS`) and the attention phase, ``3h + (2 × q + 2 × kv) ÷ TP`` (the three
    hidden-wide tensors, the qkv projection, the attention output before ``o_proj``; ``q = heads × head_dim``,
    ``kv = kv_heads × head_dim``; ``llama.py`` ``LlamaAttention.forward`` at v0.6.6).

    ``bnb_4bit``: every linear of a 4-bit bitsandbytes model allocates its output and then, per shard, copies in
    bitsandbytes' ``matmul_4bit`` result, a second tensor of the shard's width (``bitsandbytes.py``
    ``BitsAndBytesLinearMethod._apply_4bit_weight``: ``out = torch.empty(...)`` then ``_apply_bnb_4bit``'s
    ``out[:, i:j] = matmul_4bit(x, ...)``, "It is more efficient to use out kwarg … Infeasible now due to the
    bug", v0.6.6.post1, v0.8.5.post1, v0.10.0). At ``down_proj`` that is one more hidden-wide tensor: the phase
    holds ``5h + factor × i ÷ TP`` (:data:`V0_DOWN_PROJ_MLP_FACTOR`), the attention phase one more ``h`` at
    ``o_proj``; at ``gate_up_proj`` the shard's ``i ÷ TP`` result sits where the activation output would, so
    that phase is unchanged. ``release``: the vLLM release (:func:`v0_mlp_code`)."""
    code = v0_mlp_code(model, release)
    hidden_factor, mlp_factor = V0_FORWARD_FACTORS[code]
    tp = tensor_parallel_size
    h = model.hidden_size
    i = model.intermediate_size / tp
    mlp = hidden_factor * h + mlp_factor * i
    q = model.num_attention_heads * model.head_dim
    kv = model.num_kv_heads * model.head_dim
    attention = 3 * h + (2 * q + 2 * kv) / tp
    # down_proj's phase: the three hidden-wide tensors, the MLP tensors still alive, down_proj's output (h); it
    # passes the factors' phase when the hidden size outweighs the TP-split MLP (Llama-3.1-405B at TP 8: 4h + i
    # = 72,192 > 3h + 3i = 69,120 elements per token)
    mlp = max(mlp, (5 if bnb_4bit else 4) * h + V0_DOWN_PROJ_MLP_FACTOR[code] * i)
    if bnb_4bit:
        attention += h
    return max(mlp, attention)


SAMPLERS: Final = ("flashinfer", "torch")
"""Top-k/top-p samplers vLLM may run (``CapacityInputs.sampler``; ``--sampler``)."""


FLASHINFER_SAMPLER_DEFAULT_RELEASES: Final[tuple[tuple[tuple[int, ...], tuple[int, ...] | None], ...]] = (
    ((0, 8), (0, 11, 1)),
    ((0, 21), None),
)
"""V1 releases ``[first, last)`` (``None``: to date) that sample with FlashInfer by default whenever flashinfer is
importable (``vllm/v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``:
``VLLM_USE_FLASHINFER_SAMPLER`` unset counts as on in V1 from 0.8 to 0.11.0, with flashinfer < 0.2.3 in 0.8.x and ≥
0.2.3 from 0.9; opt-in from 0.11.1, vllm-project/vllm#26859 (the 0.11.1 and 0.11.2 wheels' ``__init__``: ``if
envs.VLLM_USE_FLASHINFER_SAMPLER:`` … else ``forward_native``, "Users must opt in explicitly"), through 0.20, whose
``envs.py`` leaves it None; on again from 0.21, vllm-project/vllm#40376: ``envs.py`` 0.21.0
``VLLM_USE_FLASHINFER_SAMPLER`` defaults to True, the same in 0.22-0.34). V0 needs the variable set in every release
(``envs.py``: unset means off; ``model_executor/layers/sampler.py``). The official image ``vllm/vllm-openai``
installs flashinfer (0.8.x: the flashinfer_python 0.2.1.post2 wheel in ``Dockerfile``; later releases build it);
``pip install vllm`` does not before 0.11.1 (``flashinfer-python`` is the ``[flashinfer]`` extra of 0.10 and 0.11.0),
and does after ("flashinfer-python is a default dep of vLLM CUDA now", vllm-project/vllm#26859; the 0.11.1 and 0.11.2
wheels' METADATA: ``Requires-Dist: flashinfer-python==0.5.2``)."""


FLASHINFER_SAMPLER_CAPABILITY: Final = ((7, 5), (12, 1))
"""Compute capabilities ``[low, high]`` on which the default-on FlashInfer sampler of 0.21+ runs; elsewhere vLLM
quietly falls back to the PyTorch-native sampler (``TopKTopPSampler.__init__`` → ``FlashInferBackend.
supports_compute_capability``, ``vllm/v1/attention/backends/flashinfer.py`` 0.21.0: 7.5 ≤ capability ≤ 12.1)."""


def default_sampler(
    overhead_profile: str, engine_version: str | None, compute_capability: tuple[int, int] | None = None
) -> str:
    """The sampler the official image runs (``sampler`` None): ``flashinfer`` on V1 releases of
    :data:`FLASHINFER_SAMPLER_DEFAULT_RELEASES` (from 0.21 only on GPUs of :data:`FLASHINFER_SAMPLER_CAPABILITY`,
    when the capability is known), else ``torch``. An unstated version takes ``torch``: of the two warm-ups it leaves
    the smaller pool, so the plan never promises slots a release without FlashInfer would not have."""
    parsed = parse_version(engine_version)
    if overhead_profile != "vllm-v1" or parsed is None:
        return "torch"
    for first, last in FLASHINFER_SAMPLER_DEFAULT_RELEASES:
        if first <= parsed and (last is None or parsed < last):
            low, high = FLASHINFER_SAMPLER_CAPABILITY
            if last is None and compute_capability is not None and not low <= compute_capability <= high:
                return "torch"
            return "flashinfer"
    return "torch"


def sampler_problems(sampler: str | None, compute_capability: tuple[int, int] | None) -> list[str]:
    """An explicit ``flashinfer`` sampler on a CUDA GPU outside :data:`FLASHINFER_SAMPLER_CAPABILITY`: vLLM refuses it
    (``vllm/v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``, 0.21.0: "FlashInfer does not support
    compute capability 7.0, unset VLLM_USE_FLASHINFER_SAMPLER=1"). Nothing when the capability is unknown."""
    low, high = FLASHINFER_SAMPLER_CAPABILITY
    if sampler != "flashinfer" or compute_capability is None or low <= compute_capability <= high:
        return []
    cc = f"{compute_capability[0]}.{compute_capability[1]}"
    return [
        f"sampler flashinfer (--sampler, VLLM_USE_FLASHINFER_SAMPLER=1): FlashInfer does not support compute "
        f"capability {cc} (it runs on {low[0]}.{low[1]} to {high[0]}.{high[1]}); vLLM refuses it, use --sampler torch"
    ]


V2_MODEL_RUNNER_DEFAULT_SINCE: Final = (0, 22)
"""The first vLLM release that may pick Model Runner V2 (``vllm/v1/worker/gpu/model_runner.py``) without being asked:
``vllm/envs.py`` reads ``VLLM_USE_V2_MODEL_RUNNER`` as ``int(os.getenv(..., "0"))`` up to 0.21.0 (read in the 0.19.1,
0.20.2 and 0.21.0 wheels: V1 ``gpu_model_runner.py`` unless set) and as ``maybe_convert_bool(os.getenv(..., None))``
from 0.22.0, unset then meaning ``VllmConfig.use_v2_model_runner`` (``vllm/config/vllm.py``) decides by model:
:func:`uses_v2_model_runner`."""


V2_MODEL_RUNNER_MODEL_TYPES: Final[tuple[tuple[tuple[int, ...], frozenset[str], bool], ...]] = (
    ((0, 22), frozenset({"qwen3"}), True),
    ((0, 23), frozenset({"qwen3", "llama", "mistral"}), True),
    ((0, 24), frozenset({"qwen3", "llama", "mistral", "deepseek_v2", "qwen2_moe", "granitemoe"}), False),
)
"""(first release, ``model_type``s, dense-and-unquantized only) of the releases whose V2 default is a list of
architectures (``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` and ``VllmConfig._is_default_v2_model_runner_model`` in
``vllm/config/vllm.py``): 0.22.0/0.22.1 ``{"Qwen3ForCausalLM"}`` and 0.23.0 ``{LlamaForCausalLM, MistralForCausalLM,
Qwen3ForCausalLM}``, both ``return not model_config.is_moe and not model_config.is_quantized``; 0.24.0 adds
``DeepseekV2ForCausalLM``, ``Qwen2MoeForCausalLM``, ``GraniteMoeForCausalLM`` and drops the MoE/quantized test.
Each class maps to the ``model_type`` of its checkpoints; multimodal wrappers are other classes (text-only here)."""


V2_MODEL_RUNNER_DENSE_SINCE: Final = (0, 25)
"""From this release the V2 default covers every dense generation model that is not hybrid (Mamba/linear attention)
or attention-free, and the MoE classes of :data:`V2_MODEL_RUNNER_MOE_MODEL_TYPES`
(``_is_default_v2_model_runner_model``, ``vllm/config/vllm.py`` 0.25.0, 0.25.1, 0.26.0, 0.27.1, 0.28.0:
``return is_default_v2_architecture or not model_config.is_moe``; 0.27 also lets a hybrid of the list through)."""


V2_MODEL_RUNNER_MOE_MODEL_TYPES: Final = frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"})
"""``model_type``s of the MoE classes in ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` of 0.25-0.28
(``DeepseekV2ForCausalLM``, ``Qwen2MoeForCausalLM``, ``GraniteMoeForCausalLM``; 0.27 adds Inkling, Kimi-K3 and
LongCat-Flash-Ngram classes, not mapped here: they stay on V1 in this model)."""


V2_MODEL_RUNNER_EVERY_MODEL_SINCE: Final = (0, 29)
"""From this release ``VllmConfig.use_v2_model_runner`` has no model test on CUDA: V2 unless a feature is unsupported
(``vllm/config/vllm.py`` 0.29.0, 0.30.0, 0.31.0; only ROCm keeps a V1 list)."""


V2_MODEL_RUNNER_SPECULATIVE_METHODS: Final[tuple[tuple[tuple[int, ...], frozenset[str]], ...]] = (
    ((0, 22), frozenset({"eagle", "eagle3", "mtp"})),
    ((0, 24), frozenset({"eagle", "eagle3", "mtp", "dflash"})),
    ((0, 25), frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})),
)
"""(first release, ``--speculative-config`` methods V2 runs): any other method (``ngram``, draft models …) is listed
by ``VllmConfig._get_v2_model_runner_unsupported_features`` (``vllm/config/vllm.py`` 0.22.0-0.29.0), and the
engine then falls back to V1 ("Model Runner V2 does not yet support …; using the V1 model runner instead")."""


def uses_v2_model_runner(
    model: ModelArch, engine_version: str | None, overhead_profile: str, speculative_method: str | None = None
) -> bool:
    """Whether vLLM runs Model Runner V2 by default (``VLLM_USE_V2_MODEL_RUNNER`` unset) for ``model`` on CUDA:
    ``VllmConfig.use_v2_model_runner`` of ``vllm/config/vllm.py`` by release, :data:`V2_MODEL_RUNNER_DEFAULT_SINCE`
    to :data:`V2_MODEL_RUNNER_EVERY_MODEL_SINCE`, then the speculative method
    (:data:`V2_MODEL_RUNNER_SPECULATIVE_METHODS`). False on V0, for an unstated version (the V1 runner's sampler
    warm-up is the larger) and for pooling models (not modelled). "Quantized" is vLLM's ``ModelConfig.is_quantized``:
    the checkpoint has a ``quantization_config`` (``vllm/config/model.py``, 0.27.1).

    >>> from advisor.capacity.models import ModelArch
    >>> llama = ModelArch("l", 28, 3072, 24, 8, 128, 128256, 8192, 131072, "bfloat16", 1, model_type="llama")
    >>> [uses_v2_model_runner(llama, v, "vllm-v1") for v in ("0.21.0", "0.22.1", "0.23.0", "0.27.1")]
    [False, False, True, True]
    """
    parsed = parse_version(engine_version)
    if overhead_profile != "vllm-v1" or parsed is None or parsed < V2_MODEL_RUNNER_DEFAULT_SINCE:
        return False
    if speculative_method is not None:
        methods = [m for since, m in V2_MODEL_RUNNER_SPECULATIVE_METHODS if since <= parsed][-1]
        if speculative_method not in methods:
            return False
    if parsed >= V2_MODEL_RUNNER_EVERY_MODEL_SINCE:
        return True
    if parsed >= V2_MODEL_RUNNER_DENSE_SINCE:
        return model.linear_layers == 0 and (not model.is_moe or model.model_type in V2_MODEL_RUNNER_MOE_MODEL_TYPES)
    _, types, dense_only = [row for row in V2_MODEL_RUNNER_MODEL_TYPES if row[0] <= parsed][-1]
    if model.model_type not in types or model.vision_parameters:
        return False
    return not dense_only or (not model.is_moe and model.checkpoint_quantization is None)


FLASHINFER_SAMPLER_BYTES_PER_LOGIT: Final = 14.0
"""Bytes per (row × vocab) element at the peak of the FlashInfer top-k/top-p warm-up, no sort: the model's
logits (bf16, 2, held by ``_dummy_sampler_run``), their fp32 copy (4, ``Sampler.forward``), then in flashinfer
≥ 0.2.3's ``top_k_top_p_sampling_from_logits`` the top-k-masked logits (4, ``top_k_mask_logits``) and their
softmax (4) = 14 (vLLM 0.9-0.11 ``flashinfer_sample``). vLLM V0 with ``VLLM_USE_FLASHINFER_SAMPLER=1`` (0.6-0.7
``Sampler.forward``): bf16 logits, fp32 logits, probabilities and log-probabilities, 2 + 4 + 4 + 4 = 14 too."""


ALLREDUCE_FUSION_RELEASES: Final = ((0, 17), (0, 22))
"""``[first, end)`` of the vLLM releases whose FlashInfer all-reduce fusion workspace (on by default from 0.17 on
Hopper/Blackwell with TP > 1) comes from FlashInfer 0.6.4-0.6.8, which rounds each buffer up to the multicast
granularity (vLLM 0.22 pins FlashInfer 0.6.11, which does not): :func:`advisor.capacity.overhead.
allreduce_fusion_non_torch_bytes`."""

ALLREDUCE_FUSION_NON_TORCH_BYTES: Final = (int(2.08 * (1 << 30)), int(2.17 * (1 << 30)))
"""(TP 2, TP ≥ 4) non-torch increase per rank with that workspace, the medians of vLLM 0.19.0's own breakdowns on
H100 SXM (11 runs at TP 2: 2.06-2.11 GiB; 5 at TP 4: 2.13-2.21 GiB; llm-d-incubation/llm-d-planner at d3121e05)."""


TRITON_TOPK_TOPP_SINCE: Final = (0, 17)
"""The first vLLM release whose PyTorch-native top-k/top-p (V1 ``TopKTopPSampler.forward_native``) masks the logits with
a Triton kernel instead of sorting the vocabulary: "Triton-based top-k and top-p sampler kernels (#33538)" in the
v0.17.0 release notes (2026-03-07; v0.16.0 was branch-cut on Feb 8 without it), ``vllm/v1/sample/ops/
topk_topp_sampler.py`` ``apply_top_k_top_p``: ``if HAS_TRITON: return apply_top_k_top_p_triton(logits, k, p)``."""

TRITON_SAMPLER_BYTES_PER_LOGIT: Final = 14.0
"""Bytes per (row × vocab) element at the peak of the V1 torch sampler's warm-up from :data:`TRITON_TOPK_TOPP_SINCE`:
the model's bf16 logits (2, held by ``_dummy_sampler_run``), their fp32 copy (4, ``Sampler.forward``), masked in
place by the Triton kernel, their softmax (4, ``forward_native``) and the exponential noise ``q`` (4,
``random_sample``; ``probs.div_(q)`` in place) = 14. Checked on vLLM 0.19.0's own breakdown for gpt-oss-20b on an
H100 at the default 1,024 sequences ("2.87 GiB for peak activation", llm-d-incubation/llm-d-planner at d3121e05):
1,024 × 201,088 × 14 B + :data:`TRITON_SAMPLER_BUFFER_BYTES` + the hidden states the profile holds
(:data:`PROFILE_HOLDS_HIDDEN_STATES_SINCE`, 10,240 × 2,880 × 2 B) = 2.81 GiB (the sorting sampler's 39 B: 7.53
GiB)."""

TRITON_SAMPLER_BUFFER_BYTES: Final = 80 << 20
"""The Triton top-k/top-p kernel's own ``[num_programs, vocab]`` buffers for the outlier subset: "requiring around
~80MiB of extra VRAM" (vllm-project/vllm#33538)."""

PROFILE_HOLDS_HIDDEN_STATES_SINCE: Final = (0, 9)
"""The first vLLM release whose V1 ``GPUModelRunner.profile_run`` keeps the dummy forward's hidden states alive
through the sampler warm-up: ``hidden_states, last_hidden_states = self._dummy_run(self.max_num_tokens,
is_profile=True)`` (``_dummy_run`` ends ``return hidden_states, hidden_states[logit_indices]``, so both the
``[max_num_batched_tokens, hidden]`` output and its ``[sequences, hidden]`` gather live), then
``self._dummy_sampler_run(last_hidden_states)``, which replaces its input by ``torch.rand_like`` (one more
``[sequences, hidden]``: "the dummy hidden states may contain special values, like inf or nan") before
``compute_logits``; ``del hidden_states, output`` comes only after. The tuple form came with V1's pooling runner
(``_dummy_pooler_run(hidden_states)`` needs every token's state), which 0.8.2 did not have ("vllm==0.8.2 V1 does not
yet support Pooling models", vllm-project/vllm#15773): 0.9 is taken as the first release. Checked on vLLM 0.19.0's
own breakdowns (llm-d-incubation/llm-d-planner at d3121e05, H100, 8,192 batched tokens, 1,024 sequences): Qwen2.5-72B
at TP 2 logs 2.29 GiB of peak activation against Qwen2.5-7B's 2.21 GiB with the same vocabulary and sampler, the
difference being the two models' hidden states (9,216 × (8,192 − 3,584) × 2 B = 81 MiB; 0.08 GiB logged)."""


FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT: Final = 10.0
"""The same for vLLM V1 0.8.x, whose ``forward_cuda`` samples from probabilities with flashinfer 0.2.1's fused
``top_k_top_p_sampling_from_probs``: bf16 logits (2) + fp32 logits (4) + softmax (4) = 10."""


@dataclass(frozen=True)
class OverheadModel:
    """Per-GPU memory vLLM reserves besides weights and KV cache (bytes), as a function of the shapes.

    vLLM measures ``torch peak increase`` over a profile run: a forward pass over ``T`` =
    ``max_num_batched_tokens`` tokens split into ``max_num_seqs`` dummy requests, then the sampler over one
    logits row per request (V0 ``ModelRunner.profile_run`` with ``SamplingParams(top_p=0.99, top_k=vocab-1)``;
    V1 ``GPUModelRunner.profile_run`` → ``_dummy_run`` then ``_dummy_sampler_run``). The forward's
    intermediates are freed before the sampler runs, so the peak is the larger of the two::

        forward  = T × act_bytes × (hidden_factor × hidden + max(dense MLP, MoE) per token)
                     dense MLP per token = mlp_factor × intermediate ÷ TP
                     MoE per token       = top_k × (mlp_factor × moe_intermediate ÷ TP_moe + hidden)
                                           (fused_moe's intermediate caches 1-3; TP_moe = 1 under expert
                                           parallelism; T capped at the 32,768-token fused-MoE chunk)
        sampler  = max_num_seqs × vocab × sampler_bytes_per_logit   (full vocab on every rank)
        overhead = max(forward, sampler) + non_torch (+ tp_non_torch when TP > 1) + CUDA-graph estimate

    ``sampler_bytes_per_logit = 39``: fp32 logits (4), the top-k/top-p sort's values (4) and int64 indices (8),
    the inverse permutation (8), softmax probabilities (4), log-probabilities (4), the exponential draw ``q``
    (4) and masks ≈ 39 bytes per (row × vocab) element. Calibration: four vLLM 0.11 logs on H100 at
    max_num_seqs 1024 (Llama-3.1-8B 4.76 GiB, Qwen3-0.6B 5.56, Qwen3-32B 5.64, gpt-oss-20b 7.38 GiB "torch
    peak memory increase") give 38.4-38.9 bytes; the vLLM 0.6.6.post1 T4 log of Qwen2.5-0.5B (256 rows)
    fits 39 to 0.3 %. ``hidden_factor = 6`` (residual, normed input, qkv, attention output, MLP output
    buffers) and ``mlp_factor = 3`` (gate-and-up output and the activated product) are structural.
    ``non_torch_bytes``: CUDA context, cuBLAS workspaces (0.10-0.13 GiB on one GPU in the logs above);
    ``tp_non_torch_bytes``: NCCL and custom all-reduce buffers when TP > 1 (0.55 − 0.13 = 0.42 GiB measured
    at TP 2 on H100). ``tp_peer_non_torch_bytes``: each further GPU in the TP group (V0 only: its two NCCL
    communicators grow with the peers they connect to; an 8 × A100-40GB V0 log, DeepSeek-Coder-V2-Lite on
    vLLM 0.7.x, shows ``non_torch_memory takes 2.10GiB`` at TP 8 without NVLS, so (2.00 − 0.42) ÷ 6 = 0.263 GiB
    per peer, ±30 %: PCIe nodes use fewer NCCL channels and less). ``nvls_*``: NVLink SHARP buffers on NVSwitch
    nodes (:func:`non_torch_bytes_per_gpu`). ``cuda_graph_bytes``: vLLM's CUDA-graph memory estimate, subtracted
    before the KV cache from :data:`CUDA_GRAPH_ESTIMATE_SINCE` (0.20) on; earlier releases capture graphs after
    sizing the cache, outside the budget (:func:`cuda_graph_bytes_per_gpu`).

    ``forward_by_model_code``: the dense forward follows the model file's tensor lifetimes
    (:data:`V0_FORWARD_FACTORS` by :func:`v0_mlp_code`) instead of ``hidden_factor``/``mlp_factor`` (V0 runs the
    model eagerly; V1 compiles and fuses it, and keeps the factors above). ``whole_device_before``: releases
    below this one count *everything* on the device that torch did not allocate as non-torch memory, the CUDA
    context and libraries (``whole_device_non_torch_bytes``, 0.35 GiB on one GPU in the vLLM 0.6.4 log of
    github.com/vllm-project/vllm/issues/10517: ``non_torch_memory=0.35GiB``) and other processes' memory alike
    (V0 ``worker.py`` ``determine_num_available_blocks`` to v0.6.4.post1, V1 ``gpu_worker.py``
    ``determine_available_memory`` to v0.9.0: ``non_torch_allocations = (total − free) − allocated``); later
    releases count only the increase since a baseline taken at ``init_device`` (``vllm/utils.py``
    ``memory_profiling``, V0 from v0.6.5, V1 from v0.9.1), so the context and other processes drop out.
    """

    name: str
    logits_for_every_token: bool = False
    non_torch_bytes: int = int(0.13 * GIB)
    tp_non_torch_bytes: int = int(0.42 * GIB)
    tp_peer_non_torch_bytes: int = 0
    nvls_communicators: int = 0
    nvls_channels: int = 24
    nvls_bytes_per_channel: int = NVLS_BYTES_PER_CHANNEL_HEAD
    cuda_graph_bytes: int = 0
    mlp_factor: float = 3.0
    hidden_factor: float = 6.0
    logits_bytes: int = 8
    sampler_bytes_per_logit: float = 39.0
    mla_entry_alignment_bytes: int = 0
    mla_absorbed_weights: bool = False
    forward_by_model_code: bool = False
    whole_device_before: tuple[int, ...] = ()
    whole_device_non_torch_bytes: int = int(0.35 * GIB)
    description: str = field(default="", compare=False)


OVERHEAD_PROFILES: Final[dict[str, OverheadModel]] = {
    "vllm-v1": OverheadModel(
        name="vllm-v1",
        whole_device_before=(0, 9, 1),
        cuda_graph_bytes=int(0.62 * GIB),
        description="vLLM V1 engine (0.8 and later): GPUModelRunner.profile_run, peak of forward and sampler.",
    ),
    "vllm-v0": OverheadModel(
        name="vllm-v0",
        non_torch_bytes=int(0.10 * GIB),
        tp_peer_non_torch_bytes=int((2.00 - 0.42) / 6 * GIB),
        nvls_communicators=2,
        mla_entry_alignment_bytes=256,
        mla_absorbed_weights=True,
        forward_by_model_code=True,
        whole_device_before=(0, 6, 5),
        description=(
            "vLLM V0 engine (≤ 0.7): worker.py determine_num_available_blocks; MLA cache entries aligned to "
            "256 bytes (CacheEngine align_to_256bytes: 576 bf16 elements → 640); MLA decode weights W_UV·W_O "
            "and W_Q·W_UK pre-multiplied at load (VLLM_MLA_PERFORM_MATRIX_ABSORPTION, 0.7.x) and stored in "
            "the weight precision."
        ),
    ),
}
"""Overhead models by engine generation. ``vllm-v1`` is the default; :func:`profile_for_version` maps a
version string to one."""


def profile_for_version(engine_version: str | None) -> str:
    """The overhead profile of a vLLM version alone: ``vllm-v0`` before 0.8.0 (V1 became the default engine in
    0.8.0), else ``vllm-v1``. ``None`` or an unparsable string → ``vllm-v1``. The GPU and features can send a
    later release back to V0: :func:`advisor.capacity.generation.vllm_accounting` decides with them (the
    deployment resolver calls it).

    >>> profile_for_version("0.6.6.post1"), profile_for_version("0.10.2")
    ('vllm-v0', 'vllm-v1')
    """
    return vllm_accounting(engine_version).profile


def vllm_default_max_num_seqs(
    engine_version: str | None, gpu_memory_bytes: int, gpu_name: str = "", *, profile: str | None = None
) -> int:
    """``--max-num-seqs`` when not given: 1024 on ≥ 70 GiB GPUs other than the A100 for the V1 API server,
    else 256 (``EngineArgs._set_default_args`` in ``vllm/engine/arg_utils.py``; V0 always 256). ``profile``:
    the generation already decided (:func:`advisor.capacity.generation.vllm_accounting`), else the version's."""
    if (profile or profile_for_version(engine_version)) == "vllm-v0":
        return 256
    return 1024 if gpu_memory_bytes >= 70 * GIB and "a100" not in gpu_name.lower() else 256


def vllm_default_block_size(model: ModelArch, engine_version: str | None, *, profile: str | None = None) -> int:
    """``--block-size`` when not given: 64 for MLA models on V1 (the CUDA MLA backends, FlashMLA, need
    64-token blocks), else 16 (``vllm/config/cache.py``). ``profile`` as :func:`vllm_default_max_num_seqs`."""
    return 64 if model.is_mla and (profile or profile_for_version(engine_version)) == "vllm-v1" else 16
