"""Rotary cos/sin tables in the weights (issue 16, kind F: ``config.json`` read as the engine reads it).

vLLM builds one cos/sin table per distinct rope (``get_rope`` caches by its settings), ``positions × rotary_dim``
elements of the compute dtype, a buffer "Model loading took" counts. The table's length follows the scaling type
(``rotary_embedding/linear_scaling_rope.py``: ``max_position_embeddings × scaling_factor``; ``yarn_scaling_rope.py``:
``original × factor``; ``phi3_long_rope_scaled_rope.py``: the short and the long table), and Gemma 3 keeps a local
table beside its scaled global one (``gemma3.py`` ``Gemma3Attention``). Expected figures are hand arithmetic.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import ModelArch, get_preset, rotary_cache_positions

GIB = 1 << 30


def _weights(model: ModelArch) -> float:
    return capacity_pass(
        CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, max_model_len=8192)
    ).weights_bytes_per_gpu


def test_gemma_3_12b_loads_its_local_and_its_linear_x8_global_table() -> None:
    """llm-d-planner's vLLM 0.19.0 log of google/gemma-3-12b-it on one H100 ("Model loading took 23.31 GiB"): the
    parameters at 2 B are ~22.79 GiB, and the tables 131,072 local + 131,072 × 8 global positions × 256 head dims ×
    2 B = 576 MiB, not the 64 MiB of one unscaled table — 0.50 GiB of the log's 0.52 GiB above the parameters."""
    m = get_preset("google/gemma-3-12b-it")
    assert m.rotary_cache_positions == 131_072 + 8 * 131_072
    unscaled = dataclasses.replace(m, rotary_cache_positions=0)
    assert _weights(m) - _weights(unscaled) == pytest.approx((1_179_648 - 131_072) * 256 * 2, abs=2)


@pytest.mark.parametrize(
    ("extra", "model_type", "positions"),
    [
        ({}, "llama", 0),  # one default table of max_position_embeddings
        (
            {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}},
            "llama",
            0,
        ),
        ({"rope_scaling": {"type": "linear", "factor": 4.0}}, "llama", 4 * 32_768),  # the older key
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "llama", 2 * 32_768),
        (
            {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32_768}},
            "qwen2",
            131_072,
        ),
        ({"rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 4096}}, "phi3", 4096 + 32_768),
        ({"rope_scaling": None}, "gemma3_text", 2 * 32_768),  # Gemma-3-1B: two unscaled tables, two bases
        ({"rope_parameters": {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {}}}, "gemma4_text", 0),
    ],
    ids=["default", "llama3", "linear-type-key", "dynamic", "yarn", "longrope", "gemma3-unscaled", "per-layer-kind"],
)
def test_table_positions_by_scaling_type(extra: dict[str, Any], model_type: str, positions: int) -> None:
    assert rotary_cache_positions({"max_position_embeddings": 32_768, **extra}, model_type) == positions
