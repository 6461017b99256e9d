"""The overhead of vLLM's start-up profile on each GPU, bytes: the torch activation peak (the larger of the forward
pass and the sampler warm-up), non-torch memory (CUDA context, NCCL, NVLink SHARP) and the CUDA-graph estimate, by
the :class:`~advisor.capacity.profiles.OverheadModel` of the engine generation; and which accounting sized the pool
(:func:`vllm_accounting_of`).

This is the part of the capacity pass (:mod:`advisor.capacity.kv`) that is a model rather than arithmetic, checked
against the published start-up logs of that module's table:

Each term is traced in the engine's own breakdown (``determine_num_available_blocks`` in
``vllm/worker/worker.py``, 0.6.6 lines 177-248 / 0.7.3 lines 205-271: ``available = total × util − (weights +
torch peak increase + non-torch increase)``, the weights measured at load and *outside* the peak;
``profile_run`` in ``vllm/worker/model_runner.py``, 0.6.6 lines 1231-1333: ``max_num_seqs`` prompts sharing
``max_num_batched_tokens``, then the sampler over one logits row each):

* DeepSeek-R1, 0.7.3: the log reads activation 6.37 GiB (ours 6.35: the fused-MoE forward at 32,000 tokens,
  above the 4.8 GiB sampler) and ``non_torch_memory takes 7.16GiB`` (ours 7.05). ``non_torch`` in 0.7.3 is
  device-used − torch-reserved since ``init_device`` (``vllm/utils.py`` ``memory_profiling``), so it holds the
  two NCCL communicators V0 opens at TP 8 (pynccl, and torch.distributed's TP group that gathers the logits):
  their ring and P2P buffers (2.00 GiB at TP 8, from an 8 × A100 log) and, on an NVSwitch Hopper node, their
  NVLink SHARP buffers (4.95 GiB at TP 8, measured in vllm-project/vllm#9699; NCCL 2.19-2.22
  ``src/transport/nvls.cc``): :func:`non_torch_bytes_per_gpu`. Neither figure came from this log. With
  ``--gpu-memory-gib 139.81`` alone the plan knows the H200 (the only part with that CUDA total).
* Meta-Llama-3-8B, 0.6.6 (the one miss): non-torch matches (0.10 GiB) but the log's activation is 9.37 GiB
  against 1.19 here. The release's default accounting is pinned by the Qwen2.5-0.5B log above (0.6.6.post1,
  the same ``worker.py:241`` lines): 1.44 GiB at 256 sequences, the sampler term, reproduced to 0.3 %; the
  same architecture logs 1.26 GiB at these settings (vLLM PR #10511). 9.37 GiB is the sampler term at about
  2,048 sequences (2,048 × 128,256 × 38.3 B; ``--max-num-seqs 2048`` gives 5,606 blocks, −1.5 %), an engine
  argument the quoted log does not show, so the case stays an expected failure rather than a fitted constant.
"""

from __future__ import annotations

import math

from advisor.capacity.encoder import encoder_profile
from advisor.capacity.generation import Accounting, parse_version, vllm_accounting
from advisor.capacity.inputs import CapacityInputs
from advisor.capacity.precision import DTYPE_BYTES
from advisor.capacity.profiles import (
    ALLREDUCE_FUSION_NON_TORCH_BYTES,
    ALLREDUCE_FUSION_RELEASES,
    CUDA_GRAPH_ESTIMATE_SINCE,
    FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT,
    FLASHINFER_SAMPLER_BYTES_PER_LOGIT,
    FUSED_MOE_CHUNK_TOKENS,
    GPUS_PER_NVLINK_NODE,
    OVERHEAD_PROFILES,
    PROFILE_HOLDS_HIDDEN_STATES_SINCE,
    TRITON_SAMPLER_BUFFER_BYTES,
    TRITON_SAMPLER_BYTES_PER_LOGIT,
    TRITON_TOPK_TOPP_SINCE,
    v0_forward_elements_per_token,
)


def cuda_graph_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """vLLM's CUDA-graph memory estimate on each GPU, subtracted before the KV cache (bytes): the profile's
    ``cuda_graph_bytes`` from :data:`CUDA_GRAPH_ESTIMATE_SINCE` (0.20) on, else 0, and 0 with
    ``--enforce-eager`` (``cudagraph_mode`` NONE), with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0``
    (``estimate_cuda_graphs``) or when the version is not stated (the term is version-gated).

    The engine measures it (``vllm/v1/worker/gpu_model_runner.py`` ``GPUModelRunner.profile_cudagraph_memory``,
    0.21.0): per graph mode (PIECEWISE, FULL) it captures the two largest batch sizes into a scratch pool and
    reads free memory around each capture; ``estimate = max over modes (first capture) + Σ over modes
    (second capture, at least 1 MiB) × (graphs in the mode − 1)``. The first capture carries the graph pool's
    buffers and the kernels' workspaces, and dominates: a model of one size (``PIECEWISE=1, FULL=1``) still
    logs 0.36 GiB. Twelve published estimates ("Estimated CUDA graph memory: … GiB total", vLLM 0.18-0.28, 1
    to 86 graphs, TP 1-4) lie between 0.17 GiB (noonghunna/club-3090#127, TP 4) and 2.43 GiB
    (MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#25), median 0.62 GiB (gpustack/runner#251: 0.36 GiB at TP 2),
    with no trend in the capture sizes: the profile carries the median. Not modelled: hybrid Gated-DeltaNet
    models from 0.26, whose estimate includes a transient linear in ``max_num_batched_tokens``
    (vllm-project/vllm#50780, estimates of tens of GiB).
    """
    if inputs.enforce_eager or not inputs.estimate_cuda_graphs:
        return 0
    parsed = parse_version(inputs.engine_version)
    if parsed is None or parsed < CUDA_GRAPH_ESTIMATE_SINCE:
        return 0
    return OVERHEAD_PROFILES[inputs.overhead_profile].cuda_graph_bytes


def activation_peak_bytes(inputs: CapacityInputs) -> tuple[int, int]:
    """(forward peak, sampler peak) of the profile run on one GPU, bytes; see :class:`OverheadModel`.

    Llama-3.1-8B bf16, TP1, 8192 tokens, 1024 sequences: forward 8192 × 2 × (6 × 4096 + 3 × 14336) =
    1.03 GiB; sampler 1024 × 128,256 × 39 = 4.77 GiB (vLLM 0.11 logs 4.76 GiB). Under Model Runner V2 (vLLM
    0.22+, :attr:`CapacityInputs.uses_v2_model_runner`) the sampler term is :func:`v2_sampler_warmup_bytes`. A
    Qwen-VL tower's run (:func:`advisor.capacity.encoder.encoder_profile`) comes first: the forward term is then
    ``max(forward + encoder outputs, encoder peak)`` and the sampler's ``sampler + encoder outputs``.
    """
    om = OVERHEAD_PROFILES[inputs.overhead_profile]
    m = inputs.model
    tp = inputs.tensor_parallel_size
    act = DTYPE_BYTES[inputs.compute_dtype]
    tokens = inputs.profile_tokens
    has_dense = m.num_layers > m.moe_layers or not m.is_moe
    if om.forward_by_model_code and has_dense:
        bnb_4bit = inputs.effective_quantization == "bitsandbytes" and inputs.quantized_weight_bytes < 1  # not 8-bit
        release = parse_version(inputs.engine_version)
        forward = tokens * act * v0_forward_elements_per_token(m, tp, bnb_4bit=bnb_4bit, release=release)
        if bnb_4bit:
            # bitsandbytes' MatMul4Bit.forward (any batch above one row): ``torch.nn.functional.linear(A,
            # F.dequantize_4bit(B, quant_state).to(A.dtype).t(), bias)``, the peak linear's weight (i ÷ TP × h)
            # dequantized beside its input and output (bitsandbytes/autograd/_functions.py, github.com/
            # bitsandbytes-foundation/bitsandbytes at 012c660699ccb92bfa97916f1a18bed0980eae00)
            forward += act * m.hidden_size * m.intermediate_size / tp
    else:
        widest = m.intermediate_size * (2 if m.double_wide_mlp else 1)  # Gemma 4's shared layers: 2 × intermediate
        dense = om.mlp_factor * widest / tp if has_dense else 0.0
        # Gemma 4's per-layer inputs live through the whole forward: tokens × layers × ple (gemma4.py
        # Gemma4SelfDecoderLayers.project_per_layer_inputs), 0 without PLE
        per_layer_inputs = m.num_layers * m.per_layer_input_size
        forward = tokens * act * (om.hidden_factor * m.hidden_size + dense + per_layer_inputs)
    if m.is_moe:
        tp_moe = 1 if inputs.enable_expert_parallel else tp
        per_token = m.experts_per_token * (om.mlp_factor * m.moe_intermediate_size / tp_moe + m.hidden_size)
        moe = min(tokens, FUSED_MOE_CHUNK_TOKENS) * act * per_token + tokens * act * om.hidden_factor * m.hidden_size
        forward = max(forward, moe)
    if inputs.uses_v2_model_runner:
        sampler = float(v2_sampler_warmup_bytes(inputs))
    else:
        rows = inputs.max_num_seqs
        logits = tokens if om.logits_for_every_token else rows
        sampler = logits * m.vocab_size * sampler_bytes_per_logit(inputs)
        if inputs.effective_sampler == "torch" and _triton_top_k_top_p(inputs):
            sampler += TRITON_SAMPLER_BUFFER_BYTES
        sampler += held_hidden_states_bytes(inputs)
    encoder = encoder_profile(inputs)
    if encoder is not None:  # the encoder runs first; its outputs stay cached through both (advisor.capacity.encoder)
        forward = max(forward + encoder.output_bytes, encoder.peak_bytes)
        sampler += encoder.output_bytes
    return math.ceil(forward), math.ceil(sampler)


def held_hidden_states_bytes(inputs: CapacityInputs) -> int:
    """The hidden states V1's profile run keeps alive while the sampler warms up on one GPU, bytes:
    ``(max_num_batched_tokens + 2 × sequences) × hidden × activation bytes`` from
    :data:`~advisor.capacity.profiles.PROFILE_HOLDS_HIDDEN_STATES_SINCE` on (the dummy forward's output, its gather
    at each sequence's last token and the sampler's random stand-in for it), else 0; ``sequences`` =
    ``min(max_num_seqs, max_num_batched_tokens)``. Model Runner V2 (:func:`v2_sampler_warmup_bytes`) and V0 are
    not priced by it.

    Example: Qwen2.5-72B, bf16, 8,192 batched tokens, 1,024 sequences: (8,192 + 2,048) × 8,192 × 2 B = 160 MiB.
    """
    release = parse_version(inputs.engine_version)
    if (
        inputs.overhead_profile != "vllm-v1"
        or inputs.uses_v2_model_runner
        or release is None
        or release < PROFILE_HOLDS_HIDDEN_STATES_SINCE
    ):
        return 0
    tokens = inputs.profile_tokens
    sequences = min(inputs.max_num_seqs, tokens)
    return (tokens + 2 * sequences) * inputs.model.hidden_size * DTYPE_BYTES[inputs.compute_dtype]


def v2_sampler_warmup_bytes(inputs: CapacityInputs) -> int:
    """The sampler warm-up of vLLM's Model Runner V2 on one GPU, bytes: the logits alone,
    ``min(max_num_batched_tokens, max_num_seqs)`` rows × vocab in the compute dtype, whatever the sampler
    (:attr:`CapacityInputs.uses_v2_model_runner`).

    ``GPUModelRunner.profile_run`` → ``_dummy_run(self.max_num_tokens)`` (``num_reqs = min(num_tokens,
    self.max_num_reqs)``, one logits row each) → ``_dummy_sampler_run`` (``vllm/v1/worker/gpu/model_runner.py``,
    0.22.1, 0.24.0, 0.27.1, 0.31.0): ``logits = self.model.compute_logits(hidden_states)`` (the lm_head in the model
    dtype unless ``head_dtype`` is overridden: ``model_executor/layers/logits_processor.py`` 0.27.1), then
    ``Sampler.__call__`` (``vllm/v1/worker/gpu/sample/sampler.py``) on ``InputBatch.make_dummy``, whose requests
    keep the initial ``SamplingStates`` (``sample/states.py``: temperature 0, ``top_k`` = vocab, ``top_p`` = 1).
    So ``_requires_logits_processing`` is False (no fp32 copy), ``get_top_k_top_p`` gives None (no FlashInfer, no
    sort) and ``gumbel_sample`` reduces the logits in Triton into ``rows × ⌈vocab ÷ 8192⌉`` partial maxima — "the
    sampler may skip top_k, top_p, and logprobs" (the engine's comment). V1's ``gpu_model_runner.py`` warms the
    top-k/top-p sampler up instead (:func:`sampler_bytes_per_logit`: 39 or 14 bytes per element).

    Llama-3.2-3B, bf16, 2048 batched tokens, 256 sequences: 256 × 128,256 × 2 = 62.6 MiB, below the forward
    pass, so the vLLM 0.27.1 log's "0.13 GiB for peak activation" is the forward's (V1's torch warm-up would be
    256 × 128,256 × 39 = 1.19 GiB).
    """
    rows = min(inputs.profile_tokens, inputs.max_num_seqs)
    return rows * inputs.model.vocab_size * DTYPE_BYTES[inputs.compute_dtype]


def sampler_bytes_per_logit(inputs: CapacityInputs) -> float:
    """Bytes per (row × vocab) element at the peak of the sampler warm-up, by :attr:`CapacityInputs.effective_sampler`:
    the torch sampler's :attr:`OverheadModel.sampler_bytes_per_logit` (39: it sorts the vocabulary), from vLLM 0.17
    on V1 :data:`TRITON_SAMPLER_BYTES_PER_LOGIT` (14: the Triton top-k/top-p kernel masks in place, plus its
    :data:`TRITON_SAMPLER_BUFFER_BYTES`), FlashInfer's :data:`FLASHINFER_SAMPLER_BYTES_PER_LOGIT` (14), or
    :data:`FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT` (10) on V1 before 0.9 (flashinfer 0.2.1's sampling from
    probabilities)."""
    parsed = parse_version(inputs.engine_version)
    if inputs.effective_sampler == "torch":
        if _triton_top_k_top_p(inputs):
            return TRITON_SAMPLER_BYTES_PER_LOGIT
        return OVERHEAD_PROFILES[inputs.overhead_profile].sampler_bytes_per_logit
    if inputs.overhead_profile == "vllm-v1" and parsed is not None and parsed < (0, 9):
        return FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT
    return FLASHINFER_SAMPLER_BYTES_PER_LOGIT


def _triton_top_k_top_p(inputs: CapacityInputs) -> bool:
    """Whether V1's torch sampler masks top-k/top-p with the Triton kernel (:data:`TRITON_TOPK_TOPP_SINCE`) rather than
    a sort of the vocabulary."""
    parsed = parse_version(inputs.engine_version)
    return inputs.overhead_profile == "vllm-v1" and parsed is not None and parsed >= TRITON_TOPK_TOPP_SINCE


def overhead_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Non-KV, non-weight memory on each GPU (bytes) per :class:`OverheadModel` of ``overhead_profile``:
    ``max(forward, sampler) + non-torch (+ TP buffers) + CUDA graphs``.

    Example (vllm-v1, Llama-3.1-8B, bf16, TP1, 8192 batched tokens, 256 seqs): max(1.03 GiB forward,
    256 × 128,256 × 39 = 1.19 GiB sampler) + 0.13 GiB non-torch = 1.32 GiB.
    """
    forward, sampler = activation_peak_bytes(inputs)
    return max(forward, sampler) + non_torch_bytes_per_gpu(inputs) + cuda_graph_bytes_per_gpu(inputs)


def vllm_accounting_of(inputs: CapacityInputs) -> Accounting:
    """``inputs.accounting`` when the resolver decided it, else the accounting of ``inputs.overhead_profile``:
    the version's own reason when the version gives that profile, else "as given"."""
    if inputs.accounting is not None and inputs.accounting.engine == "vllm":
        return inputs.accounting
    acc = vllm_accounting(inputs.engine_version)
    if acc.profile == inputs.overhead_profile:
        return acc
    generation = inputs.overhead_profile.removeprefix("vllm-")
    return Accounting(
        "vllm",
        generation,
        inputs.engine_version,
        f"{generation.upper()}: overhead profile {inputs.overhead_profile} as given",
    )


def non_torch_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Memory vLLM counts as ``non_torch`` on each GPU (bytes): the CUDA context and libraries, plus NCCL's
    buffers when ``TP > 1``::

        non_torch = non_torch_bytes
                    + tp_non_torch_bytes + (TP − 2) × tp_peer_non_torch_bytes          (TP > 1)
                    + nvls_communicators × nvls_channels × nvls_bytes_per_channel × TP  (TP > 2, NVLS)

    The NVLS term is NCCL 2.19–2.22's NVLink SHARP allocation (``src/transport/nvls.cc`` ``ncclNvlsSetup``:
    ``nChannels × 2 × (NCCL_BUFFSIZE 4 MiB + 2 MiB) × nHeads``, one head per GPU), made at communicator init on
    nodes where ``inputs.nvlink_sharp`` holds and more than two GPUs share the communicator. vLLM's own NCCL
    log on 8 × H200 prints ``nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 301989888
    nvlsTotalSize 2415919104`` (24 channels, 2.25 GiB; vllm-project/vllm#9699), and the same issue measures
    ~5 GiB of KV cache returned by ``NCCL_NVLS_ENABLE=0`` at TP 8, i.e. two communicators (V0's pynccl one and
    torch.distributed's TP group, which gathers the logits). vLLM ≥ 0.9 ships NCCL ≥ 2.26, which sizes NVLS
    by its 128 KiB chunk and allocates on first use: the V1 profile has no NVLS term.

    The NVLS bytes per channel and head are the measured :data:`NVLS_BYTES_PER_CHANNEL_HEAD` (13.2 MiB; the
    source's buffers alone are 12 MiB).

    Example (vllm-v0, TP 8, H200): 0.10 + 0.42 + 6 × 0.263 + 2 × 24 × 13.2 MiB × 8 = 0.10 + 2.00 + 4.95
    = 7.05 GiB (DeepSeek-R1 on vLLM 0.7.3 logged 7.16 GiB; neither figure was fitted to that log).

    Releases that count the whole device (:attr:`CapacityInputs.counts_whole_device`: V0 ≤ 0.6.4, V1 0.8-0.9.0)
    replace ``non_torch_bytes`` by ``whole_device_non_torch_bytes`` (CUDA context and libraries, 0.35 GiB) plus
    ``gpu_memory_used_by_others_bytes``: Llama-3.1-8B on an RTX 3090 with vLLM 0.6.4 logs
    ``non_torch_memory=0.35GiB`` (github.com/vllm-project/vllm/issues/10517).
    """
    om = OVERHEAD_PROFILES[inputs.overhead_profile]
    tp = inputs.tensor_parallel_size
    total = om.non_torch_bytes
    if inputs.counts_whole_device:
        # the release subtracts torch's allocations from the device's whole use: the CUDA context and libraries
        # of this process, and whatever other processes hold, count as this instance's non-torch memory
        total = om.whole_device_non_torch_bytes + inputs.gpu_memory_used_by_others_bytes
    fused = allreduce_fusion_non_torch_bytes(inputs)
    if fused is not None:
        return fused
    if tp > 1:
        # peers beyond one node's NVLink domain connect over the network, through other, smaller buffers
        total += om.tp_non_torch_bytes + (min(tp, GPUS_PER_NVLINK_NODE) - 2) * om.tp_peer_non_torch_bytes
    return total + nvls_bytes_per_gpu(inputs)


def allreduce_fusion_non_torch_bytes(inputs: CapacityInputs) -> int | None:
    """vLLM V1's non-torch increase per rank when FlashInfer's all-reduce + RMSNorm fusion builds its workspace
    inside the profile window, measured; None where it does not (the other terms of :func:`non_torch_bytes_per_gpu`
    apply).

    The fusion pass is on by default from 0.17 for compute capability 9.x/10.x with TP > 1 and one pipeline stage
    (``vllm/config/vllm.py`` 0.19.0 lines 116-135), and its workspace needs NVSwitch multicast
    (:attr:`CapacityInputs.nvlink_sharp`: not A100, PCIe cards or H100 PCIe). vLLM creates it lazily while compiling,
    inside the profile, with torch's NCCL group for the TP ranks; FlashInfer 0.6.4-0.6.8 (pinned by vLLM
    0.17-0.21) rounds each of its three buffers up to the multicast granularity, so the figure hardly depends on the
    model or TP. Measured on vLLM 0.19.0, H100 SXM, 16 runs of 10 models (llm-d-incubation/llm-d-planner at
    d3121e05, accuracy/results/v0.19.0/logs: "non-torch forward increase memory"): 2.06-2.11 GiB at TP 2 and
    2.13-2.21 GiB at TP 4, against 0.24-0.27 at TP 1 and 0.07 at PP 2 without TP
    (:data:`~advisor.capacity.profiles.ALLREDUCE_FUSION_NON_TORCH_BYTES`). FlashInfer 0.6.11 (vLLM 0.22 on) drops
    the rounding: not measured, so later releases keep the other terms."""
    parsed = parse_version(inputs.engine_version)
    first, end = ALLREDUCE_FUSION_RELEASES
    cc = inputs.compute_capability
    if (
        inputs.overhead_profile != "vllm-v1"
        or parsed is None
        or not first <= parsed < end
        or inputs.tensor_parallel_size < 2
        or inputs.pipeline_parallel_size != 1
        or not inputs.nvlink_sharp
        or cc is None
        or cc[0] not in (9, 10)
    ):
        return None
    two, four = ALLREDUCE_FUSION_NON_TORCH_BYTES
    return two if inputs.tensor_parallel_size == 2 else four


def nvls_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """The NCCL NVLink SHARP part of :func:`non_torch_bytes_per_gpu` (bytes): 0 unless the profile allocates it
    (``nvls_communicators``), ``inputs.nvlink_sharp`` holds and TP > 2. One head per GPU of the node's NVSwitch
    domain, so TP beyond :data:`GPUS_PER_NVLINK_NODE` adds no heads."""
    om = OVERHEAD_PROFILES[inputs.overhead_profile]
    tp = inputs.tensor_parallel_size
    if tp <= 2 or not inputs.nvlink_sharp:
        return 0
    return om.nvls_communicators * om.nvls_channels * om.nvls_bytes_per_channel * min(tp, GPUS_PER_NVLINK_NODE)
