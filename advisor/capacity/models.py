"""Model architectures: the shapes the capacity pass needs, from a ``config.json`` dict or a preset.

Only dense decoder-only transformers (MHA, GQA, MQA) are described. Mixture-of-experts, MLA (DeepSeek) and
hybrid sliding-window models are outside this slice; Gemma 2 is carried as a *dense approximation* (every
layer counted as full attention), which overstates its KV per token beyond its 4096-token window.

Presets live in ``advisor/data/models.json``: each one copies its Hugging Face ``config.json`` numbers and
cites that file's URL, plus the published total parameter count. Example::

    >>> get_preset("llama-3.1-8b").num_kv_heads
    8
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from advisor.errors import CapacityError, UnknownModelError

__all__ = ["ModelArch", "get_preset", "preset_ids"]

_REQUIRED_KEYS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "vocab_size",
    "intermediate_size",
    "max_position_embeddings",
)


@dataclass(frozen=True)
class ModelArch:
    """The architecture of one dense decoder-only model.

    Attributes (counts unless stated):
        name: the model id (``meta-llama/Llama-3.1-8B-Instruct``).
        num_layers: decoder layers (``num_hidden_layers``).
        hidden_size: residual width, elements.
        num_attention_heads: query heads.
        num_kv_heads: key/value heads (``num_key_value_heads``; equals ``num_attention_heads`` for MHA,
            1 for MQA).
        head_dim: elements per head (``head_dim`` when the config states it, else hidden ÷ heads).
        vocab_size: tokens in the embedding and LM head.
        intermediate_size: MLP width (gated MLP: gate, up and down projections).
        max_position_embeddings: the longest context the model supports, tokens.
        torch_dtype: the checkpoint's dtype (``bfloat16``, ``float16``, ``float32``).
        num_parameters: total parameters (published for presets, else computed by
            :meth:`computed_parameters`).
        tie_word_embeddings: the LM head shares the embedding matrix.
        attention_bias: q/k/v projections carry a bias (Qwen2).
        norms_per_layer: RMSNorm weight vectors per layer (2 for Llama; 4 for Gemma 2).
        source: citation, e.g. the Hugging Face ``config.json`` URL.
    """

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int
    torch_dtype: str
    num_parameters: int
    tie_word_embeddings: bool = False
    source: str = ""
    attention_bias: bool = False
    norms_per_layer: int = 2

    def __post_init__(self) -> None:
        for field_name in (
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "head_dim",
            "vocab_size",
            "intermediate_size",
            "max_position_embeddings",
            "num_parameters",
        ):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise CapacityError(f"{self.name}: {field_name} must be a positive integer, got {value!r}")
        if self.num_attention_heads % self.num_kv_heads != 0:
            raise CapacityError(
                f"{self.name}: num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )

    # --- parameter bookkeeping (counts of parameters, not bytes) ---------------------------------------
    def embedding_parameters(self) -> int:
        """Parameters of the input embedding plus the LM head (once if tied): vocab × hidden × (1 or 2)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def norm_parameters(self) -> int:
        """RMSNorm weights: (norms_per_layer × layers + 1 final) × hidden. Replicated on every TP rank."""
        return (self.norms_per_layer * self.num_layers + 1) * self.hidden_size

    def kv_projection_parameters_per_layer(self) -> int:
        """Parameters of the k and v projections of one layer: 2 × hidden × kv_heads × head_dim (+ bias)."""
        bias = 2 * self.num_kv_heads * self.head_dim if self.attention_bias else 0
        return 2 * self.hidden_size * self.num_kv_heads * self.head_dim + bias

    def computed_parameters(self) -> int:
        """Total parameters of a dense Llama-style decoder, from the shapes alone.

        Per layer: q (hidden × heads·head_dim), k and v (hidden × kv_heads·head_dim each), o
        (heads·head_dim × hidden), gated MLP (3 × hidden × intermediate), norms; plus q/k/v biases when
        ``attention_bias``. Plus embeddings/LM head and the final norm. This reproduces the published
        counts of every preset exactly (e.g. Llama-3.1-8B: 8,030,261,248), which the tests check.
        """
        q_and_o = 2 * self.hidden_size * self.num_attention_heads * self.head_dim
        q_bias = self.num_attention_heads * self.head_dim if self.attention_bias else 0
        mlp = 3 * self.hidden_size * self.intermediate_size
        norms = self.norms_per_layer * self.hidden_size
        per_layer = q_and_o + q_bias + self.kv_projection_parameters_per_layer() + mlp + norms
        return self.num_layers * per_layer + self.embedding_parameters() + self.hidden_size

    def linear_parameters(self) -> int:
        """Parameters that weight quantization (fp8/int8/AWQ/GPTQ) applies to: all but embeddings/LM head
        and norms, which vLLM keeps in the model dtype by default."""
        return max(0, self.num_parameters - self.embedding_parameters() - self.norm_parameters())

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any], name: str) -> ModelArch:
        """Build an architecture from a Hugging Face ``config.json`` already parsed into a dict.

        ``head_dim`` is taken when the config states it (Gemma, Llama 3.2), else ``hidden_size //
        num_attention_heads`` (the transformers convention). ``num_key_value_heads`` defaults to
        ``num_attention_heads`` (MHA, as transformers does when the key is absent). ``num_parameters`` is
        taken from a ``num_parameters`` key if present, else computed (:meth:`computed_parameters`).
        ``torch_dtype`` (or the newer ``dtype``) defaults to ``bfloat16``.

        Raises:
            CapacityError: a required key is missing or not a positive integer; the message names it.
        """
        cfg = dict(config.get("text_config") or {}) | {k: v for k, v in config.items() if k != "text_config"}
        for key in _REQUIRED_KEYS:
            if key not in cfg or cfg[key] is None:
                raise CapacityError(f"{name}: config.json has no {key!r} (needed for the capacity pass)")
        heads = _positive_int(cfg, "num_attention_heads", name)
        hidden = _positive_int(cfg, "hidden_size", name)
        kv_heads = _positive_int(cfg, "num_key_value_heads", name) if cfg.get("num_key_value_heads") else heads
        head_dim = _positive_int(cfg, "head_dim", name) if cfg.get("head_dim") else hidden // heads
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
        arch = cls(
            name=name,
            num_layers=_positive_int(cfg, "num_hidden_layers", name),
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=_positive_int(cfg, "vocab_size", name),
            intermediate_size=_positive_int(cfg, "intermediate_size", name),
            max_position_embeddings=_positive_int(cfg, "max_position_embeddings", name),
            torch_dtype=dtype,
            num_parameters=1,  # replaced below
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            source=str(cfg.get("_source", "")),
            attention_bias=bool(cfg.get("attention_bias", False)),
            norms_per_layer=int(cfg.get("_norms_per_layer", 2)),
        )
        stated = cfg.get("num_parameters")
        total = int(stated) if stated else arch.computed_parameters()
        return replace(arch, num_parameters=total)


def _positive_int(cfg: Mapping[str, Any], key: str, name: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise CapacityError(f"{name}: config.json key {key!r} must be a positive integer, got {value!r}")
    return value


def _norm_alias(text: str) -> str:
    return text.strip().lower().replace("_", "-")


@cache
def _presets() -> tuple[dict[str, ModelArch], dict[str, str]]:
    raw = json.loads(resources.files("advisor").joinpath("data/models.json").read_text(encoding="utf-8"))
    by_id: dict[str, ModelArch] = {}
    aliases: dict[str, str] = {}
    for entry in raw["models"]:
        cfg = dict(entry["config"])
        cfg["_source"] = entry["source"]
        cfg["attention_bias"] = entry.get("attention_bias", False)
        cfg["_norms_per_layer"] = entry.get("norms_per_layer", 2)
        if entry.get("num_parameters"):
            cfg["num_parameters"] = entry["num_parameters"]
        arch = ModelArch.from_hf_config(cfg, entry["id"])
        by_id[entry["id"]] = arch
        for alias in [entry["id"], *entry.get("aliases", [])]:
            aliases[_norm_alias(alias)] = entry["id"]
    return by_id, aliases


def preset_ids() -> list[str]:
    """The ids of every bundled preset (Hugging Face repo ids), sorted."""
    return sorted(_presets()[0])


def get_preset(model_id: str) -> ModelArch:
    """The bundled architecture for a Hugging Face id or a short alias, case-insensitive.

    ``"meta-llama/Llama-3.1-8B-Instruct"``, ``"llama-3.1-8b"`` and ``"LLAMA-3.1-8B"`` are the same preset.
    A bare repo name without the owner (``"Llama-3.1-8B-Instruct"``) also matches.

    Raises:
        UnknownModelError: no preset matches; the message lists the known ids.
    """
    by_id, aliases = _presets()
    key = _norm_alias(model_id)
    found = aliases.get(key)
    if found is None and "/" not in key:
        matches = [mid for mid in by_id if _norm_alias(mid.split("/", 1)[1]) == key]
        found = matches[0] if len(matches) == 1 else None
    if found is None:
        raise UnknownModelError(
            f"no preset for model {model_id!r}; known ids: {', '.join(preset_ids())} "
            "(or pass the model's config.json to ModelArch.from_hf_config)"
        )
    return by_id[found]
