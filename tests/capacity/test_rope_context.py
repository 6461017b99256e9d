"""The context vLLM accepts for a rope-scaled model (breaker 31: ``--max-model-len 65536`` on Qwen2.5's documented
128K YaRN set-up was refused as beyond 32,768).

vLLM's ``_get_and_verify_max_len`` (``vllm/config.py``, later ``vllm/config/model.py``) multiplies the derived length by
``rope_scaling.factor`` for every rope type but ``su``, ``longrope`` and ``llama3`` (whose
``max_position_embeddings`` already is the extended context), starting a YaRN scaling from
``original_max_position_embeddings``, and skips the scaling for Gemma 3. Expected lengths below by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.modelfile import resolve_model
from tests.inprocess import run_cli

QWEN25_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "rope_theta": 1000000.0,
}
YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def _write(tmp_path: Path, **changes: Any) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN25_7B, **changes}), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("changes", "context"),
    [
        ({}, 32768),  # no rope scaling
        ({"rope_scaling": YARN}, 32768 * 4),  # original 32,768 × 4
        ({"rope_scaling": {**YARN, "original_max_position_embeddings": 8192}}, 8192 * 4),  # from the original
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, 65536),  # max_position_embeddings × 2
        ({"rope_scaling": {"type": "dynamic", "factor": 1.5}}, 49152),
        # Llama 3.1: max_position_embeddings is the extended 131,072 already
        ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072),
        ({"rope_scaling": {"type": "longrope", "factor": 4.0}}, 32768),
        ({"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}, 32768),  # no factor
        ({"model_type": "gemma3_text", "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, 32768),
    ],
)
def test_the_context_is_what_vllm_derives(tmp_path: Path, changes: dict[str, Any], context: int) -> None:
    assert resolve_model(_write(tmp_path, **changes), tmp_path).context_tokens == context


def test_plan_takes_a_yarn_extended_context_and_refuses_beyond_it(tmp_path: Path) -> None:
    model = _write(tmp_path, rope_scaling=YARN)
    base = ["plan", "--model", model, "--gpu", "H100-SXM"]
    for length in ("65536", "131072"):
        r = run_cli(*base, "--max-model-len", length, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["max_model_len"] == int(length)
    beyond = run_cli(*base, "--max-model-len", "131073")
    assert beyond.returncode == 2
    assert "context of 131,072 tokens (max_position_embeddings 32,768 extended by its rope scaling)" in beyond.stderr
    # without the scaling the same length is refused at 32,768, as before
    plain = run_cli("plan", "--model", _write(tmp_path), "--gpu", "H100-SXM", "--max-model-len", "65536")
    assert plain.returncode == 2 and "context of 32,768 tokens" in plain.stderr
