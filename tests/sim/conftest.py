"""Shared builders for the simulator tests: Llama-3.1-8B on one H100-SXM, as the issue's benchmarks use."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.capacity.hardware import GPUSpec, get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.sim.engine import EngineConfig, engine_config

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def h100() -> GPUSpec:
    return get_gpu("H100-SXM")


def llama_inputs(**overrides: Any) -> CapacityInputs:
    """CapacityInputs for Llama-3.1-8B on one H100-SXM, max-model-len 8192, 256 sequences."""
    base = CapacityInputs(
        model=get_preset(MODEL),
        gpu_memory_bytes=get_gpu("H100-SXM").memory_bytes,
        max_model_len=8192,
        max_num_seqs=256,
    )
    return dataclasses.replace(base, **overrides)


def llama_engine(**overrides: Any) -> EngineConfig:
    """The EngineConfig the simulator builds from :func:`llama_inputs` (inputs overrides only)."""
    return engine_config(llama_inputs(**overrides), get_gpu("H100-SXM"), model_name=MODEL)
