"""vLLM's LoRA serving dials (``--enable-lora``) and the GPU memory their adapter slots take.

With ``--enable-lora`` vLLM wraps every LoRA-able layer and pre-allocates, at load, one slot per
``--max-loras`` adapter of rank ``--max-lora-rank`` (``vllm/lora/layers.py`` ``create_lora_weights``,
0.6.6 and 0.8.5; ``vllm/lora/layers/*.py`` from 0.10). Per linear layer, per slice (q/k/v and gate/up are
slices of the packed ``qkv_proj`` / ``gate_up_proj``), in ``--lora-dtype`` (``auto`` = the model dtype)::

    lora_a_stacked  (max_loras, 1, rank, in)      column-parallel: whole ``in``; row-parallel: in ÷ TP
    lora_b_stacked  (max_loras, 1, out, rank)     column-parallel: out ÷ TP;    row-parallel: whole ``out``

``--fully-sharded-loras`` splits the rest too: column-parallel A holds rank ÷ TP rows, row-parallel B
out ÷ TP (``BaseLinearLayerWithLoRA.create_lora_weights``: ``divide(max_lora_rank, tp_size)`` /
``divide(output_size, tp_size)``). Models whose vLLM class names ``embedding_modules``
(:data:`EMBEDDING_LORA_MODEL_TYPES`) also get the embedding and LM-head wrappers, which are not sharded:

    VocabParallelEmbeddingWithLoRA  lora_a (L, vocab + E, rank), lora_b (L, 1, hidden, rank), and before 0.12
                                    embeddings_tensors (L, E, hidden) in the model dtype
    LogitsProcessorWithLoRA         lora_a (L, 1, rank, hidden), lora_b (L, 1, vocab_padded, rank), and before
                                    0.12 embeddings_tensors (L, E, hidden) in the model dtype

with ``E = --lora-extra-vocab-size`` (256 by default, removed in 0.12) and, before 0.12,
``vocab_padded = ceil((vocab + E) ÷ 256) × 256`` (``lora_vocab_padding_size``). The model itself grows by the
extra vocabulary before 0.12: ``embed_tokens`` by ``E × max_loras`` rows and an untied ``lm_head`` by ``E``
rows, sharded over TP (``llama.py`` ``LlamaModel.__init__`` ``lora_vocab``, ``LlamaForCausalLM.__init__``
``unpadded_vocab_size``, 0.6.6-0.11.0).

Where vLLM counts the slots: V0 0.6.x creates them after "Loading model weights took" and its profiler's
``non_torch_increase`` (``vllm/utils.py`` ``memory_profiling``, 0.6.6: used − baseline − weights − torch
increase) takes them; V0 0.7.x still creates them after the weight profiler but its profiler counts torch
memory only as the profile run's increase (``memory_profiling`` with ``baseline_snapshot``, 0.7.3), so the
slots are in no term and the pool does not shrink (:data:`UNCOUNTED_V0`; a 0.7.2 Unsloth log with rank-32
slots on Llama-3.1-8B prints non_torch 0.05 GiB, below the slots' 0.16 GiB); V0 0.8.5 and V1 create them
inside ``DeviceMemoryProfiler`` of ``load_model`` (``model_runner.py`` / ``gpu_model_runner.py``), so they are
part of "Model loading took". The profile run activates ``max_loras`` dummy adapters built on the CPU
(``LoRAModelManager.create_dummy_lora``: ``"cpu"``) into those slots: the activation peak gains only the
punica shrink buffers (tokens × rank fp32 per slice, about 1.5 MiB at 8,192 tokens, rank 16), not modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from advisor.capacity.generation import parse_version
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import DTYPE_BYTES

__all__ = [
    "DEFAULT_LORA_EXTRA_VOCAB_SIZE",
    "DEFAULT_MAX_LORAS",
    "DEFAULT_MAX_LORA_RANK",
    "EMBEDDING_LORA_MODEL_TYPES",
    "LORA_DIALS",
    "LoRASettings",
    "allowed_lora_ranks",
    "lora_bytes",
    "lora_counted",
    "lora_problems",
]

LORA_DIALS: Final = ("max_loras", "max_lora_rank", "lora_extra_vocab_size", "lora_dtype", "fully_sharded_loras")
"""vLLM's LoRA dials that only ``--enable-lora`` reads, by their ``EngineArgs`` names: without it
``EngineArgs.create_engine_config`` builds no ``LoRAConfig`` (``lora_config = LoRAConfig(...) if self.enable_lora
else None``, ``vllm/engine/arg_utils.py``), so they do nothing."""

DEFAULT_MAX_LORAS: Final = 1
"""``--max-loras`` default (``LoRAConfig.max_loras``, vLLM 0.8.5-0.21.0: 1)."""

DEFAULT_MAX_LORA_RANK: Final = 16
"""``--max-lora-rank`` default (``LoRAConfig.max_lora_rank``, vLLM 0.8.5-0.21.0: 16)."""

DEFAULT_LORA_EXTRA_VOCAB_SIZE: Final = 256
"""``--lora-extra-vocab-size`` default (``LoRAConfig.lora_extra_vocab_size``, 0.6.3-0.11.0; gone in 0.12.0)."""

EXTRA_VOCAB_UNTIL: Final = (0, 12)
"""First vLLM release without ``lora_extra_vocab_size`` (``vllm/config/lora.py``, 0.12.0)."""

LORA_VOCAB_PADDING: Final = 256
"""``LoRAConfig.lora_vocab_padding_size`` (0.6.6-0.11.0): the LM-head LoRA B rows are padded to it."""

UNCOUNTED_V0: Final = ((0, 7), (0, 8))
"""V0 releases [from, to) whose KV budget leaves the LoRA slots out (module docstring; 0.7.3 read, 0.7.0-0.7.2
assumed like it, the 0.7.2 log agrees)."""

_RANKS_06: Final = (8, 16, 32, 64, 128, 256)
_RANKS_08: Final = (*_RANKS_06, 320, 512)
_RANKS_12: Final = (1, *_RANKS_08)

EMBEDDING_LORA_MODEL_TYPES: Final[dict[str, tuple[int, ...]]] = {
    "llama": (0,),
    "mistral": (0,),
    "granite": (0,),
    "minicpm": (0,),
    "nemotron": (0,),
    "solar": (0,),
    "exaone": (0,),
    "gpt_bigcode": (0,),
    "qwen3": (0, 16),
}
"""Dense model types whose vLLM class names ``embedding_modules`` (``embed_tokens``/``lm_head`` get LoRA), and the
first release where it does (``vllm/model_executor/models/*.py``: llama.py etc. in 0.6.6-0.21.0; qwen3.py from
0.16.0, none in 0.14.0). Others (Qwen2, Gemma, Phi-3) get LoRA on the linear layers only."""

SINGLE_SLICE_MODEL_TYPES: Final = frozenset({"phi3"})
"""Model types whose ``packed_modules_mapping`` keeps ``qkv_proj`` and ``gate_up_proj`` as one LoRA slice each
(``phi3.py``, 0.21.0), so A is one ``rank × hidden`` matrix, not three/two."""


@dataclass(frozen=True)
class LoRASettings:
    """vLLM's LoRA dials.

    Attributes:
        max_loras: adapter slots on the GPU [``--max-loras``].
        max_lora_rank: the rank every slot is sized for [``--max-lora-rank``].
        lora_extra_vocab_size: extra vocabulary per adapter [``--lora-extra-vocab-size``]; None = the
            release's default (256 before 0.12, none after).
        lora_dtype: ``auto`` (the model's compute dtype) or a dtype name [``--lora-dtype``].
        fully_sharded_loras: [``--fully-sharded-loras``].
    """

    max_loras: int = DEFAULT_MAX_LORAS
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK
    lora_extra_vocab_size: int | None = None
    lora_dtype: str = "auto"
    fully_sharded_loras: bool = False


def allowed_lora_ranks(version: str | None) -> tuple[int, ...]:
    """``--max-lora-rank`` values the release accepts (``LoRAConfig.__post_init__`` ``possible_max_ranks``:
    0.6.3-0.7.3 8…256; 0.8.0-0.11.0 adds 320 and 512; ``MaxLoRARanks`` Literal from 0.12.0 adds 1); an unknown
    release: the union."""
    parsed = parse_version(version)
    if parsed is None or parsed >= (0, 12):
        return _RANKS_12
    return _RANKS_08 if parsed >= (0, 8) else _RANKS_06


def _extra_vocab(settings: LoRASettings, version: str | None) -> int:
    parsed = parse_version(version)
    if parsed is None or parsed >= EXTRA_VOCAB_UNTIL:
        return 0
    return DEFAULT_LORA_EXTRA_VOCAB_SIZE if settings.lora_extra_vocab_size is None else settings.lora_extra_vocab_size


def lora_problems(settings: LoRASettings, model: ModelArch, version: str | None, tp: int) -> list[str]:
    """Why vLLM (or this model) refuses the settings: ``max_loras`` < 1, a rank outside
    :func:`allowed_lora_ranks`, an extra vocabulary outside (0, 256, 512) (0.6-0.7; 256, 512 in 0.8-0.11;
    none from 0.12), fully sharded ranks not divisible by TP, an unknown dtype, and models whose LoRA layers
    this pass does not enumerate (MoE: router gates, and experts from 0.12's ``FusedMoEWithLoRA``; MLA; hybrid
    recurrent layers)."""
    problems: list[str] = []
    if settings.max_loras < 1:
        problems.append(f"max_loras must be ≥ 1 (vLLM LoRAConfig), got {settings.max_loras}")
    ranks = allowed_lora_ranks(version)
    if settings.max_lora_rank not in ranks:
        problems.append(
            f"max_lora_rank {settings.max_lora_rank} is not one vLLM {version or '(any release)'} accepts: "
            f"{', '.join(map(str, ranks))}"
        )
    parsed = parse_version(version)
    extra = settings.lora_extra_vocab_size
    if extra is not None:
        if parsed is not None and parsed >= EXTRA_VOCAB_UNTIL:
            problems.append(f"--lora-extra-vocab-size does not exist in vLLM {version} (removed in 0.12)")
        elif extra not in ((0, 256, 512) if parsed is not None and parsed < (0, 8) else (256, 512)):
            problems.append(f"lora_extra_vocab_size must be 256 or 512 (0 too before vLLM 0.8), got {extra}")
    if settings.lora_dtype != "auto" and settings.lora_dtype not in DTYPE_BYTES:
        problems.append(f"lora_dtype {settings.lora_dtype!r} unknown; known: auto, {', '.join(DTYPE_BYTES)}")
    if settings.fully_sharded_loras and settings.max_lora_rank % tp:
        problems.append(f"--fully-sharded-loras divides max_lora_rank {settings.max_lora_rank} by TP {tp}")
    if model.is_moe:
        problems.append(
            "LoRA on MoE models is not modelled: vLLM wraps the router gates and, from 0.12, the experts "
            "(FusedMoEWithLoRA), per model file"
        )
    if model.is_mla or model.linear_layers:
        problems.append("LoRA on MLA or hybrid recurrent models is not modelled (their projections differ)")
    return problems


def lora_counted(version: str | None, v0: bool) -> bool:
    """Whether vLLM's KV budget subtracts the LoRA slots: all releases but V0 in :data:`UNCOUNTED_V0`."""
    parsed = parse_version(version)
    return not (v0 and parsed is not None and UNCOUNTED_V0[0] <= parsed < UNCOUNTED_V0[1])


def lora_bytes(
    settings: LoRASettings,
    model: ModelArch,
    *,
    compute_dtype: str,
    tp: int,
    layers: int,
    version: str | None,
) -> int:
    """GPU bytes of the LoRA slots on one GPU holding ``layers`` decoder layers (module docstring).

    Llama-3.1-8B (hidden 4,096, q 32 × 128, kv 8 × 128, MLP 14,336), rank 16, one slot, bf16, TP 1, one layer:
    qkv A 3 × 16 × 4,096 + B 6,144 × 16, o A 16 × 4,096 + B 4,096 × 16, gate_up A 2 × 16 × 4,096 +
    B 2 × 14,336 × 16, down A 16 × 14,336 + B 4,096 × 16 = 1,310,720 elements (2.5 MiB); the embedding and
    LM-head wrappers are counted on every GPU (pipeline stages: the first holds one, the last the other).
    """
    r, slots = settings.max_lora_rank, settings.max_loras
    b = DTYPE_BYTES[compute_dtype if settings.lora_dtype == "auto" else settings.lora_dtype]
    act = DTYPE_BYTES[compute_dtype]
    h = model.hidden_size
    q_out = model.num_attention_heads * model.head_dim // tp
    kv_out = max(1, model.num_kv_heads // tp) * model.head_dim
    inter = model.intermediate_size // tp
    col_a = r // tp if settings.fully_sharded_loras else r
    row_b = h // tp if settings.fully_sharded_loras else h
    single = model.model_type in SINGLE_SLICE_MODEL_TYPES
    qkv_slices, up_slices = (1, 1) if single else (3, 2 if model.gated_mlp else 1)
    up_out = inter * (2 if model.gated_mlp else 1)
    per_layer = (
        qkv_slices * col_a * h
        + (q_out + 2 * kv_out) * r  # qkv_proj (column-parallel)
        + r * q_out
        + row_b * r  # o_proj (row-parallel)
        + up_slices * col_a * h
        + up_out * r  # gate_up_proj (column-parallel)
        + r * inter
        + row_b * r  # down_proj (row-parallel)
    )
    total = layers * per_layer * b * slots
    since = EMBEDDING_LORA_MODEL_TYPES.get(model.model_type)
    parsed = parse_version(version)
    if since is not None and (parsed is None or parsed >= since):
        extra = _extra_vocab(settings, version)
        v = model.vocab_size
        padded = math.ceil((v + extra) / LORA_VOCAB_PADDING) * LORA_VOCAB_PADDING if extra else v
        embedding = ((v + extra) * r + h * r) * b + extra * h * act
        head = (r * h + padded * r) * b + extra * h * act
        vocab_rows = (extra * slots + (0 if model.tie_word_embeddings else extra)) * h * act / tp
        total += slots * (embedding + head) + math.ceil(vocab_rows)
    return int(total)
