"""Write a tiny randomly-initialised Llama (Hugging Face format) with a byte-level tokenizer of its own, for the
CPU vLLM of the end-to-end tests: no download, no weights from anywhere.

Runs in the cached vLLM venv (it needs ``torch``, ``transformers`` and ``tokenizers``, which come with vLLM and
are not in the advisor's environment)::

    VENV/bin/python tests/e2e/vllm_tiny_model.py OUT_DIR

The shape is :data:`TINY_LLAMA`: head dim 64 (``hidden_size / num_attention_heads``; vLLM's CPU attention
kernel rejects 16), 2 KV heads, 2 layers, float32. The tokenizer is byte-level BPE without merges: one token
per byte of UTF-8 (256) plus ``<s>``/``</s>``/``<unk>``, so any text tokenizes to exactly its byte count
(no BOS is added) — a test can size prompts in tokens.

Only the standard library is imported at module level, so the advisor's environment can read
:data:`TINY_LLAMA` (``tests/e2e/vllm_cpu.py`` writes the same shape into the capacity model's config.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TINY_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 2,  # head dim 128 / 2 = 64
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 259,  # 3 special + 256 bytes
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "float32",
}
"""The model's ``config.json`` keys (Hugging Face ``LlamaConfig``)."""

SPECIAL = ("<s>", "</s>", "<unk>")
"""Token ids 0, 1, 2; the 256 byte tokens follow."""


def write_tiny_llama(out: Path, seed: int = 0) -> Path:
    """Write ``config.json``, ``model.safetensors``, the tokenizer files and ``generation_config.json`` into
    ``out``; return ``out``.

    Raises:
        ImportError: torch, transformers or tokenizers is absent (run this in the vLLM venv).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    cfg = {k: v for k, v in TINY_LLAMA.items() if k not in ("architectures", "model_type", "torch_dtype")}
    model = LlamaForCausalLM(LlamaConfig(**cfg)).to(torch.float32)
    model.save_pretrained(str(out), safe_serialization=True)

    byte_chars = pre_tokenizers.ByteLevel.alphabet()  # the 256 printable stand-ins for bytes
    vocab = {tok: i for i, tok in enumerate(SPECIAL)}
    for ch in sorted(byte_chars):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="</s>"
    )
    fast.model_max_length = TINY_LLAMA["max_position_embeddings"]
    fast.save_pretrained(str(out))

    # config.json as written by save_pretrained, with the dtype vLLM reads stated
    conf_path = out / "config.json"
    conf = json.loads(conf_path.read_text())
    conf["torch_dtype"] = TINY_LLAMA["torch_dtype"]
    conf_path.write_text(json.dumps(conf, indent=2))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/e2e/vllm_tiny_model.py OUT_DIR")
    print(write_tiny_llama(Path(sys.argv[1])))
