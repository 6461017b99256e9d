"""The vision encoder's run in vLLM V1's start-up memory profile, for the Qwen-VL towers.

A multimodal model's profile does not stop at the language model. ``GPUModelRunner.profile_run``
(``vllm/v1/worker/gpu_model_runner.py``, 0.9-0.23) first asks the model's multimodal budget for the modality with
the most tokens per item, builds a dummy batch of ``max_items_per_batch`` items "of the maximum feature size"
(``max(1, min(limit × max_num_seqs, encoder_budget // tokens_per_item))``, the budget ``max(max_num_batched_tokens,
tokens_per_item)``; the engine logs "Encoder cache will be initialized with a budget of N tokens, and profiled
with M image items of the maximum feature size"), runs the vision tower on it
(``get_multimodal_embeddings``) and keeps the outputs in the encoder cache while the language model's dummy run
and the sampler warm-up follow. The torch peak of the profile is therefore

    max(encoder peak, forward + encoder outputs, sampler + encoder outputs).

**The item.** Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5's processors resize an image to at most ``max_pixels``:
12,845,056 = 16,384 × 28² for Qwen2/2.5-VL (patch 14, merge 2) and 16,777,216 = 16,384 × 32² for Qwen3-VL/3.5
(``preprocessor_config.json`` ``max_pixels``, ``size.longest_edge``), so the largest image is 16,384 tokens of
``spatial_merge_size² = 4`` patches each: 65,536 patches through the tower. Qwen2-VL's video item is sized from the
context (``qwen2_vl.py`` ``Qwen2VLProcessingInfo.get_num_frames_with_most_features``: the most frames whose tokens
fit ``max_model_len``, two frames a temporal patch of 16,384 tokens): vLLM 0.23.0 profiles a video of 114,688 =
7 × 16,384 tokens at ``max_model_len`` 128,000 (published log C of the table below), so from 0.23 a video longer than
the image is profiled instead of it. Earlier releases subtracted the image's tokens first and capped the frames
differently, and Qwen3-VL's video processor sizes frames by its own rule (vLLM 0.11.0 profiles 153,600 video tokens
for Qwen3-VL-30B-A3B at ``max_model_len`` 65,536): those are not modelled, and :func:`encoder_profile` says so in
:attr:`EncoderProfile.unmodelled` while it counts the image.

**The peak per patch.** :data:`ENCODER_WIDTHS_PER_PATCH` tower widths (``vision_config.hidden_size``, Qwen2-VL's
``embed_dim``) of activations per patch, in the compute dtype: at the MLP of one block the residual stream, the
normed input, ``gate_up`` (2 × intermediate) and the activation's output (intermediate) are alive with the down
projection's output (vLLM ``qwen2_5_vl.py`` ``Qwen2_5_VisionMLP.forward`` keeps ``gate_up`` bound until it
returns), beside the pixel values and the patch embedding's output: 11-14 widths for intermediate = 2.67 widths.
Measured against published V1 start-up logs (total × utilization − weights − KV cache, less the language model's
own terms):

* A: Qwen2.5-VL-7B, L4, vLLM 0.9.0.1, ``max_num_batched_tokens`` 2,048, one 16,384-token image: 2.39 GiB outside
  weights and KV cache (github.com/tsailiming/openshift-ai-bootstrap, docs/demo/bring-your-own-model.md at
  535d75b): 13.8 widths per patch (1,280 wide).
* C: Qwen2.5-VL-7B, A100-SXM4-80GB, vLLM 0.23.0, one 114,688-token video (458,752 patches): ~15.5 GiB beside the
  0.53 GiB CUDA-graph estimate: 14.2 widths.
* F: Qwen3.6-35B-A3B NVFP4 (Qwen3-VL tower, 1,152 wide), RTX 5090: images on vs every modality at 0, 4.88 vs
  6.44 GiB of KV cache: the encoder's peak 1.56 GiB above the language model's (github.com/BigBIueWhale/
  qwen_36_agent_setup): ~13.9 widths with the language model's ~0.4 GiB.

Under tensor parallelism the tower's attention and MLP projections are column/row parallel, so the intermediates
(:data:`ENCODER_SHARDED_WIDTHS_PER_PATCH` of the 14) are split over the ranks and the residual stream is not; no
published log at TP > 1 with a known item size checks this split.

Not modelled: other towers (LLaVA's CLIP, Gemma 3's SigLIP: their items are a few hundred tokens, many per batch),
``--mm-processor-kwargs`` that change ``max_pixels``, ``--skip-mm-profiling``, V0's multimodal profile, and
``--mm-encoder-tp-mode data``. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from advisor.capacity.generation import parse_version
from advisor.capacity.inputs import CapacityInputs
from advisor.capacity.precision import DTYPE_BYTES

__all__ = [
    "ENCODER_SHARDED_WIDTHS_PER_PATCH",
    "ENCODER_WIDTHS_PER_PATCH",
    "QWEN_VL_MAX_IMAGE_TOKENS",
    "EncoderProfile",
    "encoder_profile",
]

QWEN_VL_MAX_IMAGE_TOKENS: Final = 16_384
"""Tokens of the largest image a Qwen-VL processor makes: ``max_pixels`` ÷ (patch × merge)² = 12,845,056 ÷ 28²
(Qwen2/2.5-VL ``preprocessor_config.json``) = 16,777,216 ÷ 32² (Qwen3-VL, Qwen3.5 ``size.longest_edge``); the engines
log "a budget of 16384 tokens, and profiled with 1 image items"."""

ENCODER_WIDTHS_PER_PATCH: Final = 14.0
"""Tower widths of activations per patch at the encoder's peak, TP 1 (module docstring: 13.8, 14.2 and 13.9
measured)."""

ENCODER_SHARDED_WIDTHS_PER_PATCH: Final = 8.0
"""Of :data:`ENCODER_WIDTHS_PER_PATCH`, the widths split over the tensor-parallel ranks: ``gate_up`` and the
activation's output, 3 × intermediate = 8 widths for Qwen2.5-VL's 3,420 of 1,280 (derived from the layers, not
measured)."""

QWEN_VL_TOWER_TYPES: Final = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"})
"""Wrapper ``model_type``s (:attr:`~advisor.capacity.models.ModelArch.vision_tower_type`) whose tower the profile runs
on a :data:`QWEN_VL_MAX_IMAGE_TOKENS` image."""

VIDEO_BY_CONTEXT_TYPES: Final = frozenset({"qwen2_vl", "qwen2_5_vl"})
"""Towers whose largest video vLLM sizes from ``max_model_len`` by Qwen2-VL's rule (module docstring)."""

VIDEO_BY_CONTEXT_SINCE: Final = (0, 23)
"""The release whose video sizing is read from a published log (C: 114,688 tokens at ``max_model_len`` 128,000)."""

MERGED_PATCHES: Final = 4
"""Patches per token: ``spatial_merge_size``² = 2² for every Qwen-VL checkpoint."""


@dataclass(frozen=True)
class EncoderProfile:
    """The vision encoder's part of vLLM V1's memory profile on one GPU.

    Attributes:
        modality: the modality profiled (``image`` or ``video``).
        items: items in the dummy batch.
        tokens_per_item: tokens one item gives the language model.
        peak_bytes: the tower's activation peak on one GPU, bytes.
        output_bytes: the encoder outputs kept while the language model's dummy run follows, bytes.
        unmodelled: why the engine may profile a larger item than this one (``""``: it does not).
    """

    modality: str
    items: int
    tokens_per_item: int
    peak_bytes: int
    output_bytes: int
    unmodelled: str = ""

    def as_dict(self) -> dict[str, object]:
        """``plan --json``'s ``encoder_profile``."""
        return {
            "modality": self.modality,
            "items": self.items,
            "tokens_per_item": self.tokens_per_item,
            "peak_bytes_per_gpu": self.peak_bytes,
            "output_bytes_per_gpu": self.output_bytes,
            "unmodelled": self.unmodelled or None,
        }


def encoder_profile(inputs: CapacityInputs) -> EncoderProfile | None:
    """The encoder's run in the profile of ``inputs`` (see the module docstring), or None when there is none: not
    vLLM's V1 engine, no Qwen-VL tower loaded (text-only, or every modality of the tower at 0), or no modality on."""
    m = inputs.model
    if inputs.engine != "vllm" or inputs.overhead_profile != "vllm-v1" or not m.vision_tower_width:
        return None
    if not m.vision_parameters or m.vision_tower_type not in QWEN_VL_TOWER_TYPES or not m.vision_modalities:
        return None
    image = QWEN_VL_MAX_IMAGE_TOKENS
    image_on = "image" in m.vision_modalities
    video = _video_tokens(inputs) if "video" in m.vision_modalities else 0
    unmodelled = ""
    if "video" in m.vision_modalities and video == 0 and inputs.effective_max_model_len >= 2 * image:
        unmodelled = (
            f"the profile may run one video of up to max-model-len ({inputs.effective_max_model_len:,}) tokens, "
            "larger than the item counted, whose size this release's rule for this tower does not give here (a "
            "114,688-token video took ~15.5 GiB for Qwen2.5-VL-7B on vLLM 0.23.0); --limit-mm-per-prompt "
            "'{\"video\": 0}' leaves only the image"
        )
    if not image_on and video == 0:
        video = image  # video alone: at least one temporal patch of the largest frame pair
    modality, tokens = ("video", video) if video > image or not image_on else ("image", image)
    budget = max(inputs.profile_tokens, tokens)
    # MultiModalBudget: max(1, min(limit per prompt × max_num_seqs, encoder budget ÷ tokens per item))
    per_prompt = dict(m.vision_item_limits).get(modality)
    prompts = inputs.max_num_seqs * per_prompt if per_prompt is not None else budget // tokens
    items = max(1, min(prompts, budget // tokens))
    act = DTYPE_BYTES[inputs.compute_dtype]
    tp = inputs.tensor_parallel_size
    widths = ENCODER_WIDTHS_PER_PATCH - ENCODER_SHARDED_WIDTHS_PER_PATCH + ENCODER_SHARDED_WIDTHS_PER_PATCH / tp
    patches = items * tokens * MERGED_PATCHES
    peak = math.ceil(patches * widths * m.vision_tower_width * act)
    output = items * tokens * m.hidden_size * act
    return EncoderProfile(modality, items, tokens, peak, output, unmodelled)


def _video_tokens(inputs: CapacityInputs) -> int:
    """Tokens of the largest video the profile runs when it outgrows the image (Qwen2-VL's rule, from
    :data:`VIDEO_BY_CONTEXT_SINCE`): whole temporal patches of :data:`QWEN_VL_MAX_IMAGE_TOKENS` within
    ``max_model_len``; 0 when the rule is not known for the tower and release, or the video is no larger."""
    parsed = parse_version(inputs.engine_version)
    if inputs.model.vision_tower_type not in VIDEO_BY_CONTEXT_TYPES:
        return 0
    if parsed is None or parsed < VIDEO_BY_CONTEXT_SINCE:
        return 0
    tokens = inputs.effective_max_model_len // QWEN_VL_MAX_IMAGE_TOKENS * QWEN_VL_MAX_IMAGE_TOKENS
    return tokens if tokens > QWEN_VL_MAX_IMAGE_TOKENS else 0
